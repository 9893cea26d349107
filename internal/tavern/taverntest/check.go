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

// DiffFields reports (with t.Errorf) every difference between want and got under the name of
// the field that differs: a struct's fields one by one (a struct with unexported fields as a
// whole), a slice of structs element by element once the lengths agree, anything else as Diff.
func DiffFields[T any](t testing.TB, name string, want, got T) {
	t.Helper()
	diffValues(t, name, reflect.ValueOf(&want).Elem(), reflect.ValueOf(&got).Elem())
}

// diffValues is DiffFields on reflected values of one type.
func diffValues(t testing.TB, name string, want, got reflect.Value) {
	t.Helper()
	switch want.Kind() {
	case reflect.Pointer:
		if !want.IsNil() && !got.IsNil() {
			diffValues(t, name, want.Elem(), got.Elem())
			return
		}
	case reflect.Struct:
		if allExported(want.Type()) {
			for i := range want.NumField() {
				diffValues(t, name+"."+want.Type().Field(i).Name, want.Field(i), got.Field(i))
			}
			return
		}
	case reflect.Slice:
		if k := want.Type().Elem().Kind(); k == reflect.Struct || k == reflect.Pointer {
			if want.Len() != got.Len() {
				t.Errorf("%s: want %d elements, got %d:\n want %s\n  got %s", name, want.Len(), got.Len(), Show(want.Interface()), Show(got.Interface()))
				return
			}
			for i := range want.Len() {
				diffValues(t, fmt.Sprintf("%s[%d]", name, i), want.Index(i), got.Index(i))
			}
			return
		}
	}
	Diff(t, name, want.Interface(), got.Interface())
}

// allExported reports whether every field of the struct type st is exported.
func allExported(st reflect.Type) bool {
	for i := range st.NumField() {
		if !st.Field(i).IsExported() {
			return false
		}
	}
	return true
}
