package tools

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// confirmInputID names the confirmation among a modern request's input responses.
const confirmInputID = "confirm"

// confirmTimeout bounds how long a 2025-era client may take to answer a confirmation.
const confirmTimeout = 10 * time.Minute

// codeDeclined is the outcome of a call the user did not confirm: nothing was done.
const codeDeclined = "declined"

// confirmSchema is the form a confirmation shows: one yes/no field.
func confirmSchema(action string) map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"confirm": map[string]any{"type": "boolean", "title": action, "description": "Yes to go ahead."},
		},
		"required": []any{"confirm"},
	}
}

// confirm asks the user, through MCP elicitation (form mode), whether to do what cannot be
// undone; message says what will happen. A client that declares no elicitation capability is
// not asked (the call goes ahead, as without this feature). With MCP 2026-07-28 the question is
// a multi round-trip input request; before, an elicitation/create request during the call.
// It returns a *Failure "declined" when the user declines, cancels or answers no.
func confirm(ctx context.Context, c *Call, action, message string) error {
	params := mcp.ElicitationParams{Mode: "form", Message: message, RequestedSchema: confirmSchema(action)}
	var res *mcp.ElicitationResult
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		if info.ClientCapabilities == nil || info.ClientCapabilities.Elicitation == nil {
			return nil
		}
		if res = server.ElicitationResponse(c.Request.Params.InputResponses, confirmInputID); res == nil {
			if _, asked := c.Request.Params.InputResponses[confirmInputID]; !asked {
				return &needInput{result: server.NewInputRequestBuilder("").Elicit(confirmInputID, params).ToolResult()}
			}
		}
	} else {
		srv := server.ServerFromContext(ctx)
		session, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo)
		if srv == nil || !ok || session.GetClientCapabilities().Elicitation == nil {
			return nil
		}
		ectx, cancel := context.WithTimeout(ctx, confirmTimeout)
		defer cancel()
		var err error
		res, err = srv.RequestElicitation(ectx, mcp.ElicitationRequest{Params: params})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.Log.LogAttrs(ctx, slog.LevelInfo, "confirmation not obtained", slog.String("tool", c.Tool.Name), slog.String("err", err.Error()))
			res = nil
		}
	}
	if res != nil && res.Action == mcp.ElicitationResponseActionAccept {
		if content, ok := res.Content.(map[string]any); ok && content["confirm"] == true {
			return nil
		}
	}
	answer := "did not confirm it"
	if res != nil {
		switch res.Action {
		case mcp.ElicitationResponseActionDecline:
			answer = "declined"
		case mcp.ElicitationResponseActionCancel:
			answer = "cancelled the question"
		}
	}
	return &Failure{Code: codeDeclined, Detail: map[string]any{"answer": answer},
		Message: fmt.Sprintf("Nothing was done: the user %s (%s). Ask the user before trying again.", answer, action)}
}
