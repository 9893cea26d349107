package sessions_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cardwriter/cardwriter-mcp/internal/sessions"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// session is the smallest mcp-go ClientSession: Sent and Settle read only its id.
type session string

func (session) Initialize()                                         {}
func (session) Initialized() bool                                   { return true }
func (session) NotificationChannel() chan<- mcp.JSONRPCNotification { return nil }
func (s session) SessionID() string                                 { return string(s) }

// TestSettleWaitsForTheStream holds a call's result (Settle) until the notifications it handed
// to mcp-go (Sent) have been written and flushed on one of the session's streams, whichever:
// here the standalone GET stream, written through the gate as mcp-go writes it.
func TestSettleWaitsForTheStream(t *testing.T) {
	t.Parallel()
	sess := sessions.New(store.NewMemory(), time.Minute, nil)
	hooks := &server.Hooks{}
	sess.Hooks(hooks)
	release := make(chan struct{})
	written := make(chan struct{})
	stream := sess.Gate(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		for i := range 2 {
			// mcp-go's writeSSEEvent: one write per event, then a flush; an event id first.
			fmt.Fprintf(w, "id: s.%d\n", i)
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1,"progressToken":"p"}}`)
			w.(http.Flusher).Flush()
		}
		// A result quoting the method inside a string is not a notification.
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"method\":\"notifications/progress\"}"}]}}`)
		w.(http.Flusher).Flush()
		close(written)
	}))
	srv := httptest.NewServer(stream)
	defer srv.Close()

	mcpSrv := server.NewMCPServer("test", "1", server.WithHooks(hooks))
	ctx := mcpSrv.WithContext(context.Background(), session("s1"))
	sess.Sent(ctx)
	sess.Sent(ctx)

	settled := make(chan time.Time, 1)
	go func() {
		sess.Settle(ctx, 10*time.Second)
		settled <- time.Now()
	}()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set(server.HeaderKeySessionID, "s1")
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-settled:
		t.Fatal("Settle returned before the notifications were written")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-written
	flushed := time.Now()
	select {
	case at := <-settled:
		// They went to the standalone stream: the result waits a little more, so that a client
		// reading its streams apart handles them first.
		if gap := at.Sub(flushed); gap < 10*time.Millisecond {
			t.Errorf("Settle returned %v after the notifications were flushed on the GET stream, want about 20ms", gap)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Settle did not return within 5 s of the notifications being written")
	}

	// Written as many as were sent (the result quoting the method is not a notification, and
	// what is written never counts past what was sent): the next call's Settle returns at once,
	// and a notification sent but never written holds it for its limit only.
	start := time.Now()
	sess.Settle(ctx, 10*time.Second)
	sess.Sent(ctx)
	sess.Settle(ctx, 50*time.Millisecond)
	if d := time.Since(start); d < 50*time.Millisecond || d > 5*time.Second {
		t.Errorf("a notification never written held Settle %v, want its limit of 50ms", d)
	}
	// It is given up on: it holds no later call.
	start = time.Now()
	sess.Settle(ctx, 10*time.Second)
	if d := time.Since(start); d > time.Second {
		t.Errorf("a notification given up on held the next Settle %v", d)
	}

	// A call's context ending ends the wait.
	sess.Sent(ctx)
	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	start = time.Now()
	sess.Settle(cctx, 10*time.Second)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Settle went on %v after its call's context ended", d)
	}

	// Another session, or a context without one, never waits.
	start = time.Now()
	sess.Settle(mcpSrv.WithContext(context.Background(), session("s2")), 10*time.Second)
	sess.Settle(context.Background(), 10*time.Second)
	if d := time.Since(start); d > time.Second {
		t.Errorf("Settle without notifications waited %v", d)
	}
}
