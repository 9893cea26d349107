package schema

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A quick schema decides the common case of validation, an instance that passes, without
// jsonschema/v6's bookkeeping (keyword locations, error trees): Validate accepts an instance
// when its quick schema says valid, and asks jsonschema/v6 otherwise, which then words every
// problem. So the quick schema must never say valid where jsonschema/v6 would not; whenever
// it is not certain (a keyword it does not know, a number it does not read exactly) it says
// unknown, and jsonschema/v6 decides. FuzzQuickSchema holds the two to that.

// verdict is a quick schema's answer for one instance.
type verdict uint8

const (
	invalid verdict = iota
	valid
	unknown
)

// and combines the verdicts of two keywords of one schema: invalid wins, then unknown.
func (v verdict) and(w verdict) verdict {
	switch {
	case v == invalid || w == invalid:
		return invalid
	case v == unknown || w == unknown:
		return unknown
	}
	return valid
}

// quickSchema is one compiled (sub)schema; the zero value accepts everything.
type quickSchema struct {
	never                bool // the schema false
	opaque               bool // a keyword quick schemas do not decide: always unknown
	types                []string
	props                map[string]*quickSchema
	addProps             *quickSchema // nil: any additional property
	required             []string
	items                *quickSchema
	minItems, maxItems   int // -1: none
	minLength, maxLength int // -1: none
	minimum, maximum     *int64
	enum                 []any // strings, booleans and nil only; nil slice: no enum
	allOf, anyOf, oneOf  []*quickSchema
	not                  *quickSchema
	ifS, thenS, elseS    *quickSchema
}

// annotations are keywords that never fail an instance.
var annotations = map[string]bool{
	"description": true, "title": true, "default": true, "examples": true, "deprecated": true,
	"readOnly": true, "writeOnly": true, "$comment": true,
}

// compileQuick compiles a decoded schema (DecodeJSON); a schema that is no JSON Schema object
// or boolean compiles to an opaque one.
func compileQuick(s any) *quickSchema {
	switch s := s.(type) {
	case bool:
		return &quickSchema{never: !s, minItems: -1, maxItems: -1, minLength: -1, maxLength: -1}
	case map[string]any:
		q := &quickSchema{minItems: -1, maxItems: -1, minLength: -1, maxLength: -1}
		for k, v := range s {
			if !q.keyword(k, v) {
				return &quickSchema{opaque: true}
			}
		}
		return q
	}
	return &quickSchema{opaque: true}
}

// keyword compiles one keyword into q; false for one quick schemas do not decide.
func (q *quickSchema) keyword(k string, v any) bool {
	if annotations[k] || strings.HasPrefix(k, "x-") {
		return true
	}
	ok := true
	switch k {
	case "type":
		switch t := v.(type) {
		case string:
			q.types = []string{t}
		case []any:
			for _, e := range t {
				s, isStr := e.(string)
				ok = ok && isStr
				q.types = append(q.types, s)
			}
		default:
			ok = false
		}
	case "properties":
		m, isMap := v.(map[string]any)
		ok = isMap
		q.props = make(map[string]*quickSchema, len(m))
		for name, sub := range m {
			q.props[name] = compileQuick(sub)
		}
	case "additionalProperties":
		q.addProps = compileQuick(v)
	case "required":
		list, isList := v.([]any)
		ok = isList
		for _, e := range list {
			s, isStr := e.(string)
			ok = ok && isStr
			q.required = append(q.required, s)
		}
	case "items":
		q.items = compileQuick(v)
	case "minItems":
		q.minItems, ok = count(v)
	case "maxItems":
		q.maxItems, ok = count(v)
	case "minLength":
		q.minLength, ok = count(v)
	case "maxLength":
		q.maxLength, ok = count(v)
	case "minimum":
		n, isInt := exactInt(v)
		q.minimum, ok = &n, isInt
	case "maximum":
		n, isInt := exactInt(v)
		q.maximum, ok = &n, isInt
	case "enum", "const":
		list := []any{v}
		if k == "enum" {
			l, isList := v.([]any)
			ok, list = isList, l
		}
		q.enum = []any{}
		for _, e := range list {
			switch e.(type) {
			case string, bool, nil:
				q.enum = append(q.enum, e)
			default:
				ok = false
			}
		}
	case "allOf", "anyOf", "oneOf":
		list, isList := v.([]any)
		ok = isList && len(list) > 0
		subs := make([]*quickSchema, len(list))
		for i, e := range list {
			subs[i] = compileQuick(e)
		}
		switch k {
		case "allOf":
			q.allOf = subs
		case "anyOf":
			q.anyOf = subs
		default:
			q.oneOf = subs
		}
	case "not":
		q.not = compileQuick(v)
	case "if":
		q.ifS = compileQuick(v)
	case "then":
		q.thenS = compileQuick(v)
	case "else":
		q.elseS = compileQuick(v)
	default:
		ok = false
	}
	return ok
}

// count reads a non-negative integer keyword value.
func count(v any) (int, bool) {
	n, ok := exactInt(v)
	if !ok || n < 0 || n > math.MaxInt32 {
		return 0, false
	}
	return int(n), true
}

