package taverntest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// MustJSON encodes v as JSON, failing the test if it cannot.
func MustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

// Show renders v for a failure message: as JSON, or with %#v when it is no JSON.
func Show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// Diff reports (with t.Errorf) a difference between want and got, by reflect.DeepEqual, under
// the given field name.
func Diff(t testing.TB, field string, want, got any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Errorf("%s:\n want %s\n  got %s", field, Show(want), Show(got))
	}
}
