package tools

import (
	"context"
	"fmt"
	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/internal/tavern/taverntest"
	"github.com/mark3labs/mcp-go/mcp"
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

// shadowCount is how many trial shadows kv holds.
func shadowCount(t *testing.T, kv store.KV) int {
	t.Helper()
	n := 0
	if err := kv.Scan(t.Context(), "rev:trial:", func(string) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTrialShadows: an upsert the card service refuses (every slot taken) keeps no shadow;
// delete_trial_card removes its trial's shadow; and a user's shadows are counted: a new trial
// past --trial-shadows-per-user is refused before anything is sent, naming the quota.
func TestTrialShadows(t *testing.T) {
	t.Parallel()
	clk := authtest.NewClock(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	svc, err := sandbox.New(sandbox.Options{CheckResponses: true, DemoToken: demoToken, TrialSlots: 2, Clock: clk.Now, TrialTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	kv := store.NewMemory()
	e, _ := newTavernEnv(t, tavernEnvConfig{svc: svc, opts: Options{Revisions: revisions.New(kv, revisions.DefaultRetention()), TrialShadowsPerUser: 3}})
	upsert := func(key string) *mcp.CallToolResult {
		return e.call("upsert_trial_card", jsonArg(t, map[string]any{"clientKey": key, "card": map[string]any{"roleName": "Mira " + key}}))
	}
	for _, k := range []string{"a", "b"} {
		if res := upsert(k); res.IsError {
			t.Fatalf("upsert %s: %s", k, text(res))
		}
	}
	if n := shadowCount(t, kv); n != 2 {
		t.Fatalf("%d shadows for two trials", n)
	}
	for i := range 5 {
		env, _ := e.fail("upsert_trial_card", jsonArg(t, map[string]any{"clientKey": fmt.Sprintf("full-%d", i), "card": map[string]any{"roleName": "x"}}))
		if env["error"] != "trial_slots_full" {
			t.Fatalf("with every slot taken: %v", env)
		}
	}
	if n := shadowCount(t, kv); n != 2 {
		t.Fatalf("refused upserts kept shadows: %d, want 2", n)
	}
	e.ok("delete_trial_card", `{"clientKey":"a"}`)
	if n := shadowCount(t, kv); n != 1 {
		t.Fatalf("delete_trial_card left its shadow: %d shadows, want 1", n)
	}
	if res := upsert("c"); res.IsError {
		t.Fatalf("upsert c: %s", text(res))
	}
	e.ok("delete_trial_card", `{"clientKey":"c"}`)
	// The quota counts shadows whose trial expired at the service (b's; c was deleted): with
	// the slots free again, a new trial fits, the next is past the quota of 3.
	clk.Advance(2 * time.Hour)
	for _, k := range []string{"e", "f"} {
		if res := upsert(k); res.IsError {
			t.Fatalf("upsert %s: %s", k, text(res))
		}
	}
	clk.Advance(2 * time.Hour)
	before := e.requests.n.Load()
	env, _ := e.fail("upsert_trial_card", jsonArg(t, map[string]any{"clientKey": "d", "card": map[string]any{"roleName": "x"}}))
	if env["error"] != codeQuotaExceeded || !strings.Contains(env["message"].(string), "--trial-shadows-per-user") {
		t.Fatalf("past the shadow quota: %v", env)
	}
	if n := e.requests.n.Load() - before; n > 2 {
		t.Errorf("an upsert refused by the quota made %d card service calls (reads only are allowed)", n)
	}
}
