package schema

import (
	"encoding/json"
	"fmt"
	"testing"
)

// benchDocument is a worldbook document call's arguments: 50 entry updates (~7 KB).
func benchDocument() []byte {
	entries := make([]map[string]any, 50)
	for i := range entries {
		entries[i] = map[string]any{"op": "update", "entryId": fmt.Sprintf("e_%024d", i), "name": fmt.Sprintf("Entry %d", i),
			"content":  fmt.Sprintf("Lore entry %d: the Kestrel's crew keeps a log of every port, every debt and every promise made along the outer ring.", i),
			"keywords": []string{fmt.Sprintf("kw%d", i), "Kestrel"}, "priority": i}
	}
	data, _ := json.Marshal(map[string]any{"worldbookId": "wb_1", "entries": entries})
	return data
}

// BenchmarkDecodeJSON compares DecodeJSON with encoding/json's decoding of the same value.
func BenchmarkDecodeJSON(b *testing.B) {
	data := benchDocument()
	for _, c := range []struct {
		name   string
		decode func([]byte) (any, error)
	}{{"DecodeJSON", DecodeJSON}, {"encoding-json", decodeStd}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := c.decode(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
