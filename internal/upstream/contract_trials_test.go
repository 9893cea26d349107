package upstream_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// Contract tests of the trial operations: upsertTrialCard, getTrialCard, listTrialCards and
// deleteTrialCard, with client keys, slots (5), the 24-hour lifetime on an injectable clock,
// the SHA-256 digests of the card fields and the fields changed by the last upsert.

// ctTrialFields are the card fields a trial summary digests, in the order changed lists them.
var ctTrialFields = []string{"roleName", "roleDesc", "roleWelcome", "welcomeAlternates", "prologue", "sections"}

// ctCanonical encodes a string, a list of strings or an object of strings as canonical JSON
// (RFC 8785): no whitespace, object keys sorted by UTF-16 code units, strings escaped only
// where JSON requires it (", \ and control characters, with the short forms where they exist).
func ctCanonical(v any) []byte {
	var b bytes.Buffer
	str := func(s string) {
		b.WriteByte('"')
		for _, r := range s {
			switch {
			case r == '"':
				b.WriteString(`\"`)
			case r == '\\':
				b.WriteString(`\\`)
			case r == '\b':
				b.WriteString(`\b`)
			case r == '\f':
				b.WriteString(`\f`)
			case r == '\n':
				b.WriteString(`\n`)
			case r == '\r':
				b.WriteString(`\r`)
			case r == '\t':
				b.WriteString(`\t`)
			case r < 0x20:
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('"')
	}
	switch x := v.(type) {
	case string:
		str(x)
	case []string:
		b.WriteByte('[')
		for i, s := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			str(s)
		}
		b.WriteByte(']')
	case map[string]string:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int {
			return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		})
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			str(k)
			b.WriteByte(':')
			str(x[k])
		}
		b.WriteByte('}')
	default:
		panic(fmt.Sprintf("ctCanonical: %T", v))
	}
	return b.Bytes()
}

// ctFieldsJSON returns the canonical JSON of each card field of a trial card, an omitted
// field being "", [] or {}.
func ctFieldsJSON(c upstream.TrialCardInput) map[string]string {
	sections := map[string]string{}
	if s := c.Sections; s != nil {
		for name, p := range map[string]*string{
			"description": s.Description, "personality": s.Personality, "scenario": s.Scenario,
			"exampleDialogue": s.ExampleDialogue, "systemPrompt": s.SystemPrompt,
			"postHistoryInstructions": s.PostHistoryInstructions, "creatorNotes": s.CreatorNotes,
		} {
			if p != nil {
				sections[name] = *p
			}
		}
	}
	list := func(l []string) []string {
		if l == nil {
			return []string{}
		}
		return l
	}
	out := map[string]string{}
	for name, v := range map[string]any{
		"roleName": c.RoleName, "roleDesc": c.RoleDesc, "roleWelcome": c.RoleWelcome,
		"welcomeAlternates": list(c.WelcomeAlternates), "prologue": list(c.Prologue), "sections": sections,
	} {
		out[name] = string(ctCanonical(v))
	}
	return out
}

// ctDigest is the digest the contract defines: SHA-256 of the canonical JSON, lowercase hex.
func ctDigest(canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	return hex.EncodeToString(sum[:])
}

func TestContractCanonicalJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   any
		want string
	}{
		{"", `""`},
		{"Hi <there> & \"you\" \\ é 中文 😀", `"Hi <there> & \"you\" \\ é 中文 😀"`},
		{"a\nb\tc\rd\be\x01\x1f", `"a\nb\tc\rd\be\u0001\u001f"`},
		{[]string{}, `[]`},
		{[]string{"a", "b"}, `["a","b"]`},
		{[]string{"line\u2028separator", "para\u2029separator", `\u2028`}, "[\"line\u2028separator\",\"para\u2029separator\",\"\\\\u2028\"]"},
		{map[string]string{}, `{}`},
		{map[string]string{"scenario": "s", "description": "d", "creatorNotes": "c"}, `{"creatorNotes":"c","description":"d","scenario":"s"}`},
	}
	for _, tt := range tests {
		if got := string(ctCanonical(tt.in)); got != tt.want {
			t.Errorf("ctCanonical(%#v) = %s; want %s", tt.in, got, tt.want)
		}
	}
}

