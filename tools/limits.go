package tools

import (
	"encoding/json"
	"strconv"
)

// LargestArgument returns the most bytes one string argument of the given tools may hold (the
// largest maxLength of their input schemas, such as an image's or a card file's base64), so
// that a transport's request cap can be set above it: an argument over its limit is then
// refused by the schema, as a result the model reads, not by the transport.
func LargestArgument(ts []Tool) int64 {
	var most int64
	for _, t := range ts {
		var s any
		if json.Unmarshal(t.inputSchema, &s) == nil {
			most = max(most, largestMaxLength(s))
		}
	}
	return most
}

func largestMaxLength(v any) int64 {
	var most int64
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if n, ok := e.(float64); ok && k == "maxLength" {
				most = max(most, int64(n))
				continue
			}
			most = max(most, largestMaxLength(e))
		}
	case []any:
		for _, e := range x {
			most = max(most, largestMaxLength(e))
		}
	}
	return most
}

// sizeName renders a byte count for people: "8 MiB", "44.7 MB" or "512 bytes".
func sizeName(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1_000_000:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + " MB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
