package schema

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestTolerant(t *testing.T) {
	t.Parallel()
	tests := []schemaCase{
		{"closed object opens", `{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string"}}}`,
			`{"type":"object","properties":{"a":{"type":"string"}}}`},
		{"value constraints go, types stay", `{"type":"string","pattern":"^[0-9a-f]{64}$","format":"date-time","minLength":1,"enum":["a"]}`,
			`{"type":"string"}`},
		{"a const keeps its type", `{"const":true}`, `{"type":"boolean"}`},
		{"an enum without a type gives its types", `{"enum":["a",null]}`, `{"type":["string","null"]}`},
		{"a property named like a keyword stays", `{"type":"object","properties":{"format":{"type":"string","enum":["native"]},"pattern":{"type":"string"}}}`,
			`{"type":"object","properties":{"format":{"type":"string"},"pattern":{"type":"string"}}}`},
		{"an assumed object requires only what is needed", `{"x-assumed":true,"x-needed":["id"],"type":"object","required":["id","url"],"properties":{"id":{"type":"string"},"url":{"type":"string"}}}`,
			`{"type":"object","required":["id"],"properties":{"id":{"type":"string"},"url":{"type":"string"}}}`},
		{"an assumed object with nothing needed requires nothing", `{"x-assumed":true,"type":"object","required":["a"]}`, `{"type":"object"}`},
		{"a shown object keeps its required", `{"type":"object","required":["a"]}`, `{"type":"object","required":["a"]}`},
		{"oneOf becomes anyOf, deep", `{"type":"array","items":{"oneOf":[{"type":"null"},{"type":"object","additionalProperties":false,"properties":{"n":{"type":"integer","maximum":3}}}]}}`,
			`{"type":"array","items":{"anyOf":[{"type":"null"},{"type":"object","properties":{"n":{"type":"integer"}}}]}}`},
		{"a schema of further properties is relaxed too", `{"type":"object","additionalProperties":{"type":"string","pattern":"x"}}`,
			`{"type":"object","additionalProperties":{"type":"string"}}`},
		{"examples are not schemas", `{"type":"object","examples":[{"format":"png"}]}`, `{"type":"object","examples":[{"format":"png"}]}`},
	}
	checkTransform(t, "Tolerant", Tolerant, tests)
}

// schemaCase is one schema transformation: from in to want (JSON).
type schemaCase struct{ name, in, want string }

// checkTransform runs the cases of a schema transformation.
func checkTransform(t *testing.T, name string, f func(map[string]any) map[string]any, tests []schemaCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var in, want map[string]any
			if err := json.Unmarshal([]byte(tt.in), &in); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			if got := f(in); !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				t.Errorf("%s(%s)\n got %s\nwant %s", name, tt.in, g, tt.want)
			}
		})
	}
}

// TestOperationResultAck: an Ack operation's result is the ids it acted on and ok, beside the
// answer's fields, whatever the contract guessed the answer to be.
func TestOperationResultAck(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"setOpeningLines", "setCardVisibility", "deleteTrialCard", "publishCard"} {
		s, err := OperationResult(id)
		if err != nil {
			t.Fatal(err)
		}
		op, _ := Lookup(id)
		if !op.Ack {
			t.Fatalf("%s is not x-ack", id)
		}
		v, err := CompileSchema(id, s)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]any{"ok": true}
		for _, p := range op.Params {
			ids[p.Name] = "x-1"
		}
		if err := v.Validate(ids); err != nil {
			t.Errorf("%s: the ids and ok alone fail: %v", id, err)
		}
		delete(ids, "ok")
		if err := v.Validate(ids); err == nil {
			t.Errorf("%s: a result without ok passes", id)
		}
	}
}

func TestPortable(t *testing.T) {
	t.Parallel()
	tests := []schemaCase{
		{"bare booleans in subschema places", `{"type":"object","properties":{"a":true,"b":false},"items":true,"additionalProperties":false}`,
			`{"type":"object","properties":{"a":{},"b":{"not":{}}},"items":{},"additionalProperties":false}`},
		// The object keywords move into the object branch (ajv warns of them beside an anyOf
		// with no type); the others stay.
		{"a type list becomes anyOf", `{"type":["object","null"],"description":"d","properties":{"x":{"type":"string"}},"required":["x"]}`,
			`{"anyOf":[{"properties":{"x":{"type":"string"}},"required":["x"],"type":"object"},{"type":"null"}],"description":"d"}`},
		{"number keywords go to integer branches too", `{"type":["integer","string","null"],"minimum":1,"maxLength":4}`,
			`{"anyOf":[{"minimum":1,"type":"integer"},{"maxLength":4,"type":"string"},{"type":"null"}]}`},
		{"beside an anyOf", `{"type":["string","number"],"anyOf":[{"minLength":1},{"minimum":1}]}`,
			`{"allOf":[{"anyOf":[{"minLength":1},{"minimum":1}]},{"anyOf":[{"type":"string"},{"type":"number"}]}]}`},
		{"deep, in then and allOf", `{"allOf":[{"if":{"properties":{"op":{"const":"delete"}}},"then":{"properties":{"name":false}}}]}`,
			`{"allOf":[{"if":{"properties":{"op":{"const":"delete"}}},"then":{"properties":{"name":{"not":{}}}}}]}`},
	}
	checkTransform(t, "Portable", Portable, tests)
}

func TestPortableFoldsPlaceholders(t *testing.T) {
	t.Parallel()
	in := map[string]any{}
	_ = json.Unmarshal([]byte(`{"type":"object","additionalProperties":false,
		"allOf":[{"type":"object","description":"fields","properties":{"name":{"type":"string"},"n":{"type":"integer"}}},{"if":{"required":["x"]},"then":{"required":["name"]}}],
		"properties":{"name":true,"n":true,"id":{"type":"string"}}}`), &in)
	var want map[string]any
	_ = json.Unmarshal([]byte(`{"type":"object","additionalProperties":false,
		"allOf":[{"if":{"required":["x"]},"then":{"required":["name"]}}],
		"properties":{"name":{"type":"string"},"n":{"type":"integer"},"id":{"type":"string"}}}`), &want)
	if got := Portable(in); !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		t.Errorf("got %s", g)
	}
}

// TestUndescribed: descriptions go, a property named description and instance values stay.
func TestUndescribed(t *testing.T) {
	t.Parallel()
	in := map[string]any{"type": "object", "description": "d", "properties": map[string]any{
		"description": map[string]any{"type": "string", "description": "a property so named"},
		"kind":        map[string]any{"const": map[string]any{"description": "x"}, "description": "k"},
	}, "anyOf": []any{map[string]any{"description": "b", "type": "object"}}}
	got, _ := json.Marshal(Undescribed(in))
	want := `{"anyOf":[{"type":"object"}],"properties":{"description":{"type":"string"},"kind":{"const":{"description":"x"}}},"type":"object"}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
