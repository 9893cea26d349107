// Package tools is the MCP layer of cardwriter-mcp: one registry of tools (one value per tool,
// one file per toolset), the handler every tool shares, filtering, resources, prompts and the
// MCP server that serves them. Schemas come from the upstream contract (package schema) and
// are never written here; calls go through the card service client (package upstream).
package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cardwriter/cardwriter-mcp/schema"
)

// The toolsets, in the order they are listed.
const (
	ToolsetCards     = "cards"
	ToolsetAuthoring = "authoring"
	ToolsetWorldbook = "worldbook"
	ToolsetTrial     = "trial"
	ToolsetTavern    = "tavern"
	ToolsetRevisions = "revisions"
)

var toolsetOrder = []string{ToolsetCards, ToolsetAuthoring, ToolsetWorldbook, ToolsetTrial, ToolsetTavern, ToolsetRevisions}

// Toolsets returns the names of every toolset, in registry order.
func Toolsets() []string { return slices.Clone(toolsetOrder) }

// Tool is one MCP tool: what the model reads, what it may assume (annotations), which contract
// operation it calls, and how its result is summed up for clients that show text only. Its
// input schema is schema.OperationInput(Operation) and its output schema
// schema.OperationOutput(Operation); both are derived when the registry is built, never written
// by hand. A tool that is no single operation (the tavern toolset, test_worldbook_triggers) has
// no Operation: its schemas are schema.ToolInput(Name) and schema.ToolOutput(Name), from the
// embedded schema/tools.json (which $refs the contract for the shapes they share), and it has
// its own Handler, which receives the validated arguments whole as the Call's Body.
type Tool struct {
	Name        string // snake_case, verb first
	Toolset     string
	Title       string // short, for people
	Description string // for a model: what, when, the rules that bite, and "Example: {json}" last
	Operation   string // the contract operationId the tool calls; "" for a tool of schema/tools.json
	// Annotations are the MCP hints; every one of ReadOnlyHint, DestructiveHint,
	// IdempotentHint and OpenWorldHint is set on purpose (see hints).
	Annotations mcp.ToolAnnotation
	// Summary renders a successful result (the upstream response object) as one line of text.
	Summary func(out map[string]any) string
	// Handler replaces the generic handler (validate, split, call Operation) after the arguments
	// passed the input schema; nil for the generic one.
	Handler HandlerFunc
	// Preview, when set, makes the card preview (an MCP App, preview.go) show the tool's
	// results: it returns the result's _meta from its structured content. A handler may set
	// Call.Meta instead.
	Preview func(out map[string]any) map[string]any
	// Revise, for a write that replaces or deletes an author's content, reads what the call
	// will replace and keeps it as a revision (Call.keep), right before the write goes out
	// (Call.beforeWrite); its result then names the revision (revise.go). Nil for other tools.
	Revise HandlerRevise
	// Version, for a read of one card, worldbook or trial card, returns the version of the
	// object its result shows (undo): added to the result as version, the ifVersion of a write.
	Version func(out map[string]any) string
	// Guard gives a write the arguments ifVersion and dryRun (schema/tools.json
	// $defs/WriteGuard): Revise checks the one and answers the other.
	Guard bool
	// Cut names the result's list (of issues, findings) that is cut to fit half the result
	// budget: the first items stay, in order, and omitted says how many more there are.
	Cut string
	// OwnBudget marks a tool that keeps its results within the result budget its own way (an
	// export sends a large file by reference): the server does not check them.
	OwnBudget bool
	// Check names, for a write whose answer may be unreadable, the read tool that shows
	// whether it was applied (said in the error, so that a model does not blindly repeat it).
	Check string

	inputSchema  json.RawMessage // self-contained, from schema.OperationInput
	outputSchema json.RawMessage // self-contained, from schema.OperationOutput
	input        *schema.Validator
	output       *schema.Validator
	op           schema.Operation
	extra        []string // the arguments tools.json's extensions add, sorted
	// dropped are the hostArguments this tool's input schema does not declare: removed from a
	// call's arguments before validation.
	dropped []string
}

