package main

// End-to-end tests: the built binary, driven over stdio and streamable HTTP by the official MCP
// Go SDK (github.com/modelcontextprotocol/go-sdk), a client implementation nobody here wrote.

import (
	"archive/zip"
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern/taverntest"
)

var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cardwriter-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "cardwriter-mcp")
	// The servers these tests start keep nothing in the user's own config directory: a test
	// that gives no --state-dir or config dir of its own gets one under dir.
	if err := os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", binPath, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cleanEnv is the environment for the binary: no inherited CARDWRITER_ settings.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, envPrefix) {
			env = append(env, e)
		}
	}
	return append(env, extra...)
}

func newClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "e2e-test", Version: "1"}, nil)
}

// connectHTTP connects a new client to the streamable HTTP endpoint of the server at base.
func connectHTTP(ctx context.Context, t *testing.T, base string) *mcp.ClientSession {
	t.Helper()
	cs, err := newClient().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v", base, err)
	}
	return cs
}

func TestStdioAuthoringSession(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.Command(binPath, "stdio", "--sandbox", "--log-level", "debug")
	cmd.Env = cleanEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cs, err := newClient().Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\nstderr:\n%s", err, stderr.String())
	}
	authoringSession(ctx, t, cs)
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

func TestHTTPAuthoringSession(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := startHTTP(t)
	cs := connectHTTP(ctx, t, base)
	authoringSession(ctx, t, cs)
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// startHTTP runs `cardwriter-mcp http --sandbox` on a free loopback port and returns its base URL.
// The process is stopped with SIGTERM at the end of the test and must exit cleanly.
func startHTTP(t *testing.T, args ...string) string {
	t.Helper()
	_, found := startProcess(t, nil, append([]string{"http", "--sandbox", "--addr", "127.0.0.1:0"}, args...), `MCP endpoint: (http://\S+)/mcp`)
	return found[0]
}

// process is a running cardwriter-mcp whose stderr is kept.
type process struct {
	cmd  *exec.Cmd
	logs *syncBuffer
	once sync.Once
	err  error
}

// stop sends sig and waits for the exit (killing the process after 20 s); only the first call
// acts, and every call returns how the process exited.
func (p *process) stop(sig os.Signal) error {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(sig)
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case p.err = <-done:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			p.err = fmt.Errorf("did not stop within 20s of %v", sig)
		}
	})
	return p.err
}

// startProcess runs the binary with args (and env besides a clean environment) and waits until
// its stderr has shown a line matching each pattern; it returns the first submatch of each. At
// the end of the test the process is stopped with SIGTERM and must exit cleanly.
func startProcess(t *testing.T, env, args []string, patterns ...string) (*process, []string) {
	t.Helper()
	p := &process{cmd: exec.Command(binPath, args...), logs: &syncBuffer{}}
	p.cmd.Env = cleanEnv(env...)
	pr, pw := io.Pipe()
	p.cmd.Stderr = pw
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make([]string, len(patterns))
	all := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		left := len(patterns)
		for sc.Scan() {
			p.logs.Write([]byte(sc.Text() + "\n"))
			for i, pat := range patterns {
				if m := regexp.MustCompile(pat).FindStringSubmatch(sc.Text()); m != nil && found[i] == "" && left > 0 {
					found[i] = m[1]
					if left--; left == 0 {
						close(all)
					}
				}
			}
		}
	}()
	t.Cleanup(func() {
		if err := p.stop(syscall.SIGTERM); err != nil {
			t.Errorf("%s did not exit cleanly on SIGTERM: %v", args[0], err)
		}
		pw.Close()
	})
	select {
	case <-all:
		return p, found
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not start:\n%s", args[0], p.logs.String())
	}
	return nil, nil
}

