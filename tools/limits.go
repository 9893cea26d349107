package tools

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
)

// LargestArgument returns the most bytes one string argument of the given tools may hold (the
// largest maxLength of their input schemas, such as an image's or a card file's base64), so
// that a transport's request cap can be set above it: an argument over its limit is then
// refused by the schema, as a result the model reads, not by the transport.
func LargestArgument(ts []Tool) int64 {
	known := largestArguments()
	var most int64
	for _, t := range ts {
		n, ok := known[t.Name]
		if !ok || !bytes.Equal(n.schema, t.inputSchema) {
			n.most = largestArgument(t.inputSchema)
		}
		most = max(most, n.most)
	}
	return most
}

// largestArguments is the largest argument of each tool of the registry, by name, worked out
// once: the http command asks twice at start, and each answer decoded every input schema
// (encoding/json: 146 KB allocated).
var largestArguments = sync.OnceValue(func() map[string]argumentLimit {
	all, err := registry()
	out := make(map[string]argumentLimit, len(all))
	if err != nil {
		return out
	}
	for _, t := range all {
		out[t.Name] = argumentLimit{t.inputSchema, largestArgument(t.inputSchema)}
	}
	return out
})

// argumentLimit is the largest argument (most) of a tool with the input schema schema.
type argumentLimit struct {
	schema json.RawMessage
	most   int64
}

// largestArgument is the largest maxLength in one input schema.
func largestArgument(inputSchema json.RawMessage) int64 {
	var s any
	if json.Unmarshal(inputSchema, &s) != nil {
		return 0
	}
	return largestMaxLength(s)
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
