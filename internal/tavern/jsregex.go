package tavern

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/dlclark/regexp2"
)

// JavaScript semantics the activation simulator needs: RegExp (through regexp2's ECMAScript
// mode), String.prototype.toLowerCase, trim and the \s class, and SillyTavern's escapeRegex and
// parseRegexFromString (public/scripts/utils.js, world-info.js).

// regexTimeout bounds one regular expression match, so that a catastrophic pattern in a key cannot
// hang the server; a match that runs out of time counts as no match.
const regexTimeout = 250 * time.Millisecond

// errRegexTimeout reports a key whose match ran out of time.
var errRegexTimeout = errors.New("the match took too long")

// jsRegex is a compiled JavaScript regular expression.
type jsRegex struct {
	re     *regexp2.Regexp
	sticky bool // the y flag: a match must start at index 0 (SillyTavern builds a new RegExp per test, so lastIndex is 0)
}

// compileJSRegex compiles a JavaScript pattern with its flags (g i m s u y; each at most once, as
// the RegExp constructor demands).
func compileJSRegex(pattern, flags string) (*jsRegex, error) {
	opts := regexp2.RegexOptions(regexp2.ECMAScript)
	out := &jsRegex{}
	seen := map[rune]bool{}
	for _, f := range flags {
		if seen[f] {
			return nil, fmt.Errorf("flag %c given twice", f)
		}
		seen[f] = true
		switch f {
		case 'i':
			opts |= regexp2.IgnoreCase
		case 'm':
			opts |= regexp2.Multiline
		case 's':
			opts |= regexp2.Singleline
		case 'u':
			opts |= regexp2.Unicode
		case 'y':
			out.sticky = true
		case 'g':
		default:
			return nil, fmt.Errorf("unknown flag %c", f)
		}
	}
	if !seen['u'] {
		pattern = identityEscapes(pattern)
	}
	re, err := regexp2.Compile(pattern, opts)
	if err != nil {
		return nil, err
	}
	re.MatchTimeout = regexTimeout
	out.re = re
	return out, nil
}

// identityEscapes rewrites the escapes that mean a plain letter in a JavaScript pattern without
// the u flag but a Unicode property in regexp2: \p and \P are p and P there (Annex B).
func identityEscapes(p string) string {
	if !strings.Contains(p, `\p`) && !strings.Contains(p, `\P`) {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '\\' && i+1 < len(p) {
			if p[i+1] == 'p' || p[i+1] == 'P' {
				b.WriteByte(p[i+1])
			} else {
				b.WriteString(p[i : i+2])
			}
			i++
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// test is RegExp.prototype.test on a fresh RegExp (lastIndex 0).
func (r *jsRegex) test(s string) (bool, error) { return r.testRunes([]rune(s)) }

// testRunes is test on a text already split into runes.
func (r *jsRegex) testRunes(rs []rune) (bool, error) {
	m, err := r.re.FindRunesMatch(rs)
	if err != nil {
		return false, errRegexTimeout
	}
	if m == nil {
		return false, nil
	}
	// The engine tries index 0 first, so a sticky match exists exactly when the first match is there.
	return !r.sticky || m.Index == 0, nil
}

// parseRegexKey is SillyTavern's parseRegexFromString: a key /pattern/flags is a regular expression
// when the pattern is the shortest text before a / followed only by flags g i m s u y, has no
// unescaped /, and compiles. The first \/ becomes /. Anything else is plain text (nil).
func parseRegexKey(key string) *jsRegex {
	pattern, flags, ok := splitRegexKey(key)
	if !ok {
		return nil
	}
	pattern = strings.Replace(pattern, `\/`, "/", 1)
	re, err := compileJSRegex(pattern, flags)
	if err != nil {
		return nil
	}
	return re
}

// splitRegexKey is the syntactic part of parseRegexFromString: input.match(/^\/([\w\W]+?)\/([gimsuy]*)$/)
// and the test for an unescaped / in the pattern.
func splitRegexKey(s string) (pattern, flags string, ok bool) {
	if len(s) < 3 || s[0] != '/' {
		return "", "", false
	}
	for j := 2; j < len(s); j++ {
		if s[j] != '/' || strings.Trim(s[j+1:], "gimsuy") != "" {
			continue
		}
		p := s[1:j]
		for i := 0; i < len(p); i++ {
			if p[i] == '/' && (i == 0 || p[i-1] != '\\') {
				return "", "", false
			}
		}
		return p, s[j+1:], true
	}
	return "", "", false
}

// escapeRegex is utils.js escapeRegex: a backslash before each of / - \ ^ $ * + ? . ( ) | [ ] { }.
func escapeRegex(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`/-\^$*+?.()|[]{}`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isJSSpace reports whether r is in JavaScript's \s (WhiteSpace and LineTerminator), which is what
// String.prototype.trim removes. It differs from unicode.IsSpace: U+FEFF is in, U+0085 is out.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// jsTrim is String.prototype.trim.
func jsTrim(s string) string { return strings.TrimFunc(s, isJSSpace) }

// jsWordCount is s.split(/\s+/).length: one more than the number of runs of JavaScript white
// space (so an untrimmed key with a leading space counts as two words).
func jsWordCount(s string) int {
	n, inSpace := 1, false
	for _, r := range s {
		sp := isJSSpace(r)
		if sp && !inSpace {
			n++
		}
		inSpace = sp
	}
	return n
}

// jsLower is String.prototype.toLowerCase: the Unicode default lower-casing with its two
// context-free special cases that Go's strings.ToLower does not apply: İ (U+0130) becomes i
// followed by U+0307, and Σ becomes the final form ς at the end of a word.
func jsLower(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(s)
	}
	rs := []rune(s)
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range rs {
		switch r {
		case 0x130:
			b.WriteString("i\u0307")
		case 0x3A3:
			if finalSigma(rs, i) {
				b.WriteRune(0x3C2)
			} else {
				b.WriteRune(0x3C3)
			}
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// finalSigma is Unicode's Final_Sigma condition for rs[i]: a cased letter before it and none after
// it, skipping case-ignorable characters on both sides.
func finalSigma(rs []rune, i int) bool {
	before := false
	for j := i - 1; j >= 0; j-- {
		if caseIgnorable(rs[j]) {
			continue
		}
		before = cased(rs[j])
		break
	}
	if !before {
		return false
	}
	for j := i + 1; j < len(rs); j++ {
		if caseIgnorable(rs[j]) {
			continue
		}
		return !cased(rs[j])
	}
	return true
}

// cased is Unicode's Cased property.
func cased(r rune) bool {
	return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) ||
		unicode.Is(unicode.Other_Lowercase, r) || unicode.Is(unicode.Other_Uppercase, r)
}

// caseIgnorable is Unicode's Case_Ignorable property: marks, format characters, modifier letters
// and symbols, and the word-internal punctuation of Word_Break MidLetter, MidNumLet and Single_Quote.
func caseIgnorable(r rune) bool {
	switch r {
	case '\'', '.', ':', 0xB7, 0x387, 0x55F, 0x5F4, 0x2018, 0x2019, 0x2024, 0x2027, 0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}
