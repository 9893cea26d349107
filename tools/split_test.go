package tools

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

// splitReference is what prepare did before splitObject: decode into a map of raw values,
// encode the map again.
func splitReference(data []byte) (map[string]json.RawMessage, []byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fields); err != nil {
		return nil, nil, err
	}
	return fields, bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func checkSplit(t *testing.T, data []byte) {
	t.Helper()
	var v any
	if json.Unmarshal(data, &v) != nil {
		return // prepare splits only arguments that decoded
	}
	if _, ok := v.(map[string]any); !ok {
		if _, err := splitObject(data); err == nil {
			t.Fatalf("splitObject(%q): no error for a non-object", data)
		}
		return
	}
	wantFields, wantBody, err := splitReference(data)
	if err != nil {
		t.Fatalf("reference(%q): %v", data, err)
	}
	ms, err := splitObject(data)
	if err != nil {
		t.Fatalf("splitObject(%q): %v", data, err)
	}
	if got, want := ms.keys(), slices.Sorted(maps.Keys(wantFields)); !slices.Equal(got, want) {
		t.Fatalf("splitObject(%q): keys %q, want %q", data, got, want)
	}
	for _, m := range ms {
		var a, b bytes.Buffer
		if err := json.Compact(&a, m.value); err != nil {
			t.Fatalf("splitObject(%q): value of %q: %v", data, m.key, err)
		}
		_ = json.Compact(&b, wantFields[m.key])
		if a.String() != b.String() {
			t.Fatalf("splitObject(%q): value of %q is %s, want %s", data, m.key, a.String(), b.String())
		}
		if s, err := jsonString(m.value); err == nil {
			var want string
			if json.Unmarshal(m.value, &want) != nil || s != want {
				t.Fatalf("jsonString(%s) = %q, want %q", m.value, s, want)
			}
		}
	}
	body, err := ms.encode(len(data))
	if err != nil {
		t.Fatalf("encode(%q): %v", data, err)
	}
	if !bytes.Equal(body, wantBody) {
		t.Fatalf("encode(%q) = %s, want %s", data, body, wantBody)
	}
}

func TestSplitObject(t *testing.T) {
	for _, s := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"b": [1, {"x": "}"}], "a" : "q\"uote"}`,
		`{"roleId":"r_1","roleWelcome":"<b>&amp;</b>","alternates":["a","b"]}`,
		`{"a":1,"a":2}`, `{"\u0061":1,"a":2}`, `{"a\"b":null,"é":true,"\u2028":false}`,
		`{"n":-1.5e+10,"t":true,"f":false,"z":null,"s":"\\\\","e":""}`,
		"{\"tab\"\t:\n\"x\\ty\"\r\n}", `{"deep":[[[[{"a":[]}]]]],"o":{}}`,
		`[1]`, `"s"`, `12`, `null`,
	} {
		checkSplit(t, []byte(s))
	}
}

func FuzzSplitObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"b":[1,2],"c":{"d":"e"}}`, `{"a":"x","a":"y"}`, `{"\u00e9":"\ud83d\ude00"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkSplit(t, data) })
}