// ctTrialCheck compares a trial summary with what the test expects of it.
type ctTrialCheck struct {
	created                  bool
	changed                  []string
	used                     int
	entries, wbNew, wbGone   int
	card                     upstream.TrialCardInput
	expiresAt                time.Time
	roleID, worldbookID, key string // "" = not known yet, only non-empty
}

func (w ctTrialCheck) check(t *testing.T, what string, got *upstream.TrialSummary) {
	t.Helper()
	if got.ClientKey != w.key || got.Created != w.created || !slices.Equal(got.Changed, w.changed) {
		t.Errorf("%s: clientKey %q, created %v, changed %v; want %q, %v, %v", what, got.ClientKey, got.Created, got.Changed, w.key, w.created, w.changed)
	}
	if got.Slots != (upstream.Slots{Used: w.used, Max: 5}) {
		t.Errorf("%s: slots %+v; want {%d 5}", what, got.Slots, w.used)
	}
	if !got.ExpiresAt.Equal(w.expiresAt) {
		t.Errorf("%s: expiresAt %s; want %s", what, got.ExpiresAt, w.expiresAt)
	}
	wb := got.Worldbook
	if wb.Entries != w.entries || wb.Created != w.wbNew || wb.Deleted != w.wbGone || wb.WorldbookID == "" ||
		(w.worldbookID != "" && wb.WorldbookID != w.worldbookID) {
		t.Errorf("%s: worldbook %+v; want entries %d, created %d, deleted %d", what, wb, w.entries, w.wbNew, w.wbGone)
	}
	if got.RoleID == "" || (w.roleID != "" && got.RoleID != w.roleID) {
		t.Errorf("%s: roleId %q; want %q", what, got.RoleID, w.roleID)
	}
	canonical := ctFieldsJSON(w.card)
	for _, f := range ctTrialFields {
		if want := ctDigest(canonical[f]); got.Sections[f] != want {
			t.Errorf("%s: digest of %s %s; want %s, the SHA-256 of %s", what, f, got.Sections[f], want, canonical[f])
		}
	}
	if len(got.Sections) != len(ctTrialFields) {
		t.Errorf("%s: digests of %d fields; want %d", what, len(got.Sections), len(ctTrialFields))
	}
}

