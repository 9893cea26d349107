package tools

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Notifier sends a call's notifications to the client (see Options.Notifier): stdio writes
// them at once, streamable HTTP into the call's response or through mcp-go's queue.
type Notifier interface {
	// Notify sends one notification.
	Notify(ctx context.Context, n mcp.JSONRPCNotification) error
	// Settle returns when a response written next cannot reach the client ahead of, or in the
	// same read as, the notifications sent so far (stdio: once the client has read them; HTTP:
	// once they are written to one of the session's streams), or when ctx ends.
	Settle(ctx context.Context)
}

// notifier sends the notifications of calls: progress and log messages.
//
// mcp-go queues notifications for a writer goroutine but writes a call's response at once, so
// over stdio a handler that never blocks (the in-process sandbox, a fast service) returns
// before that goroutine runs, and every progress and log notification of the call reaches the
// client after the response, where clients such as the TypeScript SDK drop them (found by the
// e2e hosts suite). With a Notifier (the commands always give one) they are sent in order
// instead; without one they go through mcp-go's queue.
//
// The official TypeScript SDK runs notification handlers a microtask after the chunk they were
// read in but handles a response at once: a progress notification read in the same chunk as its
// call's response finds its handler already gone, and is dropped. So every call's response
// waits for the Notifier's Settle (settle): over stdio, until the client has read the
// notifications written (cmd/cardwriter-mcp, lineWriter.Settle); over HTTP, until mcp-go has
// written them to a stream of the session (sessions.Settle).
type notifier struct {
	direct Notifier
}

// newNotifier returns the notifier of a server; direct may be nil.
func newNotifier(direct Notifier) notifier {
	return notifier{direct: direct}
}

// settle returns when the call's response may be written (see Notifier.Settle): at once
// without a direct Notifier.
func (n notifier) settle(ctx context.Context) {
	if n.direct != nil {
		n.direct.Settle(ctx)
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
	return n.direct.Notify(ctx, mcp.JSONRPCNotification{
		JSONRPC:      mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: method, Params: mcp.NotificationParams{AdditionalFields: params}},
	})
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
