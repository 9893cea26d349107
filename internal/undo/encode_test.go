package undo

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestEncodeStateAsMarshal: the states' own encoding means what json.Marshal's does, and is the
// same bytes for compact values without HTML characters (what the card service sends).
func TestEncodeStateAsMarshal(t *testing.T) {
	t.Parallel()
	entry := func(id string) map[string]json.RawMessage {
		return map[string]json.RawMessage{"entryId": json.RawMessage(`"` + id + `"`), "name": json.RawMessage(`"Old Town"`),
			"keywords": json.RawMessage(`["a","b"]`), "isEnabled": json.RawMessage(`true`), "priority": json.RawMessage(`10`),
			"matchOptions": json.RawMessage(`{"caseSensitive":false}`), "empty": nil, "k\"ey\n": json.RawMessage(`1`)}
	}
	for _, tc := range []struct {
		name  string
		state any
		same  bool
	}{
		{"worldbook", WorldbookState{Name: "W", Description: "d", Tags: []string{"x"}, Format: "f", BoundRoleIDs: []string{"r1"},
			Entries: []map[string]json.RawMessage{entry("e1"), entry("e2"), nil}}, true},
		{"worldbook without entries", WorldbookState{Name: "W"}, true},
		{"worldbook empty entries", WorldbookState{Entries: []map[string]json.RawMessage{}, Tags: []string{}}, true},
		{"worldbook html and spaces", WorldbookState{Name: "<a&b>", Entries: []map[string]json.RawMessage{
			{"content": json.RawMessage(`"x < y & z"`), "list": json.RawMessage(`[1, 2]`)}}}, false},
		{"card", CardState{Fields: map[string]json.RawMessage{"roleWelcome": json.RawMessage(`"hi"`), "prologue": nil},
			Sections: map[string]json.RawMessage{"scenario": json.RawMessage(`null`)}}, true},
		{"card fields only", CardState{Fields: map[string]json.RawMessage{"roleVisibility": json.RawMessage(`"public"`)}}, true},
		{"card sections only", CardState{Sections: map[string]json.RawMessage{"description": json.RawMessage(`"d"`)}}, true},
		{"card empty", CardState{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := encodeState(tc.state)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(tc.state)
			if err != nil {
				t.Fatal(err)
			}
			if tc.same && string(got) != string(want) {
				t.Fatalf("encodeState:\n%s\njson.Marshal:\n%s", got, want)
			}
			var a, b any
			if err := json.Unmarshal(got, &a); err != nil {
				t.Fatalf("encodeState gave invalid JSON %s: %v", got, err)
			}
			_ = json.Unmarshal(want, &b)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("encodeState means\n%v\njson.Marshal\n%v", a, b)
			}
		})
	}
}
