package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestProtocolHTTP: a Mcp-Protocol-Version the HTTP server does not serve is answered 400 with
// the JSON-RPC error UnsupportedProtocolVersion naming what it serves, before mcp-go sees it; a
// 2026-07-28 POST's Last-Event-ID reaches mcp-go removed; responses carry X-Accel-Buffering: no.
func TestProtocolHTTP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, version, lastEventID string
		wantStatus                         int
		wantCode                           float64 // the JSON-RPC error code, 0 when passed on
		wantLastEventID                    string  // as the next handler sees it
	}{
		{"unknown version", http.MethodPost, "1900-01-01", "", 400, -32022, ""},
		{"2024-11-05 has no streamable HTTP", http.MethodPost, "2024-11-05", "", 400, -32022, ""},
		{"unknown version on a GET", http.MethodGet, "1900-01-01", "", 400, -32022, ""},
		{"served version", http.MethodPost, "2025-11-25", "", 200, 0, ""},
		{"no version header", http.MethodPost, "", "", 200, 0, ""},
		{"2026-07-28 Last-Event-ID ignored", http.MethodPost, "2026-07-28", "7", 200, 0, ""},
		{"2025 GET resumes with Last-Event-ID", http.MethodGet, "2025-11-25", "7", 200, 0, "7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var seen *http.Request
			h := protocolHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r }))
			r := httptest.NewRequest(tt.method, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":"a-1","method":"tools/list"}`))
			if tt.version != "" {
				r.Header.Set("Mcp-Protocol-Version", tt.version)
			}
			if tt.lastEventID != "" {
				r.Header.Set("Last-Event-ID", tt.lastEventID)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d", w.Code, tt.wantStatus)
			}
			if got := w.Header().Get("X-Accel-Buffering"); got != "no" {
				t.Errorf("X-Accel-Buffering %q", got)
			}
			if tt.wantCode == 0 {
				if seen == nil {
					t.Fatal("not passed on")
				}
				if got := seen.Header.Get("Last-Event-ID"); got != tt.wantLastEventID {
					t.Errorf("Last-Event-ID passed on: %q, want %q", got, tt.wantLastEventID)
				}
				return
			}
			if seen != nil {
				t.Fatal("passed on to mcp-go")
			}
			var resp struct {
				ID    any `json:"id"`
				Error struct {
					Code    float64 `json:"code"`
					Message string  `json:"message"`
					Data    struct {
						Requested string   `json:"requested"`
						Supported []string `json:"supported"`
					} `json:"data"`
				} `json:"error"`
			}
			body, _ := io.ReadAll(w.Body)
			if err := json.Unmarshal(body, &resp); err != nil || w.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("not a JSON-RPC error: %s (%v)", body, err)
			}
			if resp.Error.Code != tt.wantCode || resp.Error.Data.Requested != tt.version || len(resp.Error.Data.Supported) != len(httpProtocolVersions) {
				t.Errorf("error %s", body)
			}
			if tt.method == http.MethodPost && resp.ID != "a-1" {
				t.Errorf("id %v, want the request's", resp.ID)
			}
		})
	}
}

// TestStdioUnsupported: a stdio request whose _meta declares a version the server does not
// serve is answered UnsupportedProtocolVersion with its id; a notification is dropped; anything
// else (a served version, no version, the key inside a string) is passed on.
func TestStdioUnsupported(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, line string
		refused    bool
		wantAnswer string
	}{
		{"unknown version", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion" : "1900-01-01"}}}`, true, `"id":2,"error":{"code":-32022`},
		{"server/discover, unknown version", `{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}}`, true, `"requested":"2099-01-01"`},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/x","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01"}}}`, true, ""},
		{"served version", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, false, ""},
		{"legacy request", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, false, ""},
		{"the key inside a string", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"arguments":{"text":"{\"io.modelcontextprotocol/protocolVersion\":\"1900-01-01\"}"}}}`, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			answer, refused := stdioUnsupported([]byte(tt.line))
			if refused != tt.refused || !strings.Contains(string(answer), tt.wantAnswer) || (tt.wantAnswer == "") != (answer == nil) {
				t.Errorf("refused %v, answer %s", refused, answer)
			}
		})
	}
}

// FuzzDeclaredVersion: declaredVersion never panics, and what it finds is in the line.
func FuzzDeclaredVersion(f *testing.F) {
	f.Add([]byte(`{"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`))
	f.Add([]byte(`"io.modelcontextprotocol/protocolVersion"`))
	f.Add([]byte(`"io.modelcontextprotocol/protocolVersion": "`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if v, ok := declaredVersion(line); ok && !strings.Contains(string(line), v) {
			t.Fatalf("%q not in %q", v, line)
		}
	})
}