// hostArguments are arguments that known hosts add to every tool call on their own, which a
// strict input schema would refuse: Gemini CLI's wait_for_previous (it declares the argument to
// its model for every tool and passes it on; its own known bug). Only these are dropped, and
// only from tools that do not declare them; every other unknown argument is still refused.
var hostArguments = []string{"wait_for_previous"}

// InputSchema returns the tool's advertised input schema (self-contained JSON Schema).
func (t Tool) InputSchema() json.RawMessage { return slices.Clone(t.inputSchema) }

// OutputSchema returns the tool's advertised output schema (self-contained JSON Schema).
func (t Tool) OutputSchema() json.RawMessage { return slices.Clone(t.outputSchema) }

// ReadOnly reports whether the tool changes nothing (its readOnlyHint).
func (t Tool) ReadOnly() bool {
	return t.Annotations.ReadOnlyHint != nil && *t.Annotations.ReadOnlyHint
}

// MCPTool returns the tool as mcp-go advertises it in tools/list.
func (t Tool) MCPTool() mcp.Tool {
	// NewToolWithRawSchema, not NewTool + WithRawInputSchema: the latter leaves
	// InputSchema.Type set beside the raw schema, and tools/list then fails to marshal.
	mt := mcp.NewToolWithRawSchema(t.Name, t.Description, t.InputSchema())
	mt.Title = t.Title
	mt.RawOutputSchema = t.OutputSchema()
	// The title once, at the top (2025-06-18 and later); annotations.title, its older place,
	// would repeat it in every tools/list.
	mt.Annotations = t.Annotations
	if t.Preview != nil {
		mt.Meta = previewToolMeta()
	}
	return mt
}

// hints builds the four MCP annotation hints, every one explicitly set.
//
// The rules this registry follows:
//   - readOnly: true exactly for tools that only read (get_*, list_*, whoami, validate_card,
//     export_tavern_card, test_worldbook_triggers, preview_prompt, diff_revision).
//   - destructive: true when a call can delete stored content or overwrite stored content that
//     the caller did not restate: deletes, full replacements (opening lines, a trial card) and
//     writes whose fields replace the stored ones (card profile, card document sections,
//     worldbook document ops, which can also delete entries). Creating something new, setting
//     visibility to private and submitting for review are not destructive. Always false for
//     read-only tools.
//   - idempotent: true when repeating the same call changes nothing more: reads, replacements,
//     deletes. Not create_card: without a key of the caller's, a repeat makes a second card.
//   - openWorld: true everywhere: every tool talks to the card service.
func hints(readOnly, destructive, idempotent, openWorld bool) mcp.ToolAnnotation {
	return mcp.ToolAnnotation{
		ReadOnlyHint:    &readOnly,
		DestructiveHint: &destructive,
		IdempotentHint:  &idempotent,
		OpenWorldHint:   &openWorld,
	}
}

// readHints are the hints of a tool that only reads.
func readHints() mcp.ToolAnnotation { return hints(true, false, true, true) }

// replaceHints are the hints of a write that replaces stored content; repeating it changes
// nothing more.
func replaceHints() mcp.ToolAnnotation { return hints(false, true, true, true) }

// addHints are the hints of a write that adds something new each time it runs.
func addHints() mcp.ToolAnnotation { return hints(false, false, false, true) }

// definitions lists every tool, one toolset file at a time.
func definitions() []Tool {
	var all []Tool
	all = append(all, cardTools()...)
	all = append(all, authoringTools()...)
	all = append(all, reviewTool())
	all = append(all, worldbookTools()...)
	all = append(all, triggerTools()...)
	all = append(all, xrayTool())
	all = append(all, trialTools()...)
	all = append(all, tavernTools()...)
	all = append(all, revisionTools()...)
	return all
}

var registry = sync.OnceValues(func() ([]Tool, error) { return build(definitions()) })