// call invokes a tool and returns its structured content; wantErr says whether isError is expected.
func call(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, wantErr bool) map[string]any {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	if res.IsError != wantErr {
		t.Fatalf("%s: isError = %v, want %v; content: %s", name, res.IsError, wantErr, text(res))
	}
	var out map[string]any
	if wantErr {
		// An error result has no structuredContent (it would have to match the output
		// schema): the message, then the rest of the envelope as JSON (the message once).
		if res.StructuredContent != nil {
			t.Fatalf("%s: an error result carries structuredContent: %v", name, res.StructuredContent)
		}
		if len(res.Content) != 2 {
			t.Fatalf("%s: error result has %d content blocks, want the message and the envelope", name, len(res.Content))
		}
		env, _ := res.Content[1].(*mcp.TextContent)
		if env == nil || json.Unmarshal([]byte(env.Text), &out) != nil {
			t.Fatalf("%s: the second block is not the envelope as JSON; content: %s", name, text(res))
		}
		if _, repeated := out["message"]; repeated {
			t.Fatalf("%s: the envelope repeats the message; content: %s", name, text(res))
		}
		msg, _ := res.Content[0].(*mcp.TextContent)
		if msg == nil || msg.Text == "" {
			t.Fatalf("%s: the first block is no message; content: %s", name, text(res))
		}
		out["message"] = msg.Text
		return out
	}
	raw, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(raw, &out)
	if out == nil {
		t.Fatalf("%s: no structuredContent; content: %s", name, text(res))
	}
	if text(res) == "" {
		t.Errorf("%s: no text content for text-only clients", name)
	}
	return out
}

