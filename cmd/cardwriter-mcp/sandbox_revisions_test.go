package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestSandboxKeepsItsRevisions: `stdio --sandbox` keeps its revisions with the sandbox, never
// in the author's revisions folder: in memory, or beside its --sandbox-data file (where a
// restart finds them with the sandbox's cards).
func TestSandboxKeepsItsRevisions(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	config := t.TempDir()
	data := filepath.Join(t.TempDir(), "sandbox.json")
	connect := func(args ...string) *mcp.ClientSession {
		return connectStdio(ctx, t, []string{"CARDWRITER_CONFIG_DIR=" + config}, append([]string{"--sandbox", "--log-level", "error"}, args...)...)
	}
	write := func(cs *mcp.ClientSession) (string, string) {
		card := call(ctx, t, cs, "create_card", map[string]any{"roleName": "Sandboxed"}, false)
		id := card["roleId"].(string)
		out := call(ctx, t, cs, "set_opening_lines", map[string]any{"roleId": id, "roleWelcome": "Hello."}, false)
		return id, out["revision"].(map[string]any)["revisionId"].(string)
	}
	cs := connect()
	write(cs)
	_ = cs.Close()
	cs = connect("--sandbox-data", data)
	roleID, revID := write(cs)
	_ = cs.Close()
	if _, err := os.Stat(filepath.Join(config, revisionsDir)); !os.IsNotExist(err) {
		t.Errorf("the sandbox wrote into the author's revisions folder: %v", err)
	}
	if _, err := os.Stat(data + sandboxRevisionsSuffix); err != nil {
		t.Errorf("no revisions beside the sandbox's data: %v", err)
	}
	cs = connect("--sandbox-data", data)
	defer cs.Close()
	list := call(ctx, t, cs, "list_revisions", map[string]any{"roleId": roleID}, false)
	if revs := list["revisions"].([]any); len(revs) != 1 || revs[0].(map[string]any)["revisionId"] != revID {
		t.Errorf("after a restart of the sandbox: %v, want %s", list, revID)
	}
}
