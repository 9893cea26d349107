package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

func listTools(t *testing.T, e *env) []mcp.Tool {
	t.Helper()
	res, err := e.client.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Tools
}

func TestServerListsTheFilteredTools(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		filter Filter
		want   []string
	}{
		{"all", Filter{}, nil},
		{"read-only", Filter{ReadOnly: true}, []string{"get_card", "whoami", "validate_card", "review_card", "list_card_assets",
			"list_worldbooks", "get_worldbook", "list_card_worldbooks", "list_worldbook_entries", "list_trial_cards", "get_trial_card",
			"test_worldbook_triggers", "preview_prompt", "export_tavern_card", "export_tavern_worldbook", "list_revisions", "diff_revision"}},
		{"trial toolset", Filter{Toolsets: []string{"trial"}}, []string{"list_trial_cards", "get_trial_card", "upsert_trial_card", "delete_trial_card"}},
		{"named tools", Filter{Tools: []string{"whoami"}}, []string{"whoami"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, Options{Filter: tt.filter})
			var got []string
			for _, tool := range listTools(t, e) {
				got = append(got, tool.Name)
			}
			want := tt.want
			if want == nil {
				for _, tool := range All() {
					want = append(want, tool.Name)
				}
			}
			slices.Sort(got)
			want = slices.Sorted(slices.Values(want))
			if !slices.Equal(got, want) {
				t.Errorf("tools/list = %v, want %v", got, want)
			}
			// A tool left out cannot be called either.
			if !slices.Contains(got, "create_card") {
				req := mcp.CallToolRequest{}
				req.Params.Name = "create_card"
				req.Params.Arguments = map[string]any{"roleName": "x"}
				if _, err := e.client.CallTool(context.Background(), req); err == nil {
					t.Error("create_card was callable although filtered out")
				}
			}
		})
	}
}

