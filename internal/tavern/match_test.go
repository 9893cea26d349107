package tavern

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern/taverntest"
)

func tavern(cs, mww bool, logic int) *MatchOptions {
	return &MatchOptions{CaseSensitive: cs, MatchWholeWords: mww, SelectiveLogic: logic}
}

func TestMatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		entry   Entry
		opts    MatchOptions
		macros  Macros
		text    string
		fired   bool
		matched []string
		reason  string // the whole reason, or a part of it when partial
		partial bool
	}{
		// Disabled and constant entries.
		{name: "disabled never fires", entry: Entry{Keywords: []string{"kraken"}}, text: "kraken", reason: "disabled"},
		{name: "constant fires without keywords", entry: Entry{IsEnabled: true, IsConstant: true}, text: "", fired: true, reason: "constant entry"},
		{name: "constant but disabled", entry: Entry{IsConstant: true, Keywords: []string{"x"}}, text: "x", reason: "disabled"},

		// The service's native rules (MatchOptions nil, zero opts).
		{name: "native: case-insensitive", entry: Entry{IsEnabled: true, Keywords: []string{"Kraken"}}, text: "the KRAKEN rises", fired: true, matched: []string{"Kraken"}, reason: `keyword "Kraken" matched`},
		{name: "native: substring inside a word", entry: Entry{IsEnabled: true, Keywords: []string{"sea"}}, text: "seashells", fired: true, matched: []string{"sea"}, reason: `keyword "sea" matched`},
		{name: "native: nothing matched", entry: Entry{IsEnabled: true, Keywords: []string{"kraken", "squid"}}, text: "calm water", reason: "no keyword matched"},
		{name: "native: no keywords", entry: Entry{IsEnabled: true, Keywords: []string{" ", ""}}, text: "x", reason: "entry has no keywords"},
		{name: "native: every matching keyword listed", entry: Entry{IsEnabled: true, Keywords: []string{"kraken", "squid", "whale"}}, text: "a kraken fought a squid", fired: true, matched: []string{"kraken", "squid"}, reason: `keywords "kraken", "squid" matched`},
		{name: "native: secondary gate satisfied", entry: Entry{IsEnabled: true, Keywords: []string{"kraken"}, SecondaryKeywords: []string{"storm", "rain"}}, text: "kraken in the storm", fired: true, matched: []string{"kraken", "storm"}, reason: `keyword "kraken" matched; secondary gate (any) satisfied by "storm"`},
		{name: "native: secondary gate failed", entry: Entry{IsEnabled: true, Keywords: []string{"kraken"}, SecondaryKeywords: []string{"storm", "rain"}}, text: "kraken at dawn", matched: []string{"kraken"}, reason: `keyword "kraken" matched; secondary gate (any) failed: none of "storm", "rain" present`},
		{name: "native: secondary alone does not fire", entry: Entry{IsEnabled: true, Keywords: []string{"kraken"}, SecondaryKeywords: []string{"storm"}}, text: "storm", reason: "no keyword matched"},
		{name: "native: blank secondary keys mean no gate", entry: Entry{IsEnabled: true, Keywords: []string{"kraken"}, SecondaryKeywords: []string{" "}}, text: "kraken", fired: true, matched: []string{"kraken"}, reason: `keyword "kraken" matched`},
		{name: "native: keys are trimmed", entry: Entry{IsEnabled: true, Keywords: []string{"  kraken  "}}, text: "a kraken", fired: true, matched: []string{"kraken"}, reason: `keyword "kraken" matched`},
		{name: "native: /regex/ is literal text", entry: Entry{IsEnabled: true, Keywords: []string{"/kra.en/"}}, text: "kraken", reason: "no keyword matched"},
		{name: "native: /regex/ literal found", entry: Entry{IsEnabled: true, Keywords: []string{"/kra.en/"}}, text: "type /kra.en/ here", fired: true, matched: []string{"/kra.en/"}, reason: `keyword "/kra.en/" matched`},
		{name: "native: opts apply", entry: Entry{IsEnabled: true, Keywords: []string{"sea"}}, opts: MatchOptions{MatchWholeWords: true}, text: "seashells", reason: "no keyword matched"},
		{name: "native: opts case-sensitive", entry: Entry{IsEnabled: true, Keywords: []string{"Sea"}}, opts: MatchOptions{CaseSensitive: true}, text: "the sea", reason: "no keyword matched"},

		// Case sensitivity.
		{name: "case-sensitive: wrong case", entry: Entry{IsEnabled: true, Keywords: []string{"Kraken"}, MatchOptions: tavern(true, false, 0)}, text: "a kraken", reason: "no keyword matched"},
		{name: "case-sensitive: right case", entry: Entry{IsEnabled: true, Keywords: []string{"Kraken"}, MatchOptions: tavern(true, false, 0)}, text: "a Kraken", fired: true, matched: []string{"Kraken"}, reason: `keyword "Kraken" matched`},
		{name: "case-insensitive tavern", entry: Entry{IsEnabled: true, Keywords: []string{"Kraken"}, MatchOptions: tavern(false, false, 0)}, text: "a KRAKEN", fired: true, matched: []string{"Kraken"}, reason: `keyword "Kraken" matched`},

		// Whole words.
		{name: "whole words: inside a word", entry: Entry{IsEnabled: true, Keywords: []string{"sea"}, MatchOptions: tavern(false, true, 0)}, text: "seashells and undersea", reason: "no keyword matched"},
		{name: "whole words: punctuation is a boundary", entry: Entry{IsEnabled: true, Keywords: []string{"sea"}, MatchOptions: tavern(false, true, 0)}, text: "to the SEA!", fired: true, matched: []string{"sea"}, reason: `keyword "sea" matched`},
		{name: "whole words: start and end", entry: Entry{IsEnabled: true, Keywords: []string{"sea"}, MatchOptions: tavern(false, true, 0)}, text: "sea", fired: true, matched: []string{"sea"}, reason: `keyword "sea" matched`},
		{name: "whole words: a later occurrence counts", entry: Entry{IsEnabled: true, Keywords: []string{"sea"}, MatchOptions: tavern(false, true, 0)}, text: "seas, then the sea", fired: true, matched: []string{"sea"}, reason: `keyword "sea" matched`},
		{name: "whole words: a multi-word key is a substring", entry: Entry{IsEnabled: true, Keywords: []string{"sea monster"}, MatchOptions: tavern(false, true, 0)}, text: "two sea monsters", fired: true, matched: []string{"sea monster"}, reason: `keyword "sea monster" matched`},
		{name: "whole words: non-ASCII letters are boundaries (JavaScript \\W)", entry: Entry{IsEnabled: true, Keywords: []string{"caf"}, MatchOptions: tavern(false, true, 0)}, text: "un café", fired: true, matched: []string{"caf"}, reason: `keyword "caf" matched`},
		{name: "whole words: CJK neighbours are boundaries (JavaScript \\W)", entry: Entry{IsEnabled: true, Keywords: []string{"龍"}, MatchOptions: tavern(false, true, 0)}, text: "東海の龍王が来た", fired: true, matched: []string{"龍"}, reason: `keyword "龍" matched`},
		{name: "whole words: CJK key next to Latin letters is not a whole word", entry: Entry{IsEnabled: true, Keywords: []string{"ドラゴン"}, MatchOptions: tavern(false, true, 0)}, text: "bigドラゴンs", reason: "no keyword matched"},
		{name: "no whole words: CJK substring, no note", entry: Entry{IsEnabled: true, Keywords: []string{"龍"}, MatchOptions: tavern(false, false, 0)}, text: "龍王", fired: true, matched: []string{"龍"}, reason: `keyword "龍" matched`},

		// Regular expression keys.
		{name: "regex: flags i", entry: Entry{IsEnabled: true, Keywords: []string{`/tide(s)?\s+turn/i`}, MatchOptions: tavern(true, true, 0)}, text: "The Tides  TURN", fired: true, matched: []string{`/tide(s)?\s+turn/i`}, reason: `keyword "/tide(s)?\\s+turn/i" matched`},
		{name: "regex: case-sensitive without i, whatever caseSensitive says", entry: Entry{IsEnabled: true, Keywords: []string{`/Tide/`}, MatchOptions: tavern(false, false, 0)}, text: "tide", reason: "no keyword matched"},
		{name: "regex: m flag", entry: Entry{IsEnabled: true, Keywords: []string{`/^storm$/m`}, MatchOptions: tavern(false, false, 0)}, text: "calm\nstorm\nend", fired: true, matched: []string{`/^storm$/m`}, reason: "matched", partial: true},
		{name: "regex: without m, ^ is the start", entry: Entry{IsEnabled: true, Keywords: []string{`/^storm$/`}, MatchOptions: tavern(false, false, 0)}, text: "calm\nstorm\nend", reason: "no keyword matched"},
		{name: "regex: s flag", entry: Entry{IsEnabled: true, Keywords: []string{`/a.b/s`}, MatchOptions: tavern(false, false, 0)}, text: "a\nb", fired: true, matched: []string{`/a.b/s`}, reason: "matched", partial: true},
		{name: "regex: without s, . stops at newlines", entry: Entry{IsEnabled: true, Keywords: []string{`/a.b/`}, MatchOptions: tavern(false, false, 0)}, text: "a\nb", reason: "no keyword matched"},
		{name: "regex: g and u change nothing", entry: Entry{IsEnabled: true, Keywords: []string{`/kr.ken/gu`}, MatchOptions: tavern(false, false, 0)}, text: "kraken", fired: true, matched: []string{`/kr.ken/gu`}, reason: "matched", partial: true},
		{name: "regex: y anchors at the start", entry: Entry{IsEnabled: true, Keywords: []string{`/storm/y`}, MatchOptions: tavern(false, false, 0)}, text: "a storm", reason: "no keyword matched"},
		{name: "regex: \\u{...} escapes with u", entry: Entry{IsEnabled: true, Keywords: []string{`/\u9F8D|\u{1F409}/u`}, MatchOptions: tavern(false, false, 0)}, text: "🐉", fired: true, matched: []string{`/\u9F8D|\u{1F409}/u`}, reason: "matched", partial: true},
		{name: "regex: \\u{...} without u is the letter u and braces", entry: Entry{IsEnabled: true, Keywords: []string{`/\u{1F409}/`}, MatchOptions: tavern(false, false, 0)}, text: "🐉", reason: "no keyword matched"},
		{name: "regex: escaped slash", entry: Entry{IsEnabled: true, Keywords: []string{`/and\/or/`}, MatchOptions: tavern(false, false, 0)}, text: "this and/or that", fired: true, matched: []string{`/and\/or/`}, reason: "matched", partial: true},
		{name: "regex: unescaped slash makes it plain text", entry: Entry{IsEnabled: true, Keywords: []string{`/a/b/`}, MatchOptions: tavern(false, false, 0)}, text: "path /a/b/ here", fired: true, matched: []string{`/a/b/`}, reason: "matched", partial: true},
		{name: "regex: lookahead works as in JavaScript", entry: Entry{IsEnabled: true, Keywords: []string{`/kraken(?=s)/`}, MatchOptions: tavern(false, false, 0)}, text: "krakens", fired: true, matched: []string{`/kraken(?=s)/`}, reason: `keyword "/kraken(?=s)/" matched`},
		{name: "regex: repeated flag is invalid, so the key is plain text", entry: Entry{IsEnabled: true, Keywords: []string{`/kraken/ii`}, MatchOptions: tavern(false, false, 0)}, text: "kraken", reason: "so it is matched as plain text", partial: true},
		{name: "regex: an invalid key is found as plain text", entry: Entry{IsEnabled: true, Keywords: []string{`/kraken/ii`}, MatchOptions: tavern(false, false, 0)}, text: "see /kraken/ii", fired: true, matched: []string{`/kraken/ii`}, reason: "so it is matched as plain text", partial: true},
		{name: "regex: an invalid key does not stop a valid one", entry: Entry{IsEnabled: true, Keywords: []string{`/(/`, "kraken"}, MatchOptions: tavern(false, false, 0)}, text: "kraken", fired: true, matched: []string{"kraken"}, reason: `keyword "kraken" matched; key "/(/" is not a valid regular expression`, partial: true},
		{name: "regex: secondary key", entry: Entry{IsEnabled: true, Keywords: []string{"kraken"}, SecondaryKeywords: []string{`/storm|gale/`}, MatchOptions: tavern(false, false, 0)}, text: "kraken in a gale", fired: true, matched: []string{"kraken", `/storm|gale/`}, reason: `secondary gate (any) satisfied by "/storm|gale/"`, partial: true},

		// selectiveLogic.
		{name: "logic 0 any: satisfied", entry: Entry{IsEnabled: true, Keywords: []string{"kraken"}, SecondaryKeywords: []string{"storm", "tide"}, MatchOptions: tavern(false, false, LogicAndAny)}, text: "kraken, tide", fired: true, matched: []string{"kraken", "tide"}, reason: `keyword "kraken" matched; secondary gate (any) satisfied by "tide"`},
		{name: "logic 0 any: failed", entry: Entry{IsEnabled: true, Keywords: []string{"kraken"}, SecondaryKeywords: []string{"storm", "tide"}, MatchOptions: tavern(false, false, LogicAndAny)}, text: "kraken", matched: []string{"kraken"}, reason: `keyword "kraken" matched; secondary gate (any) failed: none of "storm", "tide" present`},
		{name: "logic 1 not all: satisfied", entry: Entry{IsEnabled: true, Keywords: []string{"kraken"}, SecondaryKeywords: []string{"storm", "tide"}, MatchOptions: tavern(false, false, LogicNotAll)}, text: "kraken, storm", fired: true, matched: []string{"kraken", "storm"}, reason: `keyword "kraken" matched; secondary gate (not all) satisfied: "tide" missing`},
		{name: "logic 1 not all: failed", entry: Entry{IsEnabled: true, Keywords: []string{"kraken"}, SecondaryKeywords: []string{"storm", "tide"}, MatchOptions: tavern(false, false, LogicNotAll)}, text: "kraken, storm, tide", matched: []string{"kraken", "storm", "tide"}, reason: `keyword "kraken" matched; secondary gate (not all) failed: all of "storm", "tide" present`},
		{name: "logic 2 none: satisfied", entry: Entry{IsEnabled: true, Keywords: []string{"kraken"}, SecondaryKeywords: []string{"storm", "tide"}, MatchOptions: tavern(false, false, LogicNotAny)}, text: "kraken", fired: true, matched: []string{"kraken"}, reason: `keyword "kraken" matched; secondary gate (none) satisfied: none of "storm", "tide" present`},
		{name: "logic 2 none: failed", entry: Entry{IsEnabled: true, Keywords: []string{"kraken"}, SecondaryKeywords: []string{"storm", "tide"}, MatchOptions: tavern(false, false, LogicNotAny)}, text: "kraken, tide", matched: []string{"kraken", "tide"}, reason: `keyword "kraken" matched; secondary gate (none) failed: "tide" present`},
		{name: "logic 3 all: satisfied", entry: Entry{IsEnabled: true, Keywords: []string{"kraken"}, SecondaryKeywords: []string{"storm", "tide"}, MatchOptions: tavern(false, false, LogicAndAll)}, text: "kraken, tide, storm", fired: true, matched: []string{"kraken", "storm", "tide"}, reason: `keyword "kraken" matched; secondary gate (all) satisfied: all of "storm", "tide" present`},
		{name: "logic 3 all: failed", entry: Entry{IsEnabled: true, Keywords: []string{"kraken"}, SecondaryKeywords: []string{"storm", "tide"}, MatchOptions: tavern(false, false, LogicAndAll)}, text: "kraken, storm", matched: []string{"kraken", "storm"}, reason: `keyword "kraken" matched; secondary gate (all) failed: "tide" missing`},
		{name: "logic out of range", entry: Entry{IsEnabled: true, Keywords: []string{"kraken"}, SecondaryKeywords: []string{"storm"}, MatchOptions: tavern(false, false, 7)}, text: "kraken storm", matched: []string{"kraken", "storm"}, reason: "selectiveLogic 7 is not 0-3", partial: true},
		{name: "logic without secondary keys: no gate", entry: Entry{IsEnabled: true, Keywords: []string{"kraken"}, MatchOptions: tavern(false, false, LogicNotAny)}, text: "kraken", fired: true, matched: []string{"kraken"}, reason: `keyword "kraken" matched`},
		// Macros: {{char}} is the card's name in tavern keys and in the card text scanned.
		{name: "macros: {{char}} key fires on the name", entry: Entry{IsEnabled: true, Keywords: []string{"{{char}}"}, MatchOptions: tavern(false, true, LogicAndAny)}, macros: Macros{Char: "Mira", User: DefaultUser}, text: "Mira waves", fired: true, matched: []string{"{{char}}"}, reason: `keyword "{{char}}" matched`, partial: true},
		{name: "macros: {{char}} in the text", entry: Entry{IsEnabled: true, Keywords: []string{"mira"}}, macros: Macros{Char: "Mira"}, text: "{{char}} waves", fired: true, matched: []string{"mira"}, reason: `keyword "mira" matched`},
		{name: "macros: {{user}} in key and text", entry: Entry{IsEnabled: true, Keywords: []string{"{{user}}'s ship"}, MatchOptions: tavern(false, true, LogicAndAny)}, macros: Macros{Char: "Mira", User: DefaultUser}, text: "Welcome aboard {{user}}'s ship.", fired: true, matched: []string{"{{user}}'s ship"}, reason: `keyword "{{user}}'s ship" matched`, partial: true},
		{name: "macros: no name, no {{char}}", entry: Entry{IsEnabled: true, Keywords: []string{"{{char}}"}, MatchOptions: tavern(false, true, LogicAndAny)}, text: "Mira waves", reason: "no keyword matched"},
		{name: "macros: native keys are literal", entry: Entry{IsEnabled: true, Keywords: []string{"{{char}}"}}, macros: Macros{Char: "Mira"}, text: "Mira waves", reason: "no keyword matched"},
		{name: "secondary keys obey whole words", entry: Entry{IsEnabled: true, Keywords: []string{"kraken"}, SecondaryKeywords: []string{"storm"}, MatchOptions: tavern(false, true, LogicAndAny)}, text: "kraken stormy", matched: []string{"kraken"}, reason: "failed", partial: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.entry.EntryID, tc.entry.Name = "id-1", "entry"
			res := Match([]Entry{{Name: "other"}, tc.entry}, tc.text, tc.opts, tc.macros)
			if len(res) != 2 {
				t.Fatalf("%d results", len(res))
			}
			r := res[1]
			diff(t, "Index", 1, r.Index)
			diff(t, "EntryID", "id-1", r.EntryID)
			diff(t, "Name", "entry", r.Name)
			diff(t, "Fired", tc.fired, r.Fired)
			if tc.matched == nil {
				tc.matched = []string{}
			}
			diff(t, "Matched", tc.matched, r.Matched)
			if tc.partial {
				if !strings.Contains(r.Reason, tc.reason) {
					t.Errorf("Reason %q lacks %q", r.Reason, tc.reason)
				}
			} else {
				diff(t, "Reason", tc.reason, r.Reason)
			}
		})
	}
}

