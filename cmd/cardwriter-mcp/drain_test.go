package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
)

// slowService is a sandbox whose card creations take delay; started counts them as they arrive.
func slowService(t *testing.T, delay time.Duration) (url string, svc *sandbox.Service, started *atomic.Int64) {
	t.Helper()
	svc, err := sandbox.New(sandbox.Options{DemoToken: "drain-token"})
	if err != nil {
		t.Fatal(err)
	}
	started = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/open/v1/role" {
			started.Add(1)
			time.Sleep(delay)
		}
		svc.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, svc, started
}

// TestStdioDrainsOnEOF: a call under way when stdin closes finishes, and its answer is written,
// before the server exits (mcp-go cancelled it before).
func TestStdioDrainsOnEOF(t *testing.T) {
	t.Parallel()
	url, svc, _ := slowService(t, 700*time.Millisecond)
	cmd := exec.Command(binPath, "stdio", "--api-host", url, "--log-level", "error")
	cmd.Env = cleanEnv("CARDWRITER_TOKEN=drain-token", "CARDWRITER_CONFIG_DIR="+t.TempDir())
	cmd.Stdin = strings.NewReader(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_card","arguments":{"roleName":"Drained"}}}`,
	}, "\n") + "\n") // then EOF, while the call is under way
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("stdio: %v\n%s", err, out.String())
	}
	if !regexp.MustCompile(`"id":2,"result":\{"content":\[\{"type":"text","text":"Card r_`).MatchString(out.String()) {
		t.Errorf("the call under way at EOF did not answer:\n%s", out.String())
	}
	if inv := svc.Inventory("drain-token"); inv.Cards != 1 {
		t.Errorf("the sandbox holds %d cards, want 1", inv.Cards)
	}
}

// TestHTTPDrainsOnSIGTERM: on SIGTERM the server takes no new connection, and a call under way
// finishes and answers before the server exits.
func TestHTTPDrainsOnSIGTERM(t *testing.T) {
	t.Parallel()
	url, svc, started := slowService(t, time.Second)
	proc, found := startProcess(t, []string{"CARDWRITER_TOKEN=drain-token", "CARDWRITER_CONFIG_DIR=" + t.TempDir()},
		[]string{"http", "--addr", "127.0.0.1:0", "--api-host", url, "--auth", "none", "--log-level", "info"}, `MCP endpoint: (http://\S+/mcp)`)
	mcpURL := found[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := newClient().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mcpURL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_card", Arguments: map[string]any{"roleName": "Drained"}})
		done <- result{res, err}
	}()
	for started.Load() == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the call never reached the card service")
		case <-time.After(10 * time.Millisecond):
		}
	}
	stopped := make(chan error, 1)
	go func() { stopped <- proc.stop(syscall.SIGTERM) }()
	for !strings.Contains(proc.logs.String(), listenerClosed) {
		select {
		case <-ctx.Done():
			t.Fatalf("the server never closed its listener after SIGTERM:\n%s", proc.logs.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if resp, err := http.Post(mcpURL, "application/json", strings.NewReader(`{}`)); err == nil {
		resp.Body.Close()
		t.Errorf("a new connection after SIGTERM was served: %s", resp.Status)
	}
	r := <-done
	if r.err != nil || r.res.IsError {
		t.Fatalf("the call under way at SIGTERM: %v %v", r.err, r.res)
	}
	if err := <-stopped; err != nil {
		t.Errorf("exit: %v\n%s", err, proc.logs.String())
	}
	if inv := svc.Inventory("drain-token"); inv.Cards != 1 {
		t.Errorf("the sandbox holds %d cards, want 1", inv.Cards)
	}
}
