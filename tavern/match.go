package tavern

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Result says whether one entry fires for a passage, and why.
type Result struct {
	// EntryID is the entry's service identifier (empty for entries read from files).
	EntryID string `json:"entryId"`
	// Name is the entry's name.
	Name string `json:"name"`
	// Index is the entry's position in the list given to Match.
	Index int `json:"-"`
	// Fired reports whether the entry would be activated.
	Fired bool `json:"-"`
	// Matched are the keywords (main, then secondary) found in the passage.
	Matched []string `json:"matched"`
	// Reason explains the outcome in one sentence.
	Reason string `json:"reason"`
}

// Report is the trigger tester's answer: the entries that fire and those that do not, in entry order.
type Report struct {
	// Fired are the entries the passage activates.
	Fired []Result `json:"fired"`
	// NotFired are the entries it does not.
	NotFired []Result `json:"notFired"`
}

// Triggers runs Match and splits its results into fired and not fired.
func Triggers(entries []Entry, text string, opts MatchOptions) Report {
	r := Report{Fired: []Result{}, NotFired: []Result{}}
	for _, res := range Match(entries, text, opts) {
		if res.Fired {
			r.Fired = append(r.Fired, res)
		} else {
			r.NotFired = append(r.NotFired, res)
		}
	}
	return r
}

var logicNames = map[int]string{LogicAndAny: "any", LogicNotAll: "not all", LogicNotAny: "none", LogicAndAll: "all"}

// Match tells, for each entry, whether the passage text would activate it.
//
// Entries with MatchOptions (tavern format) follow SillyTavern's rules: case sensitivity; whole-word
// matching for single-word keys (a key containing spaces matches as a substring, and so does a key
// in a script written without spaces, such as Chinese or Japanese); keys written /pattern/flags are
// regular expressions (JavaScript flags i, s, m; y anchors at the start; g and u change nothing;
// Go's RE2 syntax, so lookaround and backreferences are invalid and never match); secondary keys
// combined by selectiveLogic 0 any, 1 not all, 2 none, 3 all. Entries without MatchOptions follow
// opts, whose zero value is the service's native rules: case-insensitive substrings, secondary
// keywords as an AND gate (one of them must appear too), and keys taken literally. Disabled entries
// never fire; constant enabled entries always do. Keys are trimmed and empty keys ignored.
func Match(entries []Entry, text string, opts MatchOptions) []Result {
	hay := haystack{text: text}
	out := make([]Result, len(entries))
	for i := range entries {
		out[i] = matchEntry(&entries[i], i, &hay, opts)
	}
	return out
}

// haystack is the passage, with its lower-case form computed once.
type haystack struct {
	text  string
	lower *string
}

func (h *haystack) get(caseSensitive bool) string {
	if caseSensitive {
		return h.text
	}
	if h.lower == nil {
		l := strings.ToLower(h.text)
		h.lower = &l
	}
	return *h.lower
}

func matchEntry(e *Entry, i int, hay *haystack, opts MatchOptions) Result {
	r := Result{EntryID: e.EntryID, Name: e.Name, Index: i, Matched: []string{}}
	if !e.IsEnabled {
		r.Reason = "disabled"
		return r
	}
	if e.IsConstant {
		r.Fired, r.Reason = true, "constant entry"
		return r
	}
	mo, native := opts, e.MatchOptions == nil
	if !native {
		mo = *e.MatchOptions
	}
	var notes []string
	eval := func(keys []string) (hit, miss []string) {
		for _, k := range keys {
			k = strings.TrimSpace(k)
			if k == "" {
				continue
			}
			ok, note := matchKey(k, hay, mo, native)
			if note != "" && (ok || strings.Contains(note, "never matches")) {
				notes = append(notes, note)
			}
			if ok {
				hit = append(hit, k)
			} else {
				miss = append(miss, k)
			}
		}
		return hit, miss
	}
	mainHit, mainMiss := eval(e.Keywords)
	withNotes := func(s string) string {
		if len(notes) == 0 {
			return s
		}
		return s + "; " + strings.Join(notes, "; ")
	}
	if len(mainHit) == 0 {
		if len(mainMiss) == 0 {
			r.Reason = withNotes("entry has no keywords")
		} else {
			r.Reason = withNotes("no keyword matched")
		}
		return r
	}
	r.Matched = append(r.Matched, mainHit...)
	head := fmt.Sprintf("keyword %s matched", quoteList(mainHit))
	if len(mainHit) > 1 {
		head = fmt.Sprintf("keywords %s matched", quoteList(mainHit))
	}
	secHit, secMiss := eval(e.SecondaryKeywords)
	if len(secHit)+len(secMiss) == 0 {
		r.Fired, r.Reason = true, withNotes(head)
		return r
	}
	r.Matched = append(r.Matched, secHit...)
	logic := mo.SelectiveLogic
	name, known := logicNames[logic]
	if !known {
		r.Reason = withNotes(fmt.Sprintf("%s; selectiveLogic %d is not 0-3, so the secondary gate never opens", head, logic))
		return r
	}
	gate := "secondary gate (" + name + ")"
	var verdict string
	switch logic {
	case LogicAndAny:
		r.Fired = len(secHit) > 0
		if r.Fired {
			verdict = fmt.Sprintf("%s satisfied by %s", gate, quoteList(secHit))
		} else {
			verdict = fmt.Sprintf("%s failed: none of %s present", gate, quoteList(secMiss))
		}
	case LogicNotAll:
		r.Fired = len(secMiss) > 0
		if r.Fired {
			verdict = fmt.Sprintf("%s satisfied: %s missing", gate, quoteList(secMiss))
		} else {
			verdict = fmt.Sprintf("%s failed: all of %s present", gate, quoteList(secHit))
		}
	case LogicNotAny:
		r.Fired = len(secHit) == 0
		if r.Fired {
			verdict = fmt.Sprintf("%s satisfied: none of %s present", gate, quoteList(secMiss))
		} else {
			verdict = fmt.Sprintf("%s failed: %s present", gate, quoteList(secHit))
		}
	case LogicAndAll:
		r.Fired = len(secMiss) == 0
		if r.Fired {
			verdict = fmt.Sprintf("%s satisfied: all of %s present", gate, quoteList(secHit))
		} else {
			verdict = fmt.Sprintf("%s failed: %s missing", gate, quoteList(secMiss))
		}
	}
	r.Reason = withNotes(head + "; " + verdict)
	return r
}