func TestNewServerRefusesUnknownNames(t *testing.T) {
	t.Parallel()
	up, err := upstream.New("http://sandbox.localhost", upstream.StaticToken("t"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewServer(up, Options{Filter: Filter{Toolsets: []string{"comics"}}})
	if err == nil || !strings.Contains(err.Error(), "unknown toolset comics") || !strings.Contains(err.Error(), "cards, authoring") {
		t.Errorf("err = %v", err)
	}
	if _, err := NewServer(nil, Options{}); err == nil {
		t.Error("NewServer accepted a nil client")
	}
}

// TestToolsListWireFormat checks what a client receives: raw input and output schemas and all
// four annotation hints.
func TestToolsListWireFormat(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	res, err := e.client.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var wire struct {
		Tools []struct {
			Name         string         `json:"name"`
			Title        string         `json:"title"`
			InputSchema  map[string]any `json:"inputSchema"`
			OutputSchema map[string]any `json:"outputSchema"`
			Annotations  map[string]any `json:"annotations"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(data, &wire); err != nil {
		t.Fatal(err)
	}
	if len(wire.Tools) != len(All()) {
		t.Fatalf("%d tools listed, want %d", len(wire.Tools), len(All()))
	}
	for _, tool := range wire.Tools {
		if tool.InputSchema["type"] != "object" || tool.OutputSchema["type"] != "object" || tool.Title == "" {
			t.Errorf("%s: %+v", tool.Name, tool)
		}
		for _, h := range []string{"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} {
			if _, ok := tool.Annotations[h].(bool); !ok {
				t.Errorf("%s: %s missing on the wire", tool.Name, h)
			}
		}
	}
}

func readResource(t *testing.T, e *env, uri string) (string, error) {
	t.Helper()
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := e.client.ReadResource(context.Background(), req)
	if err != nil {
		return "", err
	}
	if len(res.Contents) != 1 {
		t.Fatalf("%s: %d contents", uri, len(res.Contents))
	}
	tc, ok := res.Contents[0].(mcp.TextResourceContents)
	if !ok || tc.MIMEType != "application/json" || tc.URI != uri {
		t.Fatalf("%s: contents %#v", uri, res.Contents[0])
	}
	return tc.Text, nil
}

func TestResources(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	roleID := e.ok("create_card", `{"roleName":"Mira"}`)["roleId"].(string)
	wbID := e.ok("create_worldbook", `{"name":"Lore"}`)["worldbookId"].(string)
	e.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "entries": []any{
		map[string]any{"op": "create", "name": "A", "content": "a", "keywords": []string{"a"}}}}))
	e.ok("upsert_trial_card", `{"clientKey":"try-1","card":{"roleName":"T"}}`)

	templates, err := e.client.ListResourceTemplates(context.Background(), mcp.ListResourceTemplatesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, rt := range templates.ResourceTemplates {
		uris = append(uris, rt.URITemplate.Raw())
		if rt.MIMEType != "application/json" && rt.Name != "export" {
			t.Errorf("%s: mimeType %q", rt.URITemplate.Raw(), rt.MIMEType)
		}
	}
	slices.Sort(uris)
	if want := []string{"card://{roleId}", "export://{exportId}", "trial://{clientKey}", "worldbook://{worldbookId}"}; !slices.Equal(uris, want) {
		t.Errorf("templates %v, want %v", uris, want)
	}

	tests := []struct {
		uri   string
		check func(t *testing.T, v map[string]any)
	}{
		{"card://" + roleID, func(t *testing.T, v map[string]any) {
			if v["roleId"] != roleID || v["roleName"] != "Mira" {
				t.Errorf("card: %v", v)
			}
		}},
		{"worldbook://" + wbID, func(t *testing.T, v map[string]any) {
			wb, _ := v["worldbook"].(map[string]any)
			entries, _ := v["entries"].([]any)
			if wb["worldbookId"] != wbID || len(entries) != 1 || len(v) != 2 {
				t.Errorf("worldbook: %v", v)
			}
		}},
		{"trial://try-1", func(t *testing.T, v map[string]any) {
			if v["clientKey"] != "try-1" {
				t.Errorf("trial: %v", v)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			text, err := readResource(t, e, tt.uri)
			if err != nil {
				t.Fatal(err)
			}
			var v map[string]any
			if err := json.Unmarshal([]byte(text), &v); err != nil {
				t.Fatal(err)
			}
			tt.check(t, v)
		})
	}

	notFound := []struct{ uri, message string }{
		{"card://r_missing", "No card with this roleId exists."},
		{"worldbook://wb_missing", "No worldbook with this worldbookId exists."},
		{"trial://gone", "No live trial card exists under this clientKey."},
		{"trial://..", "not a valid clientKey"},
	}
	for _, tt := range notFound {
		t.Run("not found "+tt.uri, func(t *testing.T) {
			_, err := readResource(t, e, tt.uri)
			if err == nil {
				t.Fatal("no error")
			}
			// The protocol's "resource not found" (-32002), with the envelope's message.
			if !errors.Is(err, mcp.ErrResourceNotFound) || !strings.Contains(err.Error(), tt.message) {
				t.Errorf("err = %v, want resource not found (-32002) with the envelope's message %q", err, tt.message)
			}
		})
	}
}

// TestResourceNotFoundError checks the handler's error directly: it carries the envelope's
// message and wraps server.ErrResourceNotFound.
func TestResourceNotFoundError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	up, err := upstream.New("http://sandbox.localhost", upstream.StaticToken(demoToken), upstream.WithTransport(e.svc.RoundTripper()))
	if err != nil {
		t.Fatal(err)
	}
	h := resourceTemplates[0].handler(up, slog.New(slog.DiscardHandler))
	req := mcp.ReadResourceRequest{}
	req.Params.URI = "card://r_missing"
	_, err = h(context.Background(), req)
	var nf *ResourceNotFoundError
	if !errors.As(err, &nf) || !errors.Is(err, server.ErrResourceNotFound) || nf.Message != "No card with this roleId exists." {
		t.Errorf("err = %#v", err)
	}
}

func TestPrompts(t *testing.T) {
	t.Parallel()
	registry := map[string]bool{}
	for _, tool := range All() {
		registry[tool.Name] = true
	}
	for _, p := range prompts {
		names := p.toolNames()
		if len(names) == 0 {
			t.Errorf("%s names no tool", p.name)
		}
		for _, n := range names {
			if !registry[n] {
				t.Errorf("prompt %s names `%s`, which is not a tool", p.name, n)
			}
		}
	}

	e := newEnv(t, Options{})
	list, err := e.client.ListPrompts(context.Background(), mcp.ListPromptsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.Prompts {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if want := []string{"author_card", "build_worldbook", "try_card_as_trial"}; !slices.Equal(names, want) {
		t.Errorf("prompts %v, want %v", names, want)
	}

	get := func(name string, args map[string]string) (string, error) {
		req := mcp.GetPromptRequest{}
		req.Params.Name = name
		req.Params.Arguments = args
		res, err := e.client.GetPrompt(context.Background(), req)
		if err != nil {
			return "", err
		}
		if len(res.Messages) != 1 || res.Messages[0].Role != mcp.RoleUser {
			t.Fatalf("%s: messages %v", name, res.Messages)
		}
		return res.Messages[0].Content.(mcp.TextContent).Text, nil
	}
	text, err := get("author_card", map[string]string{"idea": "A smuggler captain in debt", "language": "fr", "withWorldbook": "yes"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"A smuggler captain in debt", "language: fr", "`create_card`", "`set_opening_lines`",
		"prologue", "suggestions for the PLAYER", "`write_card_document`", "`update_card_profile`", "`create_worldbook`",
		"`write_worldbook_document`", "binding", "`validate_card`", "`publish_card` only if the user asks"} {
		if !strings.Contains(text, want) {
			t.Errorf("author_card lacks %q:\n%s", want, text)
		}
	}
	if text, _ := get("author_card", map[string]string{"idea": "x"}); strings.Contains(text, "`create_worldbook`") {
		t.Error("author_card without withWorldbook still builds a worldbook")
	}
	if _, err := get("author_card", nil); err == nil {
		t.Error("author_card without its idea rendered")
	}

	// A read-only server serves no authoring prompt.
	ro := newEnv(t, Options{Filter: Filter{ReadOnly: true}})
	if list, err := ro.client.ListPrompts(context.Background(), mcp.ListPromptsRequest{}); err != nil || len(list.Prompts) != 0 {
		t.Errorf("read-only prompts: %v, %v", list, err)
	}
}

// TestLoggingNotifications checks the log notifications of tool calls and that
// logging/setLevel filters them.
func TestLoggingNotifications(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	logs := func() []map[string]any {
		var out []map[string]any
		for _, n := range e.notificationsOf("notifications/message") {
			out = append(out, n.Params.AdditionalFields)
		}
		return out
	}
	setLevel := func(level mcp.LoggingLevel) {
		req := mcp.SetLevelRequest{}
		req.Params.Level = level
		if err := e.client.SetLevel(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}

	// The default level (error) lets neither successes nor service errors through.
	e.ok("whoami", `{}`)
	e.fail("get_card", `{"roleId":"r_missing"}`)
	time.Sleep(50 * time.Millisecond)
	if l := logs(); len(l) != 0 {
		t.Fatalf("notifications at the default level: %v", l)
	}

	setLevel(mcp.LoggingLevelWarning)
	e.ok("whoami", `{}`)
	e.fail("get_card", `{"roleId":"r_missing"}`)
	waitFor(t, "a warning", func() bool { return len(logs()) == 1 })
	w := logs()[0]
	data, _ := w["data"].(map[string]any)
	if fmt.Sprint(w["level"]) != "warning" || data["tool"] != "get_card" || data["outcome"] != "role_not_found" || data["message"] == nil {
		t.Errorf("warning notification: %v", w)
	}

	setLevel(mcp.LoggingLevelDebug)
	e.ok("create_card", `{"roleName":"Secret Name"}`)
	waitFor(t, "a debug start and an info outcome", func() bool { return len(logs()) == 3 })
	if d, _ := logs()[1]["data"].(map[string]any); fmt.Sprint(logs()[1]["level"]) != "debug" || d["tool"] != "create_card" || d["event"] != "started" {
		t.Errorf("debug notification: %v", logs()[1])
	}
	i := logs()[2]
	if data, _ := i["data"].(map[string]any); fmt.Sprint(i["level"]) != "info" || data["tool"] != "create_card" || data["outcome"] != "ok" {
		t.Errorf("info notification: %v", i)
	}
	all, _ := json.Marshal(logs())
	if strings.Contains(string(all), "Secret Name") || strings.Contains(string(all), demoToken+`"`) {
		t.Errorf("a notification carries arguments or the token: %s", all)
	}
}

// TestServerLog checks the slog line of every call: tool, duration, outcome, and never the
// arguments.
func TestServerLog(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var buf strings.Builder
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	})
	e := newEnv(t, Options{Logger: slog.New(slog.NewJSONHandler(w, nil))})
	e.ok("create_card", `{"roleName":"Very Secret Name"}`)
	e.fail("get_card", `{"roleId":"r_missing"}`)
	e.fail("get_card", `{"roleId":5}`)
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, want := range []string{`"tool":"create_card"`, `"outcome":"ok"`, `"outcome":"role_not_found"`, `"outcome":"invalid_arguments"`, `"duration":`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Very Secret Name") {
		t.Errorf("the log carries arguments:\n%s", out)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestPublishProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	roleID := e.ok("create_card", `{"roleName":"Mira"}`)["roleId"].(string)
	e.ok("set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "Hi."}))
	e.ok("write_card_document", jsonArg(t, map[string]any{"roleId": roleID, "sections": map[string]string{"description": "D."}}))

	// Without a progressToken: no progress notifications.
	res := e.callMeta("publish_card", jsonArg(t, map[string]any{"roleId": roleID}), nil)
	if res.IsError {
		t.Fatal(text(res))
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(e.notificationsOf("notifications/progress")); n != 0 {
		t.Fatalf("%d progress notifications without a progressToken", n)
	}

	// A second card, published with a progressToken.
	roleID = e.ok("create_card", `{"roleName":"Mira 2"}`)["roleId"].(string)
	e.ok("set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "Hi."}))
	e.ok("write_card_document", jsonArg(t, map[string]any{"roleId": roleID, "sections": map[string]string{"description": "D."}}))
	res = e.callMeta("publish_card", jsonArg(t, map[string]any{"roleId": roleID}), &mcp.Meta{ProgressToken: "pub-1"})
	if res.IsError {
		t.Fatal(text(res))
	}
	waitFor(t, "2 progress notifications", func() bool { return len(e.notificationsOf("notifications/progress")) == 2 })
	for i, n := range e.notificationsOf("notifications/progress") {
		p := n.Params.AdditionalFields
		// In process the notification is not serialized: compare printed values.
		if fmt.Sprint(p["progressToken"]) != "pub-1" || fmt.Sprint(p["progress"]) != fmt.Sprint(i) ||
			fmt.Sprint(p["total"]) != "2" || p["message"] == "" {
			t.Errorf("progress %d: %v", i+1, p)
		}
	}
}

// TestCancellation proves that a client's notifications/cancelled cancels the upstream request:
// the card service (an httptest server) blocks until its request's context is done. It runs
// over the stdio transport, where the cancellation is a notification.
func TestCancellation(t *testing.T) {
	started := make(chan struct{})
	cancelled := make(chan struct{})
	var once sync.Once
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(started) })
		<-r.Context().Done()
		close(cancelled)
	}))
	defer up.Close()

	c, err := upstream.New(up.URL, upstream.StaticToken("t"), upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	clientIn, serverOut := io.Pipe()
	serverIn, clientOut := io.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	stdio := server.NewStdioServer(srv)
	stdio.SetErrorLogger(log.New(io.Discard, "", 0)) // the cancelled call's answer meets a closed pipe
	done := make(chan error, 1)
	go func() { done <- stdio.Listen(ctx, serverIn, serverOut) }()
	defer func() {
		stop()
		_ = clientOut.Close()
		_ = serverOut.Close()
		<-done
	}()

	cl := client.NewClient(transport.NewIO(clientIn, clientOut, io.NopCloser(strings.NewReader(""))))
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "cancel-test", Version: "1"}
	if _, err := cl.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}

	callCtx, cancelCall := context.WithCancel(ctx)
	callDone := make(chan error, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "get_card"
		req.Params.Arguments = map[string]any{"roleId": "r_1"}
		_, err := cl.CallTool(callCtx, req)
		callDone <- err
	}()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the tool call never reached the card service")
	}
	cancelCall() // the client sends notifications/cancelled for the request
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request was not cancelled")
	}
	if err := <-callDone; !errors.Is(err, context.Canceled) {
		t.Errorf("CallTool: %v, want context.Canceled", err)
	}
}

