package undo

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"unicode/utf8"
)

func entry(id, name, content string, enabled bool) map[string]json.RawMessage {
	e := map[string]json.RawMessage{"name": mustJSON(name), "content": mustJSON(content), "keywords": mustJSON([]string{name}),
		"isEnabled": mustJSON(enabled)}
	if id != "" {
		e["entryId"] = mustJSON(id)
	}
	return e
}

func mustJSON(v any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

// TestPairingLinear: pairing 1,000 replaced entries (every id gone, every entry back under a new
// id, in reverse order) pairs each with its own and costs a number of comparisons linear in the
// entries; the quadratic pairing it replaced made about n²/2 (7.8 CPU-s at 1,000). Not parallel:
// it counts the package's comparisons.
func TestPairingLinear(t *testing.T) {
	for _, n := range []int{10, 1000} {
		var old, now []map[string]json.RawMessage
		for i := range n {
			old = append(old, entry(fmt.Sprintf("e_old%d", i), fmt.Sprintf("E%d", i), fmt.Sprintf("Entry %d.", i), i%2 == 0))
		}
		for i := n - 1; i >= 0; i-- {
			now = append(now, entry(fmt.Sprintf("e_new%d", i), fmt.Sprintf("E%d", i), fmt.Sprintf("Entry %d.", i), i%2 == 0))
		}
		before := comparisons.Load()
		pair := pairEntries(old, now)
		used := comparisons.Load() - before
		for i, k := range pair {
			if k != n-1-i {
				t.Fatalf("n=%d: entry %d paired with %d, want %d", n, i, k, n-1-i)
			}
		}
		if used > int64(2*n) {
			t.Errorf("n=%d: %d comparisons, want at most %d (linear)", n, used, 2*n)
		}
		before = comparisons.Load()
		ch := entryDiff(old, now, RevisionLabels, 1<<20)
		if len(ch.Added)+len(ch.Changed)+len(ch.Deleted) != 0 {
			t.Errorf("n=%d: replaced entries of the same content differ: %+v", n, ch)
		}
		if used := comparisons.Load() - before; used > int64(3*n) {
			t.Errorf("n=%d: the diff made %d comparisons, want at most %d", n, used, 3*n)
		}
	}
}

// TestPairing: entries pair by id first, then by content among those whose id is gone, first
// in order; an entry that matches neither is added, and an old one nobody took is deleted.
func TestPairing(t *testing.T) {
	t.Parallel()
	old := []map[string]json.RawMessage{entry("a", "A", "a", true), entry("b", "B", "b", true), entry("c", "C", "same", true), entry("d", "D", "same", true)}
	now := []map[string]json.RawMessage{entry("x", "D", "same", true), entry("a", "A", "changed", false), entry("y", "New", "n", true)}
	if got := pairEntries(old, now); !slices.Equal(got, []int{3, 0, -1}) {
		t.Errorf("pairs %v", got)
	}
	ch := entryDiff(old, now, RevisionLabels, 1<<20)
	if len(ch.Added) != 1 || len(ch.Changed) != 1 || len(ch.Deleted) != 2 {
		t.Fatalf("diff %+v", ch)
	}
	changes, _ := json.Marshal(ch.Changed[0]["changes"])
	if string(changes) != `[{"current":"changed","field":"content","revision":"a"},{"current":false,"field":"isEnabled","revision":true}]` {
		t.Errorf("changed entry's text: %s", changes)
	}
	// Without room for the text, the fields are named and the omission counted.
	if ch := entryDiff(old, now, RevisionLabels, 10); ch.TextOmitted != 1 || ch.Changed[0]["changes"] != nil || ch.Changed[0]["fields"] == nil {
		t.Errorf("cut diff %+v", ch)
	}
}

// TestVersions: a version depends only on the state (key order and spacing of the service's
// JSON do not change it), and the parts of two versions that differ are the fields that
// changed.
func TestVersions(t *testing.T) {
	t.Parallel()
	a, err := ParseCard(json.RawMessage(`{"roleId":"r","roleName":"Mira","roleWelcome":"Hi.","sections":{"scenario":"Port.","personality":"Dry."},"priority":1}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseCard(json.RawMessage(`{ "sections": {"personality": "Dry.", "scenario":"Port."}, "roleWelcome":"Hi.", "roleName": "Mira", "roleId":"r"}`))
	if err != nil {
		t.Fatal(err)
	}
	if a.Version() != b.Version() {
		t.Errorf("one state, two versions: %s %s", a.Version(), b.Version())
	}
	c, _ := ParseCard(json.RawMessage(`{"roleId":"r","roleName":"Mira","roleWelcome":"Hello.","sections":{"scenario":"Port.","personality":"Wry."}}`))
	changed, ok := changedParts(a.Version(), c.Version(), cardParts)
	if !ok || !slices.Equal(changed, []string{"roleWelcome", "sections.personality"}) {
		t.Errorf("changed %v %v", changed, ok)
	}
	if got, ok := changedParts(a.Version(), a.Version(), cardParts); !ok || got != nil {
		t.Errorf("same version: %v %v", got, ok)
	}
	for _, bad := range []string{"", "x", "!!!!", MetaVersion(map[string]any{"name": "n"})} {
		if _, ok := changedParts(bad, a.Version(), cardParts); ok {
			t.Errorf("%q taken for a card's version", bad)
		}
	}
	// A read's version (of the result as the tools decode it) is the pre-read's (of the
	// snapshot), for each kind.
	raw := json.RawMessage(`{"roleId":"r","roleName":"Mira <&> \u2028","tags":["a"],"roleWelcome":"Hi.\n","sections":{"scenario":"Port."}}`)
	card, _ := ParseCard(raw)
	if decoded := decodeRaw(raw).(map[string]any); CardVersion(decoded) != card.Version() {
		t.Errorf("card: read %s, pre-read %s", CardVersion(decoded), card.Version())
	}
	wb := WorldbookState{Name: "Lore", Description: "", Tags: nil, BoundRoleIDs: []string{"r_1"}}
	if got := MetaVersion(decodeRaw(json.RawMessage(`{"name":"Lore","description":"","boundRoleIds":["r_1"],"entryCount":3}`)).(map[string]any)); got != wb.MetaVersion() {
		t.Errorf("worldbook: read %s, pre-read %s", got, wb.MetaVersion())
	}
	trialRaw := json.RawMessage(`{"clientKey":"k","sections":{"roleName":"ab12","sections":"cd34"},"worldbook":{"entries":3}}`)
	var trial Trial
	if err := json.Unmarshal(trialRaw, &trial); err != nil {
		t.Fatal(err)
	}
	if got := TrialVersionOf(decodeRaw(trialRaw).(map[string]any)); got != TrialVersion(&trial) {
		t.Errorf("trial: read %s, pre-read %s", got, TrialVersion(&trial))
	}
	e1 := map[string]any{"name": "A", "content": "x", "priority": json.Number("10"), "entryId": "e1", "lastUpdateTime": "then"}
	e2 := map[string]json.RawMessage{"name": mustJSON("A"), "content": mustJSON("x"), "priority": json.RawMessage("10"), "entryId": mustJSON("e1")}
	if EntryVersion(e1) != rawEntryVersion(e2) {
		t.Errorf("an entry's version differs between the list and the snapshot: %s %s", EntryVersion(e1), rawEntryVersion(e2))
	}
}

// FuzzChangedParts: any ifVersion a client sends is refused or compared, never a panic.
func FuzzChangedParts(f *testing.F) {
	card, _ := ParseCard(json.RawMessage(`{"roleName":"Mira"}`))
	f.Add(card.Version())
	f.Add("")
	f.Add("AAAA")
	f.Fuzz(func(t *testing.T, v string) {
		changedParts(v, card.Version(), cardParts)
		changedParts(v, MetaVersion(map[string]any{"name": "a", "description": "b"}), metaParts)
		validEntryVersion(v)
	})
}

// FuzzCanonical: the canonical JSON of any text is JSON that decodes back to that text.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{"", "plain", "quote \" and \\ backslash", "\x00\x1f\n\t\u2028<&>", "émoji 🐉"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		data := appendCanonical(nil, []any{s, map[string]any{s: s}})
		var back []any
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("%q: %s is no JSON: %v", s, data, err)
		}
		if back[0] != s || back[1].(map[string]any)[s] != s {
			t.Fatalf("%q came back as %v", s, back)
		}
	})
}
