package tavern

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestJSLower(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"Kraken", "kraken"},
		{"ΟΔΟΣ", "οδος"},               // final sigma
		{"ΣΑ", "σα"},                   // not final: nothing cased before it
		{"Σ", "σ"},                     // alone
		{"ΑΣ.", "ας."},                 // final before punctuation
		{"ΑΣΑ", "ασα"},                 // inside a word
		{"ΑΣ'Α", "ασ'α"},               // an apostrophe is case-ignorable, so a letter still follows
		{"İstanbul", "i\u0307stanbul"}, // U+0130 lower-cases to two code points
		{"ÀÉ", "àé"},
	} {
		if got := jsLower(tc.in); got != tc.want {
			t.Errorf("jsLower(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestJSTrimAndWords(t *testing.T) {
	t.Parallel()
	diff(t, "trim", "a b", jsTrim("\ufeff\u3000 a b\u00a0\n"))
	diff(t, "NEL is not JavaScript white space", "\u0085a", jsTrim("\u0085a"))
	diff(t, "words", 2, jsWordCount("sea monster"))
	diff(t, "words, leading space", 2, jsWordCount(" sea"))
	diff(t, "words, one", 1, jsWordCount("sea"))
	diff(t, "words, empty", 1, jsWordCount(""))
}

func TestEscapeRegex(t *testing.T) {
	t.Parallel()
	diff(t, "escape", `a\.b\*c\/d\-e\[f\]`, escapeRegex("a.b*c/d-e[f]"))
}

func TestParseRegexKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		key, text string
		regex     bool
		match     bool
	}{
		{`/kraken/i`, "KRAKEN", true, true},
		{`/a\/b/`, "a/b", true, true},
		{`/(/`, "(", false, false},
		{`/x/q`, "x", false, false},
		{`/x/gg`, "x", false, false},
		{`//`, "", false, false},
		{`/(?<year>\d{4})-\k<year>/`, "2024-2024", true, true},
		{`/\p{L}/`, "p{L}", true, true}, // without u, \p is the letter p
		{`/\p{L}/`, "é", true, false},
		{`/\p{L}/u`, "é", true, true},
		{`/[\P]/`, "P", true, true},
	} {
		re := parseRegexKey(tc.key)
		if (re != nil) != tc.regex {
			t.Errorf("parseRegexKey(%q) regex=%v, want %v", tc.key, re != nil, tc.regex)
			continue
		}
		if re != nil {
			ok, err := re.test(tc.text)
			if err != nil || ok != tc.match {
				t.Errorf("%s on %q: %v %v, want %v", tc.key, tc.text, ok, err, tc.match)
			}
		}
	}
}

func TestRegexTimeout(t *testing.T) {
	t.Parallel()
	re := parseRegexKey(`/(a+)+$/`)
	if re == nil {
		t.Fatal("not a regex")
	}
	text := ""
	for i := 0; i < 40; i++ {
		text += "a"
	}
	start := time.Now()
	ok, err := re.test(text + "!")
	if ok || err == nil {
		t.Fatalf("catastrophic pattern: %v %v, want a timeout", ok, err)
	}
	if d := time.Since(start); d > 5*regexTimeout {
		t.Fatalf("took %v", d)
	}
	sim := Simulate([]Entry{ent("A", `/(a+)+$/`)}, SimOptions{Settings: DefaultSettings(), Chat: chat(text + "!")})
	if sim.Results[0].Fired {
		t.Fatal("a timed-out key fired")
	}
	if r := sim.Results[0].Reason; !strings.Contains(r, "took too long") {
		t.Fatalf("reason %q", r)
	}
}

