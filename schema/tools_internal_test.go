package schema

import (
	"strings"
	"testing"
)

// TestInlineAcrossDocuments: a $ref names the document it points into (or none, for its own);
// refs inside the contract keep resolving in the contract when reached from tools.json.
func TestInlineAcrossDocuments(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		v    map[string]any
		want string // an error substring; "" for success
	}{
		{"into the contract, whose refs stay in it", map[string]any{"$ref": "upstream.openapi.json#/components/schemas/TrialUpsertInput"}, ""},
		{"into tools.json", map[string]any{"$ref": "tools.json#/$defs/Source"}, ""},
		{"local ref of tools.json", map[string]any{"$ref": "#/$defs/KeptAside"}, ""},
		{"another document", map[string]any{"$ref": "other.json#/x"}, "only upstream.openapi.json and tools.json"},
		{"no fragment", map[string]any{"$ref": "upstream.openapi.json"}, "no #fragment"},
		{"nothing there", map[string]any{"$ref": "#/$defs/Nope"}, `no "Nope"`},
	}
	for _, tt := range tests {
		out, err := inline(tt.v, toolsDoc, nil)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		case tt.want == "" && strings.Contains(strings.ToLower(fmtAny(out)), "$ref"):
			t.Errorf("%s: a $ref is left: %v", tt.name, out)
		}
	}
	// A reference cycle is refused, whichever documents it crosses.
	cyc := map[string]any{"$ref": "#/a"}
	d := &document{name: "tools.json", tree: func() (any, error) { return map[string]any{"a": map[string]any{"$ref": "#/a"}}, nil }}
	if _, err := inline(cyc, d, nil); err == nil || !strings.Contains(err.Error(), "recursive") {
		t.Errorf("cycle: %v", err)
	}
}

func fmtAny(v any) string {
	var sb strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				sb.WriteString(k + " ")
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return sb.String()
}