func text(res *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

func pngBase64(t *testing.T) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	img.Set(1, 1, color.RGBA{200, 10, 10, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// authoringSession is a whole authoring session as a model would run it.
func authoringSession(ctx context.Context, t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) < 21 {
		t.Errorf("tools/list returned %d tools, want at least 21", len(list.Tools))
	}

	me := call(ctx, t, cs, "whoami", map[string]any{}, false)
	if me["userId"] == "" {
		t.Errorf("whoami: %v", me)
	}
	card := call(ctx, t, cs, "create_card", map[string]any{"roleName": "Captain Mira", "language": "en"}, false)
	roleID, _ := card["roleId"].(string)
	if roleID == "" || card["roleVisibility"] != "private" {
		t.Fatalf("create_card: %v", card)
	}
	call(ctx, t, cs, "set_opening_lines", map[string]any{
		"roleId": roleID, "roleWelcome": "The storm is coming. Are you with me?",
		"alternates": []string{"You're late, sailor."}, "prologue": []string{"Aye, captain.", "What storm?"},
	}, false)
	bad := call(ctx, t, cs, "set_opening_lines", map[string]any{"roleId": roleID, "roleWelcome": 5}, true)
	if !strings.Contains(fmt.Sprint(bad), "/roleWelcome") {
		t.Errorf("schema error does not name /roleWelcome: %v", bad)
	}
	call(ctx, t, cs, "write_card_document", map[string]any{"roleId": roleID, "sections": map[string]any{
		"description": "A sea captain who never loses a ship.", "personality": "Stern, loyal.",
	}}, false)
	img := call(ctx, t, cs, "upload_image", map[string]any{"purpose": "avatar", "roleId": roleID, "contentType": "image/png", "dataBase64": pngBase64(t)}, false)
	profile := call(ctx, t, cs, "update_card_profile", map[string]any{"roleId": roleID, "roleDesc": "Sail with Mira.", "tags": []string{"adventure"}, "avatarImageId": img["imageId"]}, false)
	if profile["avatarImageId"] != img["imageId"] {
		t.Errorf("update_card_profile: %v", profile)
	}
	got := call(ctx, t, cs, "get_card", map[string]any{"roleId": roleID}, false)
	if got["roleWelcome"] != "The storm is coming. Are you with me?" || len(got["prologue"].([]any)) != 2 {
		t.Errorf("get_card: %v", got)
	}
	wb := call(ctx, t, cs, "create_worldbook", map[string]any{"name": "The Seven Seas"}, false)
	wbID, _ := wb["worldbookId"].(string)
	doc := call(ctx, t, cs, "write_worldbook_document", map[string]any{
		"worldbookId": wbID,
		"entries": []any{
			map[string]any{"op": "create", "name": "Port Royal", "content": "A pirate haven.", "keywords": []string{"port royal"}},
			map[string]any{"op": "create", "name": "The Kraken", "content": "A sea monster.", "keywords": []string{"kraken"}, "category": "monsters"},
		},
		"binding": map[string]any{"roleId": roleID},
	}, false)
	if len(doc["createdEntryIds"].([]any)) != 2 || doc["bound"] != true {
		t.Errorf("write_worldbook_document: %v", doc)
	}
	bound := call(ctx, t, cs, "list_card_worldbooks", map[string]any{"roleId": roleID}, false)
	if len(bound["list"].([]any)) != 1 {
		t.Errorf("list_card_worldbooks: %v", bound)
	}
	entries := call(ctx, t, cs, "list_worldbook_entries", map[string]any{"worldbookId": wbID, "category": "monsters"}, false)
	if len(entries["entries"].([]any)) != 1 {
		t.Errorf("list_worldbook_entries: %v", entries)
	}
	report := call(ctx, t, cs, "validate_card", map[string]any{"roleId": roleID}, false)
	if report["ready"] != true {
		t.Fatalf("validate_card: %v", report)
	}
	pub := call(ctx, t, cs, "publish_card", map[string]any{"roleId": roleID}, false)
	if pub["reviewStatus"] != "pending" {
		t.Errorf("publish_card: %v", pub)
	}

	trialArgs := map[string]any{"clientKey": "mira-draft", "card": map[string]any{"roleName": "Mira (draft)", "roleWelcome": "Ahoy."},
		"worldbook": map[string]any{"entries": []any{map[string]any{"name": "Ship", "content": "The Gull.", "keywords": []string{"ship"}}}}}
	first := call(ctx, t, cs, "upsert_trial_card", trialArgs, false)
	if first["created"] != true || len(first["changed"].([]any)) != 6 {
		t.Errorf("first upsert_trial_card: %v", first)
	}
	trialArgs["card"] = map[string]any{"roleName": "Mira (draft)", "roleWelcome": "Ahoy, sailor."}
	delete(trialArgs, "worldbook")
	second := call(ctx, t, cs, "upsert_trial_card", trialArgs, false)
	if second["created"] != false || fmt.Sprint(second["changed"]) != "[roleWelcome]" {
		t.Errorf("second upsert_trial_card: changed = %v, want [roleWelcome]", second["changed"])
	}
	call(ctx, t, cs, "delete_trial_card", map[string]any{"clientKey": "mira-draft"}, false)
	gone := call(ctx, t, cs, "get_trial_card", map[string]any{"clientKey": "mira-draft"}, true)
	if gone["error"] != "trial_not_found" {
		t.Errorf("get_trial_card after delete: %v", gone)
	}
}

func TestStdioProtocolOnlyAndCleanExit(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binPath, "stdio", "--sandbox", "--log-level", "debug")
	cmd.Env = cleanEnv()
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"whoami","arguments":{}}}
`)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stdio did not exit cleanly when stdin closed: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("stdio did not exit within 30s of stdin closing")
	}
	ids := map[float64]bool{}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var msg map[string]any
		if err := json.Unmarshal([]byte(line), &msg); err != nil || msg["jsonrpc"] != "2.0" {
			t.Errorf("stdout carries something other than JSON-RPC: %q", line)
			continue
		}
		if id, ok := msg["id"].(float64); ok {
			ids[id] = true
		}
	}
	for _, id := range []float64{1, 2, 3} {
		if !ids[id] {
			t.Errorf("no response to request %v; stdout:\n%s", id, stdout.String())
		}
	}
	if stderr.Len() == 0 {
		t.Error("no logs on stderr at debug level")
	}
}

func TestHTTPHardening(t *testing.T) {
	t.Parallel()
	base := startHTTP(t, "--max-body-bytes", "65536")
	initBody := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	post := func(body string, hdr map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	tests := []struct {
		name   string
		body   string
		hdr    map[string]string
		status int
	}{
		{"foreign origin", initBody, map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"foreign host (DNS rebinding)", initBody, map[string]string{"Host": "evil.example:80"}, http.StatusForbidden},
		{"loopback origin", initBody, map[string]string{"Origin": "http://localhost:6274"}, http.StatusOK},
		{"body over the cap", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 70000) + `"}}`, nil, http.StatusRequestEntityTooLarge},
		{"no origin (non-browser client)", initBody, nil, http.StatusOK},
	}
	for _, tc := range tests {
		resp := post(tc.body, tc.hdr)
		if resp.StatusCode != tc.status {
			b, _ := io.ReadAll(resp.Body)
			t.Errorf("%s: status %d, want %d: %s", tc.name, resp.StatusCode, tc.status, b)
		}
	}

	// A session that DELETE ended is gone: its id then gets 404.
	resp := post(initBody, nil)
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("initialize returned no Mcp-Session-Id: sessions are not stateful")
	}
	req, _ := http.NewRequest(http.MethodDelete, base+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", sid)
	del, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	del.Body.Close()
	if del.StatusCode/100 != 2 {
		t.Errorf("DELETE session: status %d", del.StatusCode)
	}
	after := post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, map[string]string{"Mcp-Session-Id": sid})
	if after.StatusCode != http.StatusNotFound {
		t.Errorf("request on a deleted session: status %d, want 404", after.StatusCode)
	}
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	// A card service that answers (with no sign-in saved for it): a missing sign-in, not an
	// unreachable address.
	answers := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(answers.Close)
	tests := []struct {
		name    string
		args    []string
		env     []string
		wantErr bool
		out     string // substring of stdout+stderr
	}{
		{"version", []string{"version"}, nil, false, "cardwriter-mcp "},
		{"help", []string{"--help"}, nil, false, "Commands:"},
		{"stdio help lists env vars", []string{"stdio", "--help"}, nil, false, "CARDWRITER_READ_ONLY"},
		{"http help", []string{"http", "--help"}, nil, false, "CARDWRITER_MAX_BODY_BYTES"},
		{"sandbox help", []string{"sandbox", "--help"}, nil, false, "CARDWRITER_DEMO_TOKEN"},
		{"unknown command", []string{"fly"}, nil, true, "unknown command"},
		{"no api host", []string{"stdio"}, nil, true, "--api-host"},
		{"no sign-in: serves, answering how to sign in", []string{"stdio", "--api-host", "https://api.example.com"}, nil, false, "serving without a sign-in"},
		{"no sign-in, CLI: says how", []string{"export", "r_1", "-o", "-", "--api-host", answers.URL}, nil, true, "CARDWRITER_TOKEN"},
		{"unknown toolset", []string{"stdio", "--sandbox", "--toolsets", "nope"}, nil, true, "nope"},
		{"bad env value", []string{"stdio", "--sandbox"}, []string{"CARDWRITER_READ_ONLY=maybe"}, true, "CARDWRITER_READ_ONLY"},
		{"bad log level", []string{"stdio", "--sandbox", "--log-level", "loud"}, nil, true, "--log-level"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(binPath, tc.args...)
			cmd.Env = cleanEnv(tc.env...)
			cmd.Stdin = strings.NewReader("")
			out, err := cmd.CombinedOutput()
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, wantErr %v\n%s", err, tc.wantErr, out)
			}
			if !strings.Contains(string(out), tc.out) {
				t.Errorf("output lacks %q:\n%s", tc.out, out)
			}
		})
	}
}

