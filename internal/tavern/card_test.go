package tavern

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern/taverntest"
)

func TestReadV1(t *testing.T) {
	t.Parallel()
	c, f := mustRead(t, mustJSON(t, taverntest.V1Card()))
	diff(t, "format", Format{Container: "json", Spec: SpecV1}, f)
	diff(t, "Name", "Mira", c.Name)
	diff(t, "Welcome", "*Mira looks up from the logbook.* You're soaked.", c.Welcome)
	diff(t, "Sections", map[string]string{
		SectionDescription:     "A lighthouse keeper on a storm coast.",
		SectionPersonality:     "patient, wry",
		SectionScenario:        "The lamp has gone out.",
		SectionExampleDialogue: "<START>\n{{user}}: Hello?\n{{char}}: Shut the door, the wind's up.",
	}, c.Sections)
	diff(t, "Extensions", map[string]any{extRoot: map[string]any{
		"avatar": "none", "chat": "Mira - 2023-5-4 @12h 00m 00s 000ms", "talkativeness": "0.5",
		"create_date": "2023-5-4 @12h 00m 00s 000ms",
	}}, c.Extensions)
	if c.Book != nil {
		t.Errorf("Book: want nil, got %s", show(c.Book))
	}
}

func TestReadV2(t *testing.T) {
	t.Parallel()
	c, f := mustRead(t, mustJSON(t, taverntest.V2Card()))
	diff(t, "format", Format{Container: "json", Spec: SpecV2}, f)
	diff(t, "Name", "Captain Vey", c.Name)
	diff(t, "Welcome", "\"Hold the lantern lower,\" Vey whispers.", c.Welcome)
	diff(t, "Alternates", []string{"Vey tosses you a rope.", "\"You're late,\" Vey says.", "Vey is asleep in the hammock."}, c.Alternates)
	diff(t, "Description", "Works best with a slow-burn heist.", c.Description)
	diff(t, "Sections", map[string]string{
		SectionDescription:             "Captain of the *Gull*, a smuggler's sloop.",
		SectionPersonality:             "bold; loyal to her crew",
		SectionScenario:                "Night, a customs cutter on the horizon.",
		SectionExampleDialogue:         "<START>\n{{char}}: We run dark tonight.",
		SectionSystemPrompt:            "Write Vey's replies in third person.",
		SectionPostHistoryInstructions: "Keep replies under 200 words.",
	}, c.Sections)
	diff(t, "Tags", []string{"pirate", "adventure"}, c.Tags)
	diff(t, "Creator", "harbourmaster", c.Creator)
	diff(t, "CharacterVersion", "1.2", c.CharacterVersion)
	// The V1 copies beside data are dropped; what SillyTavern keeps only at the top level is kept.
	diff(t, "Extensions.root", map[string]any{
		"avatar": "none", "chat": "Captain Vey - 2024-9-1 @10h 00m 00s 000ms", "talkativeness": "0.5",
		"fav": false, "create_date": "2024-9-1 @10h 00m 00s 000ms",
	}, c.Extensions[extRoot])
	diff(t, "Extensions.data", map[string]any{"extensions": taverntest.V2Card()["data"].(map[string]any)["extensions"]}, c.Extensions[extData])

	if c.Book == nil || len(c.Book.Entries) != 2 {
		t.Fatalf("Book: %s", show(c.Book))
	}
	diff(t, "Book.Name", "Gull lore", c.Book.Name)
	e := c.Book.Entries[0]
	diff(t, "entry0.Name", "The kraken", e.Name)
	diff(t, "entry0.Keywords", []string{"kraken", "sea monster"}, e.Keywords)
	diff(t, "entry0.SecondaryKeywords", []string{"storm"}, e.SecondaryKeywords)
	// null "use global" options become SillyTavern's global defaults.
	diff(t, "entry0.MatchOptions", &MatchOptions{}, e.MatchOptions)
	diff(t, "entry0.SortOrder", 100, e.SortOrder)
	diff(t, "entry0.IsEnabled", true, e.IsEnabled)
	for _, k := range []string{"id", "position", "use_regex", "extensions"} {
		if _, ok := e.Extensions[k]; !ok {
			t.Errorf("entry0.Extensions lacks %q: %s", k, show(e.Extensions))
		}
	}
	e = c.Book.Entries[1]
	diff(t, "entry1.MatchOptions", &MatchOptions{MatchWholeWords: true, SelectiveLogic: LogicAndAll}, e.MatchOptions)
	diff(t, "entry1.SecondaryKeywords", []string{"bribe", "papers"}, e.SecondaryKeywords)
}

