package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestLabelsBounded: an error code the service makes up and a retry reason with a code are
// counted under bounded labels.
func TestLabelsBounded(t *testing.T) {
	t.Parallel()
	m := New()
	m.ToolCall("get_card", "ok", time.Millisecond)
	m.ToolCall("get_card", "card_on_fire_7f3a", time.Millisecond)
	m.Retry("getCard", "503 made_up_code")
	m.Retry("getCard", "connection refused")
	m.Refresh("ok")
	m.Sessions(1)
	m.StoreError()
	m.StoreUnavailable("replica_wait")
	m.StoreFailover()
	m.Attempt("getCard", 0, time.Millisecond)
	m.Revisions("kept", 1)
	m.Revisions("dropped", 2)
	m.ToolCall("restore_revision", "revision_not_found", time.Millisecond)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, want := range []string{
		`cardwriter_tool_calls_total{outcome="other",tool="get_card"} 1`,
		`cardwriter_upstream_retries_total{operation="getCard",reason="503"} 1`,
		`cardwriter_upstream_retries_total{operation="getCard",reason="connection refused"} 1`,
		`cardwriter_token_refreshes_total{outcome="ok"} 1`,
		`cardwriter_store_errors_total 1`,
		`cardwriter_store_unavailable_total{reason="replica_wait"} 1`,
		`cardwriter_store_failovers_total 1`,
		`cardwriter_upstream_requests_total{operation="getCard",status="0"} 1`,
		`cardwriter_revisions_total{event="kept"} 1`,
		`cardwriter_revisions_total{event="dropped"} 2`,
		`cardwriter_tool_calls_total{outcome="revision_not_found",tool="restore_revision"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("lacks %s", want)
		}
	}
	if strings.Contains(text, "card_on_fire") || strings.Contains(text, "made_up_code") {
		t.Error("an unbounded label value")
	}
}
