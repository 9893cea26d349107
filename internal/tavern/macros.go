package tavern

import (
	"regexp"
	"strings"
)

// Macros are the names substituteParams puts into keys and content before matching
// (SillyTavern's script.js substituteParams and macros.js evaluateMacros).
type Macros struct {
	// Char is the character's name ({{char}}, <BOT>, <CHAR>, and {{group}} outside a group chat).
	Char string
	// User is the user's persona name ({{user}}, <USER>).
	User string
}

// DefaultUser is the user's persona name until they choose one (SillyTavern's default): the
// name {{user}} stands for where no user is known, as in a card's review or preview.
const DefaultUser = "User"

// CardMacros are the names of the card named char as a reader who has not named their persona
// meets it.
func CardMacros(char string) Macros {
	return Macros{Char: char, User: DefaultUser}
}

var (
	legacyUser  = regexp.MustCompile(`(?i)<USER>`)
	legacyChar  = regexp.MustCompile(`(?i)<(?:BOT|CHAR|CHARIFNOTGROUP|GROUP)>`)
	macroTrim   = regexp.MustCompile(`(?i)(?:\r?\n)*\{\{trim\}\}(?:\r?\n)*`)
	macroNames  = regexp.MustCompile(`(?i)\{\{(user|char|group|charIfNotGroup|newline|noop)\}\}`)
	macroRev    = regexp.MustCompile(`(?i)\{\{reverse:(.+?)\}\}`)
	macroNote   = regexp.MustCompile(`\{\{//[\s\S]*?\}\}`)
	macroLegacy = []struct {
		re   *regexp.Regexp
		user bool
	}{{legacyUser, true}, {legacyChar, false}}
)

// Substitute is substituteParams for the macros the simulator knows: the legacy <USER>, <BOT>,
// <CHAR>, <CHARIFNOTGROUP> and <GROUP>; {{user}}, {{char}}, {{group}}, {{charIfNotGroup}},
// {{newline}}, {{trim}}, {{noop}}, {{reverse:...}} and {{// comments}}, all case-insensitive.
// Other macros (time, random, variables, card fields) are left as written.
func (m Macros) Substitute(s string) string {
	if s == "" {
		return ""
	}
	for _, l := range macroLegacy {
		name := m.Char
		if l.user {
			name = m.User
		}
		s = jsReplaceAll(s, l.re, name)
	}
	if !strings.Contains(s, "{{") {
		return s
	}
	s = macroTrim.ReplaceAllString(s, "")
	s = macroNames.ReplaceAllStringFunc(s, func(x string) string {
		switch strings.ToLower(x[2 : len(x)-2]) {
		case "user":
			return m.User
		case "newline":
			return "\n"
		case "noop":
			return ""
		default:
			return m.Char
		}
	})
	s = macroRev.ReplaceAllStringFunc(s, func(x string) string {
		rs := []rune(macroRev.FindStringSubmatch(x)[1])
		for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
			rs[i], rs[j] = rs[j], rs[i]
		}
		return string(rs)
	})
	return macroNote.ReplaceAllString(s, "")
}

// jsReplaceAll is String.prototype.replace(/re/gi, repl) with a string replacement, in which
// $$, $& (the match), $` (the text before it) and $' (the text after it) are patterns.
func jsReplaceAll(s string, re *regexp.Regexp, repl string) string {
	locs := re.FindAllStringIndex(s, -1)
	if locs == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, loc := range locs {
		b.WriteString(s[last:loc[0]])
		for i := 0; i < len(repl); i++ {
			if repl[i] != '$' || i+1 == len(repl) {
				b.WriteByte(repl[i])
				continue
			}
			switch repl[i+1] {
			case '$':
				b.WriteByte('$')
			case '&':
				b.WriteString(s[loc[0]:loc[1]])
			case '`':
				b.WriteString(s[:loc[0]])
			case '\'':
				b.WriteString(s[loc[1]:])
			default:
				b.WriteByte('$')
				continue
			}
			i++
		}
		last = loc[1]
	}
	b.WriteString(s[last:])
	return b.String()
}
