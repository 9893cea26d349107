package tools

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

func (e *env) toolNames() []string {
	e.t.Helper()
	res, err := e.client.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return names
}

// With dynamic toolsets the server starts small, and the model loads a toolset by a call: the
// tools appear, the client is told the list changed, and the filter still holds.
func TestDynamicToolsets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		filter   Filter
		authored []string // what enabling authoring adds
	}{
		{"all tools", Filter{}, []string{"create_card", "publish_card", "set_opening_lines", "validate_card"}},
		{"read-only", Filter{ReadOnly: true}, []string{"validate_card"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, Options{Dynamic: true, Filter: tc.filter})
			if got := strings.Join(e.toolNames(), ","); got != "enable_toolset,get_card,list_toolsets,whoami" {
				t.Fatalf("the starting tools: %s", got)
			}
			list := structured(t, e.call("list_toolsets", `{}`)).(map[string]any)
			sets := list["toolsets"].([]any)
			if len(sets) != len(Toolsets()) {
				t.Fatalf("%d toolsets: %v", len(sets), sets)
			}
			for _, s := range sets {
				s := s.(map[string]any)
				if want := s["name"] == ToolsetCards; s["enabled"] != want {
					t.Errorf("toolset %v enabled %v", s["name"], s["enabled"])
				}
			}
			if res, err := e.client.CallTool(context.Background(), callReq("create_card", `{"roleName":"Too soon"}`)); err == nil && !res.IsError {
				t.Errorf("create_card answered before its toolset was enabled")
			}

			out := structured(t, e.call("enable_toolset", `{"toolset":"authoring"}`)).(map[string]any)
			if out["alreadyEnabled"] != false {
				t.Errorf("first enable: %v", out)
			}
			waitFor(t, "tools/list_changed", func() bool { return len(e.notificationsOf("notifications/tools/list_changed")) == 1 })
			names := e.toolNames()
			for _, n := range tc.authored {
				if !slices.Contains(names, n) {
					t.Errorf("after enabling authoring, %s is missing: %v", n, names)
				}
			}
			if tc.filter.ReadOnly && slices.Contains(names, "create_card") {
				t.Errorf("read-only: enabling authoring served create_card")
			}
			if !tc.filter.ReadOnly {
				if res := e.call("create_card", `{"roleName":"Now"}`); res.IsError {
					t.Errorf("create_card after enabling: %s", text(res))
				}
			}
			again := structured(t, e.call("enable_toolset", `{"toolset":"authoring"}`)).(map[string]any)
			if again["alreadyEnabled"] != true {
				t.Errorf("second enable: %v", again)
			}
			env, msg := e.fail("enable_toolset", `{"toolset":"everything"}`)
			if env["error"] != "invalid_arguments" || !strings.Contains(msg, "authoring") {
				t.Errorf("unknown toolset: %v %s", env, msg)
			}
			e.fail("enable_toolset", `{}`)
		})
	}
}

func callReq(name, args string) mcp.CallToolRequest {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = json.RawMessage(args)
	return req
}
