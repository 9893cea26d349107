// Command passthrough is a reference point for the benchmark harness (cmd/cardwriter-bench), not
// a product: the least an MCP server built on the same framework can do for the four measured
// calls. It serves the same four tool names over streamable HTTP with mcp-go, configured like
// `cardwriter-mcp http` (stateful sessions, in-memory event store, the same protocol revisions),
// and forwards each call's arguments to the card service with no validation, no contract lookup,
// no retries and no logging, answering with the service's JSON as text and structuredContent.
// What `cardwriter-mcp http` costs above it is the cost of what it does and this does not.
//
// Usage: passthrough http --addr 127.0.0.1:0 --api-host URL (token in CARDWRITER_TOKEN)
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// route says how one tool's arguments become a request.
type route struct {
	method string
	path   func(args map[string]json.RawMessage) (string, error) // consumes its parameters
	body   bool
}

func str(args map[string]json.RawMessage, name string) (string, error) {
	var s string
	if err := json.Unmarshal(args[name], &s); err != nil || s == "" {
		return "", fmt.Errorf("%s: want a string", name)
	}
	delete(args, name)
	return s, nil
}

var routes = map[string]route{
	"get_card": {method: http.MethodGet, path: func(a map[string]json.RawMessage) (string, error) {
		id, err := str(a, "roleId")
		return "/role/detail?roleId=" + url.QueryEscape(id), err
	}},
	"set_opening_lines": {method: http.MethodPatch, body: true, path: func(a map[string]json.RawMessage) (string, error) {
		id, err := str(a, "roleId")
		return "/role/" + url.PathEscape(id) + "/welcome", err
	}},
	"write_worldbook_document": {method: http.MethodPost, body: true, path: func(a map[string]json.RawMessage) (string, error) {
		id, err := str(a, "worldbookId")
		return "/worldbook/" + url.PathEscape(id) + "/document", err
	}},
	"list_trial_cards": {method: http.MethodGet, path: func(map[string]json.RawMessage) (string, error) {
		return "/trial-cards", nil
	}},
}

func main() {
	if len(os.Args) < 2 || os.Args[1] != "http" {
		fmt.Fprintln(os.Stderr, "usage: passthrough http --addr 127.0.0.1:0 --api-host URL")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("http", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	apiHost := fs.String("api-host", "", "the card service's address")
	_ = fs.String("auth", "none", "ignored (no authorization on /mcp)")
	_ = fs.Parse(os.Args[2:])
	if err := run(*addr, *apiHost, os.Getenv("CARDWRITER_TOKEN")); err != nil {
		fmt.Fprintln(os.Stderr, "passthrough:", err)
		os.Exit(1)
	}
}

func run(addr, apiHost, token string) error {
	if apiHost == "" || token == "" {
		return errors.New("--api-host and CARDWRITER_TOKEN are required")
	}
	base := apiHost + "/open/v1"
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 100, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}}
	srv := server.NewMCPServer("passthrough", "1", server.WithToolCapabilities(false))
	for name, rt := range routes {
		tool := mcp.NewToolWithRawSchema(name, "passthrough of "+name, json.RawMessage(`{"type":"object"}`))
		srv.AddTool(tool, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return forward(ctx, client, base, token, rt, req.Params.RawArguments)
		})
	}
	streamable := server.NewStreamableHTTPServer(srv,
		server.WithEndpointPath("/mcp"),
		server.WithStateful(true),
		server.WithEventStore(server.NewInMemoryEventStore()),
		server.WithStreamableHTTPProtocolVersions("2025-11-25", "2025-06-18", "2025-03-26"),
	)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", streamable)
	fmt.Fprintf(os.Stderr, "MCP endpoint: http://%s/mcp\n", ln.Addr())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func forward(ctx context.Context, client *http.Client, base, token string, rt route, raw json.RawMessage) (*mcp.CallToolResult, error) {
	fail := func(err error) (*mcp.CallToolResult, error) { return mcp.NewToolResultError(err.Error()), nil }
	args := map[string]json.RawMessage{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &args); err != nil {
			return fail(err)
		}
	}
	path, err := rt.path(args)
	if err != nil {
		return fail(err)
	}
	var body io.Reader
	if rt.body {
		data, err := json.Marshal(args)
		if err != nil {
			return fail(err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, rt.method, base+path, body)
	if err != nil {
		return fail(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if rt.body {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode/100 != 2 {
		return fail(fmt.Errorf("%s: %s", resp.Status, data))
	}
	return &mcp.CallToolResult{
		Content:              []mcp.Content{mcp.NewTextContent(string(data))},
		RawStructuredContent: data,
	}, nil
}
