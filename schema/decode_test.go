package schema

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// checkDecode holds decodeFast to encoding/json's results: the same value for what it accepts,
// and nothing accepted that encoding/json refuses.
func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	want, wantErr := decodeStd(data)
	got, ok := decodeFast(data)
	if !ok {
		return // DecodeJSON falls back to decodeStd
	}
	if wantErr != nil {
		t.Fatalf("decodeFast(%q) accepted input encoding/json refuses: %v", data, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeFast(%q) = %#v, want %#v", data, got, want)
	}
}

func TestDecodeFast(t *testing.T) {
	for _, s := range []string{
		`{}`, `[]`, `""`, `0`, `-0`, `-0.5e-7`, `1E+2`, `12345678901234567890123`, `true`, `false`, `null`,
		` {"a" : [1, "x", {"b": null}], "c": true} `, `{"a":1,"a":2}`,
		`"\u00e9\ud83d\ude00\ud800\udc00\ud800x\udc00\u0000\"\\\/\b\f\n\r\t"`, "\"\xff\xfe ok \xe2\x82\"",
		`{"\u0061":"b"}`, `[[[[]]]]`, `{"deep":{"er":{"est":[{}]}}}`,
	} {
		if _, ok := decodeFast([]byte(s)); !ok {
			t.Errorf("decodeFast(%q) left valid JSON to encoding/json", s)
		}
		checkDecode(t, []byte(s))
	}
	for _, s := range []string{
		// Refused by both.
		``, ` `, `{`, `[1,]`, `{"a":1,}`, `01`, `1.`, `.5`, `-`, `1e`, `+1`, `"\x01"`, `"\q"`, `"\u12"`, `tru`, `nul`,
		`{} {}`, `1 2`, `{"a" 1}`, `[1 2]`, `"abc`, `{"a":}`,
	} {
		checkDecode(t, []byte(s))
	}
	// Nesting at and beyond encoding/json's limit.
	for _, n := range []int{9999, 10000, 10001} {
		checkDecode(t, []byte(strings.Repeat("[", n)+strings.Repeat("]", n)))
	}
}

func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e3,"x\u00e9\ud83d\ude00",true,null,{}]}`, `"\ud800\u0041"`, "\"\xc3\x28\"", `[-0.0e+1]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkDecode(t, data) })
}

// TestDecodeArgumentsRefusesNonText: what encoding/json would replace with U+FFFD without a
// word is refused, at its location.
func TestDecodeArgumentsRefusesNonText(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, where, what string }{
		{"lone high surrogate", `{"roleName":"Mira \ud800"}`, "/roleName", `lone UTF-16 surrogate (\ud800)`},
		{"lone low surrogate deep", `{"card":{"tags":["a","\udc00x"]}}`, "/card/tags/1", `(\udc00)`},
		{"reversed pair", `{"a":"\udc00\ud800"}`, "/a", "surrogate"},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", "/a", "invalid UTF-8"},
		{"invalid UTF-8 after an escape", "{\"a\":\"\\n\xff\"}", "/a", "invalid UTF-8"},
		{"in a key", `{"b\ud800":1}`, "/", "property name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := DecodeArguments([]byte(tt.in))
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Problems[0].InstanceLocation != tt.where || !strings.Contains(ve.Problems[0].Message, tt.what) {
				t.Errorf("DecodeArguments(%s) = %v; want %s at %s", tt.in, err, tt.what, tt.where)
			}
		})
	}
	for _, ok := range []string{`{"a":"\ud83d\ude00 ok"}`, `{"a":["é",1,{"b":null}]}`, `[]`} {
		if _, err := DecodeArguments([]byte(ok)); err != nil {
			t.Errorf("DecodeArguments(%s): %v", ok, err)
		}
	}
	if _, err := DecodeArguments([]byte(`{"a":`)); err == nil || !strings.Contains(err.Error(), "invalid JSON") {
		t.Errorf("malformed input: %v", err)
	}
}

// FuzzDecodeArguments: never a panic; what it accepts is what encoding/json decodes, and what
// encoding/json refuses it refuses too.
func FuzzDecodeArguments(f *testing.F) {
	for _, s := range []string{`{"a":"\ud800"}`, `{"a":["\udc00x",1]}`, "{\"a\":\"\xff\"}", `{"a":"\ud83d\ude00"}`, `[1,{"b":null}]`, `{"a":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeArguments(data)
		want, wantErr := decodeStd(data)
		if wantErr != nil && err == nil {
			t.Fatalf("DecodeArguments accepted %q, which encoding/json refuses: %v", data, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("DecodeArguments(%q) = %#v; encoding/json: %#v", data, got, want)
		}
	})
}