func TestContractUpsertTrialCard(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	ttl := 24 * time.Hour
	entry := func(name string) upstream.TrialEntryInput {
		return upstream.TrialEntryInput{Name: name, Content: name + " content", Keywords: []string{strings.ToLower(name)}}
	}
	card := upstream.TrialCardInput{
		RoleName:    "Mira",
		RoleWelcome: "Hi <there> & \"welcome\" aboard.",
		Prologue:    []string{"Who are you?", "Where am I?"},
		// U+2028 and U+2029 are written as they are in canonical JSON; the text \u2028 is not one.
		WelcomeAlternates: []string{"Para one.\u2029Para two.", `A literal \u2028, not a separator.`},
		Sections: &upstream.CardSections{
			Description:  ctPtr("Pilot é 中文 😀\nsecond line\twith a tab \\ and a \x01."),
			Scenario:     ctPtr("A ship.\u2028A new line."),
			CreatorNotes: ctPtr(""),
		},
	}
	in := upstream.TrialUpsertInput{Card: card, Worldbook: &upstream.TrialWorldbookInput{Entries: []upstream.TrialEntryInput{entry("Harbor"), entry("Storm"), entry("Keeper")}}}
	first, err := e.c.UpsertTrialCard(e.ctx, "demo-1", in)
	ctOK(t, "upsertTrialCard", first, err)
	if st := e.rec.last(t, "upsertTrialCard").Status; st != http.StatusCreated {
		t.Errorf("status %d; want 201 on create", st)
	}
	w := ctTrialCheck{key: "demo-1", created: true, changed: ctTrialFields, used: 1, entries: 3, wbNew: 3, card: card, expiresAt: ctStart.Add(ttl)}
	w.check(t, "create", first)
	w.roleID, w.worldbookID = first.RoleID, first.Worldbook.WorldbookID

	steps := []struct {
		name    string
		advance time.Duration
		in      upstream.TrialUpsertInput
		changed []string
		entries int
		wbNew   int
		wbGone  int
	}{
		{"one field changed", time.Hour, upstream.TrialUpsertInput{Card: ctWith(card, func(c *upstream.TrialCardInput) { c.RoleDesc = "A pilot." })},
			[]string{"roleDesc"}, 3, 0, 0},
		{"nothing changed, worldbook omitted keeps the entries", time.Minute, upstream.TrialUpsertInput{Card: ctWith(card, func(c *upstream.TrialCardInput) { c.RoleDesc = "A pilot." })},
			[]string{}, 3, 0, 0},
		{"card is a full replacement: omitted fields clear", time.Minute, upstream.TrialUpsertInput{Card: upstream.TrialCardInput{RoleName: "Mira", RoleDesc: "A pilot.", Prologue: []string{"Who are you?", "Where am I?"}}},
			[]string{"roleWelcome", "welcomeAlternates", "sections"}, 3, 0, 0},
		{"worldbook replaces the entries", time.Minute, upstream.TrialUpsertInput{Card: upstream.TrialCardInput{RoleName: "Mira", RoleDesc: "A pilot.", Prologue: []string{"Who are you?", "Where am I?"}},
			Worldbook: &upstream.TrialWorldbookInput{Entries: []upstream.TrialEntryInput{entry("Reef")}}},
			[]string{}, 1, 1, 3},
		{"two fields and an order change", time.Minute, upstream.TrialUpsertInput{Card: upstream.TrialCardInput{RoleName: "Mira Vale", RoleDesc: "A pilot.", Prologue: []string{"Where am I?", "Who are you?"},
			WelcomeAlternates: []string{}}},
			[]string{"roleName", "prologue"}, 1, 0, 0},
		{"an empty worldbook clears the entries", time.Minute, upstream.TrialUpsertInput{Card: upstream.TrialCardInput{RoleName: "Mira Vale", RoleDesc: "A pilot.", Prologue: []string{"Where am I?", "Who are you?"}},
			Worldbook: &upstream.TrialWorldbookInput{}},
			[]string{}, 0, 0, 1},
		{"sections given and empty differ from omitted", time.Minute, upstream.TrialUpsertInput{Card: upstream.TrialCardInput{RoleName: "Mira Vale", RoleDesc: "A pilot.", Prologue: []string{"Where am I?", "Who are you?"},
			Sections: &upstream.CardSections{Personality: ctPtr("")}}},
			[]string{"sections"}, 0, 0, 0},
	}
	last := first
	for _, st := range steps {
		e.clock.Advance(st.advance)
		got, err := e.c.UpsertTrialCard(e.ctx, "demo-1", st.in)
		ctOK(t, "upsertTrialCard", got, err)
		if status := e.rec.last(t, "upsertTrialCard").Status; status != http.StatusOK {
			t.Errorf("%s: status %d; want 200 on update", st.name, status)
		}
		if raw := ctRaw(t, e.rec.last(t, "upsertTrialCard").RespBody); raw["changed"] == nil {
			t.Errorf("%s: changed is null; want an array", st.name)
		}
		w.created, w.changed, w.card, w.expiresAt = false, st.changed, st.in.Card, e.clock.Now().Add(ttl)
		w.entries, w.wbNew, w.wbGone = st.entries, st.wbNew, st.wbGone
		w.check(t, st.name, got)
		last = got
	}

	// getTrialCard and listTrialCards report the summary of the last upsert.
	got, err := e.c.GetTrialCard(e.ctx, "demo-1")
	ctOK(t, "getTrialCard", got, err)
	w.check(t, "getTrialCard", got)
	list, err := e.c.ListTrialCards(e.ctx)
	ctOK(t, "listTrialCards", list, err)
	if list.TTLHours != 24 || list.Slots != (upstream.Slots{Used: 1, Max: 5}) || len(list.List) != 1 {
		t.Fatalf("listTrialCards %+v; want ttlHours 24, slots {1 5}, one trial", list)
	}
	w.check(t, "listTrialCards", &list.List[0])
	if last.RoleID != first.RoleID {
		t.Errorf("the trial's roleId changed from %s to %s", first.RoleID, last.RoleID)
	}

	// A trial card is not one of the author's cards.
	_, err = e.c.GetCard(e.ctx, first.RoleID)
	ctWantErr(t, err, "getCard", http.StatusNotFound, "role_not_found")
}

