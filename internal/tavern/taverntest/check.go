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

// DiffFieldsExcept is DiffFields of *want and *got with the named fields of T left out (taken
// as equal): what one side of a comparison cannot hold, such as a card's image and container
// members when it was read from JSON.
func DiffFieldsExcept[T any](t testing.TB, name string, want, got *T, skip ...string) {
	t.Helper()
	if want == nil || got == nil {
		if want != got {
			t.Errorf("%s: want %s, got %s", name, Show(want), Show(got))
		}
		return
	}
	w, g := *want, *got
	for _, field := range skip {
		wf, gf := reflect.ValueOf(&w).Elem().FieldByName(field), reflect.ValueOf(&g).Elem().FieldByName(field)
		if !wf.IsValid() {
			t.Fatalf("%s: %T has no field %s to leave out", name, w, field)
		}
		wf.Set(reflect.Zero(wf.Type()))
		gf.Set(reflect.Zero(gf.Type()))
	}
	DiffFields(t, name, &w, &g)
}

// CardSkips are the fields of a tavern.Card that a comparison of two cards' content leaves out:
// the CHARX members kept and those left out, which depend on the container the card was read
// from (the CHARX tests compare them), and, without withAvatar, its image.
func CardSkips(withAvatar bool) []string {
	if withAvatar {
		return []string{"Assets", "AssetsLeftOut"}
	}
	return []string{"Assets", "AssetsLeftOut", "Avatar"}
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
		if want.Type().Elem().Kind() == reflect.Uint8 && !reflect.DeepEqual(want.Interface(), got.Interface()) {
			t.Errorf("%s: want %d bytes, got %d bytes that differ", name, want.Len(), got.Len())
			return
		}
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
