package schema

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var (
	docOnce sync.Once
	docTree any
	docErr  error
)

// tree returns the contract decoded once as generic JSON; callers must not modify it.
func tree() (any, error) {
	docOnce.Do(func() {
		// DecodeJSON (numbers as json.Number, which encode the same) is the faster decoder,
		// and this parse is on every server's way to answering initialize.
		v, err := DecodeJSON(contract)
		if err != nil {
			docErr = fmt.Errorf("parse contract: %w", err)
			return
		}
		docTree = v
	})
	return docTree, docErr
}

// document is one JSON document a $ref can point into, by the name a $ref gives it before its
// "#" ("upstream.openapi.json#/components/schemas/Id"); a $ref with nothing before its "#" points
// into the document it is written in.
type document struct {
	name string
	tree func() (any, error)
}

var (
	contractDoc = &document{name: "upstream.openapi.json", tree: tree}
	toolsDoc    = &document{name: "tools.json", tree: toolsTree}
)

// documentNamed returns the document a $ref names.
func documentNamed(name string) (*document, error) {
	for _, d := range []*document{contractDoc, toolsDoc} {
		if name == d.name || name == "./"+d.name {
			return d, nil
		}
	}
	return nil, fmt.Errorf("$ref into %q: only upstream.openapi.json and tools.json can be referenced", name)
}

// resolve returns the value at a JSON pointer fragment ("#/a/b") of the contract.
func resolve(pointer string) (any, error) { return contractDoc.resolve(pointer) }

// resolve returns the value at a JSON pointer fragment ("#/a/b") of the document.
func (d *document) resolve(pointer string) (any, error) {
	t, err := d.tree()
	if err != nil {
		return nil, err
	}
	cur := t
	rest := strings.TrimPrefix(pointer, "#")
	if rest == "" {
		return cur, nil
	}
	for _, tok := range strings.Split(strings.TrimPrefix(rest, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, fmt.Errorf("resolve %s%s: no %q", d.prefix(), pointer, tok)
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, fmt.Errorf("resolve %s%s: no index %q", d.prefix(), pointer, tok)
			}
			cur = c[i]
		default:
			return nil, fmt.Errorf("resolve %s%s: %q is inside a scalar", d.prefix(), pointer, tok)
		}
	}
	return cur, nil
}

// prefix names the document in messages about pointers into other documents than the contract.
func (d *document) prefix() string {
	if d == contractDoc {
		return ""
	}
	return d.name
}

// Inline returns the schema at pointer as a self-contained JSON Schema: every $ref into the
// contract is replaced by the schema it names (folded into allOf when it has siblings), and the
// contract's vendor extensions (x-*) are dropped. MCP clients and model providers do not fetch
// references, so advertised schemas must not contain any.
func Inline(pointer string) (map[string]any, error) { return contractDoc.inlineAt(pointer, false) }

// inlineAt is Inline for a pointer into the document d; $refs may lead into the other document.
// keepMarkers keeps the guess markers (x-assumed, x-needed) for Tolerant.
func (d *document) inlineAt(pointer string, keepMarkers bool) (map[string]any, error) {
	v, err := d.resolve(pointer)
	if err != nil {
		return nil, err
	}
	out, err := inline(v, d, nil)
	if err != nil {
		return nil, fmt.Errorf("inline %s%s: %w", d.prefix(), pointer, err)
	}
	m, ok := out.(map[string]any)
	if ok && !keepMarkers {
		m = withoutMarkers(m).(map[string]any)
	}
	if !ok {
		return nil, fmt.Errorf("inline %s%s: not an object schema", d.prefix(), pointer)
	}
	return m, nil
}

// inline resolves every $ref of v, a part of the document doc; seen holds the references being
// resolved (document#pointer), to refuse a recursive one.
func inline(v any, doc *document, seen []string) (any, error) {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := inline(e, doc, seen)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if (strings.HasPrefix(k, "x-") && !guessMarkers[k]) || k == "$ref" {
				continue
			}
			r, err := inline(e, doc, seen)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		ref, ok := x["$ref"].(string)
		if !ok {
			return out, nil
		}
		file, pointer, found := strings.Cut(ref, "#")
		if !found {
			return nil, fmt.Errorf("$ref %s has no #fragment", ref)
		}
		target := doc
		if file != "" {
			var err error
			if target, err = documentNamed(file); err != nil {
				return nil, err
			}
		}
		key := target.name + "#" + pointer
		if slices.Contains(seen, key) {
			return nil, fmt.Errorf("recursive $ref %s cannot be inlined", ref)
		}
		resolved, err := target.resolve("#" + pointer)
		if err != nil {
			return nil, err
		}
		r, err := inline(resolved, target, append(seen, key))
		if err != nil {
			return nil, err
		}
		if len(out) == 0 {
			return r, nil
		}
		// Keep the referenced schema's own description unless the referrer gave one.
		if rm, ok := r.(map[string]any); ok && !hasAssertions(out) {
			merged := maps.Clone(rm)
			maps.Copy(merged, out)
			return merged, nil
		}
		allOf, _ := out["allOf"].([]any)
		out["allOf"] = append([]any{r}, allOf...)
		return out, nil
	}
	return v, nil
}