// ctWith returns a copy of c changed by f.
func ctWith(c upstream.TrialCardInput, f func(*upstream.TrialCardInput)) upstream.TrialCardInput {
	f(&c)
	return c
}

func TestContractUpsertTrialCardRefused(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	good := upstream.TrialCardInput{RoleName: "Mira"}
	many := func(n int) *upstream.TrialWorldbookInput {
		wb := &upstream.TrialWorldbookInput{}
		for i := range n {
			wb.Entries = append(wb.Entries, upstream.TrialEntryInput{Name: fmt.Sprint("E", i), Content: "c", Keywords: []string{"k"}})
		}
		return wb
	}
	tests := []struct {
		name   string
		key    string
		in     upstream.TrialUpsertInput
		status int
		part   string // detail.part, or "" for detail.field
		field  string
	}{
		{"key starting with a dash", "-bad", upstream.TrialUpsertInput{Card: good}, 400, "path", ""},
		{"key of 65 characters", strings.Repeat("k", 65), upstream.TrialUpsertInput{Card: good}, 400, "path", ""},
		{"key with a space", "a b", upstream.TrialUpsertInput{Card: good}, 400, "path", ""},
		{"empty roleName", "k1", upstream.TrialUpsertInput{Card: upstream.TrialCardInput{}}, 400, "body", ""},
		{"501 entries", "k1", upstream.TrialUpsertInput{Card: good, Worldbook: many(501)}, 400, "body", ""},
		{"matchOptions on a trial entry", "k1", upstream.TrialUpsertInput{Card: good, Worldbook: &upstream.TrialWorldbookInput{Entries: []upstream.TrialEntryInput{
			{Name: "n", Content: "c", Keywords: []string{"k"}, MatchOptions: &upstream.MatchOptions{}}}}}, 400, "", "matchOptions"},
	}
	for _, tt := range tests {
		_, err := e.c.UpsertTrialCard(e.ctx, tt.key, tt.in)
		apiErr := ctWantErr(t, err, "upsertTrialCard", tt.status, "invalid_request")
		if tt.part != "" {
			if part := ctDetail(t, apiErr, "part"); part != tt.part {
				t.Errorf("%s: detail.part %v; want %s", tt.name, part, tt.part)
			}
		} else if f := ctDetail(t, apiErr, "field"); f != tt.field {
			t.Errorf("%s: detail.field %v; want %s", tt.name, f, tt.field)
		}
	}
	list, err := e.c.ListTrialCards(e.ctx)
	ctOK(t, "listTrialCards", list, err)
	if len(list.List) != 0 || list.Slots.Used != 0 {
		t.Errorf("trials after the refused upserts: %+v; want none", list)
	}
	// The limits themselves are accepted: a 64-character key, 500 entries.
	key := "K" + strings.Repeat("a.b_c-", 10) + "xyz"
	got, err := e.c.UpsertTrialCard(e.ctx, key, upstream.TrialUpsertInput{Card: good, Worldbook: many(500)})
	ctOK(t, "upsertTrialCard", got, err)
	if len(key) != 64 || got.ClientKey != key || got.Worldbook.Entries != 500 {
		t.Errorf("upsert of a %d-character key with 500 entries: %+v", len(key), got)
	}
	// A key that could change the path is refused by the client before anything is sent.
	before := len(e.rec.exchanges())
	for _, bad := range []string{"a/b", "..", "a?b", "a%2Fb"} {
		_, err := e.c.UpsertTrialCard(e.ctx, bad, upstream.TrialUpsertInput{Card: good})
		var argErr *upstream.ArgumentError
		if !errors.As(err, &argErr) || argErr.Param != "clientKey" {
			t.Errorf("UpsertTrialCard(%q) = %v; want an *ArgumentError for clientKey", bad, err)
		}
	}
	if after := len(e.rec.exchanges()); after != before {
		t.Errorf("%d requests sent for refused keys; want none", after-before)
	}
}

