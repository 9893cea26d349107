package tavern

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// The simulator's cases, each taken from SillyTavern's public/scripts/world-info.js (or the
// utils.js, script.js and macros.js it calls) at commit ba6f7b7a98cf7a5eaf4f0e81da9779a9a668ced4
// (branch release, 2024-09-28); ref names the lines.

// ent is a tavern-format entry as read from a file: SillyTavern rules, no extension fields set.
func ent(name string, keys ...string) Entry {
	return Entry{Name: name, Keywords: keys, IsEnabled: true, MatchOptions: &MatchOptions{},
		Extensions: map[string]any{"extensions": map[string]any{}}}
}

// with sets V3 extension fields (extensions.<k>) on an entry.
func with(e Entry, kv ...any) Entry {
	ext := map[string]any{}
	for k, v := range e.Extensions["extensions"].(map[string]any) {
		ext[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		ext[kv[i].(string)] = kv[i+1]
	}
	e.Extensions = map[string]any{"extensions": ext}
	return e
}

func content(e Entry, c string) Entry { e.Content = c; return e }
func secondary(e Entry, logic int, keys ...string) Entry {
	mo := *e.MatchOptions
	mo.SelectiveLogic = logic
	e.MatchOptions, e.SecondaryKeywords = &mo, keys
	return e
}
func options(e Entry, cs, ww bool) Entry {
	mo := *e.MatchOptions
	mo.CaseSensitive, mo.MatchWholeWords = cs, ww
	e.MatchOptions = &mo
	return e
}
func order(e Entry, n int) Entry { e.SortOrder = n; return e }

// chat makes messages, oldest first, without names.
func chat(texts ...string) []Message {
	out := make([]Message, len(texts))
	for i, t := range texts {
		out[i] = Message{Text: t}
	}
	return out
}

func seed(n uint64) *uint64 { return &n }

// roll is the simulator's n-th roll in [0, 1) for a seed, as rand.Float64 gives it.
func roll(s uint64, n int) float64 {
	r := rand.New(rand.NewPCG(s, 0x5eed))
	var f float64
	for i := 0; i <= n; i++ {
		f = r.Float64()
	}
	return f
}

// seedWhere finds a seed whose first roll (times scale) satisfies ok.
func seedWhere(scale float64, ok func(float64) bool) uint64 {
	for s := uint64(1); ; s++ {
		if ok(roll(s, 0) * scale) {
			return s
		}
	}
}

type simCase struct {
	name    string
	ref     string
	entries []Entry
	set     func(*SimOptions)
	text    string   // the one message of the chat, when set leaves Chat empty
	fired   []string // names of the entries that fire, in entry order
	reason  map[string]string
	steps   map[string]int
	chance  map[string]float64
	effects []TimedEffect
}

func TestSimulate(t *testing.T) {
	t.Parallel()
	recursive := func(o *SimOptions) { o.Settings.Recursive = true }
	lowWin := seedWhere(200, func(f float64) bool { return f <= 100 })
	highWin := seedWhere(200, func(f float64) bool { return f > 100 })
	passes := seedWhere(100, func(f float64) bool { return f <= 50 })
	fails := seedWhere(100, func(f float64) bool { return f > 50 })
	cases := []simCase{
		// The scan buffer.
		{name: "^ does not match at the start: the buffer starts with \\x01", ref: "world-info.js:220-222 get: MATCHER + depthBuffer.join(JOINER)",
			entries: []Entry{ent("A", `/^Hello/`)}, text: "Hello there", fired: nil},
		{name: "^ with m does not match after a message break either", ref: "world-info.js:221 JOINER = '\\n' + MATCHER",
			entries: []Entry{ent("A", `/^Hello/m`)}, set: func(o *SimOptions) { o.Chat = chat("Hello", "Hello") }, fired: nil},
		{name: "the \\x01 marker is really there", ref: "world-info.js:220-222",
			entries: []Entry{ent("A", `/\x01Hello/`)}, text: "Hello there", fired: []string{"A"}},
		{name: "sticky y anchors at index 0, which is \\x01", ref: "world-info.js:245-247 keyRegex.test (a new RegExp, lastIndex 0); 222",
			entries: []Entry{ent("A", `/Hello/y`), ent("B", `/\x01Hello/y`)}, text: "Hello", fired: []string{"B"}},
		{name: "$ without m is the end of the whole buffer (the oldest message scanned)", ref: "world-info.js:222 slice(startDepth, depth).join(JOINER), newest first",
			entries: []Entry{ent("Old", `/Hello$/`), ent("New", `/World$/`)}, set: func(o *SimOptions) { o.Chat = chat("Hello", "World") }, fired: []string{"Old"}},
		{name: "messages are joined newest first", ref: "script.js:3662 chatForWI ... .reverse(); world-info.js:222",
			entries: []Entry{ent("A", `/b\n\x01a/`)}, set: func(o *SimOptions) { o.Chat = chat("a", "b") }, fired: []string{"A"}},
		{name: "messages are trimmed", ref: "world-info.js:178 this.#depthBuffer[depth] = messages[depth].trim()",
			entries: []Entry{ent("A", `/\x01dragon\n/`)}, set: func(o *SimOptions) { o.Chat = chat("x", "   dragon  ") }, fired: []string{"A"}},
		{name: "the default scan depth 2 leaves the third newest message out", ref: "world-info.js:63 world_info_depth = 2; 205 entry.scanDepth ?? this.getDepth()",
			entries: []Entry{ent("A", "dragon")}, set: func(o *SimOptions) { o.Chat = chat("dragon", "b", "c") }, fired: nil},
		{name: "scan depth 3 reaches it", ref: "world-info.js:205, 222",
			entries: []Entry{ent("A", "dragon")}, set: func(o *SimOptions) { o.Chat = chat("dragon", "b", "c"); o.Settings.ScanDepth = 3 }, fired: []string{"A"}},
		{name: "scan depth 0 scans nothing", ref: "world-info.js:206 if (depth <= this.#startDepth) return ''",
			entries: []Entry{ent("A", "dragon")}, set: func(o *SimOptions) { o.Settings.ScanDepth = 0 }, text: "dragon", fired: nil,
			reason: map[string]string{"A": "scan depth is 0"}},
		{name: "an entry's scan_depth 0 overrides the global depth", ref: "world-info.js:205; 4552 scanDepth: entry.extensions?.scan_depth ?? null",
			entries: []Entry{with(ent("A", "dragon"), "scan_depth", 0)}, text: "dragon", fired: nil},
		{name: "an entry's scan_depth reaches deeper than the global one", ref: "world-info.js:205",
			entries: []Entry{with(ent("A", "dragon"), "scan_depth", 5), ent("B", "dragon")}, set: func(o *SimOptions) { o.Chat = chat("dragon", "b", "c", "d") }, fired: []string{"A"}},
		{name: "names are scanned with their message", ref: "script.js:3662 world_info_include_names ? `${x.name}: ${x.mes}`",
			entries: []Entry{ent("A", "Alice")}, set: func(o *SimOptions) { o.Chat = []Message{{Name: "Alice", Text: "hi"}} }, fired: []string{"A"}},
		{name: "without include names they are not", ref: "script.js:3662",
			entries: []Entry{ent("A", "Alice")}, set: func(o *SimOptions) { o.Chat = []Message{{Name: "Alice", Text: "hi"}}; o.Settings.IncludeNames = false }, fired: nil},

		// Keys.
		{name: "a whitespace-only key matches everything", ref: "world-info.js:3901-3902 substituted && matchKeys(..., substituted.trim()); 269 includes('')",
			entries: []Entry{ent("A", "   ")}, text: "anything", fired: []string{"A"}},
		{name: "a whitespace-only key matches even with nothing to scan (whole words)", ref: "world-info.js:206 returns ''; 263 (?:^|\\W)()(?:$|\\W) matches ''",
			entries: []Entry{options(ent("A", " "), false, true)}, set: func(o *SimOptions) { o.Settings.ScanDepth = 0 }, text: "x", fired: []string{"A"}},
		{name: "an empty key never matches", ref: "world-info.js:3902 substituted && ... ('' is falsy)",
			entries: []Entry{ent("A", "")}, text: "anything", fired: nil},
		{name: "an empty key list never fires", ref: "world-info.js:3891 !entry.key.length",
			entries: []Entry{ent("A")}, text: "anything", fired: nil, reason: map[string]string{"A": "no keywords"}},
		{name: "case-insensitive by default", ref: "world-info.js:71 world_info_case_sensitive = false; 195",
			entries: []Entry{ent("A", "Kraken")}, text: "a KRAKEN", fired: []string{"A"}},
		{name: "the global caseSensitive applies to an entry that does not say", ref: "world-info.js:194 entry.caseSensitive ?? world_info_case_sensitive",
			entries: []Entry{ent("A", "Kraken")}, set: func(o *SimOptions) { o.Settings.CaseSensitive = true }, text: "a kraken", fired: nil},
		{name: "an entry's own case_sensitive false beats the global true", ref: "world-info.js:194; 4553",
			entries: []Entry{with(ent("A", "Kraken"), "case_sensitive", false)}, set: func(o *SimOptions) { o.Settings.CaseSensitive = true }, text: "a kraken", fired: []string{"A"}},
		{name: "toLowerCase: a final capital sigma becomes ς", ref: "world-info.js:195 str.toLowerCase()",
			entries: []Entry{ent("A", "ΟΔΟΣ")}, text: "η οδος", fired: []string{"A"}},
		{name: "toLowerCase: İ becomes i and a combining dot, so plain i does not match", ref: "world-info.js:195",
			entries: []Entry{ent("A", "İstanbul"), ent("B", "istanbul")}, text: "İSTANBUL and istanbul", fired: []string{"A", "B"}},
		{name: "toLowerCase: İ in the key does not match a plain i in the text", ref: "world-info.js:195",
			entries: []Entry{ent("A", "İzmir")}, text: "izmir", fired: nil},
		{name: "whole words: not inside a word", ref: "world-info.js:263 (?:^|\\W)(key)(?:$|\\W)",
			entries: []Entry{options(ent("A", "sea"), false, true)}, text: "seashells", fired: nil},
		{name: "whole words: the global setting applies", ref: "world-info.js:253 entry.matchWholeWords ?? world_info_match_whole_words",
			entries: []Entry{ent("A", "sea")}, set: func(o *SimOptions) { o.Settings.MatchWholeWords = true }, text: "seashells", fired: nil},
		{name: "whole words: a key of several words is a substring", ref: "world-info.js:256-259 split(/\\s+/).length > 1 -> includes",
			entries: []Entry{options(ent("A", "sea monster"), false, true)}, text: "sea monsters", fired: []string{"A"}},
		{name: "whole words: a no-break space separates words too", ref: "world-info.js:256 /\\s+/ (JavaScript \\s)",
			entries: []Entry{options(ent("A", "sea\u00a0mon"), false, true)}, text: "sea\u00a0monsters", fired: []string{"A"}},
		{name: "whole words: a CJK key after a Latin letter is not a whole word", ref: "world-info.js:263 (JavaScript \\W is [^A-Za-z0-9_])",
			entries: []Entry{options(ent("A", "ドラゴン"), false, true)}, text: "bigドラゴン", fired: nil},
		{name: "whole words: a CJK key after a digit is not either", ref: "world-info.js:263",
			entries: []Entry{options(ent("A", "龍"), false, true)}, text: "3龍", fired: nil},
		{name: "whole words: a CJK key between CJK characters is", ref: "world-info.js:263",
			entries: []Entry{options(ent("A", "龍"), false, true)}, text: "東海の龍王", fired: []string{"A"}},
		{name: "whole words: an accented letter is a boundary", ref: "world-info.js:263",
			entries: []Entry{options(ent("A", "caf"), false, true)}, text: "un café", fired: []string{"A"}},
		{name: "regex: lookahead", ref: "world-info.js:2252 new RegExp(pattern, flags); 247",
			entries: []Entry{ent("A", `/kraken(?=s)/`), ent("B", `/kraken(?!s)/`)}, text: "krakens", fired: []string{"A"}},
		{name: "regex: backreference", ref: "world-info.js:2252",
			entries: []Entry{ent("A", `/(ab)\1/`)}, text: "xabab", fired: []string{"A"}},
		{name: "regex: lookbehind", ref: "world-info.js:2252",
			entries: []Entry{ent("A", `/(?<=sea )monster/`)}, text: "a sea monster", fired: []string{"A"}},
		{name: "regex: caseSensitive does not apply, only the i flag", ref: "world-info.js:244-247 (regex before #transformString)",
			entries: []Entry{ent("A", `/Tide/`), ent("B", `/Tide/i`)}, text: "the tide", fired: []string{"B"}},
		{name: "regex: s lets . cross a newline", ref: "world-info.js:2233 flags [gimsuy]",
			entries: []Entry{ent("A", `/a.b/s`), ent("B", `/a.b/`)}, text: "a\nb", fired: []string{"A"}},
		{name: "regex: an invalid pattern is plain text", ref: "world-info.js:2251-2255 catch -> null; 244 then plaintext",
			entries: []Entry{ent("A", `/(/`)}, text: "type /(/ here", fired: []string{"A"}, reason: map[string]string{"A": "matched as plain text"}},
		{name: "regex: an unescaped / makes it plain text", ref: "world-info.js:2243 pattern.match(/(^|[^\\\\])\\//)",
			entries: []Entry{ent("A", `/a/b/`)}, text: "path /a/b/ here", fired: []string{"A"}},
		{name: "regex: a flag twice is a SyntaxError, so plain text", ref: "world-info.js:2252 new RegExp throws",
			entries: []Entry{ent("A", `/kraken/gg`)}, text: "kraken", fired: nil},
		{name: "regex: an escaped / is a /", ref: "world-info.js:2248 pattern.replace('\\\\/', '/')",
			entries: []Entry{ent("A", `/and\/or/`)}, text: "this and/or that", fired: []string{"A"}},

		// Macros.
		{name: "{{char}} in a key", ref: "world-info.js:3901 substituteParams(key); script.js:2524 environment.char",
			entries: []Entry{ent("A", "{{char}}")}, set: func(o *SimOptions) { o.Macros.Char = "Seraphina" }, text: "Seraphina waves", fired: []string{"A"}},
		{name: "<USER> in a key", ref: "macros.js:425 content.replace(/<USER>/gi, env.user)",
			entries: []Entry{ent("A", "hello <user>")}, set: func(o *SimOptions) { o.Macros.User = "Kai" }, text: "hello Kai", fired: []string{"A"}},
		{name: "{{char}} with no name is empty and never matches", ref: "world-info.js:3902 substituted && ...",
			entries: []Entry{ent("A", "{{char}}")}, text: "anything", fired: nil},
		{name: "macros in content are substituted before recursion", ref: "world-info.js:4027 entry.content = substituteParams(entry.content); 4106",
			entries: []Entry{content(ent("A", "gate"), "{{char}} is near"), ent("B", "Seraphina")},
			set:     func(o *SimOptions) { o.Macros.Char = "Seraphina"; o.Settings.Recursive = true }, text: "the gate", fired: []string{"A", "B"}, steps: map[string]int{"B": 2}},

		// Secondary keys.
		{name: "AND ANY", ref: "world-info.js:3941", entries: []Entry{secondary(ent("A", "k"), LogicAndAny, "x", "y"), secondary(ent("B", "k"), LogicAndAny, "z")}, text: "k y", fired: []string{"A"}},
		{name: "NOT ALL", ref: "world-info.js:3945", entries: []Entry{secondary(ent("A", "k"), LogicNotAll, "x", "y"), secondary(ent("B", "k"), LogicNotAll, "x", "y")}, text: "k x", fired: []string{"A", "B"}},
		{name: "NOT ALL fails when all are there", ref: "world-info.js:3945", entries: []Entry{secondary(ent("A", "k"), LogicNotAll, "x", "y")}, text: "k x y", fired: nil},
		{name: "NOT ANY", ref: "world-info.js:3952", entries: []Entry{secondary(ent("A", "k"), LogicNotAny, "x"), secondary(ent("B", "k"), LogicNotAny, "z")}, text: "k x", fired: []string{"B"}},
		{name: "AND ALL", ref: "world-info.js:3958", entries: []Entry{secondary(ent("A", "k"), LogicAndAll, "x", "y"), secondary(ent("B", "k"), LogicAndAll, "x", "z")}, text: "k x y", fired: []string{"A"}},
		{name: "an empty secondary key still makes a gate that never opens", ref: "world-info.js:3910-3913 keysecondary.length; 3938 '' never matches",
			entries: []Entry{secondary(ent("A", "k"), LogicAndAny, "")}, text: "k", fired: nil},
		{name: "selectiveLogic outside 0-3 never opens the gate", ref: "world-info.js:3937-3963 (no branch returns true)",
			entries: []Entry{secondary(ent("A", "k"), 7, "x")}, text: "k x", fired: nil},
		{name: "secondary keys alone do not fire", ref: "world-info.js:3905-3908 no primary match -> continue",
			entries: []Entry{secondary(ent("A", "k"), LogicAndAny, "x")}, text: "x", fired: nil},

		// Disabled, constant, decorators.
		{name: "disabled", ref: "world-info.js:3796 entry.disable == true", entries: []Entry{func() Entry { e := ent("A", "k"); e.IsEnabled = false; return e }()}, text: "k", fired: nil, reason: map[string]string{"A": "disabled"}},
		{name: "constant needs no key", ref: "world-info.js:3873", entries: []Entry{func() Entry { e := ent("A"); e.IsConstant = true; return e }()}, text: "", fired: []string{"A"}},
		{name: "@@activate needs no key", ref: "world-info.js:3861", entries: []Entry{content(ent("A"), "@@activate\nlore")}, text: "x", fired: []string{"A"}},
		{name: "@@dont_activate beats constant", ref: "world-info.js:3867 (before 3873)",
			entries: []Entry{func() Entry { e := content(ent("A", "x"), "@@dont_activate\nlore"); e.IsConstant = true; return e }()}, text: "x", fired: nil},
		{name: "@@@ escapes a known decorator after an unknown one", ref: "world-info.js:3673-3679 startsWith('@@@') && !fallbacked",
			entries: []Entry{content(ent("A"), "@@unknown\n@@@activate\nlore"), content(ent("B"), "@@@activate\nlore")}, text: "x", fired: []string{"A"}},
		{name: "decorator lines are not scanned in recursion", ref: "world-info.js:3622-3624 parseDecorators before the scan; 4106",
			entries: []Entry{content(ent("A", "x"), "@@activate\nthe gate"), ent("B", "activate"), ent("C", "gate")}, set: recursive, text: "x", fired: []string{"A", "C"}},

		// Probability.
		{name: "probability 0 never fires", ref: "world-info.js:4010-4011 Math.random() * 100 <= 0",
			entries: []Entry{with(ent("A", "k"), "probability", 0)}, text: "k", fired: nil, reason: map[string]string{"A": "never fires"}},
		{name: "probability 50 without a seed is reported as a chance", ref: "world-info.js:4011",
			entries: []Entry{with(ent("A", "k"), "probability", 50)}, text: "k", fired: []string{"A"}, chance: map[string]float64{"A": 50}},
		{name: "useProbability false ignores the probability", ref: "world-info.js:3999 !entry.useProbability",
			entries: []Entry{with(ent("A", "k"), "probability", 0, "useProbability", false)}, text: "k", fired: []string{"A"}},
		{name: "a seeded roll at or below the probability passes", ref: "world-info.js:4010-4011 rollValue <= entry.probability",
			entries: []Entry{with(ent("A", "k"), "probability", 50)}, set: func(o *SimOptions) { o.Seed = seed(passes) }, text: "k", fired: []string{"A"}},
		{name: "a seeded roll above it fails", ref: "world-info.js:4010-4016 failedProbabilityChecks.add",
			entries: []Entry{with(ent("A", "k"), "probability", 50)}, set: func(o *SimOptions) { o.Seed = seed(fails) }, text: "k", fired: nil, reason: map[string]string{"A": "probability check failed"}},
		{name: "a failed probability is not rolled again in recursion", ref: "world-info.js:3791 failedProbabilityChecks.has(entry) -> continue",
			entries: []Entry{with(ent("A", "k", "gate"), "probability", 50), content(ent("B", "k"), "gate")},
			set:     func(o *SimOptions) { o.Seed = seed(fails); o.Settings.Recursive = true }, text: "k", fired: []string{"B"}},

		// Recursion.
		{name: "recursion off: content is not scanned", ref: "world-info.js:69 world_info_recursive = false; 4064",
			entries: []Entry{content(ent("A", "k"), "the gate"), ent("B", "gate")}, text: "k", fired: []string{"A"}},
		{name: "recursion on: content is scanned in step 2", ref: "world-info.js:4064-4066, 4104-4107",
			entries: []Entry{content(ent("A", "k"), "the gate"), ent("B", "gate")}, set: recursive, text: "k", fired: []string{"A", "B"}, steps: map[string]int{"A": 1, "B": 2}},
		{name: "a chain of three steps", ref: "world-info.js:3761 while (scanState)",
			entries: []Entry{content(ent("A", "k"), "gate"), content(ent("B", "gate"), "tower"), ent("C", "tower")}, set: recursive, text: "k", fired: []string{"A", "B", "C"}, steps: map[string]int{"C": 3}},
		{name: "preventRecursion keeps an entry's content out", ref: "world-info.js:4047 filter(x => !x.preventRecursion)",
			entries: []Entry{with(content(ent("A", "k"), "gate"), "prevent_recursion", true), ent("B", "gate")}, set: recursive, text: "k", fired: []string{"A"}},
		{name: "excludeRecursion: not scanned in a recursion step", ref: "world-info.js:3856",
			entries: []Entry{content(ent("A", "k"), "gate"), with(ent("B", "gate"), "exclude_recursion", true)}, set: recursive, text: "k", fired: []string{"A"},
			reason: map[string]string{"B": "excludeRecursion"}},
		{name: "excludeRecursion: still fires on the chat", ref: "world-info.js:3856 (only when scanState === RECURSION)",
			entries: []Entry{with(ent("B", "gate"), "exclude_recursion", true)}, set: recursive, text: "gate", fired: []string{"B"}},
		{name: "delayUntilRecursion: fires in a recursion step", ref: "world-info.js:3846 scanState !== RECURSION && entry.delayUntilRecursion -> skip",
			entries: []Entry{ent("X", "k"), with(ent("A", "k"), "delay_until_recursion", true)}, set: recursive, text: "k", fired: []string{"X", "A"}, steps: map[string]int{"A": 2}},
		{name: "delayUntilRecursion: the first level is taken by the first scan, so alone it never fires", ref: "world-info.js:3753 currentRecursionDelayLevel = levels.shift(); 4096 only further levels force a step",
			entries: []Entry{with(ent("A", "k"), "delay_until_recursion", true)}, text: "k", fired: nil},
		{name: "delayUntilRecursion: a second level forces a step at that level", ref: "world-info.js:4096-4099 nextScanState = RECURSION; currentRecursionDelayLevel = shift()",
			entries: []Entry{with(ent("A", "k"), "delay_until_recursion", 2), with(ent("B", "k"), "delay_until_recursion", 1)}, text: "k", fired: []string{"A", "B"}, steps: map[string]int{"A": 2, "B": 2}},
		{name: "delayUntilRecursion: levels run in order", ref: "world-info.js:3749-3753 levels sorted; 3851 delayUntilRecursion > currentRecursionDelayLevel",
			entries: []Entry{ent("X", "k"), with(ent("A", "k"), "delay_until_recursion", 2), with(ent("B", "k"), "delay_until_recursion", 1)}, set: recursive, text: "k",
			fired: []string{"X", "A", "B"}, steps: map[string]int{"X": 1, "A": 4, "B": 2}},
		{name: "maxRecursionSteps 1 stops after the first scan", ref: "world-info.js:3763 world_info_max_recursion_steps <= count",
			entries: []Entry{content(ent("A", "k"), "gate"), ent("B", "gate")}, set: func(o *SimOptions) { o.Settings.Recursive = true; o.Settings.MaxRecursionSteps = 1 }, text: "k", fired: []string{"A"},
			reason: map[string]string{"B": "maxRecursionSteps"}},

		// Inclusion groups.
		{name: "group: without a seed the heaviest member wins, with its chance", ref: "world-info.js:4363-4371 weighted roll",
			entries: []Entry{with(ent("A", "k"), "group", "g", "group_weight", 100), with(ent("B", "k"), "group", "g", "group_weight", 300)}, text: "k", fired: []string{"B"},
			chance: map[string]float64{"B": 75}, reason: map[string]string{"A": `inclusion group "g"`}},
		{name: "group: a seeded roll in the first member's share picks it", ref: "world-info.js:4364-4371 rollValue <= currentWeight",
			entries: []Entry{with(ent("A", "k"), "group", "g"), with(ent("B", "k"), "group", "g")}, set: func(o *SimOptions) { o.Seed = seed(lowWin) }, text: "k", fired: []string{"A"}},
		{name: "group: a seeded roll past it picks the second", ref: "world-info.js:4364-4371",
			entries: []Entry{with(ent("A", "k"), "group", "g"), with(ent("B", "k"), "group", "g")}, set: func(o *SimOptions) { o.Seed = seed(highWin) }, text: "k", fired: []string{"B"}},
		{name: "group: groupOverride with the highest order wins", ref: "world-info.js:4355-4359 filter(groupOverride).sort(sortFn)",
			entries: []Entry{with(order(ent("A", "k"), 1), "group", "g", "group_override", true), with(order(ent("B", "k"), 5), "group", "g", "group_override", true), with(ent("C", "k"), "group", "g", "group_weight", 1000)}, text: "k", fired: []string{"B"}},
		{name: "group: scoring keeps the members with most matching keys", ref: "world-info.js:4206-4234 filterGroupsByScoring; 336-379 getScore",
			entries: []Entry{with(ent("A", "k"), "group", "g", "group_weight", 1000), with(ent("B", "k", "x"), "group", "g")}, set: func(o *SimOptions) { o.Settings.UseGroupScoring = true }, text: "k x", fired: []string{"B"}},
		{name: "group: an entry's use_group_scoring turns it on", ref: "world-info.js:4206 group.some(x => x.useGroupScoring); 4224",
			entries: []Entry{with(ent("A", "k"), "group", "g", "group_weight", 1000, "use_group_scoring", true), with(ent("B", "k", "x"), "group", "g", "use_group_scoring", true)}, text: "k x", fired: []string{"B"}},
		{name: "group: scoring counts AND ANY secondary keys", ref: "world-info.js:372-373 primaryScore + secondaryScore",
			entries: []Entry{with(ent("A", "k", "x"), "group", "g"), with(secondary(ent("B", "k"), LogicAndAny, "x", "y"), "group", "g", "group_weight", 1000)}, set: func(o *SimOptions) { o.Settings.UseGroupScoring = true }, text: "k x y", fired: []string{"B"}},
		{name: "group: one member fires alone", ref: "world-info.js:4349 group.length <= 1",
			entries: []Entry{with(ent("A", "k"), "group", "g"), with(ent("B", "zzz"), "group", "g")}, text: "k", fired: []string{"A"}},
		{name: "group: a comma list puts an entry in several groups", ref: "world-info.js:4303 item.group.split(/,\\s*/)",
			entries: []Entry{with(ent("A", "k"), "group", "g, h", "group_weight", 10), with(ent("B", "k"), "group", "g"), with(ent("C", "k"), "group", "h", "group_weight", 1)}, text: "k", fired: []string{"B"}},
		{name: "group: an entry that lost twice is removed twice, and the second removal takes the last candidate", ref: "world-info.js:4317 newEntries.splice(newEntries.indexOf(entry), 1) with indexOf -1; 4320-4328 removeAllBut",
			entries: []Entry{with(ent("X", "k"), "group", "g, h", "group_weight", 10), with(ent("Y", "k"), "group", "g"), with(ent("Z", "k"), "group", "h")}, text: "k", fired: []string{"Y"},
			reason: map[string]string{"Z": "splice(-1, 1)"}},
		{name: "group: a group that fired before shuts out later members", ref: "world-info.js:4342-4346 allActivatedEntries.some(x => x.group === key)",
			entries: []Entry{with(content(ent("A", "k"), "gate"), "group", "g"), with(ent("B", "gate"), "group", "g")}, set: recursive, text: "k", fired: []string{"A"},
			reason: map[string]string{"B": "already fired"}},
		{name: "group: a sticky member wins", ref: "world-info.js:4254-4266 filterGroupsByTimedEffects",
			entries: []Entry{with(ent("A", "k"), "group", "g", "group_weight", 1000), with(ent("B", "zzz"), "group", "g", "sticky", 3)},
			set: func(o *SimOptions) {
				o.Chat = chat("a", "k")
				o.TimedEffects = []TimedEffect{{Type: EffectSticky, Entry: 1, Start: 1, End: 4}}
			}, fired: []string{"B"}},

		// Timed effects.
		{name: "sticky keeps an entry active without its key", ref: "world-info.js:3885-3889 isSticky",
			entries: []Entry{with(ent("A", "k"), "sticky", 3)}, set: func(o *SimOptions) {
				o.Chat = chat("a", "b")
				o.TimedEffects = []TimedEffect{{Type: EffectSticky, Entry: 0, Start: 1, End: 4}}
			}, fired: []string{"A"}, reason: map[string]string{"A": "sticky"}},
		{name: "a sticky that ended starts the cooldown at once", ref: "world-info.js:548-553 interval passed -> onEnded; 420-428 sticky ended -> cooldown",
			entries: []Entry{with(ent("A", "k"), "sticky", 2, "cooldown", 3)}, set: func(o *SimOptions) {
				o.Chat = chat("a", "b", "k")
				o.TimedEffects = []TimedEffect{{Type: EffectSticky, Entry: 0, Start: 1, End: 3}}
			}, fired: nil, reason: map[string]string{"A": "cooldown"},
			effects: []TimedEffect{{Type: EffectCooldown, Entry: 0, Start: 3, End: 6, Protected: true}}},
		{name: "cooldown suppresses a matching entry", ref: "world-info.js:3840 isCooldown && !isSticky",
			entries: []Entry{with(ent("A", "k"), "cooldown", 3)}, set: func(o *SimOptions) {
				o.Chat = chat("a", "k")
				o.TimedEffects = []TimedEffect{{Type: EffectCooldown, Entry: 0, Start: 1, End: 4}}
			}, fired: nil},
		{name: "a record from a chat that has not advanced is dropped", ref: "world-info.js:526-530 chat.length <= start && !protected",
			entries: []Entry{with(ent("A", "k"), "cooldown", 3)}, set: func(o *SimOptions) {
				o.Chat = chat("a", "k")
				o.TimedEffects = []TimedEffect{{Type: EffectCooldown, Entry: 0, Start: 2, End: 5}}
			}, fired: []string{"A"}, effects: []TimedEffect{{Type: EffectCooldown, Entry: 0, Start: 2, End: 5}}},
		{name: "a record for an entry without the effect is dropped", ref: "world-info.js:542-546 if (!entry[type])",
			entries: []Entry{ent("A", "k")}, set: func(o *SimOptions) {
				o.Chat = chat("a", "k")
				o.TimedEffects = []TimedEffect{{Type: EffectCooldown, Entry: 0, Start: 1, End: 5}}
			}, fired: []string{"A"}, effects: []TimedEffect{}},
		{name: "delay holds an entry until the chat is long enough", ref: "world-info.js:566-575 chat.length < entry.delay; 3835",
			entries: []Entry{with(ent("A", "k"), "delay", 3), with(ent("B", "k"), "delay", 2)}, set: func(o *SimOptions) { o.Chat = chat("a", "k") }, fired: []string{"B"},
			reason: map[string]string{"A": "delay"}},
		{name: "firing starts sticky and cooldown records", ref: "world-info.js:502-510 start = chat.length, end = start + entry[type]; 629-634",
			entries: []Entry{with(ent("A", "k"), "sticky", 2, "cooldown", 5)}, set: func(o *SimOptions) { o.Chat = chat("a", "k") }, fired: []string{"A"},
			effects: []TimedEffect{{Type: EffectSticky, Entry: 0, Start: 2, End: 4}, {Type: EffectCooldown, Entry: 0, Start: 2, End: 7}}},
		{name: "an existing record is not restarted", ref: "world-info.js:617 if (!chat_metadata.timedWorldInfo[type][key])",
			entries: []Entry{with(ent("A", "k"), "sticky", 5)}, set: func(o *SimOptions) {
				o.Chat = chat("a", "b", "k")
				o.TimedEffects = []TimedEffect{{Type: EffectSticky, Entry: 0, Start: 1, End: 6}}
			}, fired: []string{"A"}, effects: []TimedEffect{{Type: EffectSticky, Entry: 0, Start: 1, End: 6}}},

		// Min activations.
		{name: "minActivations widens the scan until enough fired", ref: "world-info.js:4077-4090 advanceScan; 310 getDepth",
			entries: []Entry{ent("A", "dragon")}, set: func(o *SimOptions) { o.Chat = chat("dragon", "b", "c", "d"); o.Settings.MinActivations = 1 }, fired: []string{"A"}, steps: map[string]int{"A": 3}},
		{name: "minActivations stops at minActivationsDepthMax", ref: "world-info.js:4080-4084 over_max",
			entries: []Entry{ent("A", "dragon")}, set: func(o *SimOptions) {
				o.Chat = chat("dragon", "b", "c", "d")
				o.Settings.MinActivations, o.Settings.MinActivationsDepthMax = 1, 2
			}, fired: nil},
		{name: "minActivations stops at the chat's length", ref: "world-info.js:4084 buffer.getDepth() > chat.length",
			entries: []Entry{ent("A", "dragon")}, set: func(o *SimOptions) { o.Chat = chat("a", "b"); o.Settings.MinActivations = 1 }, fired: nil},

		// Native entries (the card service's own rules) inside the same pipeline.
		{name: "native: case-insensitive substring, regex keys literal", ref: "tools/triggers.go native rules (not SillyTavern)",
			entries: []Entry{{Name: "A", Keywords: []string{"SEA"}, IsEnabled: true}, {Name: "B", Keywords: []string{"/se./"}, IsEnabled: true}}, text: "seashells", fired: []string{"A"}},
	}
	if len(cases) < 60 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(tc.ref, ".js:") && !strings.Contains(tc.ref, "native") {
				t.Fatalf("case without a world-info.js reference: %q", tc.ref)
			}
			o := SimOptions{Settings: DefaultSettings()}
			if tc.set != nil {
				tc.set(&o)
			}
			if o.Chat == nil {
				o.Chat = chat(tc.text)
			}
			sim := Simulate(tc.entries, o)
			var fired []string
			for _, r := range sim.Results {
				if r.Fired {
					fired = append(fired, r.Name)
				}
			}
			byName := map[string]Result{}
			for _, r := range sim.Results {
				byName[r.Name] = r
			}
			if strings.Join(fired, ",") != strings.Join(tc.fired, ",") {
				t.Errorf("%s\nfired %v, want %v", tc.ref, fired, tc.fired)
				for _, r := range sim.Results {
					t.Logf("%s: fired=%v step=%d %s", r.Name, r.Fired, r.Step, r.Reason)
				}
			}
			for name, want := range tc.reason {
				if got := byName[name].Reason; !strings.Contains(got, want) {
					t.Errorf("%s: reason %q lacks %q", name, got, want)
				}
			}
			for name, want := range tc.steps {
				if got := byName[name].Step; got != want {
					t.Errorf("%s: step %d, want %d", name, got, want)
				}
			}
			for name, want := range tc.chance {
				if got := byName[name].Chance; got == nil || *got != want {
					t.Errorf("%s: chance %v, want %v", name, got, want)
				}
			}
			if tc.effects != nil {
				diff(t, "timed effects after", tc.effects, sim.TimedEffects)
			}
		})
	}
}

// BenchmarkSimulate: a large book (2,000 entries, regex and whole-word keys) over a long chat with recursion.
func BenchmarkSimulate(b *testing.B) {
	var entries []Entry
	for i := 0; i < 2000; i++ {
		e := options(ent("E", "word"+strconv.Itoa(i), "/key"+strconv.Itoa(i)+"(?=s)/i", "two words"+strconv.Itoa(i)), false, i%2 == 0)
		entries = append(entries, content(e, "mentions word"+strconv.Itoa(i+1)))
	}
	msgs := make([]string, 50)
	for i := range msgs {
		msgs[i] = strings.Repeat("a long line of chat text with word0 in it. ", 20)
	}
	o := SimOptions{Settings: DefaultSettings(), Chat: chat(msgs...)}
	o.Settings.Recursive, o.Settings.MaxRecursionSteps = true, 5
	b.ReportAllocs()
	for b.Loop() {
		Simulate(entries, o)
	}
}
