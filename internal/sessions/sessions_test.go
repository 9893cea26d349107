package sessions_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cardwriter/cardwriter-mcp/internal/sessions"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// replica is one mcp-go streamable HTTP server on the shared sessions, with a tool that asks
// the client a question and one that logs at every level.
func replica(t *testing.T, kv store.KV, waiting chan<- string, cancelled chan<- string) *httptest.Server {
	t.Helper()
	sess := sessions.New(kv, time.Minute, nil)
	hooks := &server.Hooks{}
	sess.Hooks(hooks)
	mcpSrv := server.NewMCPServer("test", "1", server.WithHooks(hooks), server.WithLogging(), server.WithToolCapabilities(false))
	mcpSrv.AddTool(mcp.NewTool("ask"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		caps := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo).GetClientCapabilities()
		if caps.Elicitation == nil {
			return mcp.NewToolResultText("not asked: no elicitation capability"), nil
		}
		res, err := server.ServerFromContext(ctx).RequestElicitation(ctx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{Message: "sure?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}}})
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcp.NewToolResultText("answer: " + string(res.Action)), nil
	})
	mcpSrv.AddTool(mcp.NewTool("wait"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		waiting <- "started"
		select {
		case <-ctx.Done():
			cancelled <- "cancelled"
			return nil, ctx.Err()
		case <-time.After(30 * time.Second):
			return mcp.NewToolResultText("not cancelled"), nil
		}
	})
	mcpSrv.AddTool(mcp.NewTool("log"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		srv := server.ServerFromContext(ctx)
		for _, l := range []mcp.LoggingLevel{mcp.LoggingLevelDebug, mcp.LoggingLevelWarning} {
			_ = srv.SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(l, "test", string(l)))
		}
		return mcp.NewToolResultText("logged"), nil
	})
	streamable := server.NewStreamableHTTPServer(mcpSrv, server.WithSessionIdManagerResolver(sess), server.WithEventStore(sess.Events()),
		server.WithSessionIdleTTL(time.Minute), server.WithDisableLocalhostProtection(true),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context { return sess.Restore(ctx, r) }))
	ctx, cancel := context.WithCancel(context.Background())
	if err := sess.Listen(ctx, streamable); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sess.Gate(streamable))
	t.Cleanup(func() { cancel(); ts.Close(); _ = streamable.Shutdown(context.Background()) })
	return ts
}

