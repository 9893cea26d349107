package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// listens puts a stdio subscriptions/listen stream in the order 2026-07-28 gives it, in the one
// writer of stdout: the acknowledgment (notifications/subscriptions/acknowledged) first, then
// the notifications, each with the stream's subscriptionId, then the result. mcp-go queues the
// acknowledgment to its notification writer while the request's goroutine writes the result, so
// the result often came first (4 in 5 runs with an empty filter); and its list_changed
// notifications carry no subscriptionId over stdio, so a 2026 client may drop them, the tools
// enable_toolset adds included. The input tells it of each listen request (requested); the
// writer (lineWriter.Write) passes every line through order, which holds a result that comes
// before its acknowledgment and writes it right after it. (mcp-go writes both under one lock
// of its own, so the result cannot wait for the acknowledgment: it is held instead.)
type listens struct {
	mu sync.Mutex
	// pending are the listen requests whose acknowledgment is not written yet, by the id's JSON
	// text, each with its result when that came first (held).
	pending map[string][]byte
	// open are the acknowledged listen streams whose result is not written yet: their ids.
	open map[string]json.RawMessage
	// flush writes a held result whose acknowledgment never came, after ackWait.
	flush func(line []byte)
}

// ackWait bounds how long a listen's result is held for its acknowledgment.
const ackWait = 5 * time.Second

var (
	listenMethod = []byte(`"` + mcp.MethodSubscriptionsListen + `"`)
	ackMethod    = []byte(`"` + mcp.MethodNotificationSubscriptionsAcknowledged + `"`)
	listChanged  = []byte(`list_changed"`)
	subIDKey     = []byte(`"` + mcp.MetaKeySubscriptionID + `"`)
)

// requested notes a line of the input that may be a subscriptions/listen request.
func (l *listens) requested(line []byte) {
	if !bytes.Contains(line, listenMethod) {
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method != string(mcp.MethodSubscriptionsListen) || len(m.ID) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending == nil {
		l.pending, l.open = map[string][]byte{}, map[string]json.RawMessage{}
	}
	l.pending[string(m.ID)] = nil
}

// active reports whether any listen stream is pending or open (only then is a line looked at).
func (l *listens) active() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending) > 0 || len(l.open) > 0
}

// order returns what to write for a line: an acknowledgment, followed by its stream's result
// when that came first; a list_changed notification with the open stream's subscriptionId;
// nothing for a listen's result that comes before its acknowledgment (held until it, at most
// ackWait); any other line as it is.
func (l *listens) order(line []byte) []byte {
	switch {
	case bytes.Contains(line, ackMethod):
		var m struct {
			Params struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &m) != nil {
			return line
		}
		id := m.Params.Meta[mcp.MetaKeySubscriptionID]
		l.mu.Lock()
		defer l.mu.Unlock()
		held, ok := l.pending[string(id)]
		if !ok {
			return line
		}
		delete(l.pending, string(id))
		if held != nil {
			return append(slices.Clip(line), held...) // the stream's result came first: it ended
		}
		l.open[string(id)] = id
		return line
	case bytes.Contains(line, listChanged) && !bytes.Contains(line, subIDKey):
		l.mu.Lock()
		var id json.RawMessage
		for _, open := range l.open {
			id = open
			break
		}
		l.mu.Unlock()
		if id == nil {
			return line
		}
		return tagged(line, id)
	}
	key := responseID(line)
	if key == "" {
		return line
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, open := l.open[key]; open {
		delete(l.open, key) // the stream's result: it ends
		return line
	}
	if held, pending := l.pending[key]; !pending || held != nil {
		return line
	}
	l.pending[key] = slices.Clone(line)
	time.AfterFunc(ackWait, func() {
		l.mu.Lock()
		held, ok := l.pending[key]
		if ok {
			delete(l.pending, key)
		}
		l.mu.Unlock()
		if ok && held != nil && l.flush != nil {
			l.flush(held)
		}
	})
	return nil
}

// tagged returns a notification line with _meta.subscriptionId set to id (the line unchanged
// when it is not a JSON object with params).
func tagged(line []byte, id json.RawMessage) []byte {
	var n map[string]json.RawMessage
	if json.Unmarshal(line, &n) != nil {
		return line
	}
	params := map[string]json.RawMessage{}
	if raw, ok := n["params"]; ok && json.Unmarshal(raw, &params) != nil {
		return line
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := params["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return line
	}
	meta[mcp.MetaKeySubscriptionID] = id
	var err error
	if params["_meta"], err = json.Marshal(meta); err != nil {
		return line
	}
	if n["params"], err = json.Marshal(params); err != nil {
		return line
	}
	out, err := json.Marshal(n)
	if err != nil {
		return line
	}
	if bytes.HasSuffix(line, []byte("\n")) {
		out = append(out, '\n')
	}
	return out
}

// responseID returns the id of a response line as JSON text, read without decoding the line
// (a result may be large): mcp-go writes "jsonrpc" then "id" first; "" for any other line.
func responseID(line []byte) string {
	const prefix = `{"jsonrpc":"2.0","id":`
	if !bytes.HasPrefix(line, []byte(prefix)) {
		return ""
	}
	rest := line[len(prefix):]
	end := bytes.IndexAny(rest, ",}")
	if end <= 0 {
		return ""
	}
	return string(rest[:end])
}