// TestMatchImportedBook: the trigger tester on a SillyTavern book read from a file.
func TestMatchImportedBook(t *testing.T) {
	t.Parallel()
	b := mustReadBook(t, []byte(taverntest.WorldInfo()))
	rep := Triggers(b.Entries, "A sea monster rose from the storm. The lamp went out. 龍!", MatchOptions{}, Macros{})
	var fired, notFired []string
	for _, r := range rep.Fired {
		fired = append(fired, r.Name+": "+r.Reason)
	}
	for _, r := range rep.NotFired {
		notFired = append(notFired, r.Name+": "+r.Reason)
	}
	diff(t, "fired", []string{
		`Kraken: keyword "sea monster" matched; secondary gate (not all) satisfied: "squall" missing`,
		`: constant entry`,
	}, fired)
	diff(t, "notFired", []string{`Dragon (CJK): disabled`}, notFired)
}

func TestTriggersJSON(t *testing.T) {
	t.Parallel()
	rep := Triggers([]Entry{
		{EntryID: "a", Name: "A", Keywords: []string{"x"}, IsEnabled: true},
		{EntryID: "b", Name: "B", Keywords: []string{"y"}, IsEnabled: true},
	}, "x", MatchOptions{}, Macros{})
	var got map[string][]map[string]any
	if err := json.Unmarshal(mustJSON(t, rep), &got); err != nil {
		t.Fatal(err)
	}
	diff(t, "fired", []map[string]any{{"entryId": "a", "name": "A", "matched": []any{"x"}, "key": "x", "step": float64(1), "reason": `keyword "x" matched`}}, got["fired"])
	diff(t, "notFired", []map[string]any{{"entryId": "b", "name": "B", "matched": []any{}, "reason": "no keyword matched"}}, got["notFired"])
	empty := Triggers(nil, "x", MatchOptions{}, Macros{})
	diff(t, "empty", `{"fired":[],"notFired":[]}`, string(mustJSON(t, empty)))
}

func TestSplitRegexKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in             string
		ok             bool
		pattern, flags string
	}{
		{"/abc/", true, "abc", ""},
		{"/abc/gi", true, "abc", "gi"},
		{"/a\\/b/i", true, "a\\/b", "i"},
		{"/a/b/", false, "", ""},
		{"/a/x", false, "", ""},
		{"//", false, "", ""},
		{"abc", false, "", ""},
		{"/abc", false, "", ""},
		{"/a/i/", false, "", ""},
	} {
		pattern, flags, ok := splitRegexKey(tc.in)
		if ok != tc.ok || pattern != tc.pattern || flags != tc.flags {
			t.Errorf("splitRegexKey(%q) = %q %q %v", tc.in, pattern, flags, ok)
		}
	}
}
