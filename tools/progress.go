package tools

import (
	"context"
	"log/slog"

	"github.com/mark3labs/mcp-go/mcp"
)

// Progress sends notifications/progress for one request, when the request carried a
// progressToken in its _meta; otherwise every method does nothing. Any handler that makes more
// than one request upstream can report its steps with it.
type Progress struct {
	notes notifier
	token mcp.ProgressToken
	log   *slog.Logger
}

// newProgress returns the progress reporter of a request with the given _meta.
func newProgress(meta *mcp.Meta, notes notifier, log *slog.Logger) *Progress {
	p := &Progress{log: log}
	if meta == nil || meta.ProgressToken == nil {
		return p
	}
	p.notes = notes
	p.token = meta.ProgressToken
	return p
}

// Enabled reports whether the client asked for progress notifications.
func (p *Progress) Enabled() bool { return p != nil && p.token != nil }

// Report tells the client that done of total steps are complete, with a short message (never
// card text). Sending is best effort: a notification that cannot be queued is dropped.
func (p *Progress) Report(ctx context.Context, done, total int, message string) {
	if !p.Enabled() {
		return
	}
	params := map[string]any{"progressToken": p.token, "progress": done, "total": total}
	if message != "" {
		params["message"] = message
	}
	if err := p.notes.send(ctx, string(mcp.MethodNotificationProgress), params); err != nil && p.log != nil {
		p.log.LogAttrs(ctx, slog.LevelDebug, "progress notification not sent", slog.String("err", err.Error()))
	}
}
