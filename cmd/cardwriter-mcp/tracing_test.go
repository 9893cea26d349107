package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// TestTracingExport: with OTEL_EXPORTER_OTLP_ENDPOINT set, the spans of a stdio session reach
// an OTLP/HTTP collector (here a stand-in that keeps what it gets) by the time the server exits.
func TestTracingExport(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got bytes.Buffer
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/traces" {
			data, _ := io.ReadAll(r.Body)
			mu.Lock()
			got.Write(data)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	cmd := exec.Command(binPath, "stdio", "--sandbox", "--log-level", "error")
	cmd.Env = cleanEnv("OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL, "CARDWRITER_CONFIG_DIR="+t.TempDir())
	cmd.Stdin = strings.NewReader(strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_card","arguments":{"roleName":"Traced"},"_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}`,
	}, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("stdio: %v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"tools/call create_card", "POST /role", "cardwriter-mcp", "gen_ai.tool.name"} {
		if !bytes.Contains(got.Bytes(), []byte(want)) {
			t.Errorf("the collector got no %q (%d bytes)", want, got.Len())
		}
	}
	if bytes.Contains(got.Bytes(), []byte("Traced")) {
		t.Error("a span holds the card's text")
	}
}
