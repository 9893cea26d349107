package sandbox_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
)

var allFields = []string{"roleName", "roleDesc", "roleWelcome", "welcomeAlternates", "prologue", "sections"}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func trialEntries(n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = map[string]any{"name": fmt.Sprint("E", i), "content": "c", "keywords": []string{"k"}}
	}
	return out
}

func TestTrialUpsert(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	c := inProcess(t, newService(t, sandbox.Options{Clock: clock.Now}))
	card := map[string]any{"roleName": "Mira", "roleWelcome": "Hi <there> & welcome",
		"sections": map[string]any{"scenario": "A ship.", "description": "Pilot"}}
	got := c.call("PUT", "/trial-cards/demo-1", map[string]any{"card": card, "worldbook": map[string]any{"entries": trialEntries(3)}}, http.StatusCreated)
	roleID, _ := got["roleId"].(string)
	wbInfo := got["worldbook"].(map[string]any)
	wbID, _ := wbInfo["worldbookId"].(string)
	if got["clientKey"] != "demo-1" || !strings.HasPrefix(roleID, "tr_") || got["created"] != true ||
		got["expiresAt"] != clock.Now().Add(24*time.Hour).Format(time.RFC3339) ||
		!slices.Equal(strs(got["changed"]), allFields) || !strings.HasPrefix(wbID, "wb_") {
		t.Fatalf("created %v", got)
	}
	if want := map[string]any{"used": 1.0, "max": 5.0}; !reflect.DeepEqual(got["slots"], want) {
		t.Fatalf("slots %v", got["slots"])
	}
	if num(wbInfo["entries"]) != 3 || num(wbInfo["created"]) != 3 || num(wbInfo["deleted"]) != 0 {
		t.Fatalf("worldbook %v", wbInfo)
	}
	// Digests: SHA-256 of each field's canonical JSON (keys sorted, no HTML escaping, omitted = "" / [] / {}).
	wantDigests := map[string]any{
		"roleName":          sha(`"Mira"`),
		"roleDesc":          sha(`""`),
		"roleWelcome":       sha(`"Hi <there> & welcome"`),
		"welcomeAlternates": sha(`[]`),
		"prologue":          sha(`[]`),
		"sections":          sha(`{"description":"Pilot","scenario":"A ship."}`),
	}
	if !reflect.DeepEqual(got["sections"], wantDigests) {
		t.Fatalf("digests\n got %v\nwant %v", got["sections"], wantDigests)
	}

	// Update: only the changed field is reported; ids are stable; expiry renews; entries kept when omitted.
	clock.Advance(time.Hour)
	card["roleDesc"] = "A pilot."
	got = c.call("PUT", "/trial-cards/demo-1", map[string]any{"card": card}, http.StatusOK)
	if got["created"] != false || got["roleId"] != roleID || !slices.Equal(strs(got["changed"]), []string{"roleDesc"}) ||
		got["expiresAt"] != clock.Now().Add(24*time.Hour).Format(time.RFC3339) {
		t.Fatalf("update %v", got)
	}
	if d := got["sections"].(map[string]any)["roleDesc"]; d != sha(`"A pilot."`) {
		t.Fatalf("roleDesc digest %v", d)
	}
	if want := map[string]any{"worldbookId": wbID, "entries": 3.0, "created": 0.0, "deleted": 0.0}; !reflect.DeepEqual(got["worldbook"], want) {
		t.Fatalf("worldbook %v", got["worldbook"])
	}
	// The card is a full replacement: omitting fields clears them; worldbook replaces the entries.
	got = c.call("PUT", "/trial-cards/demo-1", map[string]any{"card": map[string]any{"roleName": "Mira", "welcomeAlternates": []string{"Yo"}},
		"worldbook": map[string]any{"entries": trialEntries(2)}}, http.StatusOK)
	if !slices.Equal(strs(got["changed"]), []string{"roleDesc", "roleWelcome", "welcomeAlternates", "sections"}) {
		t.Fatalf("changed %v", got["changed"])
	}
	if want := map[string]any{"worldbookId": wbID, "entries": 2.0, "created": 2.0, "deleted": 3.0}; !reflect.DeepEqual(got["worldbook"], want) {
		t.Fatalf("worldbook %v", got["worldbook"])
	}
	// Same content again: nothing changed.
	same := c.call("PUT", "/trial-cards/demo-1", map[string]any{"card": map[string]any{"roleName": "Mira", "welcomeAlternates": []string{"Yo"}}}, http.StatusOK)
	if len(strs(same["changed"])) != 0 {
		t.Fatalf("changed %v", same["changed"])
	}
	// An empty worldbook clears the entries.
	got = c.call("PUT", "/trial-cards/demo-1", map[string]any{"card": map[string]any{"roleName": "Mira"}, "worldbook": map[string]any{"entries": []any{}}}, http.StatusOK)
	if want := map[string]any{"worldbookId": wbID, "entries": 0.0, "created": 0.0, "deleted": 2.0}; !reflect.DeepEqual(got["worldbook"], want) {
		t.Fatalf("worldbook %v", got["worldbook"])
	}
	// GET returns the summary of the last upsert.
	if g := c.call("GET", "/trial-cards/demo-1", nil, http.StatusOK); !reflect.DeepEqual(g, got) {
		t.Fatalf("get\n%v\n%v", g, got)
	}
}

