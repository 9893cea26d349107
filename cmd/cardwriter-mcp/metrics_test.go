package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMetrics scrapes /metrics after a session: the counters moved, and no label holds an id.
func TestMetrics(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binPath, "http", "--sandbox", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
	cmd.Env = cleanEnv()
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); pw.Close() }()
	found := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		var endpoint, metricsURL string
		for sc.Scan() {
			if m := regexp.MustCompile(`MCP endpoint: (http://\S+/mcp)`).FindStringSubmatch(sc.Text()); m != nil {
				endpoint = m[1]
			}
			if m := regexp.MustCompile(`metrics: (http://\S+/metrics)`).FindStringSubmatch(sc.Text()); m != nil {
				metricsURL = m[1]
			}
			if endpoint != "" && metricsURL != "" {
				found <- [2]string{endpoint, metricsURL}
				endpoint = ""
			}
		}
	}()
	var urls [2]string
	select {
	case urls = <-found:
	case <-time.After(20 * time.Second):
		t.Fatal("no endpoints")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := newClient().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: urls[0]}, nil)
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
