package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Table is the operations a client calls: the embedded contract's, or those with a user's
// corrections applied (LoadOverride). The tools derive their schemas from the embedded contract
// whatever the table; a table changes what goes to the card service (method, path, where each
// parameter goes) and what its answers are expected to be.
type Table struct {
	ops  []Operation
	doc  []byte // the document the operations' pointers point into
	note string // where the corrections came from, "" for the embedded contract
	// warnings name the corrections of operations the API document shows (see LoadOverride).
	warnings []string

	compileOnce sync.Once
	compiler    *jsonschema.Compiler
	compileErr  error
	mu          sync.Mutex
	compiled    map[string]*Validator
}

var embeddedTable = sync.OnceValues(func() (*Table, error) {
	ops, err := Operations()
	if err != nil {
		return nil, err
	}
	return &Table{ops: ops, doc: contract}, nil
})

// Embedded returns the table of the embedded contract.
func Embedded() *Table {
	t, err := embeddedTable()
	if err != nil {
		panic(err) // the contract is embedded: a build defect, caught by the schema tests
	}
	return t
}

// Lookup returns the operation with the given operationId.
func (t *Table) Lookup(id string) (Operation, bool) {
	for _, o := range t.ops {
		if o.ID == id {
			return o, true
		}
	}
	return Operation{}, false
}

// Operations returns the table's operations, sorted by path then method.
func (t *Table) Operations() []Operation { return slices.Clone(t.ops) }

// Warnings name the corrections the table makes to operations the API document shows: allowed,
// since the real service may differ from its document, but worth saying.
func (t *Table) Warnings() []string { return slices.Clone(t.warnings) }

// Source says where the table's corrections came from: "" for the embedded contract.
func (t *Table) Source() string { return t.note }

// Compile returns the validator of the schema at pointer in the table's document (the
// embedded contract with the corrections merged in).
func (t *Table) Compile(pointer string) (*Validator, error) {
	if t.note == "" {
		return Compile(pointer)
	}
	t.compileOnce.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(t.doc))
		if err != nil {
			t.compileErr = err
			return
		}
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		if err := c.AddResource(ContractURL, doc); err != nil {
			t.compileErr = err
			return
		}
		t.compiler, t.compiled = c, map[string]*Validator{}
	})
	if t.compileErr != nil {
		return nil, fmt.Errorf("compile schema %s: %w", pointer, t.compileErr)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.compiled[pointer]; ok {
		return v, nil
	}
	s, err := t.compiler.Compile(ContractURL + pointer)
	if err != nil {
		return nil, fmt.Errorf("compile schema %s: %w", pointer, err)
	}
	v := &Validator{pointer: pointer, schema: s}
	t.compiled[pointer] = v
	return v, nil
}

// Inline returns the schema at pointer in the table's document, self-contained (see Inline).
func (t *Table) Inline(pointer string) (map[string]any, error) {
	if t.note == "" {
		return Inline(pointer)
	}
	d := &document{name: contractDoc.name, tree: sync.OnceValues(func() (any, error) { return DecodeJSON(t.doc) })}
	return d.inlineAt(pointer, false)
}

// OverrideError is a contract override that cannot be applied; Problems name each thing wrong.
type OverrideError struct {
	Source   string
	Problems []string
}

func (e *OverrideError) Error() string {
	return fmt.Sprintf("contract override %s: %s", e.Source, strings.Join(e.Problems, "; "))
}

var pathVar = regexp.MustCompile(`\{([^{}]*)\}`)

