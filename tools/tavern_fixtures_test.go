package tools

// Fixture cards and lorebooks for the tavern toolset's tests, built here: JSON-shaped values and
// PNG and CHARX files assembled chunk by chunk.

import (
	"archive/zip"
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"reflect"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/tavern"
)

// n is a JSON number literal.
func n(s string) json.Number { return json.Number(s) }

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixV1 is a V1 card (TavernAI): the fields at the top level, with extra fields of its own.
func fixV1() map[string]any {
	return map[string]any{
		"name":          "Mira",
		"description":   "A lighthouse keeper on a storm coast.",
		"personality":   "patient, wry",
		"scenario":      "The lamp has gone out.",
		"first_mes":     "*Mira looks up from the logbook.* You're soaked.",
		"mes_example":   "<START>\n{{user}}: Hello?\n{{char}}: Shut the door, the wind's up.",
		"avatar":        "none",
		"chat":          "Mira - 2023-5-4 @12h 00m 00s 000ms",
		"talkativeness": "0.5",
	}
}

// fixV2 is a V2 card as SillyTavern writes it: V1 fields copied beside data, a character_book
// with SillyTavern's extensions (null "use global" options), entries out of insertion order.
func fixV2() map[string]any {
	data := map[string]any{
		"name":                      "Captain Vey",
		"description":               "Captain of the *Gull*, a smuggler's sloop.",
		"personality":               "bold; loyal to her crew",
		"scenario":                  "Night, a customs cutter on the horizon.",
		"first_mes":                 "\"Hold the lantern lower,\" Vey whispers.",
		"mes_example":               "<START>\n{{char}}: We run dark tonight.",
		"creator_notes":             "Works best with a slow-burn heist.",
		"system_prompt":             "Write Vey's replies in third person.",
		"post_history_instructions": "Keep replies under 200 words.",
		"alternate_greetings":       []any{"Vey tosses you a rope.", "\"You're late,\" Vey says.", "Vey is asleep in the hammock."},
		"tags":                      []any{"pirate", "adventure"},
		"creator":                   "harbourmaster",
		"character_version":         "1.2",
		"extensions": map[string]any{
			"talkativeness": "0.5",
			"fav":           false,
			"world":         "Gull lore",
			"depth_prompt":  map[string]any{"prompt": "Vey hums sea shanties.", "depth": n("4"), "role": "system"},
		},
		"character_book": map[string]any{
			"name": "Gull lore",
			"entries": []any{
				map[string]any{
					"id": n("0"), "keys": []any{"kraken", "sea monster"}, "secondary_keys": []any{"storm"},
					"comment": "The kraken", "content": "A kraken haunts the Shoals.", "constant": false, "selective": true,
					"insertion_order": n("100"), "enabled": true, "position": "before_char", "use_regex": true,
					"extensions": map[string]any{
						"position": n("0"), "exclude_recursion": false, "display_index": n("0"), "probability": n("100"),
						"useProbability": true, "depth": n("4"), "selectiveLogic": n("0"), "group": "", "group_override": false,
						"group_weight": n("100"), "scan_depth": nil, "match_whole_words": nil, "case_sensitive": nil,
						"automation_id": "", "role": n("0"), "vectorized": false, "sticky": nil, "cooldown": nil, "delay": nil,
					},
				},
				map[string]any{
					"id": n("1"), "keys": []any{"customs"}, "secondary_keys": []any{"bribe", "papers"},
					"comment": "Customs", "content": "The cutter's captain takes bribes.", "constant": false, "selective": true,
					"insertion_order": n("90"), "enabled": true, "position": "after_char", "use_regex": true,
					"extensions": map[string]any{
						"position": n("4"), "depth": n("2"), "selectiveLogic": n("3"), "match_whole_words": true,
						"case_sensitive": false, "probability": n("80"), "group": "law",
					},
				},
				map[string]any{
					"id": n("2"), "keys": []any{"Gull"}, "comment": "The ship", "content": "A fast sloop with black sails.",
					"constant": true, "selective": false, "insertion_order": n("5"), "enabled": false, "priority": n("3"),
					"extensions": map[string]any{"cardwriter/category": "ships"},
				},
			},
		},
	}
	return map[string]any{
		"name": data["name"], "description": data["description"], "personality": data["personality"],
		"scenario": data["scenario"], "first_mes": data["first_mes"], "mes_example": data["mes_example"],
		"creatorcomment": data["creator_notes"], "tags": data["tags"], "avatar": "none",
		"chat": "Captain Vey - 2024-9-1 @10h 00m 00s 000ms", "talkativeness": "0.5", "fav": false,
		"create_date":  "2024-9-1 @10h 00m 00s 000ms",
		"spec":         "chara_card_v2",
		"spec_version": "2.0",
		"data":         data,
	}
}

