package schema

import "maps"

// guessMarkers are the vendor extensions inlining keeps for Tolerant: x-assumed marks a schema
// (or property) the API document does not show, and x-needed lists the fields of an assumed
// object that a tool cannot work without.
var guessMarkers = map[string]bool{"x-assumed": true, "x-needed": true}

// valueConstraints are keywords that constrain a value beyond its type. The API document shows
// types; the values it allows are mostly not shown, so a tolerant reader does not check them.
var valueConstraints = map[string]bool{
	"pattern": true, "enum": true, "format": true, "multipleOf": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"minLength": true, "maxLength": true, "minItems": true, "maxItems": true, "uniqueItems": true,
	"minProperties": true, "maxProperties": true,
}

// Tolerant returns a self-contained schema (inlined with its guess markers) relaxed for reading
// the card service's answers: read tolerantly, write strictly. Its objects accept fields it
// does not name (no additionalProperties: false); values are checked for their type only (no
// pattern, enum, const, format or bounds: the document shows few of them); oneOf becomes anyOf
// (branches told apart by a const may now overlap); and an object marked x-assumed requires
// only the fields its x-needed lists. What the document shows, types and the required fields
// of shown objects, stays. The markers are dropped.
func Tolerant(s map[string]any) map[string]any {
	out := make(map[string]any, len(s))
	for k, v := range s {
		switch {
		case guessMarkers[k], valueConstraints[k], k == "const":
			continue
		case annotationKeys[k]:
			out[k] = v // descriptions and examples are no schemas
		case k == "additionalProperties":
			if b, ok := v.(bool); ok && !b {
				continue
			}
			out[k] = tolerantValue(v)
		case k == "properties" || k == "patternProperties" || k == "$defs" || k == "dependentSchemas":
			out[k] = eachSchema(v, tolerantValue)
		case k == "oneOf":
			out["anyOf"] = tolerantValue(v)
		case k == "required":
			if s["x-assumed"] == true {
				if needed, ok := s["x-needed"].([]any); ok && len(needed) > 0 {
					out[k] = needed
				}
				continue
			}
			out[k] = v
		default:
			out[k] = tolerantValue(v)
		}
	}
	if _, typed := out["type"]; !typed {
		if t := typesOf(s); t != nil {
			out["type"] = t
		}
	}
	return out
}

// eachSchema applies f to each subschema of a keyword's value: the values of a map of them
// (properties) or the items of a list of them (allOf); any other value is kept.
func eachSchema(v any, f func(any) any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for name, s := range x {
			out[name] = f(s)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = f(s)
		}
		return out
	}
	return v
}

// tolerantValue applies Tolerant to a subschema or a list of them; other values are kept.
func tolerantValue(v any) any {
	if m, ok := v.(map[string]any); ok {
		return Tolerant(m)
	}
	return eachSchema(v, tolerantValue)
}

// typesOf returns the JSON type(s) of a schema's const or enum values, so that dropping them
// keeps the type they implied; nil when they imply none or the schema has neither.
func typesOf(s map[string]any) any {
	var values []any
	if c, ok := s["const"]; ok {
		values = append(values, c)
	}
	if e, ok := s["enum"].([]any); ok {
		values = append(values, e...)
	}
	if len(values) == 0 {
		return nil
	}
	seen := map[string]bool{}
	var types []any
	for _, v := range values {
		t := jsonType(v)
		if t == "" {
			return nil
		}
		if !seen[t] {
			seen[t] = true
			types = append(types, t)
		}
	}
	if len(types) == 1 {
		return types[0]
	}
	return types
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "number" // json.Number, float64 and the integers
}

// withoutMarkers returns v with the guess markers removed from every object in it.
func withoutMarkers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := maps.Clone(x)
		for k, e := range x {
			if guessMarkers[k] {
				delete(out, k)
				continue
			}
			out[k] = withoutMarkers(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = withoutMarkers(e)
		}
		return out
	}
	return v
}