// LoadOverride applies the OpenAPI document data (named source in messages) to the embedded
// contract, operation by operation: each operation it has, found by operationId, replaces the
// embedded one of that id (method, path, parameters, request body, responses), and the schemas,
// parameters and responses under its components are added to the contract's or replace them.
// The document may be a whole copy of the contract: what it holds unchanged (operations,
// path-level fields, components of other kinds) is passed over. An operation the API document
// shows (not x-assumed) may be corrected too, and the table's Warnings name it; the OAuth
// operations may not (sign-in endpoints come from the service's metadata). The parameters must
// keep the names the tools fill (in the path or the query), so that the tools keep their inputs.
// Every problem found is reported in one *OverrideError.
func LoadOverride(source string, data []byte) (*Table, error) {
	fail := func(problems ...string) (*Table, error) {
		return nil, &OverrideError{Source: source, Problems: problems}
	}
	var over map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&over); err != nil {
		return fail(describeJSONError(data, err))
	}
	var base map[string]any
	dec = json.NewDecoder(bytes.NewReader(contract))
	dec.UseNumber()
	if err := dec.Decode(&base); err != nil {
		return nil, fmt.Errorf("parse contract: %w", err)
	}
	var problems []string
	if v, ok := over["openapi"].(string); !ok || !strings.HasPrefix(v, "3.1") {
		problems = append(problems, `"openapi" must be "3.1.x" (an OpenAPI 3.1 document)`)
	}
	paths, _ := over["paths"].(map[string]any)
	if len(paths) == 0 {
		problems = append(problems, `"paths" holds no operation to override`)
	}
	// Components first: operations may $ref what the override adds.
	if comps, ok := over["components"].(map[string]any); ok {
		baseComps := base["components"].(map[string]any)
		for _, kind := range slices.Sorted(maps.Keys(comps)) {
			m, ok := comps[kind].(map[string]any)
			if !ok {
				problems = append(problems, fmt.Sprintf("components.%s must be an object", kind))
				continue
			}
			switch {
			case kind == "schemas" || kind == "parameters" || kind == "responses":
			case sameJSON(m, baseComps[kind]):
				continue // a whole copy's: unchanged
			default:
				problems = append(problems, fmt.Sprintf("components.%s: only schemas, parameters and responses can be overridden", kind))
				continue
			}
			target, _ := baseComps[kind].(map[string]any)
			if target == nil {
				target = map[string]any{}
				baseComps[kind] = target
			}
			maps.Copy(target, m)
		}
	}
	embedded := Embedded()
	basePaths := base["paths"].(map[string]any)
	original := maps.Clone(basePaths) // the path items before any operation moves
	seen := map[string]bool{}
	var warnings []string
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		item, ok := paths[p].(map[string]any)
		if !ok {
			problems = append(problems, fmt.Sprintf("paths[%q] must be an object", p))
			continue
		}
		if !strings.HasPrefix(p, "/") {
			problems = append(problems, fmt.Sprintf("path %q must start with /", p))
		}
		for _, method := range slices.Sorted(maps.Keys(item)) {
			if !slices.Contains(methods, method) {
				if baseItem, ok := original[p].(map[string]any); ok && sameJSON(item[method], baseItem[method]) {
					continue // a whole copy's path-level field, unchanged
				}
			}
			if method == "parameters" || method == "summary" || method == "description" {
				problems = append(problems, fmt.Sprintf("paths[%q].%s: give parameters on each operation", p, method))
				continue
			}
			opRaw, ok := item[method].(map[string]any)
			if !slices.Contains(methods, method) || !ok {
				problems = append(problems, fmt.Sprintf("paths[%q].%s: not an HTTP method of an operation (get, put, post, patch, delete)", p, method))
				continue
			}
			id, _ := opRaw["operationId"].(string)
			old, found := embedded.Lookup(id)
			switch {
			case id == "":
				problems = append(problems, fmt.Sprintf("%s %s: no operationId (it names the operation to override)", strings.ToUpper(method), p))
				continue
			case !found:
				problems = append(problems, fmt.Sprintf("%s %s: the contract has no operation %q (operations: %s)", strings.ToUpper(method), p, id, strings.Join(operationIDs(embedded), ", ")))
				continue
			case p == old.Path && method == strings.ToLower(old.Method) && sameJSON(opRaw, operationRaw(contract, old)):
				continue // a whole copy's: unchanged
			case old.Server != ServerAPI:
				problems = append(problems, fmt.Sprintf("%s: an OAuth operation; sign-in endpoints come from the service's metadata, not from here", id))
				continue
			case seen[id]:
				problems = append(problems, fmt.Sprintf("%s: overridden twice", id))
				continue
			}
			seen[id] = true
			if !old.Assumed {
				warnings = append(warnings, fmt.Sprintf("%s is shown by the API document; corrected to %s %s all the same", id, strings.ToUpper(method), p))
			}
			problems = append(problems, checkOverrideOp(id, p, opRaw, old, base)...)
			// Move the operation: drop the embedded one, put the override's in its place.
			removeOperation(basePaths, old)
			target, _ := basePaths[p].(map[string]any)
			if target == nil {
				target = map[string]any{}
				basePaths[p] = target
			}
			if _, taken := target[method]; taken {
				problems = append(problems, fmt.Sprintf("%s: %s %s is another operation of the contract", id, strings.ToUpper(method), p))
				continue
			}
			merged := maps.Clone(opRaw)
			// Keep what the client relies on unless the override says otherwise.
			for _, k := range []string{"x-assumed", "x-idempotent", "x-idempotency-key", "x-ack", "security"} {
				if _, has := merged[k]; !has {
					if v, ok := operationRaw(contract, old)[k]; ok {
						merged[k] = v
					}
				}
			}
			if _, has := merged["responses"]; !has {
				merged["responses"] = operationRaw(contract, old)["responses"]
			}
			target[method] = merged
		}
	}
	if len(seen) == 0 && len(problems) == 0 && len(paths) > 0 {
		problems = append(problems, `"paths" holds no operation that differs from the contract's`)
	}
	if len(problems) > 0 {
		return fail(problems...)
	}
	doc, err := json.Marshal(base)
	if err != nil {
		return nil, fmt.Errorf("contract override %s: %w", source, err)
	}
	ops, err := parseOperations(doc)
	if err != nil {
		return fail(err.Error())
	}
	sort.Strings(warnings)
	t := &Table{ops: ops, doc: doc, note: source, warnings: warnings}
	// Every schema the corrected operations point at must resolve and compile.
	for id := range seen {
		op, _ := t.Lookup(id)
		for _, p := range op.Params {
			if _, err := t.Compile(p.Schema); err != nil {
				problems = append(problems, fmt.Sprintf("%s: parameter %s: %v", id, p.Name, err))
			}
		}
		if op.Body != nil {
			if _, err := t.Compile(op.Body.Schema); err != nil {
				problems = append(problems, fmt.Sprintf("%s: request body: %v", id, err))
			}
		}
		for _, r := range op.Responses {
			if r.Schema == "" {
				continue
			}
			if _, err := t.Compile(r.Schema); err != nil {
				problems = append(problems, fmt.Sprintf("%s: response %s: %v", id, statusLabel(r.Status), err))
			}
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fail(problems...)
	}
	return t, nil
}