// TestFailures checks the answers to failures that are not the card service's error envelope:
// an unreachable service, and an answer that breaks the contract (a defect, logged).
func TestFailures(t *testing.T) {
	t.Parallel()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`["not", "an", "object"]`))
	}))
	t.Cleanup(broken.Close) // not defer: the subtests run after this function returns
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	tests := []struct {
		name, host, code string
		retryable        bool
		logged           string
	}{
		{"unreachable", closed.URL, "unavailable", true, `"outcome":"unavailable"`},
		{"broken answer", broken.URL, "unexpected_response", false, `"outcome":"unexpected_response"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var buf strings.Builder
			logger := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
				mu.Lock()
				defer mu.Unlock()
				return buf.Write(p)
			}), nil))
			c, err := upstream.New(tt.host, upstream.StaticToken("secret-token"), upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 1}))
			if err != nil {
				t.Fatal(err)
			}
			srv, err := NewServer(c, Options{Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			cl := initializedClient(t, srv, "")
			ctx := context.Background()
			req := mcp.CallToolRequest{}
			req.Params.Name = "whoami"
			res, err := cl.CallTool(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			env, _ := ErrorEnvelope(res)
			if !res.IsError || res.StructuredContent != nil || env["error"] != tt.code || env["retryable"] != tt.retryable || firstText(res) != env["message"] {
				t.Errorf("result: isError %v, envelope %v", res.IsError, env)
			}
			mu.Lock()
			out := buf.String()
			mu.Unlock()
			if !strings.Contains(out, tt.logged) || !strings.Contains(out, `"tool":"whoami"`) {
				t.Errorf("log lacks %s:\n%s", tt.logged, out)
			}
			if tt.code == "internal" && !strings.Contains(out, `"err":`) {
				t.Errorf("the defect is not logged:\n%s", out)
			}
			if strings.Contains(out, "secret-token") || strings.Contains(text(res), "secret-token") {
				t.Error("the token leaked")
			}
		})
	}
}

// TestResourceReadOnce: a resource is read once (by the hook that decides "not found"), and
// the handler answers with what it read, so that the answer cannot change in between.
func TestResourceReadOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	roleID := e.ok("create_card", `{"roleName":"Once"}`)["roleId"].(string)
	before := e.requests.n.Load()
	if _, err := readResource(t, e, "card://"+roleID); err != nil {
		t.Fatal(err)
	}
	if n := e.requests.n.Load() - before; n != 1 {
		t.Errorf("reading card://%s sent %d requests to the card service, want 1", roleID, n)
	}
}