// annotationKeys are keywords that describe a schema without constraining it.
var annotationKeys = map[string]bool{"description": true, "title": true, "default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true}

func hasAssertions(m map[string]any) bool {
	for k := range m {
		if !annotationKeys[k] && !guessMarkers[k] {
			return true
		}
	}
	return false
}

// OperationInput returns the input schema of an operation as one flat object: its path and query
// parameters and its JSON body's properties side by side, under the names the contract gives
// them, self-contained (see Inline). The body schema must be an object whose properties are
// listed at its top level; a name used both by a parameter and by the body is an error.
func OperationInput(id string) (map[string]any, error) {
	op, ok := Lookup(id)
	if !ok {
		return nil, fmt.Errorf("operation input: no operation %q", id)
	}
	props := map[string]any{}
	var required []any
	out := map[string]any{"type": "object", "additionalProperties": false}
	if op.Body != nil {
		if op.Body.ContentType != "application/json" {
			return nil, fmt.Errorf("operation input %s: body is %s, not JSON", id, op.Body.ContentType)
		}
		body, err := Inline(op.Body.Schema)
		if err != nil {
			return nil, err
		}
		if _, nested := body["allOf"]; nested {
			return nil, fmt.Errorf("operation input %s: body schema must list its properties at the top level", id)
		}
		for k, v := range body {
			switch k {
			case "type", "additionalProperties":
			case "properties":
				maps.Copy(props, v.(map[string]any))
			case "required":
				required = append(required, v.([]any)...)
			default:
				out[k] = v
			}
		}
	}
	for _, p := range op.Params {
		if _, dup := props[p.Name]; dup {
			return nil, fmt.Errorf("operation input %s: parameter %s is also a body field", id, p.Name)
		}
		ps, err := Inline(p.Schema)
		if err != nil {
			return nil, err
		}
		if d, err := resolve(strings.TrimSuffix(p.Schema, "/schema") + "/description"); err == nil {
			ps = maps.Clone(ps)
			ps["description"] = d
		}
		props[p.Name] = ps
		if p.Required {
			required = append(required, p.Name)
		}
	}
	out["properties"] = props
	if len(required) > 0 {
		out["required"] = required
	}
	return out, nil
}

// OperationOutput returns the self-contained schema of an operation's lowest 2xx response body,
// as the contract states it (the sandbox's answers; strict where the contract guesses).
func OperationOutput(id string) (map[string]any, error) {
	_, r, err := successResponse(id)
	if err != nil {
		return nil, err
	}
	return Inline(r.Schema)
}

// OperationResult returns the schema of what a tool calling the operation returns: the success
// response read tolerantly (see Tolerant). For an Ack operation it is the ids the call acted on
// (its path parameters) and ok, beside whatever the service's answer holds.
func OperationResult(id string) (map[string]any, error) {
	op, r, err := successResponse(id)
	if err != nil {
		return nil, err
	}
	s, err := contractDoc.inlineAt(r.Schema, true)
	if err != nil {
		return nil, err
	}
	s = Tolerant(s)
	if !op.Ack {
		return s, nil
	}
	props := map[string]any{}
	if p, ok := s["properties"].(map[string]any); ok {
		props = maps.Clone(p)
	}
	var required []any
	for _, p := range op.Params {
		if p.In != "path" {
			continue
		}
		ps, err := contractDoc.inlineAt(p.Schema, true)
		if err != nil {
			return nil, err
		}
		ps = Tolerant(ps)
		props[p.Name] = ps
		required = append(required, p.Name)
	}
	props["ok"] = map[string]any{"type": "boolean"}
	s["properties"] = props
	s["required"] = append(required, "ok")
	return s, nil
}

// successResponse returns an operation and its lowest 2xx response, which must have a schema.
func successResponse(id string) (Operation, Response, error) {
	op, ok := Lookup(id)
	if !ok {
		return Operation{}, Response{}, fmt.Errorf("operation output: no operation %q", id)
	}
	r, ok := op.Response(op.SuccessStatus())
	if !ok || r.Schema == "" {
		return Operation{}, Response{}, fmt.Errorf("operation output %s: no JSON success response", id)
	}
	return op, r, nil
}

var docSeq struct {
	sync.Mutex
	n int
}

// CompileJSONLazy is CompileSchema, of a schema given as its JSON encoding (json.Marshal of the
// map CompileSchema would take, such as the input schema a tool advertises), deferred to the
// Validator's first use (Validate, ValidateJSON or Compile), so that a server can answer before
// compiling every tool's schemas (a few hundred microseconds each). Until then it keeps only raw,
// which must not change, and not the schema's decoded form (some 250 KB for every tool's
// schemas). A schema that does not compile makes every use fail with the error CompileSchema
// would have returned.
func CompileJSONLazy(name string, raw []byte) *Validator {
	v := &Validator{pointer: name, lazy: &lazySchema{}}
	v.lazy.compile = func() {
		c, err := compileJSON(name, raw)
		if err != nil {
			v.lazy.err = err
			return
		}
		v.lazy.schema, v.lazy.quick = c.schema, c.quick
	}
	return v
}

// CompileSchema compiles a self-contained schema (such as one from OperationInput) into a
// Validator; pointer in the result names it for messages.
func CompileSchema(name string, s map[string]any) (*Validator, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", name, err)
	}
	return compileJSON(name, raw)
}

// compileJSON is CompileSchema of the schema's JSON encoding.
func compileJSON(name string, raw []byte) (*Validator, error) {
	doc, err := DecodeJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", name, err)
	}
	docSeq.Lock()
	docSeq.n++
	url := fmt.Sprintf("urn:cardwriter:derived:%d", docSeq.n)
	docSeq.Unlock()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("compile %s: %w", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", name, err)
	}
	return &Validator{pointer: name, schema: sch, quick: compileQuick(doc)}, nil
}
