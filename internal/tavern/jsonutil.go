package tavern

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"
)

// MaxInputSize is the largest input Read and ReadBook accept, and the largest size any compressed
// part of an input (a zTXt or iTXt chunk, a CHARX member) may decompress to.
const MaxInputSize = 32 << 20

// maxDepth bounds the nesting of JSON inputs so hostile files cannot exhaust the stack.
const maxDepth = 200

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// decodeJSONObject decodes one JSON object, keeping numbers as json.Number so that values the model
// does not interpret are written back exactly as they came.
func decodeJSONObject(data []byte) (map[string]any, error) {
	data = bytes.TrimPrefix(data, utf8BOM)
	if !utf8.Valid(data) {
		return nil, errors.New("JSON is not valid UTF-8")
	}
	if err := checkDepth(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("JSON: unexpected data after the top-level value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("JSON: top-level value is %s, not an object", kind(v))
	}
	return m, nil
}

// checkDepth refuses JSON nested deeper than maxDepth (counting brackets outside strings).
func checkDepth(data []byte) error {
	depth := 0
	inString := false
	escaped := false
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > maxDepth {
				return fmt.Errorf("JSON nests deeper than %d levels", maxDepth)
			}
		case '}', ']':
			depth--
		}
	}
	return nil
}

// kind names a JSON value's type for error messages.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number, float64, int:
		return "a number"
	case bool:
		return "a boolean"
	case []any, []string:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// pathError builds an error that names where in the input the problem is.
func pathError(path string, format string, args ...any) error {
	return fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...))
}

// asString reads a string leniently: numbers and booleans become their text, null becomes "".
func asString(v any, path string) (string, error) {
	switch t := v.(type) {
	case nil:
		return "", nil
	case string:
		return t, nil
	case json.Number:
		return t.String(), nil
	case bool:
		return strconv.FormatBool(t), nil
	default:
		return "", pathError(path, "%s where a string was expected", kind(v))
	}
}

// asStrings reads an array of strings leniently: a lone string becomes one element (or, with split,
// the comma-separated items of it), null elements are skipped, numbers become their text.
func asStrings(v any, path string, split bool) ([]string, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case string, json.Number, bool:
		s, _ := asString(t, path)
		if split {
			return splitList(s), nil
		}
		if s == "" {
			return nil, nil
		}
		return []string{s}, nil
	case []any:
		var out []string
		for i, x := range t {
			if x == nil {
				continue
			}
			s, err := asString(x, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	case []string:
		if len(t) == 0 {
			return nil, nil
		}
		return append([]string(nil), t...), nil
	default:
		return nil, pathError(path, "%s where an array of strings was expected", kind(v))
	}
}

// splitList splits a comma-separated list, trimming items and dropping empty ones; a string that
// looks like one /regex/flags key is kept whole.
func splitList(s string) []string {
	if t := strings.TrimSpace(s); t == "" {
		return nil
	} else if _, _, ok := splitRegexKey(t); ok {
		return []string{t}
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// asBool reads a boolean leniently ("true", "false", 1, 0, "yes", "no"); ok is false for null.
func asBool(v any, path string) (val, ok bool, err error) {
	switch t := v.(type) {
	case nil:
		return false, false, nil
	case bool:
		return t, true, nil
	case json.Number:
		f, perr := t.Float64()
		if perr != nil {
			return false, false, pathError(path, "%q is not a boolean", t.String())
		}
		return f != 0, true, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(t)) {
		case "true", "1", "yes", "on":
			return true, true, nil
		case "false", "0", "no", "off":
			return false, true, nil
		case "", "null":
			return false, false, nil
		}
		return false, false, pathError(path, "%q is not a boolean", t)
	default:
		return false, false, pathError(path, "%s where a boolean was expected", kind(v))
	}
}

// asInt reads an integer leniently (numbers as strings accepted); ok is false for null or "", and
// exact is false when the value had a fraction and was rounded.
func asInt(v any, path string) (n int, ok, exact bool, err error) {
	var s string
	switch t := v.(type) {
	case nil:
		return 0, false, true, nil
	case json.Number:
		s = t.String()
	case string:
		s = strings.TrimSpace(t)
		if s == "" {
			return 0, false, true, nil
		}
	case bool:
		if t {
			return 1, true, false, nil
		}
		return 0, true, false, nil
	default:
		return 0, false, false, pathError(path, "%s where a number was expected", kind(v))
	}
	if i, perr := strconv.ParseInt(s, 10, 64); perr == nil {
		if i > math.MaxInt32 || i < math.MinInt32 {
			return 0, false, false, pathError(path, "%s is out of range", s)
		}
		return int(i), true, true, nil
	}
	f, perr := strconv.ParseFloat(s, 64)
	if perr != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false, false, pathError(path, "%q is not a number", s)
	}
	if f > math.MaxInt32 || f < math.MinInt32 {
		return 0, false, false, pathError(path, "%s is out of range", s)
	}
	r := math.Round(f)
	return int(r), true, r == f, nil
}

// asObject reads an object; null and "" give nil.
func asObject(v any, path string) (map[string]any, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return t, nil
	case string:
		if strings.TrimSpace(t) == "" {
			return nil, nil
		}
	}
	return nil, pathError(path, "%s where an object was expected", kind(v))
}

// stringsToAny converts a string slice to the []any shape JSON decoding produces.
func stringsToAny(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

// obj is a JSON object that keeps its keys in insertion order when marshalled.
type obj struct {
	keys []string
	vals map[string]any
}

func newObj() *obj { return &obj{vals: map[string]any{}} }

// set sets key to v, keeping the key's first position.
func (o *obj) set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *obj) has(k string) bool { _, ok := o.vals[k]; return ok }

func (o *obj) get(k string) (any, bool) { v, ok := o.vals[k]; return v, ok }

// setRest copies the entries of m whose keys are not set yet, in sorted key order.
func (o *obj) setRest(m map[string]any) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !o.has(k) {
			o.set(k, m[k])
		}
	}
}

// MarshalJSON writes the object with its keys in order and without HTML escaping.
func (o *obj) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			buf.WriteByte(',')
		}
		kb, err := jsontext.Marshal(k)
		if err != nil {
			return nil, err
		}
		buf.Write(kb)
		buf.WriteByte(':')
		vb, err := jsontext.Marshal(o.vals[k])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		buf.Write(vb)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// encodeIndented renders v as indented JSON without HTML escaping, ending in a newline.
func encodeIndented(v any) ([]byte, error) {
	raw, err := jsontext.Marshal(v)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// normalizeJSON turns a JSON-shaped value into what decoding its encoding would give (json.Number
// for numbers, []any for arrays), so values built by callers compare equal to values read back.
func normalizeJSON(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = normalizeJSON(x)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = normalizeJSON(x)
		}
		return out
	case []string:
		return stringsToAny(t)
	case int:
		return json.Number(strconv.Itoa(t))
	case int64:
		return json.Number(strconv.FormatInt(t, 10))
	case float64:
		return json.Number(strconv.FormatFloat(t, 'f', -1, 64))
	default:
		return v
	}
}

// isEmptyValue reports whether v is null, an empty object or an empty array.
func isEmptyValue(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	case []string:
		return len(t) == 0
	}
	return false
}