type rpc struct {
	ID     any             `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// post sends a JSON-RPC message and calls each message of the answer (JSON or SSE) with its
// event id.
func post(t *testing.T, url, sid string, body any, each func(id string, m rpc)) (int, http.Header) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(string(raw)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	read(t, resp, each)
	return resp.StatusCode, resp.Header
}

func read(t *testing.T, resp *http.Response, each func(id string, m rpc)) {
	t.Helper()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m rpc
		if b, _ := io.ReadAll(resp.Body); json.Unmarshal(b, &m) == nil && each != nil {
			each("", m)
		}
		return
	}
	sc := bufio.NewScanner(resp.Body)
	id := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "id: "); ok {
			id = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok && each != nil {
			var m rpc
			if json.Unmarshal([]byte(v), &m) == nil {
				each(id, m)
			}
		}
	}
}

func initialize(t *testing.T, url string, caps map[string]any) string {
	t.Helper()
	status, h := post(t, url, "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": caps, "clientInfo": map[string]any{"name": "t", "version": "1"}}}, nil)
	sid := h.Get("Mcp-Session-Id")
	if status != 200 || sid == "" {
		t.Fatalf("initialize: %d %q", status, sid)
	}
	post(t, url, sid, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}, nil)
	return sid
}

func callTool(name string, id int) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{"name": name, "arguments": map[string]any{}}}
}

func resultText(m rpc) string {
	var r mcp.CallToolResult
	_ = json.Unmarshal(m.Result, &r)
	if len(r.Content) == 0 {
		return string(m.Error)
	}
	return r.Content[0].(mcp.TextContent).Text
}

// The session negotiated on replica A serves its requests on replica B: what it negotiated
// (capabilities, log level), a question asked during a call on B and answered through A, a
// stream of B resumed on A, and its end on B, which A sees.
func TestSessionOnTwoReplicas(t *testing.T) {
	t.Parallel()
	kv := store.NewMemory() // shared, with an in-process broadcast: two replicas in one process
	waiting, cancelled := make(chan string, 1), make(chan string, 1)
	a, b := replica(t, kv, waiting, cancelled), replica(t, kv, waiting, cancelled)
	sid := initialize(t, a.URL, map[string]any{"elicitation": map[string]any{}})

	// The log level set on A filters B's notifications.
	post(t, a.URL, sid, map[string]any{"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": map[string]any{"level": "warning"}}, nil)
	var levels []string
	var events []string
	var final string
	post(t, b.URL, sid, callTool("log", 3), func(id string, m rpc) {
		events = append(events, id)
		if m.Method == "notifications/message" {
			var p struct{ Level string }
			_ = json.Unmarshal(m.Params, &p)
			levels = append(levels, p.Level)
		}
		if m.Result != nil {
			final = resultText(m)
		}
	})
	if strings.Join(levels, ",") != "warning" || final != "logged" {
		t.Errorf("on B after setLevel on A: levels %v, result %q", levels, final)
	}

	// A stream of B, resumed on A with Last-Event-ID: the rest of it, the result included.
	if len(events) < 2 || events[0] == "" {
		t.Fatalf("no SSE event ids: %v", events)
	}
	req, _ := http.NewRequest(http.MethodGet, a.URL, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", events[0])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var replayed []string
	read(t, resp, func(id string, m rpc) { replayed = append(replayed, id) })
	resp.Body.Close()
	if strings.Join(replayed, ",") != strings.Join(events[1:], ",") {
		t.Errorf("resumed on A: %v, want %v", replayed, events[1:])
	}

	// A question asked during a call on B, answered through A.
	final = ""
	post(t, b.URL, sid, callTool("ask", 4), func(_ string, m rpc) {
		if m.Method == "elicitation/create" {
			status, _ := post(t, a.URL, sid, map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}, nil)
			if status != http.StatusAccepted {
				t.Errorf("the answer through A: %d", status)
			}
		}
		if m.Result != nil || m.Error != nil {
			final = resultText(m)
		}
	})
	if final != "answer: accept" {
		t.Errorf("the call on B: %q", final)
	}

	// A call on B, cancelled through A.
	go func() { // no t.Fatal off the test's goroutine: the result does not matter
		raw, _ := json.Marshal(callTool("wait", 6))
		req, _ := http.NewRequest(http.MethodPost, b.URL, strings.NewReader(string(raw)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	<-waiting
	if status, _ := post(t, a.URL, sid, map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": map[string]any{"requestId": 6, "reason": "test"}}, nil); status != http.StatusAccepted {
		t.Errorf("the cancellation through A: %d", status)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Error("the call on B was not cancelled through A")
	}

	// Ended on B: gone on A.
	del, _ := http.NewRequest(http.MethodDelete, b.URL, nil)
	del.Header.Set("Mcp-Session-Id", sid)
	del.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if resp, err := http.DefaultClient.Do(del); err != nil || resp.StatusCode != 200 {
		t.Fatalf("delete: %v %v", resp, err)
	}
	if status, _ := post(t, a.URL, sid, callTool("log", 5), nil); status != http.StatusNotFound {
		t.Errorf("after DELETE on B, A answered %d", status)
	}
}

// A session the store lost (Redis failed over before its record reached a replica) is answered
// 404 by every replica, the one that opened it included, so that the client starts a new one.
func TestSessionLostFromTheStore(t *testing.T) {
	t.Parallel()
	kv := store.NewMemory()
	waiting, cancelled := make(chan string, 1), make(chan string, 1)
	a, b := replica(t, kv, waiting, cancelled), replica(t, kv, waiting, cancelled)
	sid := initialize(t, a.URL, nil)
	if status, _ := post(t, b.URL, sid, callTool("log", 2), nil); status != http.StatusOK {
		t.Fatalf("before the loss: %d", status)
	}
	if err := kv.Delete(context.Background(), "mcp:session:"+sid); err != nil {
		t.Fatal(err)
	}
	for name, url := range map[string]string{"the replica that opened it": a.URL, "the other": b.URL} {
		if status, _ := post(t, url, sid, callTool("log", 3), nil); status != http.StatusNotFound {
			t.Errorf("a lost session, on %s: %d, want 404", name, status)
		}
	}
}
