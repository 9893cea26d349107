package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// bomb is a tools/call of import_tavern_card whose source is n empty arrays (the was
// 14 million in 42 MB: decoded whole, it took the server to 2.9 GiB).
func bomb(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"import_tavern_card","arguments":{"source":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("[]")
	}
	b.WriteString("]}}}\n")
	return b.Bytes()
}

// toolError decodes the answer to request 9 and returns its error text; it fails the test when
// the answer is not a tool result with isError.
func toolError(t *testing.T, answer []byte) string {
	t.Helper()
	var m struct {
		ID     int `json:"id"`
		Result struct {
			IsError bool                `json:"isError"`
			Content []map[string]string `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(answer, &m); err != nil || m.ID != 9 || !m.Result.IsError || len(m.Result.Content) == 0 {
		t.Fatalf("want an error result of request 9, got %.500s (%v)", answer, err)
	}
	return m.Result.Content[0]["text"]
}

// postInSession opens a session of 2025-11-25 at base (a server without authorization) and
// posts body in it; it returns the answer.
func postInSession(t *testing.T, base string, body []byte) []byte {
	t.Helper()
	resp, _ := rawMCP(t, base, "", "", rawInit)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, sid)
	}
	resp, _ = rawMCP(t, base, "", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d", resp.StatusCode)
	}
	_, answer := rawMCP(t, base, "", sid, string(body))
	if i := strings.Index(answer, "data: "); i >= 0 { // an SSE answer: its one event
		answer = strings.TrimSpace(answer[i+len("data: "):])
	}
	return []byte(answer)
}

// TestHTTPArgumentBombRefusedBeforeDecoding posts the bomb (6 MB, 2 million empty arrays) to a
// real server: it is answered with a tool error the model reads, and the server's peak memory
// grows by little more than the body (decoded, the bomb took hundreds of MiB).
func TestHTTPArgumentBombRefusedBeforeDecoding(t *testing.T) {
	t.Parallel()
	p, urls := startProcess(t, nil, []string{"http", "--sandbox", "--addr", "127.0.0.1:0"}, `MCP endpoint: (http://\S+)/mcp`)
	before := peakRSS(t, p.cmd.Process.Pid)
	body := bomb(2_000_000)
	answer := postInSession(t, urls[0], body)
	peak := peakRSS(t, p.cmd.Process.Pid)
	t.Logf("peak RSS %d MiB before, %d MiB after a %d MB bomb", before>>20, peak>>20, len(body)>>20)
	if peak-before > 40<<20 {
		t.Errorf("the server's peak memory grew by %d MiB for a %d MB message it refuses", (peak-before)>>20, len(body)>>20)
	}
	if text := toolError(t, answer); !strings.Contains(text, "values") {
		t.Fatalf("the refusal does not say what was over the limit: %s", text)
	}
}

// TestHTTPArgumentOverItsToolsLimit: a 5 MiB id (no file travels in get_card) is refused as a
// tool error that names the argument and the limit, though the body is far under
// --max-body-bytes.
func TestHTTPArgumentOverItsToolsLimit(t *testing.T) {
	t.Parallel()
	_, urls := startProcess(t, nil, []string{"http", "--sandbox", "--addr", "127.0.0.1:0"}, `MCP endpoint: (http://\S+)/mcp`)
	body := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"get_card","arguments":{"roleId":"` + strings.Repeat("x", 5<<20) + `"}}}`
	if text := toolError(t, postInSession(t, urls[0], []byte(body))); !strings.Contains(text, `"roleId"`) || !strings.Contains(text, "get_card accepts at most 4194304") {
		t.Fatalf("the refusal does not name the argument and its limit: %s", text)
	}
}

// TestStdioArgumentBombRefusedBeforeDecoding sends the bomb over stdio: it is answered with a
// tool error, the session goes on, and the server's peak memory stays bounded.
func TestStdioArgumentBombRefusedBeforeDecoding(t *testing.T) {
	t.Parallel()
	c := startRawStdio(t, "pipe")
	c.call(1, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}})
	c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	before := peakRSS(t, c.pid)
	if _, err := c.in.Write(bomb(2_000_000)); err != nil {
		t.Fatal(err)
	}
	res := c.await(9)
	peak := peakRSS(t, c.pid)
	t.Logf("peak RSS %d MiB before, %d MiB after the bomb", before>>20, peak>>20)
	if peak-before > 40<<20 {
		t.Errorf("the server's peak memory grew by %d MiB for a message it refuses", (peak-before)>>20)
	}
	data, _ := json.Marshal(map[string]any{"id": 9, "result": res})
	if text := toolError(t, data); !strings.Contains(text, "values") {
		t.Fatalf("the refusal does not say what was over the limit: %s", text)
	}
	c.tool(10, "whoami", map[string]any{})
}
