package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHTTPFullDisk: the state directory of an HTTP server on a full disk (a small tmpfs
// mounted there): a write is not sent and the model reads that this server (not the card
// service) could not save, "no space left on device"; /readyz answers 503 naming the revision
// not saved (bbolt's own small probe may still find room in its file);
// once room is made, writes keep revisions again.
// It needs to mount a tmpfs (root, where the system allows it) and skips with a message where
// it cannot (a CI container that cannot mount runs internal/revisions' TestDirFault instead).
func TestHTTPFullDisk(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	revs := state
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", revs).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	const token = "full-disk-token"
	_, sb := startProcess(t, []string{"CARDWRITER_SANDBOX_TOKEN=" + token}, []string{"sandbox", "--addr", "127.0.0.1:0"}, `API at (http://\S+)/open/v1`)
	proc, found := startProcess(t, []string{"CARDWRITER_TOKEN=" + token, "CARDWRITER_CONFIG_DIR=" + t.TempDir()},
		[]string{"http", "--addr", "127.0.0.1:0", "--api-host", sb[0], "--auth", "none", "--state-dir", state}, `MCP endpoint: (http://\S+)/mcp`)
	t.Cleanup(func() {
		_ = proc.stop(os.Interrupt) // its open segment keeps the tmpfs busy
		if out, err := exec.Command("umount", revs).CombinedOutput(); err != nil {
			t.Errorf("umount: %v: %s", err, out)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := connectHTTP(ctx, t, found[0])
	defer cs.Close()
	roleID := call(ctx, t, cs, "create_card", map[string]any{"roleName": "Full"}, false)["roleId"]
	long := strings.Repeat("Long. ", 2000) // its revision will not fit in what the segment's last page has left
	call(ctx, t, cs, "set_opening_lines", map[string]any{"roleId": roleID, "roleWelcome": long}, false)

	filler := filepath.Join(revs, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write(make([]byte, 8<<20)) // fills it: fails at the end
	_ = f.Close()
	out := call(ctx, t, cs, "set_opening_lines", map[string]any{"roleId": roleID, "roleWelcome": "Short."}, true)
	msg, _ := out["message"].(string)
	if !strings.Contains(msg, "This server (cardwriter-mcp, not the card service) could not save") && !strings.Contains(msg, "this server (cardwriter-mcp, not the card service) could not save") ||
		!strings.Contains(msg, "no space left on device") {
		t.Errorf("a write on a full disk: %v", out)
	}
	status, body := getReady(t, found[0])
	checks, _ := body["checks"].(map[string]any)
	if r, _ := checks["revisions"].(string); status != http.StatusServiceUnavailable || !strings.Contains(r, "no space left on device") {
		t.Errorf("/readyz on a full disk: %d %v", status, body)
	}
	card := call(ctx, t, cs, "get_card", map[string]any{"roleId": roleID}, false)
	if card["roleWelcome"] != long {
		t.Errorf("the write was sent: %v", card["roleWelcome"])
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	call(ctx, t, cs, "set_opening_lines", map[string]any{"roleId": roleID, "roleWelcome": "After."}, false)
}
