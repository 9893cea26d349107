package tools

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cardwriter/cardwriter-mcp/auth/authtest"
	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
)

// countingTransport counts the requests that reach the sandbox.
type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// env is one sandbox behind the MCP layer, reached through mcp-go's in-process client.
type env struct {
	t        *testing.T
	svc      *sandbox.Service
	clock    *authtest.Clock
	requests *countingTransport
	srv      *server.MCPServer
	client   *client.Client
	tools    map[string]Tool

	mu            sync.Mutex
	notifications []mcp.JSONRPCNotification
}

const demoToken = "sandbox-demo-token-7f3a9c"

// newEnv starts a sandbox (checking its own responses against the contract), an MCP server
// with opts over it, and an initialized in-process client: newTavernEnv with nothing besides.
func newEnv(t *testing.T, opts Options) *env {
	t.Helper()
	e, _ := newTavernEnv(t, tavernEnvConfig{opts: opts})
	return e
}

// call invokes a tool with arguments given as JSON.
func (e *env) call(name, args string) *mcp.CallToolResult {
	e.t.Helper()
	return e.callMeta(name, args, nil)
}

func (e *env) callMeta(name, args string, meta *mcp.Meta) *mcp.CallToolResult {
	e.t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Meta = meta
	if args != "" {
		req.Params.Arguments = json.RawMessage(args)
	}
	res, err := e.client.CallTool(context.Background(), req)
	if err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	return res
}

// ok invokes a tool that must succeed, checks its result against the tool's output schema and
// returns its structured content.
func (e *env) ok(name, args string) map[string]any {
	e.t.Helper()
	res := e.call(name, args)
	if res.IsError {
		e.t.Fatalf("%s(%s): isError; text: %s", name, args, text(res))
	}
	sc := structured(e.t, res)
	if err := e.tools[name].output.Validate(sc); err != nil {
		e.t.Fatalf("%s: structuredContent fails the output schema: %v\n%v", name, err, sc)
	}
	if len(res.Content) == 0 || text(res) == "" {
		e.t.Fatalf("%s: no text content", name)
	}
	return sc.(map[string]any)
}

// fail invokes a tool that must answer isError and returns its error envelope.
func (e *env) fail(name, args string) (map[string]any, string) {
	e.t.Helper()
	res := e.call(name, args)
	if !res.IsError {
		e.t.Fatalf("%s(%s): want isError, got success: %s", name, args, text(res))
	}
	if res.StructuredContent != nil || len(res.RawStructuredContent) > 0 {
		e.t.Fatalf("%s: an error result carries structuredContent (it must validate against the output schema, so errors have none)", name)
	}
	env, ok := ErrorEnvelope(res)
	if !ok {
		e.t.Fatalf("%s: error without an envelope as its second text block: %s", name, text(res))
	}
	if _, ok := env["retryable"].(bool); !ok {
		e.t.Fatalf("%s: envelope without a boolean retryable: %v", name, env)
	}
	if msg, _ := env["message"].(string); msg == "" || firstText(res) != msg {
		e.t.Fatalf("%s: text %q is not the envelope's message %q", name, firstText(res), msg)
	}
	return env, text(res)
}

// structured returns a result's structured content decoded as the wire carries it.
func structured(t *testing.T, res *mcp.CallToolResult) any {
	t.Helper()
	raw := res.RawStructuredContent
	if len(raw) == 0 {
		var err error
		if raw, err = json.Marshal(res.StructuredContent); err != nil {
			t.Fatal(err)
		}
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("structuredContent: %v", err)
	}
	return v
}

// text joins a result's text contents.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func firstText(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	tc, _ := res.Content[0].(mcp.TextContent)
	return tc.Text
}

// notificationsOf returns the notifications received so far with the given method.
func (e *env) notificationsOf(method string) []mcp.JSONRPCNotification {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []mcp.JSONRPCNotification
	for _, n := range e.notifications {
		if n.Method == method {
			out = append(out, n)
		}
	}
	return out
}

// waitFor polls until cond holds or a second passes (notifications arrive asynchronously).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// jsonArg renders a Go value as a JSON argument string.
func jsonArg(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// initializedClient returns an in-process client of srv, initialized under the newest protocol
// before 2026-07-28 with clientInfo.name name, closed at the end of the test.
func initializedClient(t *testing.T, srv *server.MCPServer, name string) *client.Client {
	t.Helper()
	cl, err := client.NewInProcessClient(srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	ctx := context.Background()
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: name, Version: "1"}
	if _, err := cl.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return cl
}
