package schema_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/schema"
)

// TestToolSchemasAreSelfContained derives every schema of tools.json: object schemas with every
// $ref resolved (into tools.json and into the contract), no vendor extension, no top-level
// combinator in an input, and each one compiles.
func TestToolSchemasAreSelfContained(t *testing.T) {
	t.Parallel()
	names, err := schema.ToolNames()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("tools.json has no tools")
	}
	for _, name := range names {
		in, err := schema.ToolInput(name)
		if err != nil {
			t.Errorf("%s input: %v", name, err)
			continue
		}
		out, err := schema.ToolOutput(name)
		if err != nil {
			t.Errorf("%s output: %v", name, err)
			continue
		}
		for which, s := range map[string]map[string]any{"input": in, "output": out} {
			raw, _ := json.Marshal(s)
			if strings.Contains(string(raw), `"$ref"`) || strings.Contains(string(raw), `"x-`) || strings.Contains(string(raw), `"$comment"`) {
				t.Errorf("%s %s schema still has a $ref, an extension or a comment: %s", name, which, raw)
			}
			if _, err := schema.CompileSchema(name+" "+which, s); err != nil {
				t.Errorf("%s %s: %v", name, which, err)
			}
		}
		for _, k := range []string{"anyOf", "oneOf", "allOf"} {
			if _, ok := in[k]; ok {
				t.Errorf("%s input has a top-level %s", name, k)
			}
		}
	}
}

// TestToolSchemasUseTheContract checks that the shapes tools.json $refs come from the contract
// and keep its rules.
func TestToolSchemasUseTheContract(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tool, which, args, want string
	}{
		{"import_tavern_card", "input", `{"source":{"path":"/x.png"},"mode":"trial","clientKey":"ok-1"}`, ""},
		// ClientKey: the contract's pattern.
		{"import_tavern_card", "input", `{"source":{"json":"{}"},"clientKey":"../x"}`, "/clientKey: '../x' does not match pattern"},
		{"import_tavern_card", "input", `{"source":{"json":5,"other":1}}`, "/source: additional properties 'other' not allowed; /source/json: got number, want string or object"},
		{"import_tavern_card", "input", `{"mode":"card"}`, "/: missing property 'source'"},
		// Id: the contract's minLength.
		{"export_tavern_card", "input", `{"roleId":""}`, "/roleId: minLength: got 0, want 1"},
		{"export_tavern_card", "input", `{"roleId":"r","format":"gif"}`, "/format: value must be one of 'json', 'png', 'charx'"},
		{"export_tavern_worldbook", "input", `{"worldbookId":"w","format":"png"}`, "/format: value must be one of 'worldinfo', 'lorebook_v3'"},
		{"export_tavern_worldbook", "input", `{"format":"worldinfo"}`, "/: missing property 'worldbookId'"},
		// The entry's fields and MatchOptions come from the contract; list_worldbook_entries output is accepted.
		{"test_worldbook_triggers", "input", `{"text":"t","entries":[{"entryId":"e","name":"n","content":"c","keywords":["k"],"secondaryKeywords":[],` +
			`"matchOptions":null,"category":"","isEnabled":true,"isConstant":false,"priority":0,"sortOrder":0,"lastUpdateTime":"x","activationCount":0}]}`, ""},
		{"test_worldbook_triggers", "input", `{"text":"t","entries":[{"keywords":["k"],"matchOptions":{"caseSensitive":true,"matchWholeWords":false,"selectiveLogic":4}}]}`,
			"/entries/0/matchOptions/selectiveLogic: maximum: got 4, want 3"},
		{"test_worldbook_triggers", "input", `{"text":"t","entries":[{"keywords":["k"],"op":"create"}]}`, "/entries/0: additional properties 'op' not allowed"},
		{"test_worldbook_triggers", "input", `{"text":"t","format":"neither"}`, "/format: value must be one of 'native', 'tavern'"},
		// The trial summary in import_tavern_card's output is the contract's.
		{"import_tavern_card", "output", `{"mode":"trial","source":{"container":"json","spec":"chara_card_v2"},"roleId":"r","roleName":"n",` +
			`"keptAside":[],"notes":[],"trial":{"clientKey":"k"}}`, "/trial: missing properties 'roleId', 'created', 'expiresAt', 'slots', 'sections', 'changed', 'worldbook'"},
	}
	for _, tt := range tests {
		var s map[string]any
		var err error
		if tt.which == "input" {
			s, err = schema.ToolInput(tt.tool)
		} else {
			s, err = schema.ToolOutput(tt.tool)
		}
		if err != nil {
			t.Fatal(err)
		}
		v, err := schema.CompileSchema(tt.tool, s)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if err := v.ValidateJSON([]byte(tt.args)); err != nil {
			got = err.Error()
		}
		if got != tt.want && (tt.want == "" || !strings.HasPrefix(got, tt.want)) {
			t.Errorf("%s %s %s:\n got  %q\n want %q", tt.tool, tt.which, tt.args, got, tt.want)
		}
	}
}

func TestToolSchemaErrors(t *testing.T) {
	t.Parallel()
	if _, err := schema.ToolInput("no_such_tool"); err == nil || !strings.Contains(err.Error(), "no tool") {
		t.Errorf("unknown tool: %v", err)
	}
	if _, err := schema.ToolOutput("no_such_tool"); err == nil {
		t.Error("ToolOutput accepted an unknown tool")
	}
	if !json.Valid(schema.ToolSchemas()) {
		t.Error("tools.json is not JSON")
	}
}