// fixV3 is a CCv3 card with emoji and CJK text, the V3-only fields, a lorebook with settings,
// regex and CJK keys, and unknown fields at every level.
func fixV3() map[string]any {
	return map[string]any{
		"spec":         "chara_card_v3",
		"spec_version": "3.0",
		"data": map[string]any{
			"name":                      "龍王 🐉 Ryūō",
			"description":               "東海の龍王。\n🌊 Rules the eastern sea.",
			"personality":               "尊大だが公正 — proud but fair",
			"scenario":                  "海底宮殿にて。",
			"first_mes":                 "「よく来たな、人の子よ。」🐚",
			"mes_example":               "<START>\n{{user}}: 你好\n{{char}}: 何用だ？",
			"creator_notes":             "Bilingual card. 日本語と英語。",
			"system_prompt":             "",
			"post_history_instructions": "",
			"alternate_greetings":       []any{"🌀 The water stills.", "龍王は目を開けた。"},
			"character_book": map[string]any{
				"name":               "東海",
				"description":        "Lore of the eastern sea",
				"scan_depth":         n("8"),
				"token_budget":       n("1024"),
				"recursive_scanning": true,
				"extensions":         map[string]any{"risu_fullWordMatching": true},
				"entries": []any{
					map[string]any{
						"id": n("7"), "keys": []any{"龍宮", "palace"}, "secondary_keys": []any{}, "comment": "comment differs from name",
						"content": "龍宮は海底にある。🏯", "constant": false, "selective": false, "insertion_order": n("10"),
						"enabled": true, "position": "before_char", "use_regex": false,
						"extensions": map[string]any{"cardwriter/category": "places", "depth": n("4")},
						"name":       "Dragon palace", "priority": n("5"), "case_sensitive": true,
					},
					map[string]any{
						"keys": []any{"pearl"}, "secondary_keys": []any{"stolen"}, "comment": "Pearl (inactive secondary)",
						"content": "The pearl of tides.", "constant": false, "selective": false, "insertion_order": n("2.5"),
						"enabled": true, "extensions": map[string]any{}, "name": "Pearl (inactive secondary)",
					},
					map[string]any{
						"keys": []any{"/tide(s)?\\s+turn/i"}, "secondary_keys": []any{}, "comment": "Always on",
						"content": "The sea is always present.", "constant": true, "insertion_order": n("0"), "enabled": false,
						"extensions": map[string]any{"selectiveLogic": n("2"), "match_whole_words": false},
						"name":       "Always on", "priority": n("-3"), "x_unknown_entry": map[string]any{"kept": true},
					},
				},
			},
			"tags":                       []any{"dragon", "東洋", "🐉"},
			"creator":                    "海の人",
			"character_version":          "3.1",
			"extensions":                 map[string]any{"depth_prompt": map[string]any{"prompt": "潮の香り", "depth": n("4")}},
			"group_only_greetings":       []any{"龍王 addresses the group."},
			"assets":                     []any{map[string]any{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}},
			"nickname":                   "Ryū",
			"creator_notes_multilingual": map[string]any{"ja": "日本語のメモ", "en": "English note"},
			"source":                     []any{"https://example.com/ryuo"},
			"creation_date":              n("1700000000"),
			"modification_date":          n("1700000500"),
			"x_unknown_data":             []any{n("1"), "two", nil},
		},
		"x_root_field": "kept at the top",
	}
}