// TestContractTrialSlots fills the five slots: the sixth new key is trial_slots_full, an update
// of a live key still works, and removing one frees its slot.
func TestContractTrialSlots(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	card := upstream.TrialUpsertInput{Card: upstream.TrialCardInput{RoleName: "Mira"}}
	for i := 1; i <= 5; i++ {
		got, err := e.c.UpsertTrialCard(e.ctx, fmt.Sprint("k", i), card)
		ctOK(t, "upsertTrialCard", got, err)
		if got.Slots != (upstream.Slots{Used: i, Max: 5}) {
			t.Errorf("slots after %d trials: %+v", i, got.Slots)
		}
	}
	_, err := e.c.UpsertTrialCard(e.ctx, "k6", card)
	apiErr := ctWantErr(t, err, "upsertTrialCard", http.StatusConflict, "trial_slots_full")
	if used, max := ctDetail(t, apiErr, "used"), ctDetail(t, apiErr, "max"); used != 5 || max != 5 {
		t.Errorf("detail used %v, max %v; want 5, 5", used, max)
	}
	if n := e.rec.count("upsertTrialCard"); n != 6 {
		t.Errorf("%d upsertTrialCard requests; a 409 must not be retried", n)
	}
	got, err := e.c.UpsertTrialCard(e.ctx, "k3", upstream.TrialUpsertInput{Card: upstream.TrialCardInput{RoleName: "Nox"}})
	ctOK(t, "upsertTrialCard", got, err)
	if got.Created || !slices.Equal(got.Changed, []string{"roleName"}) || got.Slots.Used != 5 {
		t.Errorf("update with all slots used: %+v; want an update", got)
	}
	removed, err := e.c.DeleteTrialCard(e.ctx, "k2")
	ctOK(t, "deleteTrialCard", removed, err)
	got, err = e.c.UpsertTrialCard(e.ctx, "k6", card)
	ctOK(t, "upsertTrialCard", got, err)
	if !got.Created || got.Slots != (upstream.Slots{Used: 5, Max: 5}) {
		t.Errorf("k6 after freeing a slot: %+v", got)
	}
	list, err := e.c.ListTrialCards(e.ctx)
	ctOK(t, "listTrialCards", list, err)
	var keys []string
	for _, tr := range list.List {
		keys = append(keys, tr.ClientKey)
	}
	if !slices.Equal(keys, []string{"k1", "k3", "k4", "k5", "k6"}) {
		t.Errorf("live trials %v; want k1 k3 k4 k5 k6, sorted", keys)
	}
}

