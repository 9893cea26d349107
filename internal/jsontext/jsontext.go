// Package jsontext encodes JSON as people read it: <, > and & are written as they are (card text
// is full of them), not as \u003c escapes, and no newline follows the value.
package jsontext

import (
	"bytes"
	"encoding/json"
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