// fixSloppy has the types real files get wrong: strings for arrays, "true" for booleans, numbers
// as strings, null extensions, a null entry, a book without a name.
func fixSloppy() map[string]any {
	return map[string]any{
		"spec":         "chara_card_v2",
		"spec_version": n("2"),
		"data": map[string]any{
			"name":                "Sloppy",
			"description":         "desc",
			"first_mes":           "hi",
			"alternate_greetings": "only one, with a comma",
			"tags":                "a, b ,c",
			"creator":             nil,
			"character_version":   n("2"),
			"extensions":          nil,
			"character_book": map[string]any{
				"extensions": nil,
				"entries": []any{
					map[string]any{
						"keys": "alpha, beta", "secondary_keys": "gamma", "selective": "true", "content": n("42"),
						"enabled": "true", "constant": "false", "insertion_order": "100", "priority": "7", "extensions": nil,
					},
					map[string]any{
						"keys": []any{"delta", nil, n("5")}, "content": "no enabled field",
						"extensions": map[string]any{"selectiveLogic": "1", "case_sensitive": "true", "match_whole_words": n("1")},
					},
					nil,
				},
			},
		},
	}
}

// fixLorebook is a standalone lorebook_v3 file.
func fixLorebook() map[string]any {
	return map[string]any{
		"spec": "lorebook_v3",
		"data": map[string]any{
			"name": "Harbour lore", "description": "Docks, taverns and tides.", "scan_depth": n("4"),
			"extensions": map[string]any{"note": "from a lorebook file"},
			"entries": []any{
				map[string]any{"keys": []any{"dock", "pier"}, "content": "The docks never sleep.", "enabled": true,
					"insertion_order": n("20"), "name": "Docks", "extensions": map[string]any{"depth": n("3")}},
				map[string]any{"keys": []any{"/ale|mead/i"}, "content": "The Salty Cup serves both.", "enabled": true,
					"insertion_order": n("10"), "name": "Tavern", "case_sensitive": false,
					"extensions": map[string]any{"match_whole_words": true, "selectiveLogic": n("0")}},
			},
		},
	}
}

// fixWorldInfo is a SillyTavern World Info file: entries keyed by uid, not in uid order.
func fixWorldInfo() string {
	return `{
  "entries": {
    "3": {
      "uid": 3, "key": ["kraken", "sea monster"], "keysecondary": ["storm", "squall"],
      "comment": "Kraken", "content": "A kraken haunts the Shoals.", "constant": false,
      "vectorized": false, "selective": true, "selectiveLogic": 1, "addMemo": true, "order": 100,
      "position": 0, "disable": false, "excludeRecursion": false, "preventRecursion": false,
      "probability": 100, "useProbability": true, "depth": 4, "group": "", "groupOverride": false,
      "groupWeight": 100, "scanDepth": null, "caseSensitive": null, "matchWholeWords": null,
      "automationId": "", "role": null, "sticky": 0, "cooldown": 0, "delay": 0, "displayIndex": 0,
      "characterFilter": {"isExclude": false, "names": [], "tags": []}
    },
    "0": {
      "uid": 0, "key": ["龍"], "keysecondary": [], "comment": "Dragon (CJK)", "content": "龍がいる。",
      "constant": false, "selective": true, "selectiveLogic": 0, "order": 50, "position": 4,
      "disable": true, "caseSensitive": true, "matchWholeWords": true, "depth": 2, "displayIndex": 1
    },
    "1": {
      "uid": 1, "key": "lighthouse, lamp", "keysecondary": [], "comment": "", "content": "The lamp.",
      "constant": "true", "selective": false, "order": "10", "position": 1, "disable": "false",
      "matchWholeWords": false, "selectiveLogic": 3
    }
  },
  "name": "Shoals",
  "originalData": {"name": "Shoals (original)", "scan_depth": 6, "entries": [{"keys": ["stale"]}]}
}`
}

