package schema

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// quickCase is one schema with its jsonschema/v6 validator and its quick schema.
type quickCase struct {
	name  string
	doc   any // the decoded schema, for the instance generator
	full  *Validator
	quick *quickSchema
}

// quickCases are every schema a tool validates with: each operation's input and result, each
// tools.json tool's input and output, in the portable form the tools use.
func quickCases(t testing.TB) []quickCase {
	t.Helper()
	var out []quickCase
	add := func(name string, s map[string]any, err error) {
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s = Portable(s)
		v, err := CompileSchema(name, s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		raw, _ := json.Marshal(s)
		doc, _ := DecodeJSON(raw)
		out = append(out, quickCase{name: name, doc: doc, full: &Validator{pointer: name, schema: v.schema}, quick: v.quick})
	}
	ops, err := Operations()
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if in, err := OperationInput(op.ID); err == nil { // operations without a JSON body have none
			add(op.ID+" input", in, err)
		}
		if _, _, err := successResponse(op.ID); err == nil {
			res, err := OperationResult(op.ID)
			add(op.ID+" result", res, err)
		}
	}
	names, err := ToolNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		in, err := ToolInput(n)
		add(n+" input", in, err)
		o, err := ToolOutput(n)
		add(n+" output", o, err)
	}
	return out
}

// TestQuickSchemaAgrees holds the quick schemas to jsonschema/v6 on instances made from each
// schema, most of them valid and the others off in one of the ways a caller gets wrong: the
// quick schema may say unknown, but never valid or invalid where jsonschema/v6 disagrees.
func TestQuickSchemaAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var decided, total int
	for _, c := range quickCases(t) {
		for i := range 300 {
			g := &gen{r: r, offRate: []float64{0, 0.02, 0.1}[i%3]}
			inst := g.instance(c.doc, 0)
			raw, err := json.Marshal(inst)
			if err != nil {
				t.Fatal(err)
			}
			v, err := DecodeJSON(raw)
			if err != nil {
				t.Fatal(err)
			}
			total++
			if checkQuick(t, c, v, raw) {
				decided++
			}
		}
	}
	t.Logf("quick schemas decided %d of %d instances", decided, total)
	if decided < total/2 {
		t.Errorf("quick schemas decided only %d of %d instances", decided, total)
	}
}

// checkQuick fails t when the quick schema's verdict on v disagrees with jsonschema/v6's; it
// reports whether the quick schema decided.
func checkQuick(t testing.TB, c quickCase, v any, raw []byte) bool {
	t.Helper()
	q := c.quick.check(v)
	if q == unknown {
		return false
	}
	err := c.full.Validate(v)
	if (q == valid) != (err == nil) {
		t.Fatalf("%s: quick says %v, jsonschema/v6 says %v, on %s", c.name, q == valid, err, raw)
	}
	return true
}

// FuzzQuickSchema holds the quick schemas to jsonschema/v6 on any JSON.
func FuzzQuickSchema(f *testing.F) {
	cases := quickCases(f)
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range cases {
		if strings.Contains(c.name, "Worldbook") || strings.Contains(c.name, "trial") {
			g := &gen{r: r, offRate: 0.05}
			raw, _ := json.Marshal(g.instance(c.doc, 0))
			f.Add(raw)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := DecodeJSON(data)
		if err != nil {
			return
		}
		for _, c := range cases {
			checkQuick(t, c, v, data)
		}
	})
}

// gen makes instances of a decoded schema; offRate is the chance of each value being made
// off its schema.
type gen struct {
	r       *rand.Rand
	offRate float64
}

func (g *gen) off() bool { return g.r.Float64() < g.offRate }

// odd is a value of any type, including numbers written in the ways that need care.
func (g *gen) odd() any {
	vals := []any{nil, true, false, "", "x", "create", "update", "delete", "é", json.Number("0"), json.Number("-1"),
		json.Number("3"), json.Number("4"), json.Number("1.0"), json.Number("2.5"), json.Number("1e2"),
		json.Number("99999999999999999999"), map[string]any{}, []any{}, []any{"a"}, map[string]any{"op": "delete"}}
	return vals[g.r.IntN(len(vals))]
}

func (g *gen) instance(s any, depth int) any {
	m, ok := s.(map[string]any)
	if !ok || depth > 6 || g.off() {
		return g.odd()
	}
	if e, ok := m["const"]; ok {
		return e
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return e[g.r.IntN(len(e))]
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if l, ok := m[k].([]any); ok && len(l) > 0 {
			if sub, ok := l[g.r.IntN(len(l))].(map[string]any); ok && sub["type"] != nil && m["properties"] == nil {
				return g.instance(sub, depth+1)
			}
		}
	}
	typ, _ := m["type"].(string)
	if l, ok := m["type"].([]any); ok && len(l) > 0 {
		typ, _ = l[g.r.IntN(len(l))].(string)
	}
	switch typ {
	case "object", "":
		if m["properties"] == nil && typ == "" {
			return g.odd()
		}
		obj := map[string]any{}
		props, _ := m["properties"].(map[string]any)
		req, _ := m["required"].([]any)
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			if slices.Contains(req, any(n)) || g.r.IntN(2) == 0 {
				obj[n] = g.instance(props[n], depth+1)
			}
		}
		if g.off() {
			obj[fmt.Sprint("extra", g.r.IntN(3))] = g.odd()
		}
		if g.off() && len(req) > 0 {
			delete(obj, req[g.r.IntN(len(req))].(string))
		}
		return obj
	case "array":
		n := g.r.IntN(4)
		if g.off() {
			n = 600
		}
		a := make([]any, n)
		for i := range a {
			a[i] = g.instance(m["items"], depth+1)
		}
		return a
	case "string":
		n := 1 + g.r.IntN(8)
		if g.off() {
			n = g.r.IntN(3) * 200
		}
		return strings.Repeat("ü", n)
	case "integer":
		return json.Number(fmt.Sprint(g.r.IntN(7) - 2))
	case "number":
		return json.Number(fmt.Sprint(float64(g.r.IntN(7)) / 2))
	case "boolean":
		return g.r.IntN(2) == 0
	case "null":
		return nil
	}
	return g.odd()
}
