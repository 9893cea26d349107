package tavern

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern/taverntest"
)

func mustReadBook(t testing.TB, data []byte) *Book {
	t.Helper()
	b, err := ReadBook(data)
	if err != nil {
		t.Fatalf("ReadBook: %v\n%.300s", err, data)
	}
	return b
}

func TestReadWorldInfo(t *testing.T) {
	t.Parallel()
	b := mustReadBook(t, []byte(taverntest.WorldInfo()))
	diff(t, "Name", "Shoals", b.Name)
	// Book-level fields come from originalData where the file has none; its stale entries do not.
	diff(t, "Extensions", map[string]any{"scan_depth": n("6")}, b.Extensions)
	if len(b.Entries) != 3 {
		t.Fatalf("entries: %s", show(b.Entries))
	}
	// File order, not uid order.
	e := b.Entries[0]
	diff(t, "entry0.Name", "Kraken", e.Name)
	diff(t, "entry0.Keywords", []string{"kraken", "sea monster"}, e.Keywords)
	diff(t, "entry0.SecondaryKeywords", []string{"storm", "squall"}, e.SecondaryKeywords)
	diff(t, "entry0.MatchOptions (nulls become false)", &MatchOptions{SelectiveLogic: LogicNotAll}, e.MatchOptions)
	diff(t, "entry0.SortOrder", 100, e.SortOrder)
	diff(t, "entry0.id", n("3"), e.Extensions["id"])
	ext := e.Extensions["extensions"].(map[string]any)
	diff(t, "entry0.extensions.depth", n("4"), ext["depth"])
	diff(t, "entry0.extensions.characterFilter", map[string]any{"isExclude": false, "names": []any{}, "tags": []any{}}, ext["characterFilter"])
	diff(t, "entry0.position", "before_char", e.Extensions["position"])
	e = b.Entries[1]
	diff(t, "entry1.Name", "Dragon (CJK)", e.Name)
	diff(t, "entry1.IsEnabled (disable: true)", false, e.IsEnabled)
	diff(t, "entry1.MatchOptions", &MatchOptions{CaseSensitive: true, MatchWholeWords: true}, e.MatchOptions)
	diff(t, "entry1.position", "after_char", e.Extensions["position"])
	diff(t, "entry1.SecondaryKeywords", []string(nil), e.SecondaryKeywords)
	e = b.Entries[2]
	diff(t, "entry2.Keywords (comma string)", []string{"lighthouse", "lamp"}, e.Keywords)
	diff(t, "entry2.IsConstant (\"true\")", true, e.IsConstant)
	diff(t, "entry2.IsEnabled (disable \"false\")", true, e.IsEnabled)
	diff(t, "entry2.SortOrder (\"10\")", 10, e.SortOrder)
	diff(t, "entry2.MatchOptions", &MatchOptions{SelectiveLogic: LogicAndAll}, e.MatchOptions)
}

func TestReadBookFormats(t *testing.T) {
	t.Parallel()
	cardBook := taverntest.V3Card()["data"].(map[string]any)["character_book"]
	want, _ := mustRead(t, mustJSON(t, taverntest.V3Card()))
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"lorebook_v3", mustJSON(t, map[string]any{"spec": "lorebook_v3", "data": cardBook})},
		{"character_book object", mustJSON(t, cardBook)},
		{"card JSON", mustJSON(t, taverntest.V3Card())},
		{"card PNG", mustPNG(t, want)},
		{"data without spec", mustJSON(t, map[string]any{"data": cardBook})},
		{"V1 card with a book", mustJSON(t, map[string]any{"name": "v1", "character_book": cardBook})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			compareBooks(t, "book", want.Book, mustReadBook(t, tc.in))
		})
	}
}

