package msglimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

// testLimits: upload takes a file of up to 1000 bytes as "data"; every other argument 100.
func testLimits() *Limits {
	return &Limits{Depth: 8, Values: 50, Envelope: 200,
		Argument: func(tool, name string) int64 {
			if tool == "upload" && name == "data" {
				return 1000
			}
			return 100
		},
		Arguments: func(tool string) int64 {
			if tool == "upload" {
				return 1150
			}
			return 150
		},
	}
}

func call(tool, args string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
}

func TestCheck(t *testing.T) {
	t.Parallel()
	big := func(n int) string { return `"` + strings.Repeat("a", n) + `"` }
	nested := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name, msg string
		want      string // part of the reason; "" for accepted
		tool      string // the refusal is a tool result of this tool
	}{
		{"small call", call("get", `{"id":"x"}`), "", ""},
		{"a file where one travels", call("upload", `{"data":`+big(900)+`}`), "", ""},
		{"the file over its limit", call("upload", `{"data":`+big(1100)+`}`), `the argument "data" is 1102 bytes`, "upload"},
		{"a file-sized argument where none travels", call("get", `{"data":`+big(900)+`}`), `the argument "data" is 902 bytes`, "get"},
		{"the name after the arguments", `{"params":{"arguments":{"data":` + big(900) + `},"name":"upload"},"method":"tools/call","id":"a"}`, "", ""},
		{"an escaped key is read as the decoder reads it", `{"id":1,"method":"tools/call","params":{"name":"upload","argu\u006dents":{"data":` + big(900) + `}}}`, "", ""},
		{"an unknown key gets the envelope's limit", `{"id":1,"method":"tools/call","params":{"name":"upload","args":{"data":` + big(900) + `}}}`, "besides its arguments", "upload"},
		{"keys in another case still match", `{"ID":1,"Method":"tools/call","PARAMS":{"Name":"upload","Arguments":{"data":` + big(900) + `}}}`, "", ""},
		{"arguments over the tool's total", call("get", `{"a":`+big(90)+`,"b":`+big(90)+`}`), "accepts at most 150 in all", "get"},
		{"too deep", call("get", `{"a":`+nested(9)+`}`), "deeper than 8 levels", "get"},
		{"too many values", call("get", `{"a":[`+strings.Repeat("[],", 60)+`[]]}`), "more than 50 values", "get"},
		{"deep anywhere", nested(20), "deeper than 8", ""},
		{"a large envelope", `{"id":1,"method":"ping","params":{"x":` + big(300) + `}}`, "the message is", ""},
		{"a large _meta beside small arguments", `{"id":1,"method":"tools/call","params":{"name":"get","_meta":{"x":` + big(300) + `},"arguments":{}}}`, "besides its arguments", "get"},
		{"malformed: left to the decoder", `{"id":1,"method":"tools/call","params":{"name":"upload","arguments":{"data":"` + strings.Repeat("a", 300), "", ""},
		{"not an object", `"hello"`, "", ""},
		{"escaped method", `{"id":1,"method":"tools\/call","params":{"name":"get","arguments":{"data":` + big(120) + `}}}`, `the argument "data"`, "get"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := testLimits().Check([]byte(tc.msg))
			if tc.want == "" {
				if r != nil {
					t.Fatalf("refused: %s", r.Reason)
				}
				return
			}
			if r == nil || !strings.Contains(r.Reason, tc.want) {
				t.Fatalf("got %v, want a refusal saying %q", r, tc.want)
			}
			if r.Tool != tc.tool {
				t.Errorf("tool %q, want %q", r.Tool, tc.tool)
			}
		})
	}
}

func TestRefusalResponse(t *testing.T) {
	t.Parallel()
	r := testLimits().Check([]byte(call("get", `{"data":"`+strings.Repeat("a", 120)+`"}`)))
	var got struct {
		ID     int `json:"id"`
		Result struct {
			IsError bool `json:"isError"`
			Content []struct{ Type, Text string }
		} `json:"result"`
	}
	if err := json.Unmarshal(r.Response(), &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != 7 || !got.Result.IsError || len(got.Result.Content) != 1 || !strings.Contains(got.Result.Content[0].Text, `"data"`) {
		t.Fatalf("answer: %s", r.Response())
	}
	r = testLimits().Check([]byte(`{"id":"x","method":"ping","params":{"a":` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `}}`))
	if !bytes.Contains(r.Response(), []byte(`"error":{"code":-32600`)) || !bytes.Contains(r.Response(), []byte(`"id":"x"`)) {
		t.Fatalf("answer: %s", r.Response())
	}
	if r := testLimits().Check([]byte(`{"method":"notifications/x","params":` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `}`)); r == nil || r.Response() != nil {
		t.Fatalf("a notification refused: %v", r)
	}
}

// TestCheckBombAllocatesNothing walks the bomb (a 42 MB argument of 14 million empty
// arrays): it is refused, and the walk allocates next to nothing (decoded, it took 2.9 GiB).
func TestCheckBombAllocatesNothing(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"import_tavern_card","arguments":{"source":[`)
	for i := range 14_000_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("[]")
	}
	b.WriteString(`]}}}`)
	msg := b.Bytes()
	l := &Limits{Depth: DefaultDepth, Values: DefaultValues, Envelope: DefaultEnvelope,
		Argument: func(string, string) int64 { return 50 << 20 }, Arguments: func(string) int64 { return 50 << 20 }}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := l.Check(msg)
	runtime.ReadMemStats(&after)
	if r == nil || !strings.Contains(r.Reason, "values") {
		t.Fatalf("the bomb was not refused: %v", r)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<10 {
		t.Fatalf("checking a %d MB message allocated %d bytes", len(msg)>>20, alloc)
	}
}

// reference counts the values and the deepest nesting of valid JSON with encoding/json.
func reference(data []byte) (values, depth int, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct{ object, key bool }
	var stack []frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return values, depth, len(stack) == 0
		}
		if err != nil {
			return 0, 0, false
		}
		if n := len(stack); n > 0 {
			top := &stack[n-1]
			if d, isDelim := tok.(json.Delim); !isDelim || d == '{' || d == '[' {
				if top.object {
					if top.key = !top.key; top.key {
						values++ // a member's key; its value follows
						continue
					}
				} else {
					values++
				}
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, frame{object: tok == json.Delim('{')})
			depth = max(depth, len(stack))
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}

// FuzzCheck: never a panic; on valid JSON, a message is refused for its nesting or its values
// exactly when encoding/json counts more than the limits.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{call("upload", `{"data":"x"}`), `[[[]]]`, `{"a":[1,2,{"b":null}]}`, call("get", `{"a":[[],[],[]]}`), `"\u00`, `{"id":1,"method":"tools/call","params":{"name":"get","arguments":{"a\"b":1}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l := &Limits{Depth: 5, Values: 12, Envelope: 1 << 20,
			Argument: func(string, string) int64 { return 1 << 20 }, Arguments: func(string) int64 { return 1 << 20 }}
		r := l.Check(data)
		if r != nil {
			_ = r.Response()
		}
		if !json.Valid(data) {
			return
		}
		values, depth, ok := reference(data)
		if !ok {
			return
		}
		over := values > l.Values || depth > l.Depth
		refused := r != nil && (strings.Contains(r.Reason, "values") || strings.Contains(r.Reason, "levels"))
		if over != refused {
			t.Fatalf("%q: %d values, depth %d; refusal %v", data, values, depth, r)
		}
	})
}