func TestReadV3(t *testing.T) {
	t.Parallel()
	c, f := mustRead(t, mustJSON(t, taverntest.V3Card()))
	diff(t, "format", Format{Container: "json", Spec: SpecV3}, f)
	diff(t, "Name", "龍王 🐉 Ryūō", c.Name)
	diff(t, "Alternates", []string{"🌀 The water stills.", "龍王は目を開けた。"}, c.Alternates)
	diff(t, "Tags", []string{"dragon", "東洋", "🐉"}, c.Tags)
	data := c.Extensions[extData].(map[string]any)
	for _, k := range []string{"nickname", "assets", "creator_notes_multilingual", "source", "group_only_greetings", "creation_date", "modification_date", "extensions", "x_unknown_data"} {
		if _, ok := data[k]; !ok {
			t.Errorf("Extensions.data lacks %q", k)
		}
	}
	diff(t, "Extensions.root", map[string]any{"x_root_field": "kept at the top"}, c.Extensions[extRoot])
	if _, ok := c.Sections[SectionSystemPrompt]; ok {
		t.Errorf("empty system_prompt should not be a section")
	}
	b := c.Book
	diff(t, "Book.Extensions", map[string]any{
		"scan_depth": n("8"), "token_budget": n("1024"), "recursive_scanning": true,
		"extensions": map[string]any{"risu_fullWordMatching": true},
	}, b.Extensions)
	e := b.Entries[0]
	diff(t, "entry0.Name", "Dragon palace", e.Name)
	diff(t, "entry0.Category", "places", e.Category)
	diff(t, "entry0.Priority", 5, e.Priority)
	diff(t, "entry0.MatchOptions", &MatchOptions{CaseSensitive: true}, e.MatchOptions)
	diff(t, "entry0.Extensions.comment", "comment differs from name", e.Extensions["comment"])
	diff(t, "entry0.Extensions.extensions", map[string]any{"depth": n("4")}, e.Extensions["extensions"])
	e = b.Entries[1]
	diff(t, "entry1.SecondaryKeywords (not selective)", []string(nil), e.SecondaryKeywords)
	diff(t, "entry1.Extensions.secondary_keys", []any{"stolen"}, e.Extensions["secondary_keys"])
	diff(t, "entry1.SortOrder (2.5 rounded)", 3, e.SortOrder)
	diff(t, "entry1.Extensions.insertion_order (raw kept)", n("2.5"), e.Extensions["insertion_order"])
	e = b.Entries[2]
	diff(t, "entry2.IsConstant", true, e.IsConstant)
	diff(t, "entry2.IsEnabled", false, e.IsEnabled)
	diff(t, "entry2.Priority", -3, e.Priority)
	diff(t, "entry2.MatchOptions", &MatchOptions{SelectiveLogic: LogicNotAny}, e.MatchOptions)
}

