package jsontext

import (
	"encoding/json"
	"testing"
)

func TestMarshal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   any
		want string
	}{
		{map[string]string{"content": `<b>"Mira" & co</b>`}, `{"content":"<b>\"Mira\" & co</b>"}`},
		{[]string{}, `[]`},
		{nil, `null`},
		{"line\nbreak", `"line\nbreak"`},
	}
	for _, tt := range tests {
		got, err := Marshal(tt.in)
		if err != nil || string(got) != tt.want {
			t.Errorf("Marshal(%#v) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
		var back any
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("Marshal(%#v) is not JSON: %v", tt.in, err)
		}
	}
	if _, err := Marshal(func() {}); err == nil {
		t.Error("a func was encoded")
	}
}

func TestNonNil(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   []string
		want string
	}{
		{nil, `[]`},
		{[]string{}, `[]`},
		{[]string{"a"}, `["a"]`},
	}
	for _, tt := range tests {
		got, err := Marshal(NonNil(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("Marshal(NonNil(%#v)) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}
