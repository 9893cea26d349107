package schema_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/schema"
)

// TestOperationSchemasAreSelfContained derives the input and output schema of every API
// operation: each must be an object schema with no reference left and, for inputs, no top-level
// anyOf/oneOf/allOf (some model providers reject them).
func TestOperationSchemasAreSelfContained(t *testing.T) {
	t.Parallel()
	ops, err := schema.Operations()
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if op.Server != schema.ServerAPI {
			continue
		}
		in, err := schema.OperationInput(op.ID)
		if err != nil {
			t.Errorf("%s input: %v", op.ID, err)
			continue
		}
		out, err := schema.OperationOutput(op.ID)
		if err != nil {
			t.Errorf("%s output: %v", op.ID, err)
			continue
		}
		for name, s := range map[string]map[string]any{"input": in, "output": out} {
			raw, _ := json.Marshal(s)
			if strings.Contains(string(raw), `"$ref"`) || strings.Contains(string(raw), `"x-`) {
				t.Errorf("%s %s schema still has a $ref or an extension: %s", op.ID, name, raw)
			}
			if s["type"] != "object" {
				t.Errorf("%s %s schema type = %v, want object", op.ID, name, s["type"])
			}
			if _, err := schema.CompileSchema(op.ID+" "+name, s); err != nil {
				t.Errorf("%s %s: %v", op.ID, name, err)
			}
		}
		for _, k := range []string{"anyOf", "oneOf", "allOf"} {
			if _, ok := in[k]; ok {
				t.Errorf("%s input has top-level %s", op.ID, k)
			}
		}
		props := in["properties"].(map[string]any)
		for _, p := range op.Params {
			if props[p.Name] == nil {
				t.Errorf("%s input lacks parameter %s", op.ID, p.Name)
			}
		}
	}
}

// TestOperationInputValidates checks that a derived input schema keeps the contract's rules for
// both the parameters and the body fields.
func TestOperationInputValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		op, args, want string
	}{
		{"setOpeningLines", `{"roleId":"r1","roleWelcome":"Hello","prologue":[]}`, ""},
		{"setOpeningLines", `{"roleWelcome":5}`, "/: missing property 'roleId'; /roleWelcome: got number, want string"},
		{"setOpeningLines", `{"roleId":"","roleWelcome":"x","extra":true}`, "/: additional properties 'extra' not allowed; /roleId: minLength: got 0, want 1"},
		{"upsertTrialCard", `{"clientKey":"../x","card":{"roleName":"A"}}`, "/clientKey: '../x' does not match pattern '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$'"},
		{"writeWorldbookDocument", `{"worldbookId":"w","entries":[{"op":"create","name":"n","content":"c","keywords":["k"],"matchOptions":{"caseSensitive":true,"matchWholeWords":true,"selectiveLogic":3}}]}`, ""},
		{"writeWorldbookDocument", `{"worldbookId":"w","entries":[{"op":"delete","entryId":"e","name":"n"}]}`, "/entries/0/name: not allowed here"},
		{"listWorldbookEntries", `{"worldbookId":"w","category":"places"}`, ""},
		{"getMe", `{}`, ""},
		{"getMe", `{"x":1}`, "/: additional properties 'x' not allowed"},
	}
	for _, tc := range tests {
		in, err := schema.OperationInput(tc.op)
		if err != nil {
			t.Fatal(err)
		}
		v, err := schema.CompileSchema(tc.op, in)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if err := v.ValidateJSON([]byte(tc.args)); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s %s:\n got  %q\n want %q", tc.op, tc.args, got, tc.want)
		}
	}
}

func TestInlineRefusesUnknownPointer(t *testing.T) {
	t.Parallel()
	if _, err := schema.Inline("#/components/schemas/Nope"); err == nil {
		t.Error("Inline accepted a pointer to nothing")
	}
	if _, err := schema.OperationInput("nope"); err == nil {
		t.Error("OperationInput accepted an unknown operation")
	}
}