func TestReadSloppy(t *testing.T) {
	t.Parallel()
	c, f := mustRead(t, mustJSON(t, taverntest.SloppyCard()))
	diff(t, "format", Format{Container: "json", Spec: SpecV2}, f)
	diff(t, "Alternates (a string is one greeting)", []string{"only one, with a comma"}, c.Alternates)
	diff(t, "Tags (comma list)", []string{"a", "b", "c"}, c.Tags)
	diff(t, "CharacterVersion", "2", c.CharacterVersion)
	diff(t, "Extensions (null extensions dropped)", map[string]any(nil), c.Extensions)
	if c.Book == nil || len(c.Book.Entries) != 2 {
		t.Fatalf("Book: %s", show(c.Book))
	}
	diff(t, "Book.Extensions", map[string]any(nil), c.Book.Extensions)
	e := c.Book.Entries[0]
	diff(t, "entry0.Keywords", []string{"alpha", "beta"}, e.Keywords)
	diff(t, "entry0.SecondaryKeywords", []string{"gamma"}, e.SecondaryKeywords)
	diff(t, "entry0.Content", "42", e.Content)
	diff(t, "entry0.IsEnabled", true, e.IsEnabled)
	diff(t, "entry0.IsConstant", false, e.IsConstant)
	diff(t, "entry0.SortOrder", 100, e.SortOrder)
	diff(t, "entry0.Priority", 7, e.Priority)
	diff(t, "entry0.Extensions", map[string]any{}, e.Extensions)
	e = c.Book.Entries[1]
	diff(t, "entry1.Keywords", []string{"delta", "5"}, e.Keywords)
	diff(t, "entry1.IsEnabled (missing = enabled)", true, e.IsEnabled)
	diff(t, "entry1.MatchOptions", &MatchOptions{CaseSensitive: true, MatchWholeWords: true, SelectiveLogic: LogicNotAll}, e.MatchOptions)
}

func TestReadErrors(t *testing.T) {
	t.Parallel()
	big := make([]byte, MaxInputSize+1)
	big[0] = '{'
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "input is empty"},
		{"not a card", "hello", "unrecognised input"},
		{"array", "[1]", "unrecognised input"},
		{"broken JSON", `{"name": `, "JSON"},
		{"trailing data", `{"name": "a"} {}`, "unexpected data after"},
		{"no card fields", `{"foo": 1}`, "not a character card"},
		{"lorebook", `{"spec": "lorebook_v3", "data": {"entries": []}}`, "input is a lorebook"},
		{"world info", `{"entries": {}}`, "lorebook or World Info"},
		{"unknown spec", `{"spec": "chara_card_v9", "data": {}}`, `unknown spec "chara_card_v9"`},
		{"v2 without data", `{"spec": "chara_card_v2"}`, "has no data object"},
		{"object for a string", `{"spec": "chara_card_v3", "data": {"name": {"first": "a"}}}`, "data.name: an object where a string was expected"},
		{"object in keys", `{"spec": "chara_card_v3", "data": {"name": "a", "character_book": {"entries": [{"keys": [{"k": 1}]}]}}}`, "data.character_book.entries[0].keys[0]: an object where a string was expected"},
		{"bad boolean", `{"spec": "chara_card_v3", "data": {"name": "a", "character_book": {"entries": [{"keys": [], "enabled": "perhaps"}]}}}`, `"perhaps" is not a boolean`},
		{"bad number", `{"spec": "chara_card_v3", "data": {"name": "a", "character_book": {"entries": [{"insertion_order": "soon"}]}}}`, `"soon" is not a number`},
		{"extensions not an object", `{"spec": "chara_card_v3", "data": {"name": "a", "extensions": [1]}}`, "data.extensions: an array where an object was expected"},
		{"invalid UTF-8", "{\"name\": \"\xff\"}", "not valid UTF-8"},
		{"deep nesting", `{"name": "a", "x": ` + string(bytes.Repeat([]byte("["), 300)) + string(bytes.Repeat([]byte("]"), 300)) + `}`, "nests deeper"},
		{"too big", string(big), "the limit is"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := Read([]byte(tc.in))
			wantErr(t, err, tc.want)
		})
	}
}

