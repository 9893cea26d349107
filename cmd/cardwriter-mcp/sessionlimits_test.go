package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestHTTPUserSessionCap: one user may have --user-sessions sessions open; the next initialize
// gets 429 with a message naming the limit, another user is not affected, and a session ended
// (DELETE) gives its place back.
func TestHTTPUserSessionCap(t *testing.T) {
	t.Parallel()
	sec := &seenSecrets{}
	sb := startAuthSandbox(t, sec)
	srv := startServer(t, sec, "--addr", "127.0.0.1:0", "--api-host", sb.URL, "--auth", "passthrough",
		"--user-sessions", "3", "--user-initialize-rate", "0")
	token := sb.svc.DemoToken()
	var sids []string
	for range 3 {
		resp, body := rawMCP(t, srv.base, token, "", rawInit)
		sid := resp.Header.Get("Mcp-Session-Id")
		if resp.StatusCode != http.StatusOK || sid == "" {
			t.Fatalf("initialize: %d %s", resp.StatusCode, body)
		}
		sids = append(sids, sid)
	}
	resp, body := rawMCP(t, srv.base, token, "", rawInit)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(body, "--user-sessions") || !strings.Contains(body, `"id":1`) {
		t.Fatalf("a fourth session: %d %s, want 429 naming --user-sessions", resp.StatusCode, body)
	}
	other := "other-user-token-0123456789abcdef"
	sec.add(other)
	sb.svc.AddUser(other, "Other Author")
	if resp, body := rawMCP(t, srv.base, other, "", rawInit); resp.StatusCode != http.StatusOK {
		t.Fatalf("another user's first session: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodDelete, srv.base+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", sids[0])
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	dresp, err := http.DefaultClient.Do(req)
	if err != nil || dresp.StatusCode/100 != 2 {
		t.Fatalf("DELETE: %v %v", dresp, err)
	}
	dresp.Body.Close()
	if resp, body := rawMCP(t, srv.base, token, "", rawInit); resp.StatusCode != http.StatusOK {
		t.Fatalf("a session after one was ended: %d %s", resp.StatusCode, body)
	}
}

// TestHTTPUserInitializeRate: initialize requests over --user-initialize-rate (here a burst of
// one) get 429 with Retry-After and a message naming the limit.
func TestHTTPUserInitializeRate(t *testing.T) {
	t.Parallel()
	sec := &seenSecrets{}
	sb := startAuthSandbox(t, sec)
	srv := startServer(t, sec, "--addr", "127.0.0.1:0", "--api-host", sb.URL, "--auth", "passthrough",
		"--user-initialize-rate", "0.001")
	token := sb.svc.DemoToken()
	if resp, body := rawMCP(t, srv.base, token, "", rawInit); resp.StatusCode != http.StatusOK {
		t.Fatalf("the first initialize: %d %s", resp.StatusCode, body)
	}
	resp, body := rawMCP(t, srv.base, token, "", rawInit)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "--user-initialize-rate") {
		t.Fatalf("the second initialize: %d %s, want 429 naming --user-initialize-rate", resp.StatusCode, body)
	}
}
