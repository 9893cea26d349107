package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/server"
)

// toolsetDescriptions say what each toolset is for, in list_toolsets.
var toolsetDescriptions = map[string]string{
	ToolsetCards:     "Read a card and who is signed in.",
	ToolsetAuthoring: "Create and write cards: opening lines, text sections, profile, images, visibility, validation, review, publishing.",
	ToolsetWorldbook: "Worldbooks of keyword-triggered lore: create, write entries, bind to cards, list, and test which entries a passage fires.",
	ToolsetTrial:     "Trial cards: temporary cards for trying an idea.",
	ToolsetTavern:    "Character cards and lorebooks of other apps (SillyTavern and Character Card V1/V2/V3): import and export.",
	ToolsetRevisions: "Revisions kept before each write: list, compare with now, restore.",
}

// dynamicStart is the toolset a server with dynamic toolsets starts with.
const dynamicStart = ToolsetCards

// dynamicToolsets is the state of a server whose model enables toolsets by a tool call (as
// github-mcp-server's --dynamic-toolsets): it starts with the cards toolset and the two tools
// below, so that a host which puts every tool into the model's context puts few there.
type dynamicToolsets struct {
	srv      *server.MCPServer
	selected []Tool // what the filter allows; enabling never goes past it
	d        *deps

	mu      sync.Mutex
	enabled map[string]bool
}

// metaTools are list_toolsets and enable_toolset, built like every tool (schemas from
// schema/tools.json); they are served only with dynamic toolsets.
func (dt *dynamicToolsets) metaTools() ([]Tool, error) {
	return build([]Tool{
		{
			Name:    "list_toolsets",
			Toolset: dynamicStart,
			Title:   "List toolsets",
			Description: "List the toolsets of this server: what each is for, its tools, and whether it is enabled. " +
				"Only some tools are loaded at first; call enable_toolset to load a toolset's tools when the user's task needs them.",
			Annotations: hints(true, false, true, false),
			Summary: func(out map[string]any) string {
				return fmt.Sprintf("%d toolsets.", len(asSlice(out["toolsets"])))
			},
			Handler: dt.list,
		},
		{
			Name:    "enable_toolset",
			Toolset: dynamicStart,
			Title:   "Enable a toolset",
			Description: "Load the tools of a toolset (one name of list_toolsets), so that they can be called next. " +
				"The host is told that the tool list changed. Enabling an enabled toolset changes nothing.",
			Annotations: hints(false, false, true, false),
			Summary: func(out map[string]any) string {
				return fmt.Sprintf("Toolset %v: %d tools enabled.", out["toolset"], len(asSlice(out["tools"])))
			},
			Handler: dt.enable,
		},
	})
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// start serves the starting toolset and the meta tools.
func (dt *dynamicToolsets) start() error {
	meta, err := dt.metaTools()
	if err != nil {
		return err
	}
	dt.enabled = map[string]bool{dynamicStart: true}
	st := dt.serverTools(dynamicStart)
	for i := range meta {
		st = append(st, server.ServerTool{Tool: meta[i].MCPTool(), Handler: toolHandler(&meta[i], dt.d)})
	}
	dt.srv.AddTools(st...)
	return nil
}

// serverTools are the selected tools of a toolset, ready to serve.
func (dt *dynamicToolsets) serverTools(toolset string) []server.ServerTool {
	var st []server.ServerTool
	for i := range dt.selected {
		if t := &dt.selected[i]; t.Toolset == toolset {
			st = append(st, server.ServerTool{Tool: t.MCPTool(), Handler: toolHandler(t, dt.d)})
		}
	}
	return st
}

type toolsetInfo struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tools       []string `json:"tools"`
	Enabled     bool     `json:"enabled"`
}

func (dt *dynamicToolsets) list(_ context.Context, _ *Call) (json.RawMessage, error) {
	dt.mu.Lock()
	defer dt.mu.Unlock()
	var out []toolsetInfo
	for _, name := range toolsetOrder {
		info := toolsetInfo{Name: name, Description: toolsetDescriptions[name], Tools: []string{}, Enabled: dt.enabled[name]}
		for _, t := range dt.selected {
			if t.Toolset == name {
				info.Tools = append(info.Tools, t.Name)
			}
		}
		if len(info.Tools) > 0 {
			out = append(out, info)
		}
	}
	return json.Marshal(map[string]any{"toolsets": out})
}

func (dt *dynamicToolsets) enable(_ context.Context, c *Call) (json.RawMessage, error) {
	var args struct {
		Toolset string `json:"toolset"`
	}
	if err := json.Unmarshal(c.Body, &args); err != nil {
		return nil, fmt.Errorf("enable_toolset: %w", err)
	}
	st := dt.serverTools(args.Toolset)
	if len(st) == 0 {
		var names []string
		for _, name := range toolsetOrder {
			if len(dt.serverTools(name)) > 0 {
				names = append(names, name)
			}
		}
		return nil, &Failure{Code: "invalid_arguments", Message: fmt.Sprintf("There is no toolset %q on this server; the toolsets are %s.", args.Toolset, strings.Join(names, ", ")),
			Detail: map[string]any{"toolsets": names}}
	}
	names := make([]string, len(st))
	for i, t := range st {
		names[i] = t.Tool.Name
	}
	dt.mu.Lock()
	already := dt.enabled[args.Toolset]
	dt.enabled[args.Toolset] = true
	dt.mu.Unlock()
	if !already {
		// mcp-go tells the clients that the tool list changed (listChanged is declared).
		dt.srv.AddTools(st...)
	}
	// Some hosts keep the tool list they read at the start of a conversation (Claude Code 2.1 and
	// Gemini CLI 0.61 offer none of the enabled tools on the next turn: e2e/dynamic-hosts.test.mjs),
	// so the model is told what to do then, in structuredContent (all Claude Code passes on).
	ifNot := fmt.Sprintf("This host does not take new tools during a conversation: ask the user to restart cardwriter-mcp "+
		"with --toolsets cards,%s (or without --dynamic-toolsets).", args.Toolset)
	return json.Marshal(map[string]any{"toolset": args.Toolset, "tools": names, "alreadyEnabled": already, "ifNotOffered": ifNot})
}
