package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// FuzzCompactBytes holds compactBytes to json.Compact on valid JSON.
func FuzzCompactBytes(f *testing.F) {
	for _, s := range []string{`{}`, "{\"a\": 1}\n", `{"a":"x y\" z\\"}`, " [1, \"\\u0020\", {\"b\" :null}] ", `"\\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		var want bytes.Buffer
		if err := json.Compact(&want, data); err != nil {
			t.Fatal(err)
		}
		if got := compactBytes(data); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("compactBytes(%q) = %q, want %q", data, got, want.Bytes())
		}
	})
}

// geminiErrorLine is what Gemini CLI 0.61 gives its model for an error result: its own line
// quoting the call and the whole result (mcp-tool.ts, isMCPToolError).
func geminiErrorLine(t *testing.T, tool string, args map[string]any, res *mcp.CallToolResult) string {
	t.Helper()
	call, _ := json.Marshal(map[string]any{"name": tool, "args": args})
	parts, err := json.Marshal([]any{map[string]any{"functionResponse": map[string]any{"name": tool,
		"response": map[string]any{"content": res.Content, "isError": true}}}})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("MCP tool '%s' reported tool error for function call: %s with response: %s", tool, call, parts)
}

// TestErrorResultCompact: an error result says its message once (the envelope block carries
// the code, retryable and detail), so that a one-sentence error reaches Gemini's model as a
// short line (it was 968 characters), and ErrorEnvelope still reads the whole envelope.
func TestErrorResultCompact(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	args := map[string]any{"roleId": "r_0000000000000000000000ff"}
	res := e.call("get_card", jsonArg(t, args))
	env, ok := ErrorEnvelope(res)
	if !ok || env["error"] == nil || env["message"] == "" || env["retryable"] == nil {
		t.Fatalf("envelope: %v", env)
	}
	msg := env["message"].(string)
	if n := strings.Count(text(res), msg); n != 1 {
		t.Errorf("the message is in the text %d times: %s", n, text(res))
	}
	line := geminiErrorLine(t, "get_card", args, res)
	own := len(geminiErrorLine(t, "get_card", args, &mcp.CallToolResult{Content: []mcp.Content{}}))
	if extra := len(line) - own; extra > len(msg)+120 {
		t.Errorf("the result adds %d characters to Gemini's line for a message of %d: %s", extra, len(msg), line)
	}
	t.Logf("Gemini's line: %d characters (%d its own) for a message of %d", len(line), own, len(msg))
}