// All returns every tool of the registry, with schemas derived (validators compile on first use). The
// contract is embedded, so a failure here is a build defect: All panics on it (the registry
// tests catch it first).
func All() []Tool {
	all, err := registry()
	if err != nil {
		panic(err)
	}
	return slices.Clone(all)
}

// build derives each tool's schemas from its operation and makes its validators, once.
func build(defs []Tool) ([]Tool, error) {
	seen := map[string]bool{}
	out := make([]Tool, 0, len(defs))
	for _, t := range defs {
		if seen[t.Name] {
			return nil, fmt.Errorf("tools: %s is defined twice", t.Name)
		}
		seen[t.Name] = true
		if !slices.Contains(toolsetOrder, t.Toolset) {
			return nil, fmt.Errorf("tools: %s: unknown toolset %q", t.Name, t.Toolset)
		}
		in, outSchema, err := t.schemas()
		if err != nil {
			return nil, fmt.Errorf("tools: %s: %w", t.Name, err)
		}
		if t.Guard {
			if in, outSchema, err = t.withGuard(in, outSchema); err != nil {
				return nil, fmt.Errorf("tools: %s: %w", t.Name, err)
			}
		}
		if t.Revise != nil {
			if outSchema, err = withRevision(outSchema); err != nil {
				return nil, fmt.Errorf("tools: %s: %w", t.Name, err)
			}
			if t.Toolset != ToolsetRevisions {
				t.Description = withRevisionNote(t.Description)
			}
		}
		// What is advertised is also what validates: one schema, in its portable form.
		in, outSchema = schema.Portable(in), schema.Undescribed(schema.Portable(outSchema))
		if t.inputSchema, err = json.Marshal(in); err != nil {
			return nil, fmt.Errorf("tools: %s: input schema: %w", t.Name, err)
		}
		props, _ := in["properties"].(map[string]any)
		for _, name := range hostArguments {
			if _, declared := props[name]; !declared {
				t.dropped = append(t.dropped, name)
			}
		}
		if t.outputSchema, err = json.Marshal(outSchema); err != nil {
			return nil, fmt.Errorf("tools: %s: output schema: %w", t.Name, err)
		}
		// Compiled on first use: a server answers initialize without compiling ~50 schemas
		// (TestValidatorsCompile compiles them all).
		t.input = schema.CompileJSONLazy(t.Name+" input", t.inputSchema)
		t.output = schema.CompileJSONLazy(t.Name+" output", t.outputSchema)
		if t.Summary == nil {
			return nil, fmt.Errorf("tools: %s has no Summary", t.Name)
		}
		out = append(out, t)
	}
	return out, nil
}

// schemas derives the tool's input and output schemas: from its contract operation, or from
// schema/tools.json for a tool that is no single operation (which must have its own Handler).
func (t *Tool) schemas() (in, out map[string]any, err error) {
	if t.Operation == "" {
		if t.Handler == nil {
			return nil, nil, errors.New("a tool without an Operation needs its own Handler")
		}
		if in, err = schema.ToolInput(t.Name); err != nil {
			return nil, nil, err
		}
		out, err = schema.ToolOutput(t.Name)
		return in, out, err
	}
	op, ok := schema.Lookup(t.Operation)
	if !ok {
		return nil, nil, fmt.Errorf("the contract has no operation %q", t.Operation)
	}
	t.op = op
	if in, err = schema.OperationInput(t.Operation); err != nil {
		return nil, nil, err
	}
	if out, err = schema.OperationResult(t.Operation); err != nil {
		return nil, nil, err
	}
	return t.extend(in, out)
}

