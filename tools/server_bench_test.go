package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

// The hot path of a tool call, piece by piece and whole, on the four calls the harness
// (cmd/cardwriter-bench) measures. Run with:
//
//	go test -run '^$' -bench . -benchmem ./tools

// benchCall is one measured tool call.
type benchCall struct {
	tool string
	args json.RawMessage
}

// benchEnv is a sandbox served over loopback HTTP, seeded like the harness seeds it, and the
// MCP server of every tool calling it through the real HTTP transport.
type benchEnv struct {
	sandbox *httptest.Server
	client  *upstream.Client
	srv     *server.MCPServer
	calls   []benchCall
}

func newBenchEnv(b *testing.B) *benchEnv { return newBenchEnvWith(b, Options{}) }

// newBenchEnvWith is newBenchEnv with the server's options.
func newBenchEnvWith(b *testing.B, opts Options) *benchEnv {
	b.Helper()
	svc, err := sandbox.New(sandbox.Options{DemoToken: demoToken})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(svc.Handler())
	b.Cleanup(ts.Close)
	up, err := upstream.New(ts.URL, upstream.StaticToken(demoToken))
	if err != nil {
		b.Fatal(err)
	}
	srv, err := NewServer(up, opts)
	if err != nil {
		b.Fatal(err)
	}
	e := &benchEnv{sandbox: ts, client: up, srv: srv}
	ctx := context.Background()
	var card struct {
		RoleID string `json:"roleId"`
	}
	if err := up.Call(ctx, "createCard", nil, map[string]any{"roleName": "Captain Mira"}, &card); err != nil {
		b.Fatal(err)
	}
	var wb struct {
		WorldbookID string `json:"worldbookId"`
	}
	if err := up.Call(ctx, "createWorldbook", nil, map[string]any{"name": "Lore"}, &wb); err != nil {
		b.Fatal(err)
	}
	creates := make([]map[string]any, 50)
	for i := range creates {
		creates[i] = map[string]any{"op": "create", "name": fmt.Sprintf("Entry %d", i), "content": "Seed.",
			"keywords": []string{"kw" + strconv.Itoa(i)}}
	}
	var doc struct {
		Created []string `json:"createdEntryIds"`
	}
	if err := up.Call(ctx, "writeWorldbookDocument", map[string]string{"worldbookId": wb.WorldbookID},
		map[string]any{"entries": creates, "binding": map[string]any{"roleId": card.RoleID}}, &doc); err != nil {
		b.Fatal(err)
	}
	for _, key := range []string{"bench-a", "bench-b"} {
		if err := up.Call(ctx, "upsertTrialCard", map[string]string{"clientKey": key},
			map[string]any{"card": map[string]any{"roleName": "Trial " + key, "roleWelcome": "Hello."}}, nil); err != nil {
			b.Fatal(err)
		}
	}
	updates := make([]map[string]any, len(doc.Created))
	for i, id := range doc.Created {
		updates[i] = map[string]any{"op": "update", "entryId": id, "name": fmt.Sprintf("Entry %d", i),
			"content":  fmt.Sprintf("Lore entry %d: the Kestrel's crew keeps a log of every port, every debt and every promise made along the outer ring.", i),
			"keywords": []string{"kw" + strconv.Itoa(i), "Kestrel"}}
	}
	mustJSON := func(v any) json.RawMessage {
		data, err := json.Marshal(v)
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	e.calls = []benchCall{
		{"get_card", mustJSON(map[string]any{"roleId": card.RoleID})},
		{"set_opening_lines", mustJSON(map[string]any{"roleId": card.RoleID,
			"roleWelcome": "The Kestrel shudders as it drops out of the jump. Mira looks up from the console: \"You're awake. Good. We have company.\"",
			"alternates":  []string{"Mira is already at the airlock when you wake.", "\"Don't touch that,\" Mira says, not turning around."},
			"prologue":    []string{"Who's following us?", "Where are we?"}})},
		{"write_worldbook_document", mustJSON(map[string]any{"worldbookId": wb.WorldbookID, "entries": updates})},
		{"list_trial_cards", json.RawMessage(`{}`)},
		{"get_worldbook", mustJSON(map[string]any{"worldbookId": wb.WorldbookID})},
		{"list_worldbook_entries", mustJSON(map[string]any{"worldbookId": wb.WorldbookID, "detail": "full"})},
		{"get_trial_card", json.RawMessage(`{"clientKey":"bench-a"}`)},
	}
	return e
}

func toolByName(b *testing.B, name string) *Tool {
	b.Helper()
	for _, t := range All() {
		if t.Name == name {
			return &t
		}
	}
	b.Fatalf("no tool %s", name)
	return nil
}

// BenchmarkDecodeArguments is the arguments' JSON decoded for validation (numbers kept exact).
func BenchmarkDecodeArguments(b *testing.B) {
	e := newBenchEnv(b)
	for _, c := range e.calls {
		b.Run(c.tool, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.args)))
			for b.Loop() {
				if _, err := schema.DecodeJSON(c.args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidateArguments is the input schema's validation of decoded arguments.
func BenchmarkValidateArguments(b *testing.B) {
	e := newBenchEnv(b)
	for _, c := range e.calls {
		t := toolByName(b, c.tool)
		inst, err := schema.DecodeJSON(c.args)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.tool, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := t.input.Validate(inst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPrepare is argument handling whole: decode, validate, split into parameters and body.
func BenchmarkPrepare(b *testing.B) {
	e := newBenchEnv(b)
	for _, c := range e.calls {
		t := toolByName(b, c.tool)
		b.Run(c.tool, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.args)))
			for b.Loop() {
				if _, _, _, err := t.prepare(c.args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeResult is a service answer turned into the tool result and encoded as the
// JSON-RPC response carries it.
func BenchmarkEncodeResult(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	for _, c := range e.calls {
		t := toolByName(b, c.tool)
		params, body, extra, err := t.prepare(c.args)
		if err != nil {
			b.Fatal(err)
		}
		handle := t.Handler
		if handle == nil {
			handle = generic
		}
		data, err := handle(ctx, &Call{Tool: t, Params: params, Body: body, Extra: extra, Budget: DefaultResultBudget, Client: e.client, Progress: newProgress(nil, newNotifier(nil), nil)})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.tool, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				out, err := decodeObject(data)
				if err != nil {
					b.Fatal(err)
				}
				res := successResult(t.Summary(out), out, data)
				if _, err := json.Marshal(mcp.NewJSONRPCResultResponse(mcp.NewRequestId(1), res)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkToolCall is one tools/call JSON-RPC message handled by the MCP server, the card
// service call included (the sandbox over loopback HTTP).
func BenchmarkToolCall(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	for _, c := range e.calls {
		msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + c.tool + `","arguments":` + string(c.args) + `}}`)
		b.Run(c.tool, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp := e.srv.HandleMessage(ctx, msg)
				r, ok := resp.(mcp.JSONRPCResponse)
				if !ok {
					b.Fatalf("%T: %v", resp, resp)
				}
				if res, ok := r.Result.(*mcp.CallToolResult); ok && res.IsError {
					b.Fatalf("isError: %v", res.Content)
				}
			}
		})
	}
}

// BenchmarkRevisionWrite is the cost of the revision before a write (issue 23): the two writes
// of BenchmarkToolCall with revisions off, kept in memory, and kept in the embedded bbolt file.
// The difference is the read of what the write replaces (getCard; getWorldbook and
// listWorldbookEntries of 50 entries) and the store's two writes.
func BenchmarkRevisionWrite(b *testing.B) {
	stores := []struct {
		name string
		opts func(b *testing.B) Options
	}{
		{"off", func(*testing.B) Options {
			return Options{Revisions: revisions.New(store.NewMemory(), revisions.Retention{})}
		}},
		{"memory", func(*testing.B) Options { return Options{} }},
		{"bolt", func(b *testing.B) Options {
			kv, err := store.OpenBolt(filepath.Join(b.TempDir(), store.BoltFile))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { kv.Close() })
			return Options{Revisions: revisions.New(kv, revisions.DefaultRetention())}
		}},
	}
	ctx := context.Background()
	for _, st := range stores {
		e := newBenchEnvWith(b, st.opts(b))
		for _, c := range e.calls {
			if c.tool != "set_opening_lines" && c.tool != "write_worldbook_document" {
				continue
			}
			msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + c.tool + `","arguments":` + string(c.args) + `}}`)
			b.Run(c.tool+"/"+st.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					resp := e.srv.HandleMessage(ctx, msg)
					if res, ok := resp.(mcp.JSONRPCResponse).Result.(*mcp.CallToolResult); !ok || res.IsError {
						b.Fatalf("%v", resp)
					}
				}
			})
		}
	}
}

// BenchmarkStreamableHTTP is one tool call over streamable HTTP (mcp-go's server, as
// `cardwriter-mcp http` serves it) on an initialized session, with a raw HTTP client.
func BenchmarkStreamableHTTP(b *testing.B) {
	e := newBenchEnv(b)
	ts := httptest.NewServer(server.NewStreamableHTTPServer(e.srv, server.WithEndpointPath("/mcp"), server.WithStateful(true)))
	b.Cleanup(ts.Close)
	hc := ts.Client()
	post := func(session string, body []byte) (*http.Response, []byte) {
		req, err := http.NewRequest(http.MethodPost, ts.URL+"/mcp", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		return resp, data
	}
	resp, data := post("", []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`))
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		b.Fatalf("initialize: %s %s", resp.Status, data)
	}
	post(session, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	for _, c := range e.calls {
		msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + c.tool + `","arguments":` + string(c.args) + `}}`)
		b.Run(c.tool, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, data := post(session, msg)
				if resp.StatusCode != http.StatusOK || bytes.Contains(data, []byte(`"isError":true`)) {
					b.Fatalf("%s: %s", resp.Status, data)
				}
			}
		})
	}
}

// BenchmarkBuildRegistry is the registry built from scratch (schemas derived, validators
// compiled), what a server does once at start before it can answer initialize.
func BenchmarkBuildRegistry(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := build(definitions()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewServer is the MCP server made from the built registry (tools, resources and
// prompts registered), the rest of a server's start before it answers initialize.
func BenchmarkNewServer(b *testing.B) {
	up, err := upstream.New("http://127.0.0.1:9", upstream.StaticToken(demoToken))
	if err != nil {
		b.Fatal(err)
	}
	All()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewServer(up, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFramework is what mcp-go costs per call on its own: the same tools/call messages
// handled by an MCP server whose tool of that name does nothing (a fixed result), through
// HandleMessage, and through the stdio server (as `cardwriter-mcp stdio` serves it). Set
// against ToolCall, it separates the framework's parsing of each request from ours.
func BenchmarkFramework(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	srv := server.NewMCPServer("framework", "1", server.WithToolCapabilities(false), server.WithLogging())
	fixed := &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("ok")}}
	for _, c := range e.calls {
		srv.AddTool(mcp.NewToolWithRawSchema(c.tool, "", json.RawMessage(`{"type":"object"}`)),
			func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) { return fixed, nil })
	}
	for _, c := range e.calls {
		msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + c.tool + `","arguments":` + string(c.args) + `}}`)
		b.Run("HandleMessage/"+c.tool, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(msg)))
			for b.Loop() {
				if _, ok := srv.HandleMessage(ctx, msg).(mcp.JSONRPCResponse); !ok {
					b.Fatal("not a response")
				}
			}
		})
		b.Run("Stdio/"+c.tool, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(msg)))
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			sctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- server.NewStdioServer(srv).Listen(sctx, inR, outW) }()
			out := bufio.NewReader(outR)
			line := append(msg, '\n')
			for b.Loop() {
				if _, err := inW.Write(line); err != nil {
					b.Fatal(err)
				}
				if _, err := out.ReadSlice('\n'); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cancel()
			inW.Close()
			outR.Close()
			<-done
		})
	}
}