func TestMacros(t *testing.T) {
	t.Parallel()
	m := Macros{Char: "Sera", User: "Kai"}
	for _, tc := range []struct{ in, want string }{
		{"{{char}} and {{USER}}", "Sera and Kai"},
		{"<BOT> <char> <user> <GROUP>", "Sera Sera Kai Sera"},
		{"a\n{{trim}}\nb", "ab"},
		{"{{reverse:abc}}", "cba"},
		{"x{{// a note}}y", "xy"},
		{"{{newline}}{{noop}}", "\n"},
		{"{{time}}", "{{time}}"},
		{"", ""},
	} {
		diff(t, tc.in, tc.want, m.Substitute(tc.in))
	}
	// String.prototype.replace patterns in a name given to a legacy tag.
	diff(t, "$&", "[<USER>]", Macros{User: "[$&]"}.Substitute("<USER>"))
	diff(t, "$$", "a$b", Macros{User: "a$$b"}.Substitute("<USER>"))
	diff(t, "$ alone", "$5", Macros{User: "$5"}.Substitute("<USER>"))
}

func TestParseDecorators(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		dec     []string
		content string
	}{
		{"plain", nil, "plain"},
		{"@@activate\nlore", []string{"@@activate"}, "lore"},
		{"@@activate\n@@dont_activate\nlore", []string{"@@activate", "@@dont_activate"}, "lore"},
		{"@@nope\nlore", nil, "lore"},
		{"@@@activate\nlore", nil, "lore"},
		{"@@nope\n@@@activate\nlore", []string{"@@activate"}, "lore"},
		{"@@activate", []string{"@@activate"}, "@@activate"}, // no content line: content stays as it was
	} {
		dec, c := parseDecorators(tc.in)
		diff(t, tc.in+" decorators", tc.dec, dec)
		diff(t, tc.in+" content", tc.content, c)
	}
}

// FuzzRegexKey: any key, any text: parsing and matching never panic, and Simulate answers.
func FuzzRegexKey(f *testing.F) {
	for _, s := range []string{`/kraken/i`, `/(a+)+$/`, `/a\/b/gimsuy`, `/(/`, `/[/`, `/\u{1F409}/u`, "/x/yy", "sea monster", "{{char}}"} {
		f.Add(s, "a kraken and a/b 🐉 sea monster")
	}
	f.Fuzz(func(t *testing.T, key, text string) {
		if re := parseRegexKey(key); re != nil {
			_, _ = re.test(text)
		}
		sim := Simulate([]Entry{options(ent("A", key), false, true), ent("B", key)}, SimOptions{Settings: DefaultSettings(), Chat: chat(text)})
		if len(sim.Results) != 2 {
			t.Fatalf("%d results", len(sim.Results))
		}
	})
}

// FuzzSimulate: any extension fields (as JSON) and any chat: Simulate never panics and answers
// for every entry.
func FuzzSimulate(f *testing.F) {
	for _, s := range []string{`{"probability":50,"group":"a,b","sticky":2}`, `{"scan_depth":"Infinity","delay_until_recursion":"x"}`,
		`{"group_weight":-5,"group":"1","use_group_scoring":true}`, `{"cooldown":1e308,"delay":-1}`} {
		f.Add(s, "kraken storm", uint64(1))
	}
	f.Fuzz(func(t *testing.T, ext, text string, seed uint64) {
		var m map[string]any
		if json.Unmarshal([]byte(ext), &m) != nil {
			return
		}
		a := ent("A", "kraken", "/st(?=orm)/")
		a.Extensions = map[string]any{"extensions": m}
		b := with(content(ent("B", "storm"), "kraken"), "group", "a")
		effects := []TimedEffect{{Type: EffectSticky, Entry: 0, Start: 0, End: 3}, {Type: EffectCooldown, Entry: 7, Start: 0, End: 2}}
		for _, sd := range []*uint64{nil, &seed} {
			o := SimOptions{Settings: DefaultSettings(), Chat: chat(text, text), Seed: sd, TimedEffects: effects}
			o.Settings.Recursive, o.Settings.MinActivations = true, 3
			if sim := Simulate([]Entry{a, b, a}, o); len(sim.Results) != 3 {
				t.Fatalf("%d results", len(sim.Results))
			}
		}
	})
}
