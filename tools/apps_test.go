package tools

import (
	"context"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestAppsNegotiated: the server declares the MCP Apps extension; a client that declared it too
// gets get_card's _meta.ui in tools/list and the preview in get_card's result _meta, on both
// revisions; a client that did not gets neither, and the same text and structuredContent.
func TestAppsNegotiated(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name         string
		apps, modern bool
	}{
		{"2025-11-25, declared", true, false},
		{"2025-11-25, not declared", false, false},
		{"2026-07-28, declared", true, true},
		{"2026-07-28, not declared", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, _ := newTavernEnv(t, tavernEnvConfig{apps: tt.apps, modern: tt.modern})
			tl, err := e.client.ListTools(context.Background(), mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var meta *mcp.Meta
			for _, tool := range tl.Tools {
				if tool.Name == "get_card" {
					meta = tool.Meta
				}
			}
			if (meta != nil) != tt.apps {
				t.Errorf("get_card's _meta in tools/list: %v; the client declared the extension: %v", meta, tt.apps)
			}
			roleID := e.ok("create_card", `{"roleName":"Vey"}`)["roleId"].(string)
			res := e.call("get_card", `{"roleId":"`+roleID+`"}`)
			if res.IsError || res.StructuredContent == nil && len(res.RawStructuredContent) == 0 {
				t.Fatalf("get_card: %s", text(res))
			}
			if got := res.Meta != nil && res.Meta.AdditionalFields[previewKey] != nil; got != tt.apps {
				t.Errorf("get_card's result carries the preview: %v; the client declared the extension: %v", got, tt.apps)
			}
		})
	}
	e := newEnv(t, Options{})
	if _, ok := e.client.GetServerCapabilities().Extensions[appsExtension]; !ok {
		t.Error("the server does not declare the MCP Apps extension")
	}
}
