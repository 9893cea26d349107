package schema

import (
	"bytes"
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// toolSchemas is the document of the tool schemas that are not one contract operation (tools.json):
// {"$defs": {...}, "tools": {NAME: {"input": schema, "output": schema}}}. Its $refs point into
// itself ("#/$defs/...") or into the contract ("upstream.openapi.json#/components/schemas/...").
//
//go:embed tools.json
var toolSchemas []byte

// ToolSchemas returns a copy of the embedded tool schemas document.
func ToolSchemas() []byte { return bytes.Clone(toolSchemas) }

var toolsTree = sync.OnceValues(func() (any, error) {
	v, err := DecodeJSON(toolSchemas) // as tree(): numbers as json.Number
	if err != nil {
		return nil, fmt.Errorf("parse tools.json: %w", err)
	}
	return v, nil
})

// ToolNames returns the names of the tools whose schemas tools.json holds, sorted.
func ToolNames() ([]string, error) { return namesIn("tools") }

// namesIn returns the keys of a top-level object of tools.json, sorted, without $comment.
func namesIn(section string) ([]string, error) {
	v, err := toolsDoc.resolve("#/" + section)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("tools.json: %s is not an object", section)
	}
	names := slices.Sorted(maps.Keys(m))
	return slices.DeleteFunc(names, func(k string) bool { return k == "$comment" }), nil
}

// ToolInput returns the input schema of a tool of tools.json, self-contained like OperationInput's:
// every $ref (into tools.json or into the contract) is resolved. It must be an object schema
// without a top-level anyOf, oneOf or allOf (some model providers refuse those).
func ToolInput(name string) (map[string]any, error) {
	s, err := toolSchema(name, "input")
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf", "not", "if"} {
		if _, ok := s[k]; ok {
			return nil, fmt.Errorf("tool input %s: a top-level %s is not allowed; check such rules in the handler", name, k)
		}
	}
	if _, ok := s["properties"].(map[string]any); !ok {
		return nil, fmt.Errorf("tool input %s: no properties", name)
	}
	return s, nil
}

// ToolOutput returns the self-contained output schema of a tool of tools.json, read tolerantly
// like OperationResult's (it holds the service's answers too).
func ToolOutput(name string) (map[string]any, error) {
	s, err := toolSchema(name, "output")
	if err != nil {
		return nil, err
	}
	return Tolerant(s), nil
}

func toolSchema(name, which string) (map[string]any, error) {
	if _, err := toolsDoc.resolve("#/tools/" + escapePointer(name)); err != nil {
		return nil, fmt.Errorf("tool %s %s: tools.json has no tool %q", name, which, name)
	}
	s, err := toolsDoc.inlineAt("#/tools/"+escapePointer(name)+"/"+which, which == "output")
	if err != nil {
		return nil, err
	}
	if s["type"] != "object" {
		return nil, fmt.Errorf("tool %s %s: the schema's type is %v, not object", name, which, s["type"])
	}
	return s, nil
}

// ToolDef returns a self-contained schema of tools.json's $defs, read tolerantly like an
// output's: a shape several tools' results share (the revision a write kept).
func ToolDef(name string) (map[string]any, error) {
	s, err := toolsDoc.inlineAt("#/$defs/"+escapePointer(name), true)
	if err != nil {
		return nil, fmt.Errorf("tools.json $defs/%s: %w", name, err)
	}
	return Tolerant(s), nil
}

// ToolExtension returns what tools.json's extensions add to the schemas of a tool that calls one
// contract operation (paging and search arguments, page fields of the result): the properties
// of its input and of its output, self-contained (the output's read tolerantly). ok is false
// for a tool without extensions.
func ToolExtension(name string) (in, out map[string]any, ok bool, err error) {
	at := "#/extensions/" + escapePointer(name)
	if _, err := toolsDoc.resolve(at); err != nil {
		return nil, nil, false, nil
	}
	props := func(which string, keepMarkers bool) (map[string]any, error) {
		s, err := toolsDoc.inlineAt(at+"/"+which, keepMarkers)
		if err != nil {
			return nil, fmt.Errorf("tool extension %s %s: %w", name, which, err)
		}
		if keepMarkers {
			s = Tolerant(s)
		}
		p, ok := s["properties"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("tool extension %s %s: no properties", name, which)
		}
		return p, nil
	}
	if in, err = props("input", false); err != nil {
		return nil, nil, false, err
	}
	if out, err = props("output", true); err != nil {
		return nil, nil, false, err
	}
	return in, out, true, nil
}

// ExtendedTools returns the names of the tools tools.json extends, sorted.
func ExtendedTools() ([]string, error) { return namesIn("extensions") }