// TestHTTPProgressAndLogging checks that notifications reach a client over streamable HTTP:
// progress for publish_card (two upstream requests) under the newest protocol revision and under
// 2025-11-25, and log messages at the level the client set under 2025-11-25 (logging is deprecated
// from 2026-07-28, and the Go SDK's setLevel then lacks the _meta mcp-go requires).
func TestHTTPProgressAndLogging(t *testing.T) {
	t.Parallel()
	base := startHTTP(t)
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("protocol "+cmp.Or(version, "newest"), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var mu sync.Mutex
			var progress []float64
			var logs []string
			client := mcp.NewClient(&mcp.Implementation{Name: "e2e-test", Version: "1"}, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					progress = append(progress, req.Params.Progress)
					mu.Unlock()
				},
				LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
					mu.Lock()
					logs = append(logs, string(req.Params.Level))
					mu.Unlock()
				},
			})
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			wantLogs := version != ""
			if wantLogs {
				if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
					t.Fatal(err)
				}
			}
			card := call(ctx, t, cs, "create_card", map[string]any{"roleName": "Progress"}, false)
			roleID := card["roleId"]
			call(ctx, t, cs, "set_opening_lines", map[string]any{"roleId": roleID, "roleWelcome": "Hello."}, false)
			call(ctx, t, cs, "write_card_document", map[string]any{"roleId": roleID, "sections": map[string]any{"description": "A test."}}, false)
			params := &mcp.CallToolParams{Name: "publish_card", Arguments: map[string]any{"roleId": roleID}}
			params.SetProgressToken("publish-1")
			res, err := cs.CallTool(ctx, params)
			if err != nil || res.IsError {
				t.Fatalf("publish_card: %v %v", err, res)
			}
			// The client dispatches notifications asynchronously; give its handlers a moment.
			deadline := time.Now().Add(5 * time.Second)
			for {
				mu.Lock()
				done := len(progress) >= 2 && (!wantLogs || len(logs) > 0)
				mu.Unlock()
				if done || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			// The client runs notification handlers concurrently, so compare them as a set.
			slices.Sort(progress)
			if !slices.Equal(progress, []float64{0, 1}) {
				t.Errorf("progress notifications = %v, want steps 0 and 1 of 2", progress)
			}
			if wantLogs && len(logs) == 0 {
				t.Error("no log notifications at level debug")
			}
		})
	}
}

