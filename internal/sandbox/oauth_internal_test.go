package sandbox

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/oauthserver"
)

// TestOAuthTokenAudienceAndScope plants access tokens the public flows cannot produce (the sandbox
// only issues mcp:card-writer for its own resource) and checks the API refuses each one.
func TestOAuthTokenAudienceAndScope(t *testing.T) {
	t.Parallel()
	s, err := New(Options{CheckResponses: true, DemoToken: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	now := s.now()
	s.mu.Lock()
	s.st.OAuth.Clients["c_1"] = &oauthClient{ID: "c_1", RedirectURIs: []string{"http://127.0.0.1/cb"}, GrantTypes: oauthserver.GrantTypes}
	plant := func(token, scope, resource, user string, expires time.Time) {
		g := &oauthGrant{ID: "g_" + token, ClientID: "c_1", UserID: user, Scope: scope, Resource: resource, Created: now}
		s.st.OAuth.Grants[g.ID] = g
		s.st.OAuth.AccessTokens[oauthserver.Digest(token)] = &oauthToken{GrantID: g.ID, Scope: scope, Expires: expires}
	}
	later := now.Add(time.Hour)
	plant("good", cardScope, s.resourceID(), demoUserID, later)
	plant("noscope", "", s.resourceID(), demoUserID, later)
	plant("otherscope", "profile", s.resourceID(), demoUserID, later)
	plant("otherresource", cardScope, "https://other.example/open/v1", demoUserID, later)
	plant("hostresource", cardScope, s.opts.BaseURL, demoUserID, later)
	plant("nouser", cardScope, s.resourceID(), "u_gone", later)
	plant("expired", cardScope, s.resourceID(), demoUserID, now)
	s.mu.Unlock()

	for token, want := range map[string]int{
		"good": http.StatusOK, "noscope": http.StatusUnauthorized, "otherscope": http.StatusUnauthorized,
		"otherresource": http.StatusUnauthorized, "hostresource": http.StatusUnauthorized,
		"nouser": http.StatusUnauthorized, "expired": http.StatusUnauthorized,
	} {
		req := httptest.NewRequest("GET", "http://sandbox.localhost/open/v1/me", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("%s: %d, want %d: %s", token, rec.Code, want, rec.Body)
		}
		if want == http.StatusUnauthorized && rec.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s: no WWW-Authenticate", token)
		}
	}
}

func TestRedirectMatching(t *testing.T) {
	t.Parallel()
	c := &oauthClient{RedirectURIs: []string{"http://127.0.0.1/cb", "http://[::1]:8080/cb", "http://localhost/cb?a=1", "https://app.example/cb"}}
	for uri, want := range map[string]bool{
		"http://127.0.0.1/cb":        true,
		"http://127.0.0.1:49152/cb":  true,
		"http://[::1]/cb":            true,
		"http://[::1]:1/cb":          true,
		"http://localhost:3/cb?a=1":  true,
		"https://app.example/cb":     true,
		"http://localhost:3/cb":      false,
		"http://127.0.0.1:0/cb":      false,
		"http://127.0.0.1:99999/cb":  false,
		"http://127.0.0.1:80x/cb":    false,
		"http://127.0.0.1/cb/":       false,
		"http://127.0.0.1/CB":        false,
		"https://127.0.0.1/cb":       false,
		"http://127.0.0.1/cb#x":      false,
		"http://127.0.0.1/cb?":       false,
		"https://app.example:443/cb": false,
		"https://APP.example/cb":     false,
		"http://app.example/cb":      false,
	} {
		if got := c.redirectAllowed(uri); got != want {
			t.Errorf("%s: %v, want %v", uri, got, want)
		}
	}
}

func TestPageCSP(t *testing.T) {
	t.Parallel()
	for uri, want := range map[string]string{
		"http://127.0.0.1:5555/cb": "form-action 'self' http://127.0.0.1:5555;",
		"http://localhost/cb":      "form-action 'self' http://localhost;",
		"https://app.example/cb":   "form-action 'self' https://app.example;",
		"http://[::1]:5555/cb":     "form-action 'self' http:;",
		"":                         "form-action 'self';",
	} {
		if got := pageCSP(uri); !strings.Contains(got, want) || !strings.Contains(got, "frame-ancestors 'none'") {
			t.Errorf("%q: %s", uri, got)
		}
	}
}