// extend adds to an operation's derived schemas what tools.json's extensions give the tool
// (paging and search arguments, page fields): arguments the server keeps (Call.Extra), never sent
// to the card service.
func (t *Tool) extend(in, out map[string]any) (map[string]any, map[string]any, error) {
	addIn, addOut, ok, err := schema.ToolExtension(t.Name)
	if err != nil || !ok {
		return in, out, err
	}
	inProps, _ := in["properties"].(map[string]any)
	for _, k := range slices.Sorted(maps.Keys(addIn)) {
		if _, dup := inProps[k]; dup {
			return nil, nil, fmt.Errorf("extension argument %s is also an argument of %s", k, t.Operation)
		}
		inProps[k] = addIn[k]
		t.extra = append(t.extra, k)
	}
	outProps, _ := out["properties"].(map[string]any)
	if outProps == nil {
		return nil, nil, fmt.Errorf("the result of %s has no properties to extend", t.Operation)
	}
	maps.Copy(outProps, addOut)
	return in, out, nil
}

// withRevision returns the output schema of a write that keeps revisions: out with an optional
// revision object (schema/tools.json $defs/RevisionKept). It declares revisionId only: alsoKept,
// dropped and notKept, there when they apply, are left undeclared (every write's schema holds
// this object, tools/list has a token budget, and the text says them too).
func withRevision(out map[string]any) (map[string]any, error) {
	def, err := schema.ToolDef("RevisionKept")
	if err != nil {
		return nil, err
	}
	out = maps.Clone(out)
	props, _ := out["properties"].(map[string]any)
	props = maps.Clone(props)
	if props == nil {
		props = map[string]any{}
	}
	props["revision"] = def
	out["properties"] = props
	return out, nil
}

// withGuard returns the schemas of a write that takes ifVersion and dryRun (schema/tools.json
// $defs/WriteGuard; write_worldbook_document's entry ops take an ifVersion of their own): the
// input with them (kept by the server, never sent), the output with a dry run's fields
// ($defs/DryRun).
func (t *Tool) withGuard(in, out map[string]any) (map[string]any, map[string]any, error) {
	guard, err := schema.ToolDef("WriteGuard")
	if err != nil {
		return nil, nil, err
	}
	dry, err := schema.ToolDef("DryRun")
	if err != nil {
		return nil, nil, err
	}
	args, _ := guard["properties"].(map[string]any)
	in = maps.Clone(in)
	props := maps.Clone(in["properties"].(map[string]any))
	for _, k := range slices.Sorted(maps.Keys(args)) {
		if _, dup := props[k]; dup {
			return nil, nil, fmt.Errorf("guard argument %s is also an argument of the tool", k)
		}
		props[k] = args[k]
		if t.Operation != "" {
			t.extra = append(t.extra, k)
		}
	}
	slices.Sort(t.extra)
	if entries, ok := props["entries"].(map[string]any); ok && t.Operation == "writeWorldbookDocument" {
		entries = maps.Clone(entries)
		items := maps.Clone(entries["items"].(map[string]any))
		itemProps := maps.Clone(items["properties"].(map[string]any))
		itemProps["ifVersion"] = args["ifVersion"]
		items["properties"] = itemProps
		entries["items"] = items
		props["entries"] = entries
	}
	in["properties"] = props
	out = maps.Clone(out)
	outProps := maps.Clone(out["properties"].(map[string]any))
	maps.Copy(outProps, dry["properties"].(map[string]any))
	out["properties"] = outProps
	// A dry run gives the write's own result, saying nothing was applied, where it can
	// (dryRunFields); otherwise the result is either form.
	req, _ := out["required"].([]any)
	given := t.dryRunFields()
	if slices.ContainsFunc(req, func(r any) bool { s, _ := r.(string); return !slices.Contains(given, s) }) {
		delete(out, "required")
		out["anyOf"] = []any{map[string]any{"required": req}, map[string]any{"required": dry["required"]}}
	}
	return in, out, nil
}

// revisionNote is the sentence the description of every write that keeps revisions carries.
const revisionNote = " restore_revision undoes it."

// withRevisionNote returns a write's description with revisionNote ending its text, before
// its example.
func withRevisionNote(desc string) string {
	text, example, ok := strings.Cut(desc, "\n\nExample:")
	if !ok {
		return desc + revisionNote
	}
	return text + revisionNote + "\n\nExample:" + example
}