func TestTrialInputErrors(t *testing.T) {
	t.Parallel()
	c := inProcess(t, newService(t, sandbox.Options{}))
	tests := []struct {
		name string
		body map[string]any
	}{
		{"no card", map[string]any{}},
		{"no roleName", map[string]any{"card": map[string]any{"roleDesc": "x"}}},
		{"unknown card field", map[string]any{"card": map[string]any{"roleName": "x", "tags": []string{}}}},
		{"unknown section", map[string]any{"card": map[string]any{"roleName": "x", "sections": map[string]any{"lore": "x"}}}},
		{"entry without keywords", map[string]any{"card": map[string]any{"roleName": "x"}, "worldbook": map[string]any{"entries": []map[string]any{{"name": "a", "content": "b"}}}}},
		{"entry with op", map[string]any{"card": map[string]any{"roleName": "x"}, "worldbook": map[string]any{"entries": []map[string]any{{"op": "create", "name": "a", "content": "b", "keywords": []string{}}}}}},
		{"too many entries", map[string]any{"card": map[string]any{"roleName": "x"}, "worldbook": map[string]any{"entries": trialEntries(501)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c.on(t).fail("PUT", "/trial-cards/k", tt.body, http.StatusBadRequest, "invalid_request")
		})
	}
	obj := c.fail("PUT", "/trial-cards/k", map[string]any{"card": map[string]any{"roleName": "x"}, "worldbook": map[string]any{"entries": []map[string]any{
		{"name": "a", "content": "b", "keywords": []string{}},
		{"name": "a", "content": "b", "keywords": []string{}, "matchOptions": map[string]any{"caseSensitive": true, "matchWholeWords": true, "selectiveLogic": 1}},
	}}}, http.StatusBadRequest, "invalid_request")
	if d := detail(t, obj); num(d["index"]) != 1 || d["field"] != "matchOptions" {
		t.Fatalf("detail %v", d)
	}
	c.fail("GET", "/trial-cards/k", nil, http.StatusNotFound, "trial_not_found") // nothing was created
}

func TestTrialSlotsExpiryAndDelete(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	c := inProcess(t, newService(t, sandbox.Options{Clock: clock.Now}))
	put := func(key string, want int) map[string]any {
		t.Helper()
		return c.call("PUT", "/trial-cards/"+key, map[string]any{"card": map[string]any{"roleName": key}}, want)
	}
	for _, k := range []string{"e", "d", "c", "b"} {
		put(k, http.StatusCreated)
		clock.Advance(time.Minute)
	}
	first := put("a", http.StatusCreated) // the fifth slot
	obj := c.fail("PUT", "/trial-cards/f", map[string]any{"card": map[string]any{"roleName": "f"}}, http.StatusConflict, "trial_slots_full")
	if d := detail(t, obj); num(d["used"]) != 5 || num(d["max"]) != 5 {
		t.Fatalf("detail %v", d)
	}
	put("a", http.StatusOK) // updating an existing trial needs no slot
	list := c.call("GET", "/trial-cards", nil, http.StatusOK)
	keys := []string{}
	for _, x := range list["list"].([]any) {
		keys = append(keys, x.(map[string]any)["clientKey"].(string))
	}
	if strings.Join(keys, ",") != "a,b,c,d,e" || num(list["ttlHours"]) != 24 ||
		!reflect.DeepEqual(list["slots"], map[string]any{"used": 5.0, "max": 5.0}) {
		t.Fatalf("list %v", list)
	}
	// "e" was written first; just before its expiry it is live, at expiry it is gone.
	clock.Advance(24*time.Hour - 4*time.Minute - time.Second)
	c.call("GET", "/trial-cards/e", nil, http.StatusOK)
	clock.Advance(time.Second)
	c.fail("GET", "/trial-cards/e", nil, http.StatusNotFound, "trial_not_found")
	c.fail("DELETE", "/trial-cards/e", nil, http.StatusNotFound, "trial_not_found")
	list = c.call("GET", "/trial-cards", nil, http.StatusOK)
	if len(list["list"].([]any)) != 4 || num(list["slots"].(map[string]any)["used"]) != 4 {
		t.Fatalf("list %v", list)
	}
	// The freed slot takes a new trial; the expired key starts fresh.
	fresh := put("e", http.StatusCreated)
	if fresh["created"] != true || len(strs(fresh["changed"])) != 6 || num(fresh["slots"].(map[string]any)["used"]) != 5 {
		t.Fatalf("fresh %v", fresh)
	}
	// Delete frees a slot.
	got := c.call("DELETE", "/trial-cards/a", nil, http.StatusOK)
	if !reflect.DeepEqual(got, map[string]any{"clientKey": "a", "removed": true}) {
		t.Fatalf("delete %v", got)
	}
	c.fail("GET", "/trial-cards/a", nil, http.StatusNotFound, "trial_not_found")
	again := put("a", http.StatusCreated)
	if again["roleId"] == first["roleId"] {
		t.Fatal("a deleted trial kept its roleId")
	}
	if g := c.call("GET", "/trial-cards/b", nil, http.StatusOK); num(g["slots"].(map[string]any)["used"]) != 5 {
		t.Fatalf("get %v", g)
	}
}

func TestTrialOptions(t *testing.T) {
	t.Parallel()
	c := inProcess(t, newService(t, sandbox.Options{TrialSlots: 1, TrialTTL: 90 * time.Minute}))
	c.call("PUT", "/trial-cards/one", map[string]any{"card": map[string]any{"roleName": "x"}}, http.StatusCreated)
	c.fail("PUT", "/trial-cards/two", map[string]any{"card": map[string]any{"roleName": "x"}}, http.StatusConflict, "trial_slots_full")
	list := c.call("GET", "/trial-cards", nil, http.StatusOK)
	if num(list["ttlHours"]) != 2 || num(list["slots"].(map[string]any)["max"]) != 1 {
		t.Fatalf("list %v", list)
	}
}