// TestContractTrialExpiry moves the sandbox's clock: a trial lives until expiresAt (24 hours
// after its last upsert); from then on it is trial_not_found and its slot is free.
func TestContractTrialExpiry(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	card := upstream.TrialUpsertInput{Card: upstream.TrialCardInput{RoleName: "Mira"}}
	old, err := e.c.UpsertTrialCard(e.ctx, "old", card)
	ctOK(t, "upsertTrialCard", old, err)
	if !old.ExpiresAt.Equal(ctStart.Add(24 * time.Hour)) {
		t.Fatalf("expiresAt %s; want 24 hours after %s", old.ExpiresAt, ctStart)
	}
	e.clock.Advance(time.Hour)
	for _, k := range []string{"young", "k3", "k4", "k5"} {
		got, err := e.c.UpsertTrialCard(e.ctx, k, card)
		ctOK(t, "upsertTrialCard", got, err)
	}
	_, err = e.c.UpsertTrialCard(e.ctx, "k6", card)
	ctWantErr(t, err, "upsertTrialCard", http.StatusConflict, "trial_slots_full")

	// One second before expiresAt the trial is alive.
	e.clock.Advance(23*time.Hour - time.Second)
	got, err := e.c.GetTrialCard(e.ctx, "old")
	ctOK(t, "getTrialCard", got, err)
	if got.RoleID != old.RoleID || !got.ExpiresAt.Equal(old.ExpiresAt) {
		t.Errorf("getTrialCard before expiry %+v; want the trial unchanged", got)
	}
	// At expiresAt it is gone, everywhere.
	e.clock.Advance(time.Second)
	_, err = e.c.GetTrialCard(e.ctx, "old")
	ctWantErr(t, err, "getTrialCard", http.StatusNotFound, "trial_not_found")
	_, err = e.c.DeleteTrialCard(e.ctx, "old")
	ctWantErr(t, err, "deleteTrialCard", http.StatusNotFound, "trial_not_found")
	list, err := e.c.ListTrialCards(e.ctx)
	ctOK(t, "listTrialCards", list, err)
	if list.Slots != (upstream.Slots{Used: 4, Max: 5}) || len(list.List) != 4 || slices.ContainsFunc(list.List, func(s upstream.TrialSummary) bool { return s.ClientKey == "old" }) {
		t.Errorf("listTrialCards after expiry %+v; want the four younger trials and a free slot", list)
	}
	// The slot is free again, and the old key starts a new trial.
	got, err = e.c.UpsertTrialCard(e.ctx, "k6", card)
	ctOK(t, "upsertTrialCard", got, err)
	if !got.Created || got.Slots.Used != 5 || !got.ExpiresAt.Equal(e.clock.Now().Add(24*time.Hour)) {
		t.Errorf("k6 after expiry: %+v", got)
	}
	_, err = e.c.UpsertTrialCard(e.ctx, "old", card)
	ctWantErr(t, err, "upsertTrialCard", http.StatusConflict, "trial_slots_full")

	// An upsert renews expiresAt: "young" was created at +1h; renewed now, it outlives the others.
	renewed, err := e.c.UpsertTrialCard(e.ctx, "young", card)
	ctOK(t, "upsertTrialCard", renewed, err)
	e.clock.Advance(time.Hour)
	_, err = e.c.GetTrialCard(e.ctx, "k3")
	ctWantErr(t, err, "getTrialCard", http.StatusNotFound, "trial_not_found")
	got, err = e.c.GetTrialCard(e.ctx, "young")
	ctOK(t, "getTrialCard", got, err)
	if !got.ExpiresAt.Equal(renewed.ExpiresAt) {
		t.Errorf("young expires at %s; want %s", got.ExpiresAt, renewed.ExpiresAt)
	}
	again, err := e.c.UpsertTrialCard(e.ctx, "old", card)
	ctOK(t, "upsertTrialCard", again, err)
	if !again.Created || again.RoleID == old.RoleID || !slices.Equal(again.Changed, ctTrialFields) {
		t.Errorf("the expired key upserted again: %+v; want a new trial", again)
	}
}

func TestContractDeleteTrialCard(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	for _, k := range []string{"a", "b"} {
		got, err := e.c.UpsertTrialCard(e.ctx, k, upstream.TrialUpsertInput{Card: upstream.TrialCardInput{RoleName: k}})
		ctOK(t, "upsertTrialCard", got, err)
	}
	removed, err := e.c.DeleteTrialCard(e.ctx, "a")
	ctOK(t, "deleteTrialCard", removed, err)
	if removed.ClientKey != "a" || !removed.Removed {
		t.Errorf("deleteTrialCard = %+v; want {a true}", removed)
	}
	_, err = e.c.GetTrialCard(e.ctx, "a")
	ctWantErr(t, err, "getTrialCard", http.StatusNotFound, "trial_not_found")
	_, err = e.c.DeleteTrialCard(e.ctx, "a")
	ctWantErr(t, err, "deleteTrialCard", http.StatusNotFound, "trial_not_found")
	_, err = e.c.DeleteTrialCard(e.ctx, "never")
	ctWantErr(t, err, "deleteTrialCard", http.StatusNotFound, "trial_not_found")
	list, err := e.c.ListTrialCards(e.ctx)
	ctOK(t, "listTrialCards", list, err)
	if list.Slots.Used != 1 || len(list.List) != 1 || list.List[0].ClientKey != "b" {
		t.Errorf("listTrialCards after removing a: %+v", list)
	}
	// The document does not restrict keys on the read and the delete: a key that the upsert's
	// pattern would refuse (another client's, say) is looked up, not refused.
	for _, key := range []string{"-bad", "a b"} {
		_, err = e.c.GetTrialCard(e.ctx, key)
		ctWantErr(t, err, "getTrialCard", http.StatusNotFound, "trial_not_found")
		_, err = e.c.DeleteTrialCard(e.ctx, key)
		ctWantErr(t, err, "deleteTrialCard", http.StatusNotFound, "trial_not_found")
	}
}
