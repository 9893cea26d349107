package tools

import (
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/auth/authtest"

	"github.com/cardwriter/cardwriter-mcp/internal/aside"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// TestExportQuota: one user's live exports hold at most --export-user-bytes together: the export
// that would pass it is refused, naming the quota, its flag and how to free space, and nothing
// more is kept; once the first expires there is room again.
func TestExportQuota(t *testing.T) {
	t.Parallel()
	kv := store.NewMemory()
	clk := authtest.NewClock(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	e, _ := newTavernEnv(t, tavernEnvConfig{opts: Options{Aside: aside.NewMemory(), Exports: kv, ExportUserBytes: 1 << 20, now: clk.Now}})
	wbID := e.ok("create_worldbook", `{"name":"Big"}`)["worldbookId"].(string)
	e.ok("import_tavern_worldbook", jsonArg(t, map[string]any{"source": map[string]any{"dataBase64": b64(bigBook(1500))}, "worldbookId": wbID}))
	args := jsonArg(t, map[string]any{"worldbookId": wbID, "format": "worldinfo"})
	var kept int
	for range 20 {
		res := e.call("export_tavern_worldbook", args)
		if res.IsError {
			env, _ := ErrorEnvelope(res)
			msg, _ := env["message"].(string)
			if env["error"] != codeQuotaExceeded || !strings.Contains(msg, "--export-user-bytes") || !strings.Contains(msg, "expires at") {
				t.Fatalf("over the quota: %v", env)
			}
			break
		}
		linkOf(t, e, "export_tavern_worldbook", res)
		kept++
	}
	if kept == 0 || kept == 20 {
		t.Fatalf("%d exports kept before the quota refused one, want some but not all", kept)
	}
	n := 0
	_ = kv.Scan(t.Context(), exportKeyPrefix, func(string) error { n++; return nil })
	if n != kept {
		t.Errorf("%d exports in the store, want the %d kept", n, kept)
	}
	clk.Advance(DefaultExportTTL)
	if res := e.call("export_tavern_worldbook", args); res.IsError {
		t.Fatalf("once the exports expired: %s", text(res))
	}
}