// TestRoundTripJSON: Read(WriteV3JSON(Read(x))) equals Read(x) field by field, and a second export
// is byte-identical to the first.
func TestRoundTripJSON(t *testing.T) {
	t.Parallel()
	withBOM := append([]byte{0xEF, 0xBB, 0xBF}, mustJSON(t, taverntest.V3Card())...)
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"V1", mustJSON(t, taverntest.V1Card())},
		{"V2 SillyTavern", mustJSON(t, taverntest.V2Card())},
		{"V3 emoji CJK", mustJSON(t, taverntest.V3Card())},
		{"sloppy types", mustJSON(t, taverntest.SloppyCard())},
		{"BOM", withBOM},
		{"V2 without spec", mustJSON(t, map[string]any{"data": map[string]any{"name": "x", "first_mes": "y"}})},
		{"V2 fields at top level", mustJSON(t, map[string]any{"spec": "chara_card_v2", "name": "x", "data": nil})},
		{"V1 with junk spec_version", []byte(`{"name": "x", "spec_version": 1, "data": 5}`)},
		{"empty book", []byte(`{"spec": "chara_card_v3", "data": {"name": "x", "character_book": {}}}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			first, _ := mustRead(t, tc.in)
			out, err := WriteV3JSON(first)
			if err != nil {
				t.Fatalf("WriteV3JSON: %v", err)
			}
			second, f := mustRead(t, out)
			diff(t, "format", Format{Container: "json", Spec: SpecV3}, f)
			compareCards(t, first, second, true)
			again, err := WriteV3JSON(second)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, again) {
				t.Errorf("second export differs:\n%s\n---\n%s", out, again)
			}
		})
	}
}

// TestWriteRestoresSource: a canonical V3 card is written back exactly as it came, every field where
// it came from.
func TestWriteRestoresSource(t *testing.T) {
	t.Parallel()
	src := mustJSON(t, taverntest.V3Card())
	c, _ := mustRead(t, src)
	out, err := WriteV3JSON(c)
	if err != nil {
		t.Fatal(err)
	}
	want, got := decodeAny(t, src), decodeAny(t, out)
	if !reflect.DeepEqual(want, got) {
		wd, gd := want["data"].(map[string]any), got["data"].(map[string]any)
		for k := range wd {
			diff(t, "data."+k, wd[k], gd[k])
		}
		for k := range gd {
			if _, ok := wd[k]; !ok {
				t.Errorf("data.%s: not in source", k)
			}
		}
		diff(t, "root", want, got)
	}
}

// TestWriteV2SillyTavern: the leftovers of a SillyTavern V2 card come back where they were.
func TestWriteV2SillyTavern(t *testing.T) {
	t.Parallel()
	src := taverntest.V2Card()
	c, _ := mustRead(t, mustJSON(t, src))
	out, err := WriteV3JSON(c)
	if err != nil {
		t.Fatal(err)
	}
	got := decodeAny(t, out)
	diff(t, "spec", "chara_card_v3", got["spec"])
	diff(t, "spec_version", "3.0", got["spec_version"])
	for _, k := range []string{"avatar", "chat", "talkativeness", "fav", "create_date"} {
		diff(t, "root."+k, src[k], got[k])
	}
	data := got["data"].(map[string]any)
	srcData := src["data"].(map[string]any)
	for k, v := range srcData {
		if k == "character_book" {
			continue
		}
		diff(t, "data."+k, normalizeJSON(v), data[k])
	}
	diff(t, "data.group_only_greetings", []any{}, data["group_only_greetings"])
	book := data["character_book"].(map[string]any)
	entries := book["entries"].([]any)
	srcEntries := srcData["character_book"].(map[string]any)["entries"].([]any)
	for i, se := range srcEntries {
		for k, v := range se.(map[string]any) {
			diff(t, "entry."+k, normalizeJSON(v), entries[i].(map[string]any)[k])
		}
	}
}

// TestWriteChangedMatchOptions: options changed on the service are written where the source kept
// them, and null ("use global") stays null while it still means the same.
func TestWriteChangedMatchOptions(t *testing.T) {
	t.Parallel()
	c, _ := mustRead(t, mustJSON(t, taverntest.V2Card()))
	e := &c.Book.Entries[0]
	e.MatchOptions = &MatchOptions{CaseSensitive: true, SelectiveLogic: LogicNotAny}
	out, err := WriteV3JSON(c)
	if err != nil {
		t.Fatal(err)
	}
	entry := decodeAny(t, out)["data"].(map[string]any)["character_book"].(map[string]any)["entries"].([]any)[0].(map[string]any)
	ext := entry["extensions"].(map[string]any)
	diff(t, "extensions.case_sensitive", true, ext["case_sensitive"])
	diff(t, "top case_sensitive", true, entry["case_sensitive"])
	diff(t, "extensions.match_whole_words (still null)", nil, ext["match_whole_words"])
	if _, ok := ext["match_whole_words"]; !ok {
		t.Error("extensions.match_whole_words dropped")
	}
	diff(t, "extensions.selectiveLogic", n("2"), ext["selectiveLogic"])
	c2, _ := mustRead(t, out)
	diff(t, "re-read MatchOptions", e.MatchOptions, c2.Book.Entries[0].MatchOptions)
}

// TestWriteNewCard: a card built from the service's fields (no Extensions anywhere) exports what
// the service holds, none of what it does not, and re-imports to the same service fields.
func TestWriteNewCard(t *testing.T) {
	t.Parallel()
	c := &Card{
		Name:        "Nova",
		Welcome:     "Hello.",
		Alternates:  []string{"Hi.", "Hey."},
		Description: "notes",
		Sections:    map[string]string{SectionDescription: "d", SectionSystemPrompt: "s"},
		Tags:        []string{"t"},
		Book: &Book{Name: "Nova lore", Entries: []Entry{
			{EntryID: "e1", Name: "Ship", Content: "The ship.", Keywords: []string{"ship"}, SecondaryKeywords: []string{"dock"},
				MatchOptions: &MatchOptions{MatchWholeWords: true, SelectiveLogic: LogicAndAll}, Category: "places",
				IsEnabled: true, Priority: 3, SortOrder: 20},
			{EntryID: "e2", Name: "Native", Content: "n", Keywords: []string{"x"}, IsEnabled: true},
		}},
	}
	out, err := WriteV3JSON(c)
	if err != nil {
		t.Fatal(err)
	}
	entry := decodeAny(t, out)["data"].(map[string]any)["character_book"].(map[string]any)["entries"].([]any)[0].(map[string]any)
	ext := entry["extensions"].(map[string]any)
	diff(t, "extensions.match_whole_words", true, ext["match_whole_words"])
	for _, k := range []string{"case_sensitive", "depth", "probability", "useProbability", "position"} {
		if v, ok := ext[k]; ok {
			t.Errorf("extensions.%s = %v written, though the service does not hold it", k, v)
		}
	}
	second := decodeAny(t, out)["data"].(map[string]any)["character_book"].(map[string]any)["entries"].([]any)[1].(map[string]any)
	for _, k := range []string{"selective", "secondary_keys", "priority", "id", "use_regex"} {
		if v, ok := second[k]; ok {
			t.Errorf("%s = %v written for an entry with no secondary keywords and priority 0", k, v)
		}
	}
	diff(t, "extensions.selectiveLogic", n("3"), ext["selectiveLogic"])
	diff(t, "extensions.cardwriter/category", "places", ext[categoryKey])
	diff(t, "selective", true, entry["selective"])
	diff(t, "comment", "Ship", entry["comment"])

	back, _ := mustRead(t, out)
	diff(t, "Name", c.Name, back.Name)
	diff(t, "Alternates", c.Alternates, back.Alternates)
	diff(t, "Sections", c.Sections, back.Sections)
	for i, want := range c.Book.Entries {
		got := back.Book.Entries[i]
		diff(t, "entry.Name", want.Name, got.Name)
		diff(t, "entry.Keywords", want.Keywords, got.Keywords)
		diff(t, "entry.SecondaryKeywords", want.SecondaryKeywords, got.SecondaryKeywords)
		diff(t, "entry.Category", want.Category, got.Category)
		diff(t, "entry.Priority", want.Priority, got.Priority)
		diff(t, "entry.SortOrder", want.SortOrder, got.SortOrder)
		wantMO := want.MatchOptions
		if wantMO == nil {
			wantMO = &MatchOptions{}
		}
		diff(t, "entry.MatchOptions", wantMO, got.MatchOptions)
	}
	// A second trip is a fixed point.
	out2, _ := WriteV3JSON(back)
	back2, _ := mustRead(t, out2)
	compareCards(t, back, back2, false)

	// creatorNotes as a section stands in for an empty roleDesc; unknown sections are refused.
	c2 := &Card{Name: "x", Sections: map[string]string{SectionCreatorNotes: "from section"}}
	out, err = WriteV3JSON(c2)
	if err != nil {
		t.Fatal(err)
	}
	back, _ = mustRead(t, out)
	diff(t, "Description from creatorNotes", "from section", back.Description)
	// Both roleDesc and a different creatorNotes section survive.
	c3 := &Card{Name: "x", Description: "desc", Sections: map[string]string{SectionCreatorNotes: "other notes"}}
	out, err = WriteV3JSON(c3)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "creator_notes", "desc", decodeAny(t, out)["data"].(map[string]any)["creator_notes"])
	back, _ = mustRead(t, out)
	compareCards(t, c3, back, false)
	_, err = WriteV3JSON(&Card{Name: "x", Sections: map[string]string{"lore": "?"}})
	wantErr(t, err, `section "lore"`)
	_, err = WriteV3JSON(&Card{Name: "x", Book: &Book{Entries: []Entry{{MatchOptions: &MatchOptions{SelectiveLogic: 9}}}}})
	wantErr(t, err, "selectiveLogic 9")
}

// TestEntryJSON: an Entry marshals to exactly the service's entry fields.
func TestEntryJSON(t *testing.T) {
	t.Parallel()
	e := Entry{EntryID: "e1", Name: "n", Keywords: []string{"k"}, SecondaryKeywords: []string{}, IsEnabled: true, Extensions: map[string]any{"id": 1}}
	var got map[string]any
	if err := json.Unmarshal(mustJSON(t, e), &got); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	want := []string{"category", "content", "entryId", "isConstant", "isEnabled", "keywords", "matchOptions", "name", "priority", "secondaryKeywords", "sortOrder"}
	if len(keys) != len(want) {
		t.Fatalf("fields: %v", got)
	}
	for _, k := range want {
		if _, ok := got[k]; !ok {
			t.Errorf("missing %s", k)
		}
	}
	var empty map[string]any
	if err := json.Unmarshal(mustJSON(t, Entry{}), &empty); err != nil {
		t.Fatal(err)
	}
	diff(t, "nil keywords", []any{}, empty["keywords"])
	diff(t, "nil secondaryKeywords", []any{}, empty["secondaryKeywords"])
	diff(t, "nil matchOptions", nil, empty["matchOptions"])
	var back Entry
	if err := json.Unmarshal([]byte(`{"entryId":"e","name":"n","content":"c","keywords":["a"],"secondaryKeywords":[],"matchOptions":null,"category":"","isEnabled":true,"isConstant":false,"priority":0,"sortOrder":1}`), &back); err != nil {
		t.Fatal(err)
	}
	if back.MatchOptions != nil || back.SortOrder != 1 || back.Keywords[0] != "a" {
		t.Errorf("unmarshal: %+v", back)
	}
}

// TestLeftovers: what the service cannot hold, gathered, carried as JSON and restored onto a card
// rebuilt from the service's fields, exports as the original did.
func TestLeftovers(t *testing.T) {
	t.Parallel()
	orig, _ := mustRead(t, mustJSON(t, taverntest.V2Card()))
	js := mustJSON(t, orig.Leftovers())
	var l Leftovers
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&l); err != nil {
		t.Fatal(err)
	}
	// The card as the service would give it back: service fields only, new ids, entries swapped.
	svc := &Card{
		Name: orig.Name, Welcome: orig.Welcome, Alternates: orig.Alternates, Description: orig.Description,
		Sections: orig.Sections, Tags: orig.Tags,
		Book: &Book{Name: orig.Book.Name, Description: orig.Book.Description},
	}
	for i := len(orig.Book.Entries) - 1; i >= 0; i-- {
		e := orig.Book.Entries[i]
		e.Extensions = nil
		e.EntryID = "svc-" + e.Name
		svc.Book.Entries = append(svc.Book.Entries, e)
	}
	svc.Restore(&l)
	for i := range svc.Book.Entries {
		svc.Book.Entries[i].EntryID = ""
	}
	svc.Book.Entries[0], svc.Book.Entries[1] = svc.Book.Entries[1], svc.Book.Entries[0]
	want, err := WriteV3JSON(orig)
	if err != nil {
		t.Fatal(err)
	}
	got, err := WriteV3JSON(svc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("restored card exports differently:\n%s\n---\n%s", want, got)
	}
}
