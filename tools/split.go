package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"unicode/utf8"
)

// members are the top-level members of a JSON object: each key (decoded) with its value as
// written, sorted by key; of duplicate keys only the last is kept, as encoding/json keeps it.
// Splitting an object this way, instead of decoding it into a map[string]json.RawMessage and
// encoding that map again, costs one pass over the arguments and no reflection.
type members []member

type member struct {
	key   string
	plain bool   // the key is printable ASCII written without escapes: it can be copied as is
	value []byte // the value as written (not compacted)
}

// splitObject splits a JSON object into its members. data must be valid JSON (the caller has
// decoded it already); an object is the only value accepted.
func splitObject(data []byte) (members, error) {
	s := scanner{b: data}
	s.space()
	if !s.is('{') {
		return nil, errors.New("not a JSON object")
	}
	s.i++
	var out members
	s.space()
	if s.is('}') {
		s.i++
	} else {
		for {
			if !s.is('"') {
				return nil, errors.New("malformed JSON object")
			}
			start := s.i
			escaped, err := s.skipString()
			if err != nil {
				return nil, err
			}
			rawKey := data[start+1 : s.i-1]
			m := member{key: string(rawKey), plain: !escaped && isPlainASCII(rawKey)}
			if escaped || !utf8.Valid(rawKey) {
				if err := json.Unmarshal(data[start:s.i], &m.key); err != nil {
					return nil, err
				}
			}
			s.space()
			if !s.is(':') {
				return nil, errors.New("malformed JSON object")
			}
			s.i++
			s.space()
			vstart := s.i
			if err := s.skipValue(); err != nil {
				return nil, err
			}
			m.value = data[vstart:s.i]
			out = append(out, m)
			s.space()
			if s.is(',') {
				s.i++
				s.space()
				continue
			}
			if s.is('}') {
				s.i++
				break
			}
			return nil, errors.New("malformed JSON object")
		}
	}
	s.space()
	if s.i != len(data) {
		return nil, errors.New("trailing data after the JSON object")
	}
	// Sort by key, keeping the order of duplicates, then keep the last of each key.
	slices.SortStableFunc(out, func(a, b member) int { return strings.Compare(a.key, b.key) })
	kept := out[:0]
	for i, m := range out {
		if i+1 < len(out) && out[i+1].key == m.key {
			continue
		}
		kept = append(kept, m)
	}
	return kept, nil
}

// take removes the member named key and returns its value.
func (ms *members) take(key string) ([]byte, bool) {
	i, found := slices.BinarySearchFunc(*ms, key, func(m member, k string) int { return strings.Compare(m.key, k) })
	if !found {
		return nil, false
	}
	v := (*ms)[i].value
	*ms = slices.Delete(*ms, i, i+1)
	return v, true
}

// keys returns the keys, sorted.
func (ms members) keys() []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.key
	}
	return out
}

// encode writes the members as one compact JSON object, keys sorted, <, > and & not escaped:
// the bytes encoding/json's Encoder (SetEscapeHTML(false)) writes for a map[string]json.RawMessage.
func (ms members) encode(sizeHint int) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(sizeHint)
	buf.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			buf.WriteByte(',')
		}
		if m.plain {
			buf.WriteByte('"')
			buf.WriteString(m.key)
			buf.WriteByte('"')
		} else {
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(m.key); err != nil {
				return nil, err
			}
			buf.Truncate(buf.Len() - 1) // the Encoder's newline
		}
		buf.WriteByte(':')
		if isCompact(m.value) { // valid JSON: the arguments were decoded before they were split
			buf.Write(m.value)
		} else if err := json.Compact(&buf, m.value); err != nil {
			return nil, err
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// jsonString decodes a JSON string value; anything else is an error.
func jsonString(v []byte) (string, error) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' && bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v) {
		return string(v[1 : len(v)-1]), nil
	}
	var s string
	err := json.Unmarshal(v, &s)
	return s, err
}

// isPlainASCII reports whether a key needs no escaping: printable ASCII other than " and \.
func isPlainASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// scanner walks valid JSON without decoding it.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) is(c byte) bool { return s.i < len(s.b) && s.b[s.i] == c }

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// skipString moves past the string starting at s.i and reports whether it holds escapes.
func (s *scanner) skipString() (escaped bool, err error) {
	for i := s.i + 1; i < len(s.b); i++ {
		switch s.b[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			s.i = i + 1
			return escaped, nil
		}
	}
	return false, errors.New("unterminated JSON string")
}

// skipValue moves past the value starting at s.i.
func (s *scanner) skipValue() error {
	if s.i >= len(s.b) {
		return errors.New("missing JSON value")
	}
	switch s.b[s.i] {
	case '"':
		_, err := s.skipString()
		return err
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if _, err := s.skipString(); err != nil {
					return err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return nil
				}
			}
			s.i++
		}
		return errors.New("unterminated JSON value")
	}
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if s.i == start {
				return errors.New("missing JSON value")
			}
			return nil
		}
		s.i++
	}
	return nil
}
