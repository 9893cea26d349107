package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMetrics scrapes /metrics after a session: the counters moved, and no label holds an id.
func TestMetrics(t *testing.T) {
	t.Parallel()
	_, urls := startProcess(t, nil, []string{"http", "--sandbox", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"},
		`MCP endpoint: (http://\S+/mcp)`, `metrics: (http://\S+/metrics)`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A session of 2025-11-25, so that the sessions gauge counts it (2026-07-28 has none).
	cs, err := newClient().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: urls[0]}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	card := call(ctx, t, cs, "create_card", map[string]any{"roleName": "Metered"}, false)
	call(ctx, t, cs, "get_card", map[string]any{"roleId": "nope"}, true)
	resp, err := http.Get(urls[1])
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(data)
	for _, want := range []string{
		`cardwriter_tool_calls_total{outcome="ok",tool="create_card"} 1`,
		`cardwriter_tool_calls_total{outcome="role_not_found",tool="get_card"} 1`,
		`cardwriter_upstream_requests_total{operation="createCard",status="201"} 1`,
		`cardwriter_upstream_requests_total{operation="getCard",status="404"} 1`,
		`cardwriter_mcp_sessions_active 1`,
		`cardwriter_tool_call_duration_seconds_count{tool="create_card"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(text, card["roleId"].(string)) {
		t.Error("an id is in the metrics")
	}
	_ = cs.Close()
}
