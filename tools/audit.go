package tools

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// idFields are the fields of arguments and results that name what a write acted on.
var idFields = []string{"roleId", "worldbookId", "imageId", "clientKey", "avatarImageId", "backgroundImageId", "revisionId"}

// audit writes the audit line of a write: who (the card service's user id, in proxy mode the
// grant and the MCP client's id, the MCP session and client), which tool, the ids it acted on
// (revisionKept: the revision it kept; revisionId: the one restore_revision put back), its
// outcome and duration. Never the arguments' text, a result's content, a revision's content
// or a token.
func audit(ctx context.Context, log *slog.Logger, d *deps, t *Tool, req mcp.CallToolRequest, res *mcp.CallToolResult, code string, dur time.Duration) {
	if log == nil || t.ReadOnly() {
		return
	}
	ids := map[string]any{}
	collect := func(m map[string]any) {
		for _, k := range idFields {
			if v, ok := m[k].(string); ok && v != "" {
				ids[k] = v
			}
		}
		if list, ok := m["createdEntryIds"].([]any); ok && len(list) > 0 {
			ids["createdEntryIds"] = list
		}
		if rev, ok := m["revision"].(map[string]any); ok {
			// The revision the write kept: its id, never its content.
			ids["revisionKept"] = rev["revisionId"]
		}
	}
	if raw, err := rawArguments(req); err == nil && len(raw) > 0 {
		var args map[string]any
		if json.Unmarshal(raw, &args) == nil {
			collect(args)
		}
	}
	if out, ok := res.StructuredContent.(map[string]any); ok && !res.IsError {
		collect(out)
	}
	who := d.client.Identity(ctx)
	if who.UserID == "" {
		who.UserID = "unknown"
	}
	attrs := []slog.Attr{
		slog.String("tool", t.Name),
		slog.String("user", who.UserID),
		slog.String("outcome", code),
		slog.Int64("durationMs", dur.Milliseconds()),
	}
	if who.GrantID != "" {
		attrs = append(attrs, slog.String("grant", who.GrantID), slog.String("clientId", who.ClientID))
	}
	if cs := server.ClientSessionFromContext(ctx); cs != nil {
		attrs = append(attrs, slog.String("session", cs.SessionID()))
		if ci, ok := cs.(server.SessionWithClientInfo); ok {
			info := ci.GetClientInfo()
			attrs = append(attrs, slog.String("client", info.Name+"/"+info.Version))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(ids)) {
		attrs = append(attrs, slog.Any(k, ids[k]))
	}
	log.LogAttrs(ctx, slog.LevelInfo, "write", attrs...)
}
