package schema

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is the nesting encoding/json accepts; deeper input is left to it (for its error).
const maxDepth = 10000

// decodeFast decodes one JSON value into what encoding/json's Decoder with UseNumber produces
// (map[string]any, []any, string, json.Number, bool, nil), in one pass and without reflection.
// It reports false for anything it does not accept whole, including every malformed input;
// DecodeJSON then decodes with encoding/json, which gives the error. FuzzDecodeJSON holds the
// two to the same results.
func decodeFast(data []byte) (any, bool) {
	p := fastParser{b: data}
	p.space()
	v, ok := p.value(0)
	if !ok {
		return nil, false
	}
	p.space()
	if p.i != len(p.b) {
		return nil, false // more than one value or trailing data: encoding/json words the error
	}
	return v, true
}

// DecodeArguments is DecodeJSON for input that must be text: a string holding a lone UTF-16
// surrogate escape or invalid UTF-8 is refused with a *ValidationError at its location,
// instead of being replaced by U+FFFD without a word (encoding/json's way).
func DecodeArguments(data []byte) (any, error) {
	p := fastParser{b: data, strict: true}
	p.space()
	v, ok := p.value(0)
	if ok {
		p.space()
		if p.i == len(p.b) {
			return v, nil
		}
	}
	if p.bad != "" {
		path := slices.Clone(p.badPath)
		slices.Reverse(path)
		return nil, &ValidationError{Problems: []Problem{{InstanceLocation: pointerOf(path),
			Message: "the text holds " + p.bad + "; send valid Unicode"}}}
	}
	return decodeStd(data)
}

type fastParser struct {
	b []byte
	i int
	// strict refuses text that is no Unicode (a lone UTF-16 surrogate escape, invalid UTF-8)
	// instead of replacing it with U+FFFD; bad then says what was refused and badPath where,
	// innermost first.
	strict  bool
	bad     string
	badPath []string
}

// refuse records, in strict mode, why a string is refused; it reports whether it did.
func (p *fastParser) refuse(why string) bool {
	if !p.strict {
		return false
	}
	p.bad = why
	return true
}

func (p *fastParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) value(depth int) (any, bool) {
	if p.i >= len(p.b) {
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, false
}

func (p *fastParser) literal(word string) bool {
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return false
	}
	p.i += len(word)
	return true
}

func (p *fastParser) object(depth int) (any, bool) {
	if depth >= maxDepth {
		return nil, false
	}
	p.i++ // {
	m := map[string]any{}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return m, true
	}
	for {
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, false
		}
		k, ok := p.str()
		if !ok {
			if p.bad != "" {
				p.bad += " in a property name"
			}
			return nil, false
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, false
		}
		p.i++
		p.space()
		v, ok := p.value(depth)
		if !ok {
			if p.bad != "" {
				p.badPath = append(p.badPath, k.(string))
			}
			return nil, false
		}
		m[k.(string)] = v
		p.space()
		if p.i >= len(p.b) {
			return nil, false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
			p.space()
		case '}':
			p.i++
			return m, true
		default:
			return nil, false
		}
	}
}

func (p *fastParser) array(depth int) (any, bool) {
	if depth >= maxDepth {
		return nil, false
	}
	p.i++ // [
	a := make([]any, 0)
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return a, true
	}
	for {
		v, ok := p.value(depth)
		if !ok {
			if p.bad != "" {
				p.badPath = append(p.badPath, strconv.Itoa(len(a)))
			}
			return nil, false
		}
		a = append(a, v)
		p.space()
		if p.i >= len(p.b) {
			return nil, false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
			p.space()
		case ']':
			p.i++
			return a, true
		default:
			return nil, false
		}
	}
}

// number accepts the JSON number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *fastParser) number() (any, bool) {
	start := p.i
	if p.b[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.i < len(p.b) && p.b[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, false
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return nil, false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	return json.Number(p.b[start:p.i]), true
}

// str decodes the string at p.i as encoding/json does: escapes resolved, surrogate pairs joined,
// lone surrogates and invalid UTF-8 replaced by U+FFFD, control characters refused.
func (p *fastParser) str() (any, bool) {
	p.i++ // "
	start := p.i
	// The common case: no escapes, valid UTF-8, nothing to rewrite.
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !utf8.Valid(s) {
				if p.refuse("invalid UTF-8") {
					return nil, false
				}
				return string(fixUTF8(nil, s)), true
			}
			return string(s), true
		case c == '\\':
			return p.strSlow(start)
		case c < 0x20:
			return nil, false
		}
		p.i++
	}
	return nil, false
}

func (p *fastParser) strSlow(start int) (any, bool) {
	out := make([]byte, 0, p.i-start+16)
	if !utf8.Valid(p.b[start:p.i]) && p.refuse("invalid UTF-8") {
		return nil, false
	}
	out = fixUTF8(out, p.b[start:p.i])
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), true
		case c < 0x20:
			return nil, false
		case c != '\\':
			j := p.i
			for j < len(p.b) && p.b[j] != '"' && p.b[j] != '\\' && p.b[j] >= 0x20 {
				j++
			}
			if !utf8.Valid(p.b[p.i:j]) && p.refuse("invalid UTF-8") {
				return nil, false
			}
			out = fixUTF8(out, p.b[p.i:j])
			p.i = j
			continue
		}
		// An escape.
		if p.i+1 >= len(p.b) {
			return nil, false
		}
		switch e := p.b[p.i+1]; e {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			out = append(out, simpleEscapes[e])
			p.i += 2
		case 'u':
			r, ok := hex4(p.b[p.i+2:])
			if !ok {
				return nil, false
			}
			p.i += 6
			if utf16.IsSurrogate(r) {
				if len(p.b)-p.i >= 6 && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
					if r2, ok := hex4(p.b[p.i+2:]); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							p.i += 6
							continue
						}
					}
				}
				if p.refuse(fmt.Sprintf("a lone UTF-16 surrogate (\\u%04x), which is no character", r)) {
					return nil, false
				}
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, false
		}
	}
	return nil, false
}

// hex4 reads four hex digits.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	return r, true
}

// fixUTF8 appends s to out with each invalid byte replaced by U+FFFD.
func fixUTF8(out, s []byte) []byte {
	for len(s) > 0 {
		r, n := utf8.DecodeRune(s)
		if r == utf8.RuneError && n == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, s[:n]...)
		}
		s = s[n:]
	}
	return out
}

// simpleEscapes maps the letter after a backslash to the byte it stands for.
var simpleEscapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}
