package tools

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Notifier writes one notification to the client at once, before the call that sent it goes
// on (see Options.Notifier); it returns ErrIndirect to leave a notification to mcp-go.
type Notifier func(ctx context.Context, n mcp.JSONRPCNotification) error

// ErrIndirect, returned by a Notifier, sends the notification through mcp-go instead.
var ErrIndirect = errors.New("tools: not written directly")

// notifier sends the notifications of calls: progress and log messages.
//
// mcp-go queues notifications for a writer goroutine but writes a call's response at once, so
// over stdio a handler that never blocks (the in-process sandbox, a fast service) returns
// before that goroutine runs, and every progress and log notification of the call reaches the
// client after the response, where clients such as the TypeScript SDK drop them (found by the
// e2e hosts suite). With a direct Notifier (stdio) they are written in order instead; without
// one (HTTP, where mcp-go writes a request's notifications ahead of its response) they go
// through mcp-go's queue.
//
// The official TypeScript SDK runs notification handlers a microtask after the message is read
// but handles a response at once: a progress notification read in the same chunk as its call's
// response finds its handler already gone, and is dropped. So with a direct Notifier, a call's
// response waits until noteGap after the last notification (settle): they then arrive in
// separate reads. Only calls that sent a notification wait.
type notifier struct {
	direct Notifier
	last   *atomic.Int64 // with direct: when the last notification was written (UnixNano)
}

// noteGap is how long after the last notification written a response waits (direct only).
// 3 ms held on an idle machine, but with two test files and their servers on 2 cores the
// client's event loop was sometimes busier than that, read the progress notification and the
// response in one chunk and dropped the notification (the hosts suite, 2 of about 8 runs);
// 20 ms leaves room for that and costs only calls that sent a notification.
const noteGap = 20 * time.Millisecond

// newNotifier returns the notifier of a server; direct may be nil.
func newNotifier(direct Notifier) notifier {
	return notifier{direct: direct, last: new(atomic.Int64)}
}

// settle waits, with a direct Notifier, until noteGap has passed since the last notification
// was written; it returns at once when none was written that recently.
func (n notifier) settle(ctx context.Context) {
	if n.direct == nil {
		return
	}
	wait := time.Duration(n.last.Load() + int64(noteGap) - time.Now().UnixNano())
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// send sends the notification method with params to the client of the call in ctx.
func (n notifier) send(ctx context.Context, method string, params map[string]any) error {
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		return server.ErrNotificationNotInitialized
	}
	if n.direct == nil {
		return srv.SendNotificationToClient(ctx, method, params)
	}
	if cs := server.ClientSessionFromContext(ctx); cs == nil || !cs.Initialized() {
		return server.ErrNotificationNotInitialized
	}
	err := n.direct(ctx, mcp.JSONRPCNotification{
		JSONRPC:      mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: method, Params: mcp.NotificationParams{AdditionalFields: params}},
	})
	if errors.Is(err, ErrIndirect) {
		return srv.SendNotificationToClient(ctx, method, params)
	}
	n.last.Store(time.Now().UnixNano())
	return err
}

// log sends a log message at level, when the client asked for that level: the session's
// logging/setLevel, or under MCP 2026-07-28 the level the request declared (none: no message).
func (n notifier) log(ctx context.Context, level mcp.LoggingLevel, data any) {
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		return
	}
	msg := mcp.NewLoggingMessageNotification(level, ServerName, data)
	if n.direct == nil {
		_ = srv.SendLogMessageToClient(ctx, msg)
		return
	}
	var want mcp.LoggingLevel
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		want = info.LogLevel
	} else if cs, ok := server.ClientSessionFromContext(ctx).(server.SessionWithLogging); ok {
		want = cs.GetLogLevel()
	}
	if want == "" || !level.ShouldSendTo(want) {
		return
	}
	_ = n.send(ctx, msg.Method, map[string]any{"level": msg.Params.Level, "logger": msg.Params.Logger, "data": msg.Params.Data})
}