// testImage encodes a small gradient as PNG.
func testImage(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x * 7), uint8(y * 11), uint8(x + y), 0xff})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pngChunk builds a PNG chunk with its length and CRC.
func pngChunk(typ string, data []byte) []byte {
	out := make([]byte, 12+len(data))
	binary.BigEndian.PutUint32(out, uint32(len(data)))
	copy(out[4:], typ)
	copy(out[8:], data)
	binary.BigEndian.PutUint32(out[8+len(data):], crc32.ChecksumIEEE(out[4:8+len(data)]))
	return out
}

func zlibBytes(b []byte) []byte {
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// Text chunks holding a card: tEXt and zTXt with base64 (as card writers do), iTXt with the JSON.
func tEXt(kw string, js []byte) []byte {
	return pngChunk("tEXt", append([]byte(kw+"\x00"), base64.StdEncoding.EncodeToString(js)...))
}

func zTXt(kw string, js []byte) []byte {
	return pngChunk("zTXt", append([]byte(kw+"\x00\x00"), zlibBytes([]byte(base64.StdEncoding.EncodeToString(js)))...))
}

func iTXt(kw string, js []byte) []byte {
	data := append([]byte(kw+"\x00"), 1, 0)
	data = append(data, "en\x00Character\x00"...)
	return pngChunk("iTXt", append(data, zlibBytes(js)...))
}

// withChunks puts chunks into a PNG right after IHDR (afterIHDR) or right before IEND.
func withChunks(t testing.TB, img []byte, afterIHDR bool, chunks ...[]byte) []byte {
	t.Helper()
	const sigLen = 8
	ihdrEnd := sigLen + 12 + int(binary.BigEndian.Uint32(img[sigLen:]))
	iend := bytes.LastIndex(img, []byte("IEND")) - 4
	if iend < ihdrEnd {
		t.Fatal("not a PNG with IHDR and IEND")
	}
	at := iend
	if afterIHDR {
		at = ihdrEnd
	}
	out := append([]byte{}, img[:at]...)
	out = append(out, bytes.Join(chunks, nil)...)
	return append(out, img[at:]...)
}

// makeZip builds a zip archive from name/content pairs.
func makeZip(t testing.TB, files ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		w, err := zw.Create(f[0])
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f[1]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// cardFixture is one file to import, with what it is.
type cardFixture struct {
	name       string
	file       []byte
	format     string // tavern.Format.String() of the file
	withAvatar bool
}

// cardFixtures are the files every round trip test imports: each version and each container,
// each PNG chunk layout, sloppy types, emoji and CJK text.
func cardFixtures(t testing.TB) []cardFixture {
	img := testImage(t, 24, 32)
	v2, v3 := mustJSON(t, fixV2()), mustJSON(t, fixV3())
	stale := mustJSON(t, map[string]any{"spec": "chara_card_v2", "data": map[string]any{"name": "Stale copy", "first_mes": "old"}})
	v3icon := fixV3()
	v3icon["data"].(map[string]any)["assets"] = []any{map[string]any{"type": "icon", "uri": "embeded://assets/icon/images/main.png", "name": "main", "ext": "png"}}
	return []cardFixture{
		{name: "V1 JSON", file: mustJSON(t, fixV1()), format: "json/chara_card_v1"},
		{name: "V2 JSON (SillyTavern)", file: v2, format: "json/chara_card_v2"},
		{name: "V3 JSON emoji CJK", file: v3, format: "json/chara_card_v3"},
		{name: "sloppy types", file: mustJSON(t, fixSloppy()), format: "json/chara_card_v2"},
		{name: "PNG chara only", file: withChunks(t, img, false, tEXt("chara", v2)), format: "png/chara_card_v2 (chara chunk)", withAvatar: true},
		{name: "PNG ccv3 only", file: withChunks(t, img, false, tEXt("ccv3", v3)), format: "png/chara_card_v3 (ccv3 chunk)", withAvatar: true},
		{name: "PNG both chunks", file: withChunks(t, img, true, tEXt("chara", stale), tEXt("ccv3", v3)), format: "png/chara_card_v3 (ccv3 chunk)", withAvatar: true},
		{name: "PNG zTXt", file: withChunks(t, img, false, zTXt("chara", v2)), format: "png/chara_card_v2 (chara chunk)", withAvatar: true},
		{name: "PNG iTXt", file: withChunks(t, img, true, iTXt("ccv3", v3)), format: "png/chara_card_v3 (ccv3 chunk)", withAvatar: true},
		{name: "CHARX", file: makeZip(t, [2]string{"card.json", string(mustJSON(t, v3icon))}, [2]string{"assets/icon/images/main.png", string(img)}),
			format: "charx/chara_card_v3", withAvatar: true},
	}
}

// diffField reports a difference of one field.
func diffField(t testing.TB, field string, want, got any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Errorf("%s:\n want %s\n  got %s", field, show(want), show(got))
	}
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// compareCards compares two cards field by field (the avatar's bytes too when withAvatar).
func compareCards(t testing.TB, want, got *tavern.Card, withAvatar bool) {
	t.Helper()
	diffField(t, "Name", want.Name, got.Name)
	diffField(t, "Welcome", want.Welcome, got.Welcome)
	diffField(t, "Alternates", want.Alternates, got.Alternates)
	diffField(t, "Description", want.Description, got.Description)
	diffField(t, "Sections", want.Sections, got.Sections)
	diffField(t, "Tags", want.Tags, got.Tags)
	diffField(t, "Creator", want.Creator, got.Creator)
	diffField(t, "CharacterVersion", want.CharacterVersion, got.CharacterVersion)
	for k := range want.Extensions {
		diffField(t, "Extensions."+k, want.Extensions[k], got.Extensions[k])
	}
	diffField(t, "Extensions", want.Extensions, got.Extensions)
	compareBooks(t, "Book", want.Book, got.Book)
	if withAvatar && !bytes.Equal(want.Avatar, got.Avatar) {
		t.Errorf("Avatar: want %d bytes, got %d bytes", len(want.Avatar), len(got.Avatar))
	}
}

// compareBooks compares two lorebooks field by field.
func compareBooks(t testing.TB, name string, want, got *tavern.Book) {
	t.Helper()
	if want == nil || got == nil {
		if (want == nil) != (got == nil) {
			t.Errorf("%s: want %s, got %s", name, show(want), show(got))
		}
		return
	}
	diffField(t, name+".Name", want.Name, got.Name)
	diffField(t, name+".Description", want.Description, got.Description)
	diffField(t, name+".Extensions", want.Extensions, got.Extensions)
	if len(want.Entries) != len(got.Entries) {
		t.Errorf("%s.Entries: want %d, got %d", name, len(want.Entries), len(got.Entries))
		return
	}
	for i := range want.Entries {
		w, g := want.Entries[i], got.Entries[i]
		p := fmt.Sprintf("%s.Entries[%d]", name, i)
		diffField(t, p+".EntryID", w.EntryID, g.EntryID)
		diffField(t, p+".Name", w.Name, g.Name)
		diffField(t, p+".Content", w.Content, g.Content)
		diffField(t, p+".Keywords", w.Keywords, g.Keywords)
		diffField(t, p+".SecondaryKeywords", w.SecondaryKeywords, g.SecondaryKeywords)
		diffField(t, p+".MatchOptions", w.MatchOptions, g.MatchOptions)
		diffField(t, p+".Category", w.Category, g.Category)
		diffField(t, p+".IsEnabled", w.IsEnabled, g.IsEnabled)
		diffField(t, p+".IsConstant", w.IsConstant, g.IsConstant)
		diffField(t, p+".Priority", w.Priority, g.Priority)
		diffField(t, p+".SortOrder", w.SortOrder, g.SortOrder)
		diffField(t, p+".Extensions", w.Extensions, g.Extensions)
	}
}
