package tools

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzCompactBytes holds compactBytes to json.Compact on valid JSON.
func FuzzCompactBytes(f *testing.F) {
	for _, s := range []string{`{}`, "{\"a\": 1}\n", `{"a":"x y\" z\\"}`, " [1, \"\\u0020\", {\"b\" :null}] ", `"\\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		var want bytes.Buffer
		if err := json.Compact(&want, data); err != nil {
			t.Fatal(err)
		}
		if got := compactBytes(data); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("compactBytes(%q) = %q, want %q", data, got, want.Bytes())
		}
	})
}
