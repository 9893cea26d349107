// Package msglimit bounds a JSON-RPC message before anything decodes it: one pass over its
// bytes, building nothing, checks how deep it nests, how many values it holds, and, for a
// tools/call, the size of each argument and of the arguments together against the tool's own
// limits (large only where a file or an image travels). mcp-go decodes a message whole into
// maps and slices before any handler runs (a 42 MB argument of 14 million empty arrays took
// 2.9 GiB); a message refused here is never handed to it.
//
// The walk is lenient: what it cannot read as JSON it lets through, for the decoder to refuse
// (encoding/json checks a whole message before it builds anything). Where the walk could be
// fooled (a key spelled with escapes or in another case), it falls on the strict side: a value
// it does not recognise as a tool's argument gets the small limit of the message's envelope.
package msglimit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Defaults for the limits that no tool decides.
const (
	// DefaultDepth is deeper than any tool's arguments nest (a card's extensions, a worldbook
	// entry's options: under 10).
	DefaultDepth = 64
	// DefaultValues leaves room for test_worldbook_triggers' 10,000 entries of about 25 values;
	// decoded, that many values take about 30 MB.
	DefaultValues = 300_000
	// DefaultEnvelope bounds what a message carries besides a call's arguments.
	DefaultEnvelope = 1 << 20
)

// Limits bound one message.
type Limits struct {
	// Depth is the deepest nesting of arrays and objects accepted.
	Depth int
	// Values is the most values (array elements and object members, at any depth) accepted.
	Values int
	// Envelope is the most bytes of a message outside a tools/call's arguments, and of any
	// message that is no tools/call.
	Envelope int64
	// Argument returns the most bytes (as JSON) of the argument name of tool.
	Argument func(tool, name string) int64
	// Arguments returns the most bytes (as JSON) of tool's arguments object.
	Arguments func(tool string) int64
	// Invalid, when set, returns why the params of a request to method are invalid (answered
	// -32602 Invalid params before any handler runs), "" when they are not; it is called for
	// messages within the limits that are no tools/call.
	Invalid func(method string, params json.RawMessage) string
}

// Refusal is a message refused, with what the answer to it needs.
type Refusal struct {
	// ID is the request's id as it came (nil for a notification, or when unknown).
	ID json.RawMessage
	// Tool is the tool called, for a tools/call; its answer is then a tool result the model
	// reads (isError), so that it can send less.
	Tool string
	// Reason says what is over which limit, or what is invalid.
	Reason string
	// Invalid is set when the request's params are invalid (Limits.Invalid): the answer is
	// -32602 Invalid params.
	Invalid bool
}

func (r *Refusal) Error() string { return r.Reason }

// Response is the JSON-RPC answer to the refused request, or nil for a notification.
func (r *Refusal) Response() []byte {
	if len(r.ID) == 0 {
		return nil
	}
	var msg any
	if r.Tool != "" {
		msg = map[string]any{"jsonrpc": "2.0", "id": r.ID, "result": map[string]any{
			"isError": true,
			"content": []map[string]string{{"type": "text", "text": "Invalid arguments: " + r.Reason}},
		}}
	} else if r.Invalid {
		msg = map[string]any{"jsonrpc": "2.0", "id": r.ID, "error": map[string]any{"code": -32602, "message": "Invalid params: " + r.Reason}}
	} else {
		msg = map[string]any{"jsonrpc": "2.0", "id": r.ID, "error": map[string]any{"code": -32600, "message": "Invalid Request: " + r.Reason}}
	}
	out, _ := json.Marshal(msg)
	return out
}

// Check returns why msg is refused, or nil when it is within the limits (or not JSON a walk
// can read: the decoder refuses it).
func (l *Limits) Check(msg []byte) *Refusal {
	w := walker{b: msg, l: l}
	w.space()
	ok := w.value(0, roleTop, "")
	if w.over != "" {
		return w.refusal(w.over)
	}
	if !ok {
		return nil
	}
	if w.method != "tools/call" {
		if int64(len(msg)) > l.Envelope {
			return w.refusal(fmt.Sprintf("the message is %d bytes; at most %d are accepted", len(msg), l.Envelope))
		}
		if l.Invalid != nil && len(w.id) > 0 {
			if reason := l.Invalid(w.method, w.params); reason != "" {
				r := w.refusal(reason)
				r.Invalid = true
				return r
			}
		}
		return nil
	}
	if envelope := int64(len(msg)) - w.argsBytes; envelope > l.Envelope {
		return w.refusal(fmt.Sprintf("the request is %d bytes besides its arguments; at most %d are accepted", envelope, l.Envelope))
	}
	for _, a := range w.args {
		if most := l.Argument(w.tool, a.name); a.bytes > most {
			return w.refusal(fmt.Sprintf("the argument %q is %d bytes of JSON; %s accepts at most %d for it", a.name, a.bytes, w.tool, most))
		}
	}
	if most := l.Arguments(w.tool); w.argsBytes > most {
		return w.refusal(fmt.Sprintf("the arguments are %d bytes of JSON; %s accepts at most %d in all", w.argsBytes, w.tool, most))
	}
	return nil
}

func (w *walker) refusal(reason string) *Refusal {
	r := &Refusal{ID: w.id, Reason: reason}
	if w.method == "tools/call" {
		r.Tool = w.tool
		if r.Tool == "" {
			r.Tool = "the tool"
		}
	}
	return r
}

// role is what a value is in the message, as far as the limits care.
type role int

const (
	roleOther     role = iota
	roleTop            // the message
	roleParams         // the message's params
	roleArguments      // a tools/call's arguments
	roleArgument       // one argument
)