// checkOverrideOp checks one overriding operation against the one it replaces: its parameters
// carry the same names in the path or the query, the path's {names} are its path parameters,
// its body is JSON, its $refs point at something.
func checkOverrideOp(id, path string, op map[string]any, old Operation, base map[string]any) []string {
	var problems []string
	want := map[string]bool{}
	for _, p := range old.Params {
		want[p.Name] = true
	}
	got := map[string]string{}
	params, _ := op["parameters"].([]any)
	for i, raw := range params {
		p, ok := raw.(map[string]any)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: parameters[%d] must be an object", id, i))
			continue
		}
		if ref, ok := p["$ref"].(string); ok {
			resolved, err := resolveIn(base, ref)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: parameters[%d]: $ref %s does not resolve", id, i, ref))
				continue
			}
			if p, ok = resolved.(map[string]any); !ok {
				problems = append(problems, fmt.Sprintf("%s: parameters[%d]: $ref %s is no parameter", id, i, ref))
				continue
			}
		}
		name, _ := p["name"].(string)
		in, _ := p["in"].(string)
		switch {
		case name == "":
			problems = append(problems, fmt.Sprintf("%s: parameters[%d] has no name", id, i))
			continue
		case in != "path" && in != "query":
			problems = append(problems, fmt.Sprintf("%s: parameter %s: in must be path or query, not %q", id, name, in))
		case !want[name]:
			problems = append(problems, fmt.Sprintf("%s: parameter %s is not one the tool fills (%s)", id, name, strings.Join(slices.Sorted(maps.Keys(want)), ", ")))
		}
		if _, ok := p["schema"]; !ok {
			problems = append(problems, fmt.Sprintf("%s: parameter %s has no schema", id, name))
		}
		got[name] = in
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			problems = append(problems, fmt.Sprintf("%s: parameter %s is missing (the tool fills it; give it in the path or the query)", id, name))
		}
	}
	vars := map[string]bool{}
	for _, m := range pathVar.FindAllStringSubmatch(path, -1) {
		vars[m[1]] = true
		if got[m[1]] != "path" {
			problems = append(problems, fmt.Sprintf("%s: the path's {%s} is not a path parameter of the operation", id, m[1]))
		}
	}
	for name, in := range got {
		if in == "path" && !vars[name] {
			problems = append(problems, fmt.Sprintf("%s: path parameter %s does not appear in the path %s", id, name, path))
		}
	}
	if rb, ok := op["requestBody"].(map[string]any); ok {
		content, _ := rb["content"].(map[string]any)
		if _, ok := content["application/json"]; !ok || len(content) != 1 {
			problems = append(problems, fmt.Sprintf("%s: requestBody must have application/json content only", id))
		}
	} else if old.Body != nil {
		problems = append(problems, fmt.Sprintf("%s: requestBody is missing (the tool sends one)", id))
	}
	if rs, ok := op["responses"].(map[string]any); ok {
		for code := range rs {
			if code != "default" && !regexp.MustCompile(`^[1-5][0-9][0-9]$`).MatchString(code) {
				problems = append(problems, fmt.Sprintf("%s: response code %q is not a status code or default", id, code))
			}
		}
	}
	collectRefs(op, func(ref string) {
		if _, err := resolveIn(base, ref); err != nil {
			problems = append(problems, fmt.Sprintf("%s: $ref %s does not resolve", id, ref))
		}
	})
	return problems
}