// exactInt reads a number that is an integer written without fraction or exponent (or an
// integral float64 or int); false for anything else, which quick schemas leave to jsonschema/v6.
func exactInt(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		if strings.ContainsAny(string(n), ".eE") {
			return 0, false
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		return i, err == nil
	case int:
		return int64(n), true
	case int64:
		return n, true
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
			return int64(n), true
		}
	}
	return 0, false
}

// check decides inst against q.
func (q *quickSchema) check(inst any) verdict {
	switch {
	case q.opaque:
		return unknown
	case q.never:
		return invalid
	}
	v := q.checkType(inst)
	if v == invalid {
		return invalid
	}
	switch x := inst.(type) {
	case map[string]any:
		v = v.and(q.checkObject(x))
	case []any:
		v = v.and(q.checkArray(x))
	case string:
		n := -1
		if q.minLength >= 0 || q.maxLength >= 0 {
			n = utf8.RuneCountInString(x)
		}
		if (q.minLength >= 0 && n < q.minLength) || (q.maxLength >= 0 && n > q.maxLength) {
			return invalid
		}
	default:
		if q.minimum != nil || q.maximum != nil {
			v = v.and(q.checkNumber(inst))
		}
	}
	if v == invalid {
		return invalid
	}
	if q.enum != nil {
		v = v.and(q.checkEnum(inst))
	}
	return v.and(q.checkApplicators(inst))
}

// checkType decides the type keyword.
func (q *quickSchema) checkType(inst any) verdict {
	if q.types == nil {
		return valid
	}
	v := invalid
	for _, t := range q.types {
		switch w := typeMatch(t, inst); w {
		case valid:
			return valid
		case unknown:
			v = unknown
		}
	}
	return v
}

// typeMatch decides whether inst is of the JSON Schema type t.
func typeMatch(t string, inst any) verdict {
	is := func(b bool) verdict {
		if b {
			return valid
		}
		return invalid
	}
	switch x := inst.(type) {
	case nil:
		return is(t == "null")
	case bool:
		return is(t == "boolean")
	case string:
		return is(t == "string")
	case map[string]any:
		return is(t == "object")
	case []any:
		return is(t == "array")
	case json.Number, float64, int, int64:
		switch t {
		case "number":
			return valid
		case "integer":
			if _, ok := exactInt(x); ok {
				return valid
			}
			return unknown // 1.0 is an integer, 1.5 is not: jsonschema/v6 decides
		}
		return invalid
	}
	return unknown
}

func (q *quickSchema) checkObject(m map[string]any) verdict {
	for _, name := range q.required {
		if _, ok := m[name]; !ok {
			return invalid
		}
	}
	v := valid
	for name, val := range m {
		sub, ok := q.props[name]
		if !ok {
			sub = q.addProps
		}
		if sub == nil {
			continue
		}
		if v = v.and(sub.check(val)); v == invalid {
			return invalid
		}
	}
	return v
}

func (q *quickSchema) checkArray(a []any) verdict {
	if (q.minItems >= 0 && len(a) < q.minItems) || (q.maxItems >= 0 && len(a) > q.maxItems) {
		return invalid
	}
	v := valid
	if q.items != nil {
		for _, e := range a {
			if v = v.and(q.items.check(e)); v == invalid {
				return invalid
			}
		}
	}
	return v
}

func (q *quickSchema) checkNumber(inst any) verdict {
	n, ok := exactInt(inst)
	if !ok {
		return unknown
	}
	if (q.minimum != nil && n < *q.minimum) || (q.maximum != nil && n > *q.maximum) {
		return invalid
	}
	return valid
}

// checkEnum decides enum and const, whose values are strings, booleans and nulls.
func (q *quickSchema) checkEnum(inst any) verdict {
	switch inst.(type) {
	case string, bool, nil:
		for _, e := range q.enum {
			if e == inst {
				return valid
			}
		}
	}
	return invalid // no string, boolean or null equals a value of another type
}

// checkApplicators decides allOf, anyOf, oneOf, not and if/then/else.
func (q *quickSchema) checkApplicators(inst any) verdict {
	v := valid
	for _, s := range q.allOf {
		if v = v.and(s.check(inst)); v == invalid {
			return invalid
		}
	}
	if q.anyOf != nil {
		any := invalid
		for _, s := range q.anyOf {
			w := s.check(inst)
			if w == valid {
				any = valid
				break
			}
			if w == unknown {
				any = unknown
			}
		}
		v = v.and(any)
	}
	if q.oneOf != nil {
		n, unsure := 0, false
		for _, s := range q.oneOf {
			switch s.check(inst) {
			case valid:
				n++
			case unknown:
				unsure = true
			}
		}
		switch {
		case n > 1:
			return invalid
		case unsure:
			v = v.and(unknown)
		case n == 0:
			return invalid
		}
	}
	if q.not != nil {
		switch q.not.check(inst) {
		case valid:
			return invalid
		case unknown:
			v = v.and(unknown)
		}
	}
	if q.ifS != nil {
		branch := q.elseS
		switch q.ifS.check(inst) {
		case valid:
			branch = q.thenS
		case unknown:
			return v.and(unknown)
		}
		if branch != nil {
			v = v.and(branch.check(inst))
		}
	}
	return v
}
