package tools

import (
	"bytes"
	"encoding/json"
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

const (
	// DefaultArgumentBytes is the most bytes of JSON one argument takes when its schema carries
	// no file or image: room for a worldbook document of 500 entries of 8 KB.
	DefaultArgumentBytes = 4 << 20
	// DefaultArgumentsBytes is the most bytes of JSON a tool's arguments take together, besides
	// the files and images among them.
	DefaultArgumentsBytes = 8 << 20
)

// ArgumentLimits are the size limits of each tool's arguments as JSON, from the input schemas:
// an argument whose schema allows a long string (a file or an image as base64) gets that
// length, plus room for JSON escapes; every other argument DefaultArgumentBytes; the arguments
// together DefaultArgumentsBytes plus their files' limits. A transport checks them before the
// arguments are decoded (internal/msglimit).
type ArgumentLimits struct {
	large map[string]map[string]int64 // tool -> argument -> limit, for the arguments over the default
}

// NewArgumentLimits works out the limits of the tools ts.
func NewArgumentLimits(ts []Tool) *ArgumentLimits {
	a := &ArgumentLimits{large: map[string]map[string]int64{}}
	for _, t := range ts {
		var s struct {
			Properties map[string]any `json:"properties"`
		}
		if json.Unmarshal(t.inputSchema, &s) != nil {
			continue
		}
		for name, p := range s.Properties {
			n := largestMaxLength(p)
			// A string's maxLength counts characters; as JSON, a base64 text may have its
			// slashes escaped (\/) and a text its characters as \u escapes: room for some.
			if most := n + n/16 + 64<<10; most > DefaultArgumentBytes {
				if a.large[t.Name] == nil {
					a.large[t.Name] = map[string]int64{}
				}
				a.large[t.Name][name] = most
			}
		}
	}
	return a
}

// Argument returns the most bytes of JSON the argument name of tool may take.
func (a *ArgumentLimits) Argument(tool, name string) int64 {
	if n, ok := a.large[tool][name]; ok {
		return n
	}
	return DefaultArgumentBytes
}

// Arguments returns the most bytes of JSON the arguments of tool may take together.
func (a *ArgumentLimits) Arguments(tool string) int64 {
	most := int64(DefaultArgumentsBytes)
	for _, n := range a.large[tool] {
		most += n
	}
	return most
}
