package tools

import (
	"context"
	"github.com/cardwriter/cardwriter-mcp/internal/tavern/taverntest"
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

// TestAsideQuota: kept-aside import data is bounded per user (--aside-user-bytes): an import whose
// leftovers would pass the quota is refused before anything is sent to the card service (GET /me
// aside), naming the quota and its flag; and a record expires (--aside-ttl) instead of staying
// for good.
func TestAsideQuota(t *testing.T) {
	t.Parallel()
	kv := store.NewMemory()
	file := taverntest.Real(t, "default_Seraphina.png")
	e, _ := newTavernEnv(t, tavernEnvConfig{opts: Options{Aside: aside.NewKVWith(kv, aside.KVOptions{UserBytes: 200, TTL: time.Hour})}})
	before := e.requests.n.Load()
	env, _ := e.fail("import_tavern_card", jsonArg(t, map[string]any{"source": map[string]any{"dataBase64": b64(file)}}))
	msg, _ := env["message"].(string)
	if env["error"] != codeQuotaExceeded || !strings.Contains(msg, "--aside-user-bytes") {
		t.Fatalf("an import over the kept-aside quota: %v", env)
	}
	if n := e.requests.n.Load() - before; n > 1 {
		t.Errorf("an import refused by the quota made %d card service calls, want at most GET /me", n)
	}
	if got := e.svc.Inventory(e.svc.DemoToken()); got.Cards != 0 {
		t.Errorf("an import refused by the quota made cards: %v", got.Cards)
	}
}

// ttlKV records the lifetime of each value written.
type ttlKV struct {
	store.KV
	ttls map[string]time.Duration
}

func (k *ttlKV) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	k.ttls[key] = ttl
	return k.KV.Set(ctx, key, value, ttl)
}

// TestAsideExpires: a kept-aside record in the server's store expires its TTL after its last
// write (before, it was kept for good).
func TestAsideExpires(t *testing.T) {
	t.Parallel()
	kv := &ttlKV{KV: store.NewMemory(), ttls: map[string]time.Duration{}}
	s := aside.NewKVWith(kv, aside.KVOptions{TTL: time.Hour})
	key := aside.Key{BaseURL: "http://x", UserID: "u", Kind: aside.KindCard, ID: "r1"}
	if err := s.Put(t.Context(), key, []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	for k, ttl := range kv.ttls {
		if strings.HasPrefix(k, "aside:") && ttl != time.Hour {
			t.Errorf("a kept-aside record's lifetime is %s, want an hour", ttl)
		}
	}
	if len(kv.ttls) == 0 {
		t.Fatal("nothing written")
	}
}
