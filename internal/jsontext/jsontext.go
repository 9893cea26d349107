// Package jsontext encodes JSON as people read it: <, > and & are written as they are (card text
// is full of them), not as \u003c escapes, and no newline follows the value.
package jsontext

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"unicode/utf8"
)

// Marshal encodes v like json.Marshal, without HTML escaping.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// NonNil returns s, or an empty slice for nil, so that it encodes as [] rather than null.
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Canonical encodes v, a string, a list of strings or an object of strings, as canonical
// JSON (RFC 8785): Marshal sorts the keys and writes no whitespace and no HTML escapes, but
// escapes U+2028 and U+2029, which canonical JSON writes as they are.
func Canonical(v any) ([]byte, error) {
	data, err := Marshal(v)
	if err != nil || !bytes.Contains(data, []byte(`\u202`)) {
		return data, err
	}
	out := make([]byte, 0, len(data))
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' || i+1 >= len(data) {
			out = append(out, data[i])
			continue
		}
		if esc := string(data[i+1 : min(i+6, len(data))]); esc == "u2028" || esc == "u2029" {
			out = utf8.AppendRune(out, 0x2028+rune(esc[4]-'8'))
			i += 5
			continue
		}
		out = append(out, data[i], data[i+1]) // another escape: copied whole, so \\u2028 stays text
		i++
	}
	return out, nil
}

// Digests returns the lowercase hex SHA-256 of each value's Canonical JSON, by name (a trial
// card's sections digests).
func Digests(values map[string]any) (map[string]string, error) {
	out := make(map[string]string, len(values))
	for name, v := range values {
		canon, err := Canonical(v)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(canon)
		out[name] = hex.EncodeToString(sum[:])
	}
	return out, nil
}
