package tools

import (
	"context"
	"log/slog"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// rootsTimeout bounds how long the server waits for the client's roots/list answer.
const rootsTimeout = 10 * time.Second

// rootsInputID names the roots request in a multi round-trip exchange.
const rootsInputID = "roots"

// clientRootURIs returns the URIs of the client's roots (see clientRoots).
func clientRootURIs(ctx context.Context, c *Call) ([]string, error) {
	roots, err := clientRoots(ctx, c)
	if err != nil {
		return nil, err
	}
	uris := make([]string, len(roots))
	for i, r := range roots {
		uris[i] = r.URI
	}
	return uris, nil
}

// clientRoots asks the client for its roots, when it declared the roots capability. Under MCP
// 2026-07-28 and later the question is a multi round-trip input request (the call returns it, and
// the client calls again with the answer); with earlier clients it is a roots/list request sent
// during the call. A client that cannot answer counts as one with no roots.
func clientRoots(ctx context.Context, c *Call) ([]mcp.Root, error) {
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		if info.ClientCapabilities == nil || info.ClientCapabilities.Roots == nil {
			return nil, nil
		}
		if res := server.RootsResponse(c.Request.Params.InputResponses, rootsInputID); res != nil {
			return res.Roots, nil
		}
		if _, asked := c.Request.Params.InputResponses[rootsInputID]; asked {
			return nil, nil // answered, but not with roots
		}
		return nil, &needInput{result: server.NewInputRequestBuilder("").Roots(rootsInputID).ToolResult()}
	}
	srv := server.ServerFromContext(ctx)
	session := server.ClientSessionFromContext(ctx)
	if srv == nil || session == nil {
		return nil, nil
	}
	withInfo, ok := session.(server.SessionWithClientInfo)
	if !ok || withInfo.GetClientCapabilities().Roots == nil {
		return nil, nil
	}
	rctx, cancel := context.WithTimeout(ctx, rootsTimeout)
	defer cancel()
	res, err := srv.RequestRoots(rctx, mcp.ListRootsRequest{Request: mcp.Request{Method: string(mcp.MethodListRoots)}})
	if err != nil || res == nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.Log.LogAttrs(ctx, slog.LevelDebug, "roots/list failed; counting no roots", slog.String("err", errString(err)))
		return nil, nil
	}
	return res.Roots, nil
}

func errString(err error) string {
	if err == nil {
		return "no answer"
	}
	return err.Error()
}
