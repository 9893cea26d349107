package tools

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Helpers for the one-line summaries of results. They read the result object loosely: a
// summary never fails, it only says less when a field is missing.

// str returns m[key] as a string, "" when absent or not a string.
func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// obj returns m[key] as an object, nil when absent.
func obj(m map[string]any, key string) map[string]any {
	o, _ := m[key].(map[string]any)
	return o
}

// list returns m[key] as an array, nil when absent.
func list(m map[string]any, key string) []any {
	l, _ := m[key].([]any)
	return l
}

// num returns m[key] as an integer, 0 when absent.
func num(m map[string]any, key string) int64 {
	switch v := m[key].(type) {
	case json.Number:
		n, _ := v.Int64()
		return n
	case float64:
		return int64(v)
	case int:
		return int64(v)
	case int64:
		return v
	}
	return 0
}

// boolean returns m[key] as a boolean, false when absent.
func boolean(m map[string]any, key string) bool {
	b, _ := m[key].(bool)
	return b
}

// quoted renders a name in double quotes, cut to 60 characters.
func quoted(s string) string {
	r := []rune(s)
	if len(r) > 60 {
		s = string(r[:59]) + "…"
	}
	return fmt.Sprintf("%q", s)
}

// strings of a []any, skipping non-strings.
func stringsOf(l []any) []string {
	out := make([]string, 0, len(l))
	for _, v := range l {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// joinOr joins a list, or says none.
func joinOr(l []string, none string) string {
	if len(l) == 0 {
		return none
	}
	return strings.Join(l, ", ")
}
