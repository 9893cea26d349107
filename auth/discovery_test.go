package auth_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/auth"
)

func httptestServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// metadataServer serves metadata built by body from the server's own URL.
func metadataServer(t *testing.T, status int, body func(base string) string) string {
	t.Helper()
	var base string
	base = httptestServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/oauth-authorization-server" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body(base)))
	})
	return base
}

func TestDiscover(t *testing.T) {
	t.Parallel()
	good := func(b string) string {
		return `{"issuer":"` + b + `","authorization_endpoint":"` + b + `/authz","token_endpoint":"` + b + `/tok",` +
			`"registration_endpoint":"` + b + `/reg","revocation_endpoint":"` + b + `/rev",` +
			`"response_types_supported":["code"],"code_challenge_methods_supported":["S256"]}`
	}
	base := metadataServer(t, 200, good)
	md, err := auth.Discover(context.Background(), nil, base)
	if err != nil || !md.Discovered || md.AuthorizationEndpoint != base+"/authz" || md.TokenEndpoint != base+"/tok" ||
		md.RegistrationEndpoint != base+"/reg" || md.RevocationEndpoint != base+"/rev" || md.Issuer != base {
		t.Fatalf("Discover = %+v, %v", md, err)
	}
	// The API host may be given with a trailing slash or in upper case.
	if md, err := auth.Discover(context.Background(), nil, strings.ToUpper(base)+"/"); err != nil || md.Issuer != base {
		t.Errorf("Discover(upper case, slash) = %+v, %v", md, err)
	}

	tests := []struct {
		name   string
		status int
		body   func(string) string
		want   string
	}{
		{"other issuer", 200, func(b string) string {
			return strings.Replace(good(b), `"issuer":"`+b+`"`, `"issuer":"https://evil.example"`, 1)
		}, "issuer"},
		{"no PKCE", 200, func(b string) string {
			return strings.Replace(good(b), `,"code_challenge_methods_supported":["S256"]`, ``, 1)
		}, "S256"},
		{"plain PKCE only", 200, func(b string) string {
			return strings.Replace(good(b), `["S256"]`, `["plain"]`, 1)
		}, "S256"},
		{"no token endpoint", 200, func(b string) string {
			return strings.Replace(good(b), `"token_endpoint":"`+b+`/tok",`, ``, 1)
		}, "token_endpoint"},
		{"bad endpoint", 200, func(b string) string {
			return strings.Replace(good(b), b+"/authz", "javascript:alert(1)", 1)
		}, "authorization_endpoint"},
		{"no code flow", 200, func(b string) string {
			return strings.Replace(good(b), `["code"]`, `["token"]`, 1)
		}, "authorization code"},
		{"not JSON", 200, func(string) string { return "<html>" }, "not a JSON object"},
		{"server error", 503, func(string) string { return "{}" }, "503"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base := metadataServer(t, tc.status, tc.body)
			if _, err := auth.Discover(context.Background(), nil, base); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Discover = %v, want an error about %q", err, tc.want)
			}
		})
	}
}

// TestDiscoverHTTPSIssuer: an HTTPS issuer's endpoints must be HTTPS too.
func TestDiscoverHTTPSIssuer(t *testing.T) {
	t.Parallel()
	var base string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"issuer":"` + base + `","authorization_endpoint":"` + base + `/a","token_endpoint":"http://` +
			strings.TrimPrefix(base, "https://") + `/t","code_challenge_methods_supported":["S256"]}`))
	}))
	t.Cleanup(srv.Close)
	base = srv.URL
	if _, err := auth.Discover(context.Background(), srv.Client(), base); err == nil || !strings.Contains(err.Error(), "not HTTPS") {
		t.Errorf("Discover = %v", err)
	}
}

func TestDiscoverBadAPIHost(t *testing.T) {
	t.Parallel()
	for _, h := range []string{"", "ftp://x", "https://x/open/v1", "https://user@x"} {
		if _, err := auth.Discover(context.Background(), nil, h); err == nil {
			t.Errorf("Discover(%q) succeeded", h)
		}
	}
	if r, err := auth.Resource("HTTPS://API.Example.com/"); err != nil || r != "https://api.example.com/open/v1" {
		t.Errorf("Resource = %q, %v", r, err)
	}
}