// TestHTTPArgumentLimitsAreToolResults: with the default body cap, an image or a card file over
// its limit reaches the tool and is refused by its schema, as a result naming the argument and
// the limit, not by the transport (HTTP 413, which a model never sees).
func TestHTTPArgumentLimitsAreToolResults(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := startHTTP(t)
	cs := connectHTTP(ctx, t, base)
	defer cs.Close()
	tests := []struct {
		tool  string
		args  map[string]any
		where string
	}{
		{"upload_image", map[string]any{"purpose": "avatar", "contentType": "image/png", "dataBase64": strings.Repeat("A", 11184812+4)}, "/dataBase64"},
		{"import_tavern_card", map[string]any{"source": map[string]any{"dataBase64": strings.Repeat("A", 44739244+4)}}, "/source/dataBase64"},
	}
	for _, tc := range tests {
		env := call(ctx, t, cs, tc.tool, tc.args, true)
		msg, _ := env["message"].(string)
		if env["error"] != "invalid_arguments" || !strings.Contains(msg, tc.where) {
			t.Errorf("%s over its limit: %v", tc.tool, env)
		}
	}
}

// TestHTTPKeptAsideSurvivesRestart: what an import keeps aside over HTTP is in --state-dir, so
// an export after a restart still restores it (it was lost with the process before): a JSON card,
// SillyTavern's Seraphina PNG (her lorebook's probability null, useProbability false, selective
// false come back as they were) and a CHARX whose every member comes back.
func TestHTTPKeptAsideSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	args := []string{"--sandbox-data", filepath.Join(dir, "sandbox.json"), "--state-dir", filepath.Join(dir, "state")}
	card := map[string]any{"spec": "chara_card_v2", "spec_version": "2.0", "data": map[string]any{
		"name": "Captain Vey", "description": "A smuggler.", "personality": "", "scenario": "", "first_mes": "Late again.",
		"mes_example": "", "creator_notes": "", "system_prompt": "", "post_history_instructions": "", "alternate_greetings": []any{},
		"tags": []any{"sci-fi"}, "creator": "someone", "character_version": "7", "extensions": map[string]any{"e2e": map[string]any{"kept": true}},
	}}
	seraphina, charx := taverntest.Real(t, taverntest.RealSeraphinaPNG), taverntest.RealCHARX(t)
	var roleID, seraphinaID, worldbookID, charxID string
	t.Run("import, then stop", func(t *testing.T) {
		base := startHTTP(t, args...)
		cs := connectHTTP(ctx, t, base)
		defer cs.Close()
		out := call(ctx, t, cs, "import_tavern_card", map[string]any{"source": map[string]any{"json": card}}, false)
		roleID, _ = out["roleId"].(string)
		out = call(ctx, t, cs, "import_tavern_card", map[string]any{"source": map[string]any{"dataBase64": base64.StdEncoding.EncodeToString(seraphina)}}, false)
		seraphinaID, _ = out["roleId"].(string)
		worldbookID, _ = out["worldbookId"].(string)
		out = call(ctx, t, cs, "import_tavern_card", map[string]any{"source": map[string]any{"dataBase64": base64.StdEncoding.EncodeToString(charx)}}, false)
		charxID, _ = out["roleId"].(string)
	})
	if roleID == "" || seraphinaID == "" || worldbookID == "" || charxID == "" {
		t.Fatal("the cards were not imported")
	}
	base := startHTTP(t, args...)
	cs := connectHTTP(ctx, t, base)
	defer cs.Close()
	out := call(ctx, t, cs, "export_tavern_card", map[string]any{"roleId": roleID}, false)
	data, _ := out["card"].(map[string]any)["data"].(map[string]any)
	ext, _ := data["extensions"].(map[string]any)
	if data["creator"] != "someone" || data["character_version"] != "7" || fmt.Sprint(ext["e2e"]) != "map[kept:true]" {
		t.Errorf("after a restart the export lost what was kept aside: %v", data)
	}

	src := taverntest.CardChunk(t, seraphina, "chara")["data"].(map[string]any)["character_book"].(map[string]any)["entries"].([]any)
	out = call(ctx, t, cs, "export_tavern_worldbook", map[string]any{"worldbookId": worldbookID, "format": "lorebook_v3"}, false)
	entries, _ := out["lorebook"].(map[string]any)["data"].(map[string]any)["entries"].([]any)
	if len(entries) != len(src) || len(out["notRestored"].([]any)) != 0 {
		t.Fatalf("export_tavern_worldbook after a restart: %d entries (want %d), notRestored %v", len(entries), len(src), out["notRestored"])
	}
	for i, e := range entries {
		want, got := src[i].(map[string]any), e.(map[string]any)
		for _, k := range []string{"id", "selective", "position", "extensions"} {
			if fmt.Sprint(want[k]) != fmt.Sprint(got[k]) {
				t.Errorf("entry %d: %s = %v after a restart, the file had %v", i, k, got[k], want[k])
			}
		}
	}

	// The CHARX is too large for a result: it comes by link, read back from the store.
	out = call(ctx, t, cs, "export_tavern_card", map[string]any{"roleId": charxID, "format": "charx"}, false)
	link, _ := out["link"].(map[string]any)
	if link == nil || out["dataBase64"] != nil {
		t.Fatalf("the CHARX export is not a link: %v", link)
	}
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: link["uri"].(string)})
	if err != nil || len(read.Contents) != 1 {
		t.Fatalf("resources/read %v: %v", link["uri"], err)
	}
	zipped := read.Contents[0].Blob
	if float64(len(zipped)) != link["size"] {
		t.Errorf("read %d bytes, the link says %v", len(zipped), link["size"])
	}
	zr, err := zip.NewReader(bytes.NewReader(zipped), int64(len(zipped)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	want := []string{"card.json", "assets/icon/images/main.png", "assets/background/images/glade.png", "assets/emotions/happy.png", "module.risum"}
	if !slices.Equal(names, want) {
		t.Errorf("CHARX after a restart holds %v, want %v", names, want)
	}
}

// TestHTTPProgressUnderNewestProtocol calls publish_card many times under 2026-07-28 (no
// session: each request on its own) and counts its progress notifications: every call's must
// arrive ahead of its result. mcp-go's forwarder can take a notification off its queue and lose
// it to the response (it lost 2 of 40 before the server wrote them itself).
func TestHTTPProgressUnderNewestProtocol(t *testing.T) {
	t.Parallel()
	base := startHTTP(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	progress := map[string]int{}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress[fmt.Sprint(req.Params.ProgressToken)]++
			mu.Unlock()
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s, want 2026-07-28", v)
	}
	const calls = 40
	for i := range calls {
		card := call(ctx, t, cs, "create_card", map[string]any{"roleName": fmt.Sprintf("Progress %d", i)}, false)
		call(ctx, t, cs, "set_opening_lines", map[string]any{"roleId": card["roleId"], "roleWelcome": "Hello."}, false)
		call(ctx, t, cs, "write_card_document", map[string]any{"roleId": card["roleId"], "sections": map[string]any{"description": "A test."}}, false)
		params := &mcp.CallToolParams{Name: "publish_card", Arguments: map[string]any{"roleId": card["roleId"]}}
		params.SetProgressToken(fmt.Sprintf("p%d", i))
		if res, err := cs.CallTool(ctx, params); err != nil || res.IsError {
			t.Fatalf("publish_card: %v %v", err, res)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	lost := 0
	for {
		mu.Lock()
		lost = 0
		for i := range calls {
			lost += 2 - min(progress[fmt.Sprintf("p%d", i)], 2)
		}
		mu.Unlock()
		if lost == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lost > 0 {
		t.Errorf("%d of %d progress notifications of %d publish_card calls were lost", lost, 2*calls, calls)
	}
}

// TestHTTPProgressBeforeTheResult calls publish_card under 2025-11-25 while the session holds
// its standalone GET stream open, as hosts do, and requires each call's progress notifications to
// have reached the client, on either stream, by the time its result has. mcp-go hands a session's
// notifications to whichever of its streams reads its queue first; on the GET stream one could
// reach the host after the call's result, and the TypeScript SDK then drops it (its progress
// handler is gone: the hosts suite under load). The result now waits until they are written.
func TestHTTPProgressBeforeTheResult(t *testing.T) {
	t.Parallel()
	base := startHTTP(t)
	resp, _ := rawMCP(t, base, "", "", rawInit)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %s, session %q", resp.Status, sid)
	}
	if resp, body := rawMCP(t, base, "", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %s %s", resp.Status, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	get, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/mcp", nil)
	get.Header.Set("Accept", "text/event-stream")
	get.Header.Set("Mcp-Session-Id", sid)
	get.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	stream, err := http.DefaultClient.Do(get)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("standalone stream: %v %v", err, stream)
	}
	defer stream.Body.Close()
	var onStream atomic.Int32 // progress notifications read from the standalone stream
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "notifications/progress") {
				onStream.Add(1)
			}
		}
	}()
	id := 1
	callTool := func(name, args string, meta string) []map[string]any {
		t.Helper()
		id++
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s%s}}`, id, name, args, meta)
		resp, text := rawMCP(t, base, "", sid, body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s %s", name, resp.Status, text)
		}
		var msgs []map[string]any
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			text = "data: " + text
		}
		for line := range strings.Lines(text) {
			data, ok := strings.CutPrefix(strings.TrimSpace(line), "data:")
			if !ok {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("%s: %v in %s", name, err, text)
			}
			msgs = append(msgs, m)
		}
		if len(msgs) == 0 || msgs[len(msgs)-1]["id"] != float64(id) {
			t.Fatalf("%s: the response does not end with the result of call %d: %s", name, id, text)
		}
		return msgs
	}
	const calls = 30
	inResponses, late := 0, 0
	for i := range calls {
		res := callTool("create_card", fmt.Sprintf(`{"roleName":"Stream %d"}`, i), "")
		result, _ := res[len(res)-1]["result"].(map[string]any)
		card, _ := result["structuredContent"].(map[string]any)
		roleID, err := json.Marshal(card["roleId"])
		if err != nil || card["roleId"] == nil {
			t.Fatalf("create_card: no roleId in %v", res)
		}
		callTool("set_opening_lines", fmt.Sprintf(`{"roleId":%s,"roleWelcome":"Hello."}`, roleID), "")
		callTool("write_card_document", fmt.Sprintf(`{"roleId":%s,"sections":{"description":"A test."}}`, roleID), "")
		msgs := callTool("publish_card", fmt.Sprintf(`{"roleId":%s}`, roleID), fmt.Sprintf(`,"_meta":{"progressToken":"p%d"}`, i))
		inResponses += len(msgs) - 1
		// The standalone stream's reader runs as soon as its bytes arrive, which they did before
		// the result's; a moment for it to be scheduled, far less than a call takes.
		want := 2 * (i + 1)
		for wait := 0; inResponses+int(onStream.Load()) < want && wait < 5; wait++ {
			time.Sleep(100 * time.Microsecond)
		}
		if got := inResponses + int(onStream.Load()); got < want {
			late++
			t.Logf("publish_card %d: %d of %d progress notifications had arrived with its result", i, got, want)
		}
	}
	if late > 0 {
		t.Errorf("%d of %d publish_card results arrived ahead of their progress notifications (%d notifications in responses, %d on the standalone stream)", late, calls, inResponses, onStream.Load())
	}
}