func mustPNG(t testing.TB, c *Card) []byte {
	t.Helper()
	out, err := WritePNG(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReadBookErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"no entries", `{"name": "x"}`, "not a lorebook: no entries"},
		{"entries a string", `{"entries": "x"}`, "entries: a string where an object or array was expected"},
		{"entry a number", `{"entries": {"0": 5}}`, `entries["0"]: a number where an object was expected`},
		{"bad disable", `{"entries": {"0": {"key": ["a"], "disable": "sometimes"}}}`, `entries["0"].disable: "sometimes" is not a boolean`},
		{"unknown spec", `{"spec": "x", "entries": []}`, `unknown spec "x"`},
		{"lorebook without data", `{"spec": "lorebook_v3"}`, "lorebook_v3 has no data object"},
		{"card without book", `{"spec": "chara_card_v3", "data": {"name": "x"}}`, "card has no character_book"},
		{"not JSON", "nope", "unrecognised input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ReadBook([]byte(tc.in))
			wantErr(t, err, tc.want)
		})
	}
}

// TestWorldInfoRoundTrip: ReadBook(WriteWorldInfo(ReadBook(x))) equals ReadBook(x) field by field,
// and a SillyTavern file comes back with every entry field it had.
func TestWorldInfoRoundTrip(t *testing.T) {
	t.Parallel()
	first := mustReadBook(t, []byte(taverntest.WorldInfo()))
	out, err := WriteWorldInfo(first)
	if err != nil {
		t.Fatal(err)
	}
	second := mustReadBook(t, out)
	compareBooks(t, "book", first, second)
	again, _ := WriteWorldInfo(second)
	if !bytes.Equal(out, again) {
		t.Errorf("second export differs")
	}
	src := decodeAny(t, []byte(taverntest.WorldInfo()))["entries"].(map[string]any)
	got := decodeAny(t, out)["entries"].(map[string]any)
	for uid, se := range src {
		ge, ok := got[uid].(map[string]any)
		if !ok {
			t.Errorf("entry %s missing", uid)
			continue
		}
		for k, v := range se.(map[string]any) {
			w := v
			switch {
			case uid == "1" && k == "key":
				w = []any{"lighthouse", "lamp"}
			case uid == "1" && (k == "constant"):
				w = true
			case uid == "1" && k == "disable":
				w = false
			case uid == "1" && k == "order":
				w = n("10")
			}
			diff(t, "entries."+uid+"."+k, w, ge[k])
		}
	}
}

// TestCrossFormat: a World Info book put into a card, exported as V3 and read back, exports as the
// same World Info again; a card's book exported as World Info and back keeps the service's fields.
func TestCrossFormat(t *testing.T) {
	t.Parallel()
	wi := mustReadBook(t, []byte(taverntest.WorldInfo()))
	card := &Card{Name: "x", Book: wi}
	js, err := WriteV3JSON(card)
	if err != nil {
		t.Fatal(err)
	}
	back, _ := mustRead(t, js)
	compareBooks(t, "WI via card", wi, back.Book)
	out1, _ := WriteWorldInfo(wi)
	out2, _ := WriteWorldInfo(back.Book)
	if !bytes.Equal(out1, out2) {
		t.Errorf("World Info differs after a trip through a card:\n%s\n---\n%s", out1, out2)
	}

	c, _ := mustRead(t, mustJSON(t, taverntest.V2Card()))
	wiOut, err := WriteWorldInfo(c.Book)
	if err != nil {
		t.Fatal(err)
	}
	b := mustReadBook(t, wiOut)
	for i := range c.Book.Entries {
		w, g := c.Book.Entries[i], b.Entries[i]
		w.Extensions, g.Extensions = nil, nil
		compareEntries(t, "entry", w, g)
	}
	ext := b.Entries[1].Extensions["extensions"].(map[string]any)
	diff(t, "group survives", "law", ext["group"])
	diff(t, "depth survives", n("2"), ext["depth"])
}

