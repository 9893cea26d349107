package main

import (
	"bytes"
	"context"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// A 2026-07-28 subscriptions/listen stream over HTTP, in the order the specification gives it:
// the acknowledgment first. mcp-go queues the acknowledgment to the request's notification
// forwarder while the request's goroutine goes on to write the result; when the result follows
// at once (nothing subscribed), the forwarder may have taken the acknowledgment off its queue
// and then find the request done, and drops it (14 of 50 runs). Here the stream's writer is
// ours (listenStream): it sees every event mcp-go writes, and the request's goroutine does not
// go on to its result (afterListen, a hook that runs before mcp-go writes it) until that writer
// has written the acknowledgment. The forwarder takes no lock the waiting goroutine holds, so it
// always gets to write it. The subscriptionId on every notification is mcp-go's own
// (tagSubscription) over HTTP.

// listenAckKey is the context key of a listen request's listenStream.
type listenAckKey struct{}

// listenStream is the response writer of one subscriptions/listen request: it passes every
// write on and closes acked once the acknowledgment has been written.
type listenStream struct {
	http.ResponseWriter
	once  sync.Once
	acked chan struct{}
}

// ackEvent is how the acknowledgment's method appears in the SSE event mcp-go writes.
var ackEvent = []byte(`"method":"` + mcp.MethodNotificationSubscriptionsAcknowledged + `"`)

func (l *listenStream) Write(p []byte) (int, error) {
	n, err := l.ResponseWriter.Write(p)
	if bytes.Contains(p, ackEvent) {
		l.once.Do(func() { close(l.acked) })
	}
	return n, err
}

// Flush passes a flush on (mcp-go streams only to a writer that can flush).
func (l *listenStream) Flush() {
	if f, ok := l.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the writer underneath.
func (l *listenStream) Unwrap() http.ResponseWriter { return l.ResponseWriter }

// listenHTTP gives each 2026-07-28 subscriptions/listen POST a listenStream, in its context too
// (for afterListen).
func listenHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get(mcp.HeaderMethod) != string(mcp.MethodSubscriptionsListen) ||
			!mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
			next.ServeHTTP(w, r)
			return
		}
		ls := &listenStream{ResponseWriter: w, acked: make(chan struct{})}
		next.ServeHTTP(ls, r.WithContext(context.WithValue(r.Context(), listenAckKey{}, ls)))
	})
}

// afterListen holds a listen request's result until its stream has written the
// acknowledgment, or the client has gone.
func afterListen(hooks *server.Hooks) {
	hooks.AddAfterSubscriptionsListen(func(ctx context.Context, _ any, _ *mcp.SubscriptionsListenRequest, _ *mcp.SubscriptionsListenResult) {
		ls, _ := ctx.Value(listenAckKey{}).(*listenStream)
		if ls == nil {
			return
		}
		select {
		case <-ls.acked:
		case <-ctx.Done():
		}
	})
}