// removeOperation deletes the embedded operation old from the paths of doc.
func removeOperation(paths map[string]any, old Operation) {
	item, ok := paths[old.Path].(map[string]any)
	if !ok {
		return
	}
	delete(item, strings.ToLower(old.Method))
	for _, m := range methods {
		if _, ok := item[m]; ok {
			return
		}
	}
	delete(paths, old.Path)
}

// sameJSON reports whether a and b, decoded JSON (numbers as json.Number or float64), encode
// alike.
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// operationRaw returns the embedded operation as decoded JSON.
func operationRaw(doc []byte, op Operation) map[string]any {
	var d struct {
		Paths map[string]map[string]map[string]any `json:"paths"`
	}
	_ = json.Unmarshal(doc, &d)
	return d.Paths[op.Path][strings.ToLower(op.Method)]
}

// resolveIn resolves a local $ref ("#/a/b") in doc.
func resolveIn(doc map[string]any, ref string) (any, error) {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, errors.New("only local references (#/...) are allowed")
	}
	var cur any = doc
	for _, tok := range strings.Split(rest, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("no %q", tok)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("no %q", tok)
		}
	}
	return cur, nil
}

// collectRefs calls f with every $ref in v.
func collectRefs(v any, f func(string)) {
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok {
			f(ref)
		}
		for _, e := range x {
			collectRefs(e, f)
		}
	case []any:
		for _, e := range x {
			collectRefs(e, f)
		}
	}
}

// describeJSONError words a JSON syntax error with its line and column.
func describeJSONError(data []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := 1, 1
		for _, b := range data[:max(0, min(int(se.Offset)-1, len(data)))] {
			if b == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
		return fmt.Sprintf("not valid JSON at line %d, column %d: %v", line, col, err)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "the document must be a JSON object"
	}
	return "not valid JSON: " + err.Error()
}

func operationIDs(t *Table) []string {
	var ids []string
	for _, o := range t.ops {
		if o.Server == ServerAPI {
			ids = append(ids, o.ID)
		}
	}
	sort.Strings(ids)
	return ids
}

func statusLabel(status int) string {
	if status == 0 {
		return "default"
	}
	return fmt.Sprint(status)
}