// TestWorldInfoNewEntries: entries from the service (no Extensions) get uids and what the service
// holds, matching options only where they differ from SillyTavern's defaults, and nothing the
// service does not hold (depth, probability, useProbability); a kept uid is not reused.
func TestWorldInfoNewEntries(t *testing.T) {
	t.Parallel()
	b := &Book{Name: "svc", Entries: []Entry{
		{EntryID: "a", Name: "A", Content: "a", Keywords: []string{"a"}, IsEnabled: true, Category: "cat", SortOrder: 5,
			MatchOptions: &MatchOptions{CaseSensitive: true, SelectiveLogic: LogicNotAny}, SecondaryKeywords: []string{"b"}},
		{EntryID: "b", Name: "B", Content: "b", Keywords: []string{"b"}, Extensions: map[string]any{"id": n("0")}},
	}}
	out, err := WriteWorldInfo(b)
	if err != nil {
		t.Fatal(err)
	}
	entries := decodeAny(t, out)["entries"].(map[string]any)
	a := entries["1"].(map[string]any)
	diff(t, "uid", n("1"), a["uid"])
	diff(t, "caseSensitive", true, a["caseSensitive"])
	diff(t, "selectiveLogic", n("2"), a["selectiveLogic"])
	diff(t, "selective", true, a["selective"])
	diff(t, "keysecondary", []any{"b"}, a["keysecondary"])
	diff(t, "position", n("0"), a["position"])
	for _, k := range []string{"matchWholeWords", "depth", "probability", "useProbability", "priority"} {
		if v, ok := a[k]; ok {
			t.Errorf("%s = %v written, though the service does not hold it", k, v)
		}
	}
	diff(t, "order", n("5"), a["order"])
	diff(t, "disable", false, a["disable"])
	diff(t, "category", "cat", a[categoryKey])
	if _, ok := a["case_sensitive"]; ok {
		t.Error("World Info entry carries the V3 case_sensitive")
	}
	bEntry := entries["0"].(map[string]any)
	diff(t, "disable", true, bEntry["disable"])
	back := mustReadBook(t, out)
	diff(t, "Category", "cat", back.Entries[0].Category)
	diff(t, "MatchOptions", b.Entries[0].MatchOptions, back.Entries[0].MatchOptions)
	diff(t, "IsEnabled", false, back.Entries[1].IsEnabled)
}

func TestWriteLorebookV3(t *testing.T) {
	t.Parallel()
	c, _ := mustRead(t, mustJSON(t, taverntest.V3Card()))
	out, err := WriteLorebookV3(c.Book)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "spec", "lorebook_v3", decodeAny(t, out)["spec"])
	compareBooks(t, "book", c.Book, mustReadBook(t, out))
	if _, err := WriteLorebookV3(nil); err == nil {
		t.Error("nil book accepted")
	}
	if _, err := WriteWorldInfo(nil); err == nil {
		t.Error("nil book accepted")
	}
}

// TestCamelCaseBookSettings: settings an editor wrote in camelCase go out under the V3 names.
func TestCamelCaseBookSettings(t *testing.T) {
	t.Parallel()
	b, err := ReadBook([]byte(`{"name":"Shoals","scanDepth":3,"tokenBudget":512,"recursiveScanning":true,"entries":[{"keys":["kraken"],"content":"A kraken.","enabled":true,"insertion_order":0}]}`))
	if err != nil {
		t.Fatal(err)
	}
	// Kept (and listed) under the V3 names from the start.
	diff(t, "Extensions", map[string]any{"scan_depth": n("3"), "token_budget": n("512"), "recursive_scanning": true}, b.Extensions)
	out, err := WriteLorebookV3(b)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	data, _ := doc["data"].(map[string]any)
	if data == nil {
		data = doc
	}
	for _, k := range []string{"scanDepth", "tokenBudget", "recursiveScanning"} {
		if _, ok := data[k]; ok {
			t.Errorf("%s written back as is: %s", k, out)
		}
	}
	if data["scan_depth"] != float64(3) || data["token_budget"] != float64(512) || data["recursive_scanning"] != true {
		t.Errorf("V3 settings missing: %s", out)
	}
}