// quoteList renders keys as "a", "b".
func quoteList(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}

// matchKey reports whether one trimmed key matches, with a note when a rule needs explaining.
func matchKey(key string, hay *haystack, mo MatchOptions, native bool) (bool, string) {
	if !native {
		if rx, ok := splitRegexKey(key); ok {
			re, err := compileJSRegex(rx.pattern, rx.flags)
			if err != nil {
				return false, fmt.Sprintf("key %q is not a valid regular expression here (%v) and never matches", key, err)
			}
			return re.MatchString(hay.text), ""
		}
	}
	text := hay.get(mo.CaseSensitive)
	k := key
	if !mo.CaseSensitive {
		k = strings.ToLower(k)
	}
	if !mo.MatchWholeWords {
		return strings.Contains(text, k), ""
	}
	if hasSpacelessScript(k) {
		return strings.Contains(text, k), fmt.Sprintf("%q is CJK text, so whole-word matching does not apply and it matched as a substring", key)
	}
	if len(strings.Fields(k)) > 1 {
		return strings.Contains(text, k), ""
	}
	if !strings.Contains(text, k) {
		return false, ""
	}
	re := regexp.MustCompile(`(?:^|\W)(` + regexp.QuoteMeta(k) + `)(?:$|\W)`)
	return re.MatchString(text), ""
}

// spacelessScripts are scripts written without spaces between words, where word boundaries mean nothing.
var spacelessScripts = []*unicode.RangeTable{
	unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul, unicode.Bopomofo,
	unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar,
}

// hasSpacelessScript reports whether s contains a CJK (or other space-less script) character.
func hasSpacelessScript(s string) bool {
	for _, r := range s {
		if r < 0x2E80 {
			continue
		}
		if unicode.IsOneOf(spacelessScripts, r) {
			return true
		}
	}
	return false
}

// jsRegex is a key written /pattern/flags.
type jsRegex struct{ pattern, flags string }

// splitRegexKey recognises a /pattern/flags key the way SillyTavern does: the shortest pattern
// followed by / and only the flags g, i, m, s, u, y; a pattern with an unescaped / in it is plain text.
func splitRegexKey(s string) (jsRegex, bool) {
	if len(s) < 3 || s[0] != '/' {
		return jsRegex{}, false
	}
	for j := 2; j < len(s); j++ {
		if s[j] != '/' || strings.Trim(s[j+1:], "gimsuy") != "" {
			continue
		}
		p := s[1:j]
		for i := 0; i < len(p); i++ {
			if p[i] == '/' && (i == 0 || p[i-1] != '\\') {
				return jsRegex{}, false
			}
		}
		return jsRegex{pattern: p, flags: s[j+1:]}, true
	}
	return jsRegex{}, false
}

// compileJSRegex compiles a JavaScript pattern and flags with Go's regexp.
func compileJSRegex(pattern, flags string) (*regexp.Regexp, error) {
	var goFlags string
	sticky := false
	seen := map[rune]bool{}
	for _, f := range flags {
		if seen[f] {
			return nil, fmt.Errorf("flag %c given twice", f)
		}
		seen[f] = true
		switch f {
		case 'i', 's', 'm':
			goFlags += string(f)
		case 'y':
			sticky = true
		}
	}
	p := translateJSPattern(pattern)
	if sticky {
		p = `\A(?:` + p + `)`
	}
	if goFlags != "" {
		p = "(?" + goFlags + ")" + p
	}
	return regexp.Compile(p)
}

// translateJSPattern rewrites JavaScript escapes Go's syntax spells differently (\uXXXX, \u{X}).
func translateJSPattern(p string) string {
	if !strings.Contains(p, `\u`) {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c != '\\' || i+1 >= len(p) {
			b.WriteByte(c)
			continue
		}
		next := p[i+1]
		if next == 'u' {
			if i+6 <= len(p) && isHex(p[i+2:i+6]) {
				b.WriteString(`\x{` + p[i+2:i+6] + `}`)
				i += 5
				continue
			}
			if i+2 < len(p) && p[i+2] == '{' {
				if end := strings.IndexByte(p[i+3:], '}'); end > 0 && isHex(p[i+3:i+3+end]) {
					b.WriteString(`\x{` + p[i+3:i+3+end] + `}`)
					i += 3 + end
					continue
				}
			}
		}
		b.WriteByte(c)
		b.WriteByte(next)
		i++
	}
	return b.String()
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
