package schema

import "reflect"

// Portable returns a self-contained schema rewritten into the forms every MCP client and model
// provider accepts, with the same meaning: a bare true or false where a subschema is expected
// (a property, an item) becomes {} or {"not": {}}, and a list of types ("type": ["object",
// "null"]) becomes anyOf branches of one type each, the keywords that apply to one type only
// (properties, required, items, minLength, ...) moving into that type's branch, where they
// mean what they meant beside the list; the others (description, enum, ...) stay beside it.
// additionalProperties keeps its booleans, which every client reads. The MCP Inspector's
// --strict check reports the first two forms as errors and warnings, and ajv (Gemini CLI's
// validator) warns of type keywords beside an anyOf with no type ("strictTypes").
func Portable(s map[string]any) map[string]any {
	out := make(map[string]any, len(s))
	for k, v := range s {
		switch k {
		case "properties", "patternProperties", "$defs", "dependentSchemas":
			out[k] = eachSchema(v, portableSchema)
		case "items", "contains", "not", "if", "then", "else", "propertyNames", "unevaluatedItems":
			out[k] = portableSchema(v)
		case "additionalProperties", "unevaluatedProperties":
			if m, ok := v.(map[string]any); ok {
				out[k] = Portable(m)
			} else {
				out[k] = v
			}
		case "allOf", "anyOf", "oneOf", "prefixItems":
			out[k] = eachSchema(v, portableSchema)
		default:
			out[k] = v
		}
	}
	foldPlaceholders(out)
	types, ok := out["type"].([]any)
	if !ok {
		return out
	}
	delete(out, "type")
	branches := make([]any, len(types))
	for i, t := range types {
		branch := map[string]any{"type": t}
		name, _ := t.(string)
		for k, v := range out {
			if applies(typeKeywords[k], name) {
				branch[k] = v
			}
		}
		branches[i] = branch
	}
	for k := range out {
		if typeKeywords[k] == "" {
			continue
		}
		for _, t := range types {
			if name, _ := t.(string); applies(typeKeywords[k], name) {
				delete(out, k) // moved into its type's branch
				break
			}
		}
	}
	if existing, has := out["anyOf"]; has {
		delete(out, "anyOf")
		allOf, _ := out["allOf"].([]any)
		out["allOf"] = append(allOf, map[string]any{"anyOf": existing}, map[string]any{"anyOf": branches})
	} else {
		out["anyOf"] = branches
	}
	return out
}

// typeKeywords are the keywords that apply to instances of one type only, by that type
// ("number" keywords apply to integers too).
var typeKeywords = map[string]string{
	"properties": "object", "required": "object", "additionalProperties": "object",
	"patternProperties": "object", "minProperties": "object", "maxProperties": "object",
	"propertyNames": "object", "dependentRequired": "object", "dependentSchemas": "object",
	"unevaluatedProperties": "object", "unevaluatedItems": "array",

	"items": "array", "prefixItems": "array", "minItems": "array", "maxItems": "array",
	"uniqueItems": "array", "contains": "array", "minContains": "array", "maxContains": "array",

	"minLength": "string", "maxLength": "string", "pattern": "string", "format": "string",

	"minimum": "number", "maximum": "number", "exclusiveMinimum": "number",
	"exclusiveMaximum": "number", "multipleOf": "number",
}

// applies reports whether a keyword of kind (typeKeywords) applies to instances of type t.
func applies(kind, t string) bool {
	return kind != "" && (kind == t || kind == "number" && t == "integer")
}

// foldPlaceholders replaces the placeholders ({} for a name listed only so that
// additionalProperties: false lets it pass) among s's properties by the property's schema from
// an allOf branch that defines it (S and {} together mean S), and drops a branch left saying
// nothing more than s itself: an object schema whose every property s now has, the same.
func foldPlaceholders(s map[string]any) {
	props, ok := s["properties"].(map[string]any)
	allOf, ok2 := s["allOf"].([]any)
	if !ok || !ok2 {
		return
	}
	for _, b := range allOf {
		bm, ok := b.(map[string]any)
		if !ok {
			continue
		}
		bp, ok := bm["properties"].(map[string]any)
		if !ok {
			continue
		}
		for name, def := range bp {
			if cur, ok := props[name].(map[string]any); ok && len(cur) == 0 {
				props[name] = def
			}
		}
	}
	kept := allOf[:0]
	for _, b := range allOf {
		if !redundantBranch(b, s, props) {
			kept = append(kept, b)
		}
	}
	if len(kept) == 0 {
		delete(s, "allOf")
	} else {
		s["allOf"] = kept
	}
}

// redundantBranch reports whether an allOf branch of parent constrains nothing parent does not:
// only type (parent's own), description and properties that parent has identically.
func redundantBranch(b any, parent, props map[string]any) bool {
	bm, ok := b.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range bm {
		switch k {
		case "description", "title":
		case "type":
			if !reflect.DeepEqual(v, parent["type"]) {
				return false
			}
		case "properties":
			bp, ok := v.(map[string]any)
			if !ok {
				return false
			}
			for name, def := range bp {
				if !reflect.DeepEqual(props[name], def) {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// portableSchema is Portable for a value in a subschema's place.
func portableSchema(v any) any {
	switch x := v.(type) {
	case bool:
		if x {
			return map[string]any{}
		}
		return map[string]any{"not": map[string]any{}}
	case map[string]any:
		return Portable(x)
	}
	return v
}

// Undescribed returns a schema without its descriptions, the same constraints: what an output
// schema advertises, which clients validate results with and hosts do not hand to a model (it
// reads the result itself, and the text that comes with it), so that tools/list, which a host
// may pay for on every turn, carries no words nobody reads. Instance values (const, enum,
// default, examples) are left as they are.
func Undescribed(s map[string]any) map[string]any {
	out := make(map[string]any, len(s))
	for k, v := range s {
		switch k {
		case "description":
			if _, ok := v.(string); ok {
				continue
			}
			out[k] = undescribedValue(v) // a property named description
		case "const", "enum", "default", "examples":
			out[k] = v
		default:
			out[k] = undescribedValue(v)
		}
	}
	return out
}

func undescribedValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return Undescribed(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = undescribedValue(e)
		}
		return out
	}
	return v
}
