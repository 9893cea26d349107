package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestLoopbackOriginsOnAPublicURL: loopback origins may call /mcp of a server on a loopback
// URL, not of one deployed on a public URL (unless listed); listed origins always may.
func TestLoopbackOriginsOnAPublicURL(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	for _, tc := range []struct {
		publicURL, origin string
		want              int
	}{
		{"", "http://localhost:6274", http.StatusOK},
		{"http://127.0.0.1:8080", "http://127.0.0.1:6274", http.StatusOK},
		{"https://mcp.example.com", "http://localhost:6274", http.StatusForbidden},
		{"https://mcp.example.com", "http://127.0.0.1:6274", http.StatusForbidden},
		{"https://mcp.example.com", "http://[::1]:6274", http.StatusForbidden},
		{"https://mcp.example.com", "https://app.example.com", http.StatusOK},
		{"https://mcp.example.com", "https://evil.example", http.StatusForbidden},
	} {
		g := &guard{allowedOrigins: []string{"https://app.example.com"}, public: deployedPublic(tc.publicURL),
			maxBody: 1 << 20, logger: slog.New(slog.DiscardHandler), next: ok}
		r := httptest.NewRequest(http.MethodGet, "/mcp", nil)
		r.Header.Set("Origin", tc.origin)
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("public URL %q, Origin %s: %d, want %d", tc.publicURL, tc.origin, w.Code, tc.want)
		}
	}
}