type argument struct {
	name  string
	bytes int64
}

type walker struct {
	b      []byte
	i      int
	l      *Limits
	values int
	over   string // the limit exceeded, which ends the walk

	method    string
	id        json.RawMessage
	tool      string
	params    json.RawMessage // the params member as it came (not copied)
	args      []argument      // each argument of the arguments object(s), as met
	argsBytes int64           // the arguments object(s), in all
}

func (w *walker) space() {
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

// value walks one value, of role r under the key key; it reports false when the walk ends
// (malformed input, or a limit exceeded: w.over).
func (w *walker) value(depth int, r role, key string) bool {
	if w.i >= len(w.b) {
		return false
	}
	start := w.i
	var ok bool
	switch c := w.b[w.i]; c {
	case '{':
		ok = w.object(depth+1, r)
	case '[':
		ok = w.array(depth + 1)
	case '"':
		_, ok = w.str()
	default:
		ok = w.scalar()
	}
	if !ok {
		return false
	}
	switch r {
	case roleArguments:
		w.argsBytes += int64(w.i - start)
	case roleArgument:
		w.args = append(w.args, argument{name: key, bytes: int64(w.i - start)})
	}
	return true
}

func (w *walker) enter(depth int) bool {
	if depth > w.l.Depth {
		w.over = fmt.Sprintf("the message nests deeper than %d levels", w.l.Depth)
		return false
	}
	return true
}

func (w *walker) count() bool {
	if w.values++; w.values > w.l.Values {
		w.over = fmt.Sprintf("the message holds more than %d values (array elements and object members)", w.l.Values)
		return false
	}
	return true
}

func (w *walker) object(depth int, r role) bool {
	if !w.enter(depth) {
		return false
	}
	w.i++ // {
	w.space()
	if w.i < len(w.b) && w.b[w.i] == '}' {
		w.i++
		return true
	}
	for {
		if w.i >= len(w.b) || w.b[w.i] != '"' {
			return false
		}
		key, ok := w.str()
		if !ok {
			return false
		}
		w.space()
		if w.i >= len(w.b) || w.b[w.i] != ':' {
			return false
		}
		w.i++
		w.space()
		if !w.count() {
			return false
		}
		child := roleOther
		name := ""
		switch {
		case r == roleTop && strings.EqualFold(key, "params"):
			child = roleParams
		case r == roleParams && strings.EqualFold(key, "arguments"):
			child = roleArguments
		case r == roleArguments:
			child, name = roleArgument, key
		}
		valueStart := w.i
		if !w.value(depth, child, name) {
			return false
		}
		w.note(r, key, w.b[valueStart:w.i])
		if more, ok := w.after('}'); !more {
			return ok
		}
	}
}

// after walks what follows a member or an element: a comma (more follows) or the closing
// bracket close (the container ended, ok); anything else ends the walk.
func (w *walker) after(close byte) (more, ok bool) {
	w.space()
	if w.i >= len(w.b) {
		return false, false
	}
	switch w.b[w.i] {
	case ',':
		w.i++
		w.space()
		return true, true
	case close:
		w.i++
		return false, true
	}
	return false, false
}

// note keeps what the limits need of a member: the method, the id, the tool's name. Like
// encoding/json, the last of duplicate keys wins, and keys match without regard to case.
func (w *walker) note(r role, key string, raw []byte) {
	switch {
	case r == roleTop && strings.EqualFold(key, "method"):
		w.method = shortString(raw)
	case r == roleTop && strings.EqualFold(key, "id"):
		if len(raw) <= 256 {
			w.id = json.RawMessage(bytes.Clone(raw))
		}
	case r == roleTop && strings.EqualFold(key, "params"):
		w.params = raw
	case r == roleParams && strings.EqualFold(key, "name"):
		w.tool = shortString(raw)
	}
}

// shortString decodes a JSON string of at most 256 bytes; "" for anything else.
func shortString(raw []byte) string {
	if len(raw) > 256 || len(raw) < 2 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

func (w *walker) array(depth int) bool {
	if !w.enter(depth) {
		return false
	}
	w.i++ // [
	w.space()
	if w.i < len(w.b) && w.b[w.i] == ']' {
		w.i++
		return true
	}
	for {
		if !w.count() || !w.value(depth, roleOther, "") {
			return false
		}
		if more, ok := w.after(']'); !more {
			return ok
		}
	}
}

// str walks a string and returns it decoded when it is short (a key, a method, a name);
// longer strings are only skipped.
func (w *walker) str() (string, bool) {
	start := w.i
	w.i++ // "
	escaped := false
	for w.i < len(w.b) {
		switch c := w.b[w.i]; {
		case c == '"':
			w.i++
			raw := w.b[start:w.i]
			if len(raw) > 258 {
				return "", true
			}
			if !escaped {
				if !utf8.Valid(raw) {
					return string(bytes.ToValidUTF8(raw[1:len(raw)-1], []byte("\uFFFD"))), true
				}
				return string(raw[1 : len(raw)-1]), true
			}
			return shortString(raw), true
		case c == '\\':
			escaped = true
			w.i += 2
		case c < 0x20:
			return "", false
		default:
			w.i++
		}
	}
	return "", false
}

// scalar walks a number, true, false or null (loosely: the decoder checks them).
func (w *walker) scalar() bool {
	start := w.i
	for w.i < len(w.b) {
		switch w.b[w.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return w.i > start
		case '{', '[', '"', ':':
			return false
		}
		w.i++
	}
	return w.i > start
}
