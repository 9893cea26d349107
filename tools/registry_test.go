package tools

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

var update = flag.Bool("update", false, "rewrite the README's tool table from the registry")

var readOnlyName = regexp.MustCompile(`^(get_|list_)|^whoami$|^validate_card$|^review_card$|^export_tavern_(card|worldbook)$|^test_worldbook_triggers$|^preview_prompt$|^diff_revision$`)

// TestRegistry checks every tool of the registry, the way github-mcp-server's
// tools_validation_test checks its own.
func TestRegistry(t *testing.T) {
	t.Parallel()
	all := All()
	names := map[string]bool{}
	for _, tool := range all {
		t.Run(tool.Name, func(t *testing.T) {
			t.Parallel()
			if !regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`).MatchString(tool.Name) {
				t.Errorf("name %q is not snake_case", tool.Name)
			}
			if tool.Title == "" {
				t.Error("no title")
			}
			if !slices.Contains(Toolsets(), tool.Toolset) {
				t.Errorf("toolset %q is not one of %v", tool.Toolset, Toolsets())
			}
			checkDescription(t, tool)
			a := tool.Annotations
			for hint, v := range map[string]*bool{"readOnlyHint": a.ReadOnlyHint, "destructiveHint": a.DestructiveHint,
				"idempotentHint": a.IdempotentHint, "openWorldHint": a.OpenWorldHint} {
				if v == nil {
					t.Errorf("%s is not set", hint)
				}
			}
			if t.Failed() {
				return
			}
			if want := readOnlyName.MatchString(tool.Name); *a.ReadOnlyHint != want {
				t.Errorf("readOnlyHint = %v, want %v (true exactly for get_*, list_*, whoami, validate_card, export_tavern_card, export_tavern_worldbook, test_worldbook_triggers, preview_prompt, diff_revision)", *a.ReadOnlyHint, want)
			}
			if *a.ReadOnlyHint && *a.DestructiveHint {
				t.Error("a read-only tool is marked destructive")
			}
			if !*a.OpenWorldHint {
				t.Error("openWorldHint is false, but every tool calls the card service")
			}
			checkInputSchema(t, tool)
			var out map[string]any
			if err := json.Unmarshal(tool.OutputSchema(), &out); err != nil {
				t.Fatal(err)
			}
			if out["type"] != "object" {
				t.Errorf("output schema type = %v, want object", out["type"])
			}
			if strings.Contains(string(tool.OutputSchema()), `"$ref"`) {
				t.Error("output schema contains $ref")
			}
		})
		if names[tool.Name] {
			t.Errorf("tool %s is defined twice", tool.Name)
		}
		names[tool.Name] = true
	}

	// Every open API operation of the contract is the Operation of exactly one tool, and every
	// tool without one has its schemas in schema/tools.json (and tools.json no others).
	ops, err := schema.Operations()
	if err != nil {
		t.Fatal(err)
	}
	uses := map[string][]string{}
	var composite []string
	for _, tool := range all {
		if tool.Operation == "" {
			composite = append(composite, tool.Name)
			continue
		}
		uses[tool.Operation] = append(uses[tool.Operation], tool.Name)
	}
	meta, err := (&dynamicToolsets{}).metaTools() // served with dynamic toolsets only
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range meta {
		composite = append(composite, tool.Name)
	}
	inDoc, err := schema.ToolNames()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(composite)
	if !slices.Equal(composite, inDoc) {
		t.Errorf("tools without an Operation %v, tools of schema/tools.json %v: want the same", composite, inDoc)
	}
	for _, op := range ops {
		if op.Server != schema.ServerAPI {
			continue
		}
		if n := len(uses[op.ID]); n != 1 {
			t.Errorf("operation %s is used by %d tools %v, want exactly 1", op.ID, n, uses[op.ID])
		}
		delete(uses, op.ID)
	}
	for op, by := range uses {
		t.Errorf("tools %v call %s, which is not an open API operation", by, op)
	}
}

// checkDescription wants a description that ends with one example call, which must pass the
// tool's input schema; a tool that requires at most one argument, which its schema names, may
// leave the example out (tools/list is paid on every turn: issue 22).
func checkDescription(t *testing.T, tool Tool) {
	t.Helper()
	before, example, found := strings.Cut(tool.Description, "Example: ")
	if !found {
		var in struct {
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(tool.InputSchema(), &in); err != nil {
			t.Fatal(err)
		}
		if len(in.Required) > 1 {
			t.Fatalf("the description has no \"Example: {json}\", and the tool requires %v", in.Required)
		}
		before, example = tool.Description, ""
	}
	if len(strings.TrimSpace(before)) < 40 {
		t.Errorf("the description is too short to help a model: %q", before)
	}
	if !strings.HasSuffix(firstSentence(tool.Description), ".") {
		t.Errorf("the first sentence %q does not end with a period (it is the README's summary)", firstSentence(tool.Description))
	}
	if example == "" {
		return
	}
	if err := tool.input.ValidateJSON([]byte(example)); err != nil {
		t.Errorf("the example %s fails the input schema: %v", example, err)
	}
}

// checkInputSchema wants type object at the top, no top-level combinators and no $ref anywhere.
func checkInputSchema(t *testing.T, tool Tool) {
	t.Helper()
	var in map[string]any
	if err := json.Unmarshal(tool.InputSchema(), &in); err != nil {
		t.Fatal(err)
	}
	if in["type"] != "object" {
		t.Errorf("input schema type = %v, want object", in["type"])
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf", "not", "if"} {
		if _, ok := in[k]; ok {
			t.Errorf("input schema has a top-level %s", k)
		}
	}
	if strings.Contains(string(tool.InputSchema()), `"$ref"`) {
		t.Error("input schema contains $ref")
	}
	if _, ok := in["properties"].(map[string]any); !ok {
		t.Error("input schema has no properties object")
	}
}

// TestToolsnaps compares every tool's advertised definition with its snapshot in
// __toolsnaps__, so that any change to the tool surface is deliberate.
func TestToolsnaps(t *testing.T) {
	t.Parallel()
	const dir = "__toolsnaps__"
	updating := os.Getenv("UPDATE_TOOLSNAPS") == "true"
	if updating {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]bool{}
	for _, tool := range All() {
		file := filepath.Join(dir, tool.Name+".snap")
		want[file] = true
		got, err := snapshot(tool)
		if err != nil {
			t.Fatal(err)
		}
		if updating {
			if err := os.WriteFile(file, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		old, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: no snapshot (%v); create it with: UPDATE_TOOLSNAPS=true go test ./tools", tool.Name, err)
			continue
		}
		if !bytes.Equal(old, got) {
			t.Errorf("%s: the tool differs from %s; if the change is meant, update it with: UPDATE_TOOLSNAPS=true go test ./tools\n--- snapshot\n%s\n+++ now\n%s",
				tool.Name, file, old, got)
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.snap"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if want[f] {
			continue
		}
		if updating {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s is the snapshot of a tool that no longer exists; remove it, or run: UPDATE_TOOLSNAPS=true go test ./tools", f)
	}
}

// snapshot renders what tools/list advertises for a tool, indented, with sorted keys.
func snapshot(tool Tool) ([]byte, error) {
	data, err := json.Marshal(tool.MCPTool())
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

func TestMarkdownTable(t *testing.T) {
	t.Parallel()
	table := MarkdownTable(All())
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if got, want := len(lines), len(All())+2; got != want {
		t.Fatalf("%d lines, want %d:\n%s", got, want, table)
	}
	for _, want := range []string{
		"| `get_card` | cards | yes | Get one card's full detail by roleId. |",
		"| `create_card` | authoring | no | Create a new, empty private card and return its roleId. |",
		"| `delete_trial_card` | trial | no |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
}

const (
	tableBegin = "<!-- tools:begin -->"
	tableEnd   = "<!-- tools:end -->"
)

// TestReadmeToolTable fails when the README's tool table differs from the registry.
func TestReadmeToolTable(t *testing.T) {
	const readme = "../README.md"
	const regenerate = "regenerate it with: go test ./tools -run TestReadmeToolTable -update"
	data, err := os.ReadFile(readme)
	if err != nil {
		t.Fatalf("read %s: %v; the README must hold the tool table between %s and %s (%s)", readme, err, tableBegin, tableEnd, regenerate)
	}
	doc := string(data)
	begin := strings.Index(doc, tableBegin)
	end := strings.Index(doc, tableEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s has no %s ... %s block; add the two markers where the tool table goes, then %s", readme, tableBegin, tableEnd, regenerate)
	}
	want := "\n" + MarkdownTable(All())
	got := doc[begin+len(tableBegin) : end]
	if got == want {
		return
	}
	if *update {
		doc = doc[:begin+len(tableBegin)] + want + doc[end:]
		if err := os.WriteFile(readme, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the tool table in %s is out of date; %s\n--- README\n%s\n+++ registry\n%s", readme, regenerate, got, want)
}

func TestFilter(t *testing.T) {
	t.Parallel()
	all := All()
	names := func(ts []Tool) []string {
		var out []string
		for _, tool := range ts {
			out = append(out, tool.Name)
		}
		return out
	}
	var readOnly, trial []string
	for _, tool := range all {
		if tool.ReadOnly() {
			readOnly = append(readOnly, tool.Name)
		}
		if tool.Toolset == ToolsetTrial {
			trial = append(trial, tool.Name)
		}
	}
	tests := []struct {
		name    string
		filter  Filter
		want    []string
		wantErr []string // substrings of the error
	}{
		{name: "zero value selects all", want: names(all)},
		{name: "all toolset", filter: Filter{Toolsets: []string{"all"}}, want: names(all)},
		{name: "one toolset", filter: Filter{Toolsets: []string{"trial"}}, want: trial},
		{name: "two toolsets", filter: Filter{Toolsets: []string{"cards", "trial"}},
			want: append([]string{"get_card", "whoami"}, trial...)},
		{name: "tools only", filter: Filter{Tools: []string{"whoami", "create_card"}}, want: []string{"whoami", "create_card"}},
		{name: "toolset plus tool", filter: Filter{Toolsets: []string{"cards"}, Tools: []string{"validate_card"}},
			want: []string{"get_card", "whoami", "validate_card"}},
		{name: "read-only", filter: Filter{ReadOnly: true}, want: readOnly},
		{name: "read-only toolset", filter: Filter{Toolsets: []string{"authoring"}, ReadOnly: true},
			want: []string{"validate_card", "list_card_assets", "review_card"}},
		{name: "read-only drops a named write tool", filter: Filter{Tools: []string{"create_card", "get_card"}, ReadOnly: true},
			want: []string{"get_card"}},
		{name: "unknown toolset", filter: Filter{Toolsets: []string{"cards", "tavernx"}},
			wantErr: []string{"unknown toolset tavernx", "valid toolsets: all, cards, authoring, worldbook, trial"}},
		{name: "unknown tool", filter: Filter{Tools: []string{"make_card"}},
			wantErr: []string{"unknown tool make_card", "valid tools: get_card, whoami, create_card"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.filter.Apply(all)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("no error; got %v", names(got))
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names(got), tt.want) {
				t.Errorf("got %v, want %v", names(got), tt.want)
			}
		})
	}
}

// TestInstructionsNameRealTools checks that every snake_case name in the default server
// instructions is a tool or a prompt.
func TestInstructionsNameRealTools(t *testing.T) {
	t.Parallel()
	known := map[string]bool{}
	for _, tool := range All() {
		known[tool.Name] = true
	}
	for _, p := range prompts {
		known[p.name] = true
	}
	names := regexp.MustCompile(`\b[a-z]+(?:_[a-z]+)+\b`).FindAllString(defaultInstructions, -1)
	if len(names) < 5 {
		t.Fatalf("the instructions name only %v", names)
	}
	for _, n := range names {
		if !known[n] {
			t.Errorf("the instructions name %s, which is neither a tool nor a prompt", n)
		}
	}
}

// TestLimitsAgree: the schemas' limits on base64 arguments are the limits the handlers apply.
func TestLimitsAgree(t *testing.T) {
	t.Parallel()
	tools := map[string]Tool{}
	for _, tool := range All() {
		tools[tool.Name] = tool
	}
	maxLength := func(tool string, path ...string) int64 {
		var s any
		if err := json.Unmarshal(tools[tool].InputSchema(), &s); err != nil {
			t.Fatal(err)
		}
		for _, p := range path {
			s = s.(map[string]any)["properties"].(map[string]any)[p]
		}
		return int64(s.(map[string]any)["maxLength"].(float64))
	}
	if got, want := maxLength("upload_image", "dataBase64"), int64(base64.StdEncoding.EncodedLen(maxUploadBytes)); got != want {
		t.Errorf("upload_image dataBase64 maxLength %d; the handlers' limit %d", got, want)
	}
	if got, want := maxLength("import_tavern_card", "source", "dataBase64"), int64(base64.StdEncoding.EncodedLen(tavern.MaxInputSize)); got != want {
		t.Errorf("import_tavern_card source.dataBase64 maxLength %d; tavern.MaxInputSize as base64 %d", got, want)
	}
	if got := LargestArgument(All()); got != int64(base64.StdEncoding.EncodedLen(tavern.MaxInputSize)) {
		t.Errorf("LargestArgument = %d", got)
	}
}

// TestSchemasPortable: no advertised schema holds a bare boolean where a subschema goes or a
// list of types (forms some clients and providers refuse; the MCP Inspector's --strict check
// flags them).
func TestSchemasPortable(t *testing.T) {
	t.Parallel()
	var walk func(tool, path string, v any)
	walk = func(tool, path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if _, ok := x["type"].([]any); ok {
				t.Errorf("%s %s: a list of types", tool, path)
			}
			for k, e := range x {
				switch k {
				case "properties", "patternProperties", "$defs":
					for name, ps := range e.(map[string]any) {
						if _, ok := ps.(bool); ok {
							t.Errorf("%s %s/%s/%s: a bare boolean", tool, path, k, name)
						}
						walk(tool, path+"/"+k+"/"+name, ps)
					}
				case "items", "not", "if", "then", "else":
					if _, ok := e.(bool); ok {
						t.Errorf("%s %s/%s: a bare boolean", tool, path, k)
					}
					walk(tool, path+"/"+k, e)
				case "examples", "default", "const", "enum":
				default:
					walk(tool, path+"/"+k, e)
				}
			}
		case []any:
			for i, e := range x {
				walk(tool, fmt.Sprintf("%s/%d", path, i), e)
			}
		}
	}
	for _, tool := range All() {
		for name, raw := range map[string]json.RawMessage{"input": tool.InputSchema(), "output": tool.OutputSchema()} {
			var s any
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatal(err)
			}
			walk(tool.Name, name, s)
		}
	}
}
