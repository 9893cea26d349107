package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStdioServersShareRevisions: three stdio servers (separate processes of the built binary,
// as three hosts of one author start them) on one config directory write 200 opening lines
// each, at once, over 6 cards of one sandbox; then every revision any of them acknowledged is
// listed and readable by a fourth server started afterwards. (The store this replaces, one
// bbolt file opened per operation and compacted by renaming, lost 10 to 21% of them.)
func TestStdioServersShareRevisions(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const token = "shared-revisions-token"
	_, sb := startProcess(t, []string{"CARDWRITER_SANDBOX_TOKEN=" + token}, []string{"sandbox", "--addr", "127.0.0.1:0"}, `API at (http://\S+)/open/v1`)
	config := t.TempDir()
	connect := func() *mcp.ClientSession {
		return connectStdio(ctx, t, []string{"CARDWRITER_TOKEN=" + token, "CARDWRITER_CONFIG_DIR=" + config},
			"--api-host", sb[0], "--log-level", "error", "--revisions-per-object", "1000")
	}
	servers := []*mcp.ClientSession{connect(), connect(), connect()}
	var cards []string
	for i := range 6 {
		card := call(ctx, t, servers[0], "create_card", map[string]any{"roleName": fmt.Sprintf("Shared %d", i)}, false)
		cards = append(cards, card["roleId"].(string))
	}
	const writes = 200
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	for s, cs := range servers {
		for w := range 4 { // four calls at once per server
			wg.Go(func() {
				for i := w; i < writes; i += 4 {
					out := call(ctx, t, cs, "set_opening_lines", map[string]any{"roleId": cards[(s+i)%len(cards)],
						"roleWelcome": fmt.Sprintf("Server %d, write %d.", s, i)}, false)
					rev, _ := out["revision"].(map[string]any)
					id, _ := rev["revisionId"].(string)
					if id == "" {
						t.Errorf("server %d write %d kept no revision: %v", s, i, out)
						return
					}
					mu.Lock()
					acked[id] = true
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	for _, cs := range servers {
		if err := cs.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	if len(acked) != len(servers)*writes {
		t.Fatalf("%d revisions acknowledged, want %d", len(acked), len(servers)*writes)
	}
	later := connect()
	defer later.Close()
	listed := map[string]bool{}
	for _, card := range cards {
		cursor := ""
		for {
			args := map[string]any{"roleId": card, "limit": 100}
			if cursor != "" {
				args["cursor"] = cursor
			}
			page := call(ctx, t, later, "list_revisions", args, false)
			for _, r := range page["revisions"].([]any) {
				listed[r.(map[string]any)["revisionId"].(string)] = true
			}
			next, _ := page["nextCursor"].(string)
			if next == "" {
				break
			}
			cursor = next
		}
	}
	lost := 0
	for id := range acked {
		if !listed[id] {
			lost++
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged revisions are not listed", lost, len(acked))
	}
	n := 0
	for id := range acked {
		if n++; n > 30 {
			break
		}
		call(ctx, t, later, "diff_revision", map[string]any{"revisionId": id}, false)
	}
	segs, _ := filepath.Glob(filepath.Join(config, "revisions", "*", "seg-*.rev"))
	if len(segs) < len(servers) {
		t.Errorf("%d segments, want one per server at least: %v", len(segs), segs)
	}
	if _, err := os.Stat(filepath.Join(config, "revisions.db")); err == nil {
		t.Error("revisions.db was made: the shared file per operation is back")
	}
}

// connectStdio starts `cardwriter-mcp stdio ARGS` with env (besides a clean environment) and
// connects a client to it.
func connectStdio(ctx context.Context, t *testing.T, env []string, args ...string) *mcp.ClientSession {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"stdio"}, args...)...)
	cmd.Env = cleanEnv(env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cs, err := newClient().Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	return cs
}
