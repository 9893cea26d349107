package sandbox_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

func TestOAuthMetadata(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, sandbox.Options{})
	res, md := e.do(t, "GET", "/.well-known/oauth-authorization-server", "", "", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("AS metadata: %d", res.StatusCode)
	}
	raw, _ := json.Marshal(md)
	if err := schema.Component("AuthorizationServerMetadata").ValidateJSON(raw); err != nil {
		t.Fatalf("AS metadata does not match the contract: %v", err)
	}
	want := map[string]any{
		"issuer":                        e.base,
		"authorization_endpoint":        e.base + "/oauth/authorize",
		"token_endpoint":                e.base + "/oauth/token",
		"registration_endpoint":         e.base + "/oauth/register",
		"revocation_endpoint":           e.base + "/oauth/revoke",
		"device_authorization_endpoint": e.base + "/oauth/device_authorization",
		"authorization_response_iss_parameter_supported": true,
	}
	for k, v := range want {
		if md[k] != v {
			t.Errorf("%s = %v, want %v", k, md[k], v)
		}
	}
	lists := map[string][]string{
		"scopes_supported":                      {scope},
		"code_challenge_methods_supported":      {"S256"},
		"token_endpoint_auth_methods_supported": {"none"},
		"grant_types_supported":                 {"authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"},
		"response_types_supported":              {"code"},
	}
	for k, v := range lists {
		if got := strs(md[k]); !slices.Equal(got, v) {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}

	// RFC 9728: the API's 401 names the protected-resource metadata, which names the issuer.
	res, obj := e.do(t, "GET", "/open/v1/me", "", "", nil)
	if res.StatusCode != http.StatusUnauthorized || obj["error"] != "unauthorized" || obj["message"] == "" {
		t.Fatalf("no token: %d %v", res.StatusCode, obj)
	}
	prmURL := e.base + "/.well-known/oauth-protected-resource/open/v1"
	wantChallenge := `Bearer resource_metadata="` + prmURL + `", scope="mcp:card-writer"`
	if got := res.Header.Get("WWW-Authenticate"); got != wantChallenge {
		t.Fatalf("WWW-Authenticate %q, want %q", got, wantChallenge)
	}
	res, _ = e.do(t, "GET", "/open/v1/me", "", "", map[string]string{"Authorization": "Bearer nope"})
	if got := res.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, wantChallenge+`, error="invalid_token"`) {
		t.Fatalf("WWW-Authenticate with a bad token %q", got)
	}
	res, prm := e.do(t, "GET", strings.TrimPrefix(prmURL, e.base), "", "", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("PRM: %d", res.StatusCode)
	}
	raw, _ = json.Marshal(prm)
	if err := schema.Component("ProtectedResourceMetadata").ValidateJSON(raw); err != nil {
		t.Fatalf("PRM does not match the contract: %v", err)
	}
	if prm["resource"] != e.resource() || !slices.Equal(strs(prm["authorization_servers"]), []string{e.base}) ||
		!slices.Equal(strs(prm["scopes_supported"]), []string{scope}) || !slices.Equal(strs(prm["bearer_methods_supported"]), []string{"header"}) {
		t.Fatalf("PRM %v", prm)
	}
	if res.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("PRM without CORS")
	}
	// Wrong methods.
	for _, tc := range []struct{ method, path string }{
		{"POST", "/.well-known/oauth-authorization-server"}, {"GET", "/oauth/token"}, {"GET", "/oauth/register"},
		{"GET", "/oauth/revoke"}, {"POST", "/oauth/authorize"}, {"DELETE", "/oauth/consent"},
	} {
		res, _ := e.do(t, tc.method, tc.path, "", "", nil)
		if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") == "" {
			t.Errorf("%s %s: %d allow %q", tc.method, tc.path, res.StatusCode, res.Header.Get("Allow"))
		}
	}
}

// TestOAuthHappyPath drives the flow with golang.org/x/oauth2 as an independent client: a loopback
// redirect URI registered without a port and used with one (RFC 8252), PKCE S256, resource.
func TestOAuthHappyPath(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, sandbox.Options{AccessTokenTTL: time.Minute})
	clientID := e.client(t, "Happy Client")
	conf := &oauth2.Config{
		ClientID:    clientID,
		Endpoint:    oauth2.Endpoint{AuthURL: e.base + "/oauth/authorize", TokenURL: e.base + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams},
		RedirectURL: loopbackUse,
		Scopes:      []string{scope},
	}
	verifier := oauth2.GenerateVerifier()
	authURL := conf.AuthCodeURL("state-xyz", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", e.resource()))

	b := e.browser(t)
	signIn := b.get(t, authURL)
	if !strings.Contains(signIn.body, "Happy Client") || signIn.url.Path != "/oauth/login" {
		t.Fatalf("sign-in page at %s: %s", signIn.url, signIn.body)
	}
	consent := b.signIn(t, signIn)
	for _, want := range []string{"Happy Client", "Demo Author", scope, loopbackUse, "127.0.0.1:54321", e.resource(), `value="deny"`} {
		if !strings.Contains(consent.body, want) {
			t.Errorf("consent page lacks %q", want)
		}
	}
	loc := b.answer(t, consent, "allow")
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != loopbackUse {
		t.Fatalf("redirected to %s", loc)
	}
	q := loc.Query()
	if q.Get("state") != "state-xyz" || q.Get("iss") != e.base || q.Get("code") == "" || q.Get("error") != "" {
		t.Fatalf("redirect query %v", q)
	}

	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, e.srv.Client())
	tok, err := conf.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", e.resource()))
	if err != nil {
		t.Fatalf("Exchange: %v", err)
	}
	if tok.TokenType != "Bearer" || tok.RefreshToken == "" || tok.Extra("scope") != scope {
		t.Fatalf("token %+v scope %v", tok, tok.Extra("scope"))
	}
	if n, _ := tok.Extra("expires_in").(float64); n != 60 {
		t.Fatalf("expires_in %v", tok.Extra("expires_in"))
	}
	e.wantAPI(t, tok.AccessToken, http.StatusOK)
	c := &client{t: t, hc: e.srv.Client(), base: e.base, token: tok.AccessToken}
	if me := c.call("GET", "/me", nil, http.StatusOK); me["userId"] != "u_demo" {
		t.Fatalf("me %v", me)
	}
	c.newCard("Made with OAuth")

	// Past the access token's expiry: the API refuses it, and the token source refreshes.
	e.clock.Advance(2 * time.Minute)
	e.wantAPI(t, tok.AccessToken, http.StatusUnauthorized)
	expired := *tok
	expired.Expiry = time.Now().Add(-time.Second) // what the client sees once expires_in has passed
	fresh, err := conf.TokenSource(ctx, &expired).Token()
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if fresh.AccessToken == tok.AccessToken || fresh.RefreshToken == tok.RefreshToken || fresh.RefreshToken == "" {
		t.Fatal("refresh did not issue new tokens")
	}
	e.wantAPI(t, fresh.AccessToken, http.StatusOK)
	if got := c.as(fresh.AccessToken).call("GET", "/worldbook/list", nil, http.StatusOK); got["list"] == nil {
		t.Fatalf("list %v", got)
	}
	// The demo token keeps working beside OAuth tokens.
	e.wantAPI(t, e.svc.DemoToken(), http.StatusOK)
}

// TestOAuthAutoDetectAuthStyle: x/oauth2's default auth style first sends client_id in a Basic
// header, which a public client must not; the 401 invalid_client makes it retry in the body
// without spending the code.
func TestOAuthAutoDetectAuthStyle(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, sandbox.Options{})
	clientID := e.client(t, "Auto")
	conf := &oauth2.Config{ClientID: clientID, RedirectURL: loopbackUse,
		Endpoint: oauth2.Endpoint{AuthURL: e.base + "/oauth/authorize", TokenURL: e.base + "/oauth/token"}}
	verifier := oauth2.GenerateVerifier()
	code := e.code(t, e.authParams(clientID, verifier, nil))
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, e.srv.Client())
	tok, err := conf.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("Exchange: %v", err)
	}
	e.wantAPI(t, tok.AccessToken, http.StatusOK)
}

func TestOAuthRegistration(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, sandbox.Options{})
	tests := []struct {
		name string
		meta map[string]any
		code string // "" = 201
	}{
		{"https", map[string]any{"redirect_uris": []string{"https://app.example/cb"}}, ""},
		{"loopback v4 with port", map[string]any{"redirect_uris": []string{"http://127.0.0.1:8080/cb"}}, ""},
		{"loopback v6", map[string]any{"redirect_uris": []string{"http://[::1]/cb"}}, ""},
		{"localhost", map[string]any{"redirect_uris": []string{"http://localhost/cb"}}, ""},
		{"all fields", map[string]any{"redirect_uris": []string{loopbackCB}, "client_name": "X", "token_endpoint_auth_method": "none",
			"grant_types": []string{"authorization_code"}, "response_types": []string{"code"}, "scope": scope,
			"client_uri": "https://x.example", "software_id": "ignored"}, ""},
		{"no redirect uris", map[string]any{"client_name": "X"}, "invalid_redirect_uri"},
		{"empty redirect uris", map[string]any{"redirect_uris": []string{}}, "invalid_redirect_uri"},
		{"http not loopback", map[string]any{"redirect_uris": []string{"http://app.example/cb"}}, "invalid_redirect_uri"},
		{"http 127.0.0.2", map[string]any{"redirect_uris": []string{"http://127.0.0.2/cb"}}, "invalid_redirect_uri"},
		{"one bad among good", map[string]any{"redirect_uris": []string{loopbackCB, "http://evil.example/cb"}}, "invalid_redirect_uri"},
		{"relative", map[string]any{"redirect_uris": []string{"/cb"}}, "invalid_redirect_uri"},
		{"fragment", map[string]any{"redirect_uris": []string{"https://app.example/cb#x"}}, "invalid_redirect_uri"},
		{"custom scheme", map[string]any{"redirect_uris": []string{"com.example.app:/cb"}}, "invalid_redirect_uri"},
		{"javascript", map[string]any{"redirect_uris": []string{"javascript:alert(1)"}}, "invalid_redirect_uri"},
		{"user info", map[string]any{"redirect_uris": []string{"https://u:p@app.example/cb"}}, "invalid_redirect_uri"},
		{"confidential", map[string]any{"redirect_uris": []string{loopbackCB}, "token_endpoint_auth_method": "client_secret_basic"}, "invalid_client_metadata"},
		{"implicit", map[string]any{"redirect_uris": []string{loopbackCB}, "grant_types": []string{"implicit"}}, "invalid_client_metadata"},
		{"refresh only", map[string]any{"redirect_uris": []string{loopbackCB}, "grant_types": []string{"refresh_token"}}, "invalid_client_metadata"},
		{"token response", map[string]any{"redirect_uris": []string{loopbackCB}, "response_types": []string{"token"}}, "invalid_client_metadata"},
		{"unknown scope", map[string]any{"redirect_uris": []string{loopbackCB}, "scope": "admin"}, "invalid_client_metadata"},
		{"wrong types", map[string]any{"redirect_uris": "https://app.example/cb"}, "invalid_client_metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, obj := e.register(t, tt.meta)
			if tt.code == "" {
				if status != http.StatusCreated {
					t.Fatalf("%d %v", status, obj)
				}
				raw, _ := json.Marshal(obj)
				if err := schema.Component("ClientRegistration").ValidateJSON(raw); err != nil {
					t.Fatal(err)
				}
				if obj["client_id"] == "" || obj["token_endpoint_auth_method"] != "none" || obj["client_secret"] != nil {
					t.Fatalf("registration %v", obj)
				}
				return
			}
			if status != http.StatusBadRequest || obj["error"] != tt.code || obj["error_description"] == "" {
				t.Fatalf("%d %v, want 400 %s", status, obj, tt.code)
			}
		})
	}
	// Defaults: public client with both grant types.
	_, obj := e.register(t, map[string]any{"redirect_uris": []string{loopbackCB}})
	if !slices.Equal(strs(obj["grant_types"]), []string{"authorization_code", "refresh_token"}) {
		t.Errorf("default grant_types %v", obj["grant_types"])
	}
	for _, tc := range []struct{ ct, body string }{{"text/plain", `{"redirect_uris":["https://a.example/cb"]}`}, {"application/json", `{`}} {
		res, obj := e.do(t, "POST", "/oauth/register", tc.ct, tc.body, nil)
		if res.StatusCode != http.StatusBadRequest || obj["error"] != "invalid_client_metadata" {
			t.Errorf("%s %s: %d %v", tc.ct, tc.body, res.StatusCode, obj)
		}
	}
}

func TestOAuthAuthorizeErrors(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, sandbox.Options{})
	clientID := e.client(t, "Errors", loopbackCB, "https://app.example/cb?x=1")
	verifier := oauth2.GenerateVerifier()

	// No trusted redirect: an error page, never a redirect.
	pages := []struct {
		name      string
		overrides map[string]string
		raw       string // a raw query instead
	}{
		{"unknown client", map[string]string{"client_id": "c_nope"}, ""},
		{"missing client", map[string]string{"client_id": ""}, ""},
		{"missing redirect", map[string]string{"redirect_uri": ""}, ""},
		{"foreign redirect", map[string]string{"redirect_uri": "https://evil.example/callback"}, ""},
		{"other path on loopback", map[string]string{"redirect_uri": "http://127.0.0.1:54321/other"}, ""},
		{"other loopback host", map[string]string{"redirect_uri": "http://localhost:54321/callback"}, ""},
		{"https loopback", map[string]string{"redirect_uri": "https://127.0.0.1:54321/callback"}, ""},
		{"extra query", map[string]string{"redirect_uri": "http://127.0.0.1:54321/callback?a=b"}, ""},
		{"https other port", map[string]string{"redirect_uri": "https://app.example:8443/cb?x=1"}, ""},
		{"https other query", map[string]string{"redirect_uri": "https://app.example/cb?x=2"}, ""},
		{"fragment", map[string]string{"redirect_uri": "http://127.0.0.1:54321/callback#f"}, ""},
		{"user info", map[string]string{"redirect_uri": "http://u@127.0.0.1:54321/callback"}, ""},
		{"duplicate redirect", nil, "client_id=" + clientID + "&redirect_uri=" + url.QueryEscape(loopbackUse) + "&redirect_uri=" + url.QueryEscape("https://evil.example/cb")},
	}
	for _, tt := range pages {
		t.Run("page/"+tt.name, func(t *testing.T) {
			q := e.authParams(clientID, verifier, tt.overrides).Encode()
			if tt.raw != "" {
				q = tt.raw
			}
			res, _ := e.do(t, "GET", "/oauth/authorize?"+q, "", "", nil)
			if res.StatusCode != http.StatusBadRequest || res.Header.Get("Location") != "" ||
				!strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
				t.Fatalf("%d location %q type %q", res.StatusCode, res.Header.Get("Location"), res.Header.Get("Content-Type"))
			}
			checkPageHeaders(t, res.Header)
		})
	}

	// A trusted redirect: the error goes back to the client with the state (RFC 6749 4.1.2.1).
	redirects := []struct {
		name      string
		overrides map[string]string
		code      string
	}{
		{"missing resource", map[string]string{"resource": ""}, "invalid_target"},
		{"wrong resource", map[string]string{"resource": "https://other.example/open/v1"}, "invalid_target"},
		{"resource of the host", map[string]string{"resource": e.base}, "invalid_target"},
		{"resource with fragment", map[string]string{"resource": e.resource() + "#x"}, "invalid_target"},
		{"missing state", map[string]string{"state": ""}, "invalid_request"},
		{"plain method", map[string]string{"code_challenge_method": "plain", "code_challenge": verifier}, "invalid_request"},
		{"missing method", map[string]string{"code_challenge_method": ""}, "invalid_request"},
		{"missing challenge", map[string]string{"code_challenge": ""}, "invalid_request"},
		{"short challenge", map[string]string{"code_challenge": "abc"}, "invalid_request"},
		{"token response type", map[string]string{"response_type": "token"}, "unsupported_response_type"},
		{"missing response type", map[string]string{"response_type": ""}, "invalid_request"},
		{"unknown scope", map[string]string{"scope": scope + " admin"}, "invalid_scope"},
	}
	for _, tt := range redirects {
		t.Run("redirect/"+tt.name, func(t *testing.T) {
			q := e.authParams(clientID, verifier, tt.overrides)
			res, _ := e.do(t, "GET", "/oauth/authorize?"+q.Encode(), "", "", nil)
			loc, err := url.Parse(res.Header.Get("Location"))
			if res.StatusCode != http.StatusFound || err != nil {
				t.Fatalf("%d %q", res.StatusCode, res.Header.Get("Location"))
			}
			got := loc.Query()
			if loc.Host != "127.0.0.1:54321" || loc.Path != "/callback" || got.Get("error") != tt.code ||
				got.Get("error_description") == "" || got.Get("code") != "" || got.Get("iss") != e.base {
				t.Fatalf("redirect %s", loc)
			}
			if got.Get("state") != q.Get("state") {
				t.Fatalf("state %q, want %q", got.Get("state"), q.Get("state"))
			}
		})
	}
	t.Run("redirect keeps the registered query", func(t *testing.T) {
		res, _ := e.do(t, "GET", "/oauth/authorize?"+e.authParams(clientID, verifier, map[string]string{
			"redirect_uri": "https://app.example/cb?x=1", "resource": ""}).Encode(), "", "", nil)
		loc, _ := url.Parse(res.Header.Get("Location"))
		if loc.Host != "app.example" || loc.Query().Get("x") != "1" || loc.Query().Get("error") != "invalid_target" {
			t.Fatalf("redirect %s", loc)
		}
	})
	t.Run("duplicate parameter", func(t *testing.T) {
		q := e.authParams(clientID, verifier, nil).Encode() + "&scope=" + url.QueryEscape(scope)
		res, _ := e.do(t, "GET", "/oauth/authorize?"+q, "", "", nil)
		if loc, _ := url.Parse(res.Header.Get("Location")); res.StatusCode != http.StatusFound || loc.Query().Get("error") != "invalid_request" {
			t.Fatalf("%d %s", res.StatusCode, loc)
		}
	})

	// Accepted: variants of the resource and of the loopback port, and no scope (the default).
	for name, overrides := range map[string]map[string]string{
		"resource trailing slash": {"resource": e.resource() + "/"},
		"resource upper-case":     {"resource": strings.ToUpper(e.base) + "/open/v1"},
		"no scope":                {"scope": ""},
		"loopback no port":        {"redirect_uri": loopbackCB},
		"loopback other port":     {"redirect_uri": "http://127.0.0.1:1/callback"},
	} {
		t.Run("ok/"+name, func(t *testing.T) {
			res, _ := e.do(t, "GET", "/oauth/authorize?"+e.authParams(clientID, verifier, overrides).Encode(), "", "", nil)
			if loc := res.Header.Get("Location"); res.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "/oauth/login?request=") {
				t.Fatalf("%d %q", res.StatusCode, loc)
			}
		})
	}
}

// checkPageHeaders requires the anti-framing, no-cache headers of every HTML page.
func checkPageHeaders(t *testing.T, h http.Header) {
	t.Helper()
	csp := h.Get("Content-Security-Policy")
	if h.Get("X-Frame-Options") != "DENY" || !strings.Contains(csp, "frame-ancestors 'none'") ||
		!strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "form-action 'self'") ||
		h.Get("Cache-Control") != "no-store" || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("page headers: XFO %q CSP %q Cache-Control %q", h.Get("X-Frame-Options"), csp, h.Get("Cache-Control"))
	}
}

func TestOAuthPages(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, sandbox.Options{})
	clientID := e.client(t, `<script>alert("x")</script> & Co`)
	verifier := oauth2.GenerateVerifier()
	b := e.browser(t)
	signIn := b.authorize(t, e.authParams(clientID, verifier, nil))
	checkPageHeaders(t, signIn.header)
	if strings.Contains(signIn.body, "<script>") || !strings.Contains(signIn.body, "&lt;script&gt;") {
		t.Fatalf("client name not escaped: %s", signIn.body)
	}
	// The session cookie: HttpOnly, SameSite=Lax; signing in gives a new one.
	before := e.srv.URL
	u, _ := url.Parse(before)
	if !strings.Contains(strings.Join(signIn.header.Values("Set-Cookie"), "\n"), "HttpOnly") ||
		!strings.Contains(strings.Join(signIn.header.Values("Set-Cookie"), "\n"), "SameSite=Lax") {
		t.Fatalf("Set-Cookie %q", signIn.header.Values("Set-Cookie"))
	}
	anon := b.hc.Jar.Cookies(u)
	consent := b.signIn(t, signIn)
	signed := b.hc.Jar.Cookies(u)
	if len(anon) != 1 || len(signed) != 1 || anon[0].Value == signed[0].Value {
		t.Fatalf("session id not renewed on sign-in: %v -> %v", anon, signed)
	}
	checkPageHeaders(t, consent.header)
	if strings.Contains(consent.body, "<script>") {
		t.Fatal("client name not escaped on the consent page")
	}
	// The consent form's redirect goes to the client's origin: form-action allows it.
	if csp := consent.header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' http://127.0.0.1:54321;") {
		t.Fatalf("consent CSP %q", csp)
	}
	// The only inline style is the one the CSP hash allows.
	m := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindStringSubmatch(consent.body)
	sum := sha256.Sum256([]byte(m[1]))
	if csp := consent.header.Get("Content-Security-Policy"); !strings.Contains(csp, "style-src 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") {
		t.Fatalf("style hash not in CSP %q", csp)
	}
	// An already signed-in browser skips the sign-in page but is always asked for consent.
	again := b.authorize(t, e.authParams(clientID, verifier, nil))
	if again.url.Path != "/oauth/consent" || !strings.Contains(again.body, `value="allow"`) {
		t.Fatalf("second authorization landed on %s", again.url)
	}
	checkPageHeaders(t, again.header)
	// An unknown or expired request is an error page.
	p := b.get(t, e.base+"/oauth/login?request=nope")
	if p.status != http.StatusBadRequest {
		t.Fatalf("unknown request: %d", p.status)
	}
	checkPageHeaders(t, p.header)
	e.clock.Advance(11 * time.Minute)
	action, f := again.form(t)
	f.Set("decision", "allow")
	if p := b.post(t, action, f, nil); p.status != http.StatusBadRequest || p.header.Get("Location") != "" {
		t.Fatalf("expired request answered: %d %q", p.status, p.header.Get("Location"))
	}
}

func TestOAuthCSRF(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, sandbox.Options{})
	clientID := e.client(t, "CSRF")
	verifier := oauth2.GenerateVerifier()
	victim := e.browser(t)
	consent := victim.signIn(t, victim.authorize(t, e.authParams(clientID, verifier, nil)))
	action, f := consent.form(t)

	// The attacker's own session and its own consent form (another request).
	attacker := e.browser(t)
	atkConsent := attacker.signIn(t, attacker.authorize(t, e.authParams(clientID, verifier, nil)))
	_, atkForm := atkConsent.form(t)

	tests := []struct {
		name   string
		b      *browser
		form   func() url.Values
		header map[string]string
		want   int
	}{
		{"missing token", victim, func() url.Values { g := clone(f); g.Del("csrf"); return g }, nil, http.StatusForbidden},
		{"wrong token", victim, func() url.Values { g := clone(f); g.Set("csrf", "AAAA"); return g }, nil, http.StatusForbidden},
		{"token of another session and request", victim, func() url.Values { g := clone(f); g.Set("csrf", atkForm.Get("csrf")); return g }, nil, http.StatusForbidden},
		{"victim's token from the attacker's session", attacker, func() url.Values { return clone(f) }, nil, http.StatusForbidden},
		{"cross-origin post", victim, func() url.Values { return clone(f) }, map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"no cookie", &browser{e: e, hc: &http.Client{CheckRedirect: victim.hc.CheckRedirect}}, func() url.Values { return clone(f) }, nil, http.StatusForbidden},
		{"bad decision", victim, func() url.Values { g := clone(f); g.Set("decision", "maybe"); return g }, nil, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := tt.form()
			if !g.Has("decision") {
				g.Set("decision", "allow")
			}
			p := tt.b.post(t, action, g, tt.header)
			if p.status != tt.want || p.header.Get("Location") != "" {
				t.Fatalf("%d %q: %s", p.status, p.header.Get("Location"), p.body)
			}
			checkPageHeaders(t, p.header)
		})
	}
	// The attacker cannot even view the victim's pending request.
	if p := attacker.get(t, e.base+"/oauth/consent?request="+url.QueryEscape(f.Get("request"))); p.status != http.StatusForbidden {
		t.Fatalf("attacker viewed the victim's consent page: %d", p.status)
	}
	// None of that used the request up: the victim can still allow it.
	if loc := victim.answer(t, consent, "allow"); loc.Query().Get("code") == "" {
		t.Fatalf("allow after refused forgeries: %s", loc)
	}
	// Sign-in is CSRF-protected too.
	b := e.browser(t)
	signIn := b.authorize(t, e.authParams(clientID, verifier, nil))
	sAction, sf := signIn.form(t)
	sf.Set("user", "u_demo")
	sf.Set("csrf", "forged")
	if p := b.post(t, sAction, sf, nil); p.status != http.StatusForbidden {
		t.Fatalf("forged sign-in: %d", p.status)
	}
}

func clone(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

// TestOAuthSignInChoosesUser: the sign-in page offers every user the sandbox knows, the demo
// user first, and the code issued is for the user whose button was pressed.
func TestOAuthSignInChoosesUser(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, sandbox.Options{})
	bea := e.svc.AddUser("bea-token-0123456789", `Bea <b>"Builder"</b>`)
	alice := e.svc.AddUser("alice-token-0123456789", "Alice")
	clientID := e.client(t, "Chooser")

	b := e.browser(t)
	verifier := oauth2.GenerateVerifier()
	q := e.authParams(clientID, verifier, nil)
	signIn := b.authorize(t, q)
	checkPageHeaders(t, signIn.header)
	want := []string{"u_demo/Demo Author", alice + "/Alice", bea + `/Bea <b>"Builder"</b>`}
	var got []string
	for _, a := range signIn.accounts(t) {
		got = append(got, a.id+"/"+a.nickname)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("accounts on the sign-in page %q, want %q", got, want)
	}
	if strings.Contains(signIn.body, "<b>") {
		t.Fatalf("nickname not escaped: %s", signIn.body)
	}
	if !strings.Contains(signIn.body, `value="u_demo" class="primary">Sign in as Demo Author</button>`) {
		t.Errorf("the demo user's button is not the first, primary one: %s", signIn.body)
	}
	loc := b.answer(t, b.signInAs(t, signIn, "Alice"), "allow")
	code := loc.Query().Get("code")
	if code == "" || loc.Query().Get("state") != q.Get("state") {
		t.Fatalf("redirect %s", loc)
	}
	status, tok := e.token(t, codeForm(clientID, code, verifier))
	if status != http.StatusOK {
		t.Fatalf("exchange: %d %v", status, tok)
	}
	res, me := e.do(t, "GET", "/open/v1/me", "", "", map[string]string{"Authorization": "Bearer " + tok["access_token"].(string)})
	if res.StatusCode != http.StatusOK || me["userId"] != alice || me["nickname"] != "Alice" {
		t.Fatalf("me with Alice's OAuth token: %d %v", res.StatusCode, me)
	}
	// The browser stays signed in as Alice: the next authorization skips the sign-in page.
	again := b.authorize(t, e.authParams(clientID, verifier, nil))
	if again.url.Path != "/oauth/consent" || !strings.Contains(again.body, "Signed in as <strong>Alice</strong>") {
		t.Fatalf("second authorization: %s %s", again.url, again.body)
	}

	// Another browser signs in as Bea, whose nickname needs escaping.
	b2 := e.browser(t)
	verifier2 := oauth2.GenerateVerifier()
	loc = b2.answer(t, b2.signInAs(t, b2.authorize(t, e.authParams(clientID, verifier2, nil)), `Bea <b>"Builder"</b>`), "allow")
	status, tok = e.token(t, codeForm(clientID, loc.Query().Get("code"), verifier2))
	if status != http.StatusOK {
		t.Fatalf("exchange: %d %v", status, tok)
	}
	if _, me := e.do(t, "GET", "/open/v1/me", "", "", map[string]string{"Authorization": "Bearer " + tok["access_token"].(string)}); me["userId"] != bea {
		t.Fatalf("me with Bea's OAuth token: %v", me)
	}
}

// TestOAuthSignInUnknownUser: the sign-in POST must name a user the sandbox knows; anything else
// is refused without signing the session in or using the request up.
func TestOAuthSignInUnknownUser(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, sandbox.Options{})
	e.svc.AddUser("other-token-0123456789", "Other")
	clientID := e.client(t, "Unknown user")
	b := e.browser(t)
	verifier := oauth2.GenerateVerifier()
	q := e.authParams(clientID, verifier, nil)
	signIn := b.authorize(t, q)
	action, f := signIn.form(t)
	for _, user := range []string{"", "u_nope", "U_DEMO", "u_demo ", "Demo Author"} {
		g := clone(f)
		if user != "" {
			g.Set("user", user)
		}
		p := b.post(t, action, g, nil)
		if p.status != http.StatusBadRequest || p.header.Get("Location") != "" || !strings.Contains(p.body, "Unknown account") {
			t.Errorf("user %q: %d %q: %s", user, p.status, p.header.Get("Location"), p.body)
		}
		checkPageHeaders(t, p.header)
	}
	// A known user id is no way around the CSRF check.
	g := clone(f)
	g.Set("user", "u_demo")
	g.Set("csrf", "forged")
	if p := b.post(t, action, g, nil); p.status != http.StatusForbidden {
		t.Errorf("a known user with a forged CSRF token: %d", p.status)
	}
	// The session is still anonymous: the consent page sends the browser back to sign in.
	if p := b.get(t, e.base+"/oauth/consent?request="+url.QueryEscape(f.Get("request"))); p.url.Path != "/oauth/login" {
		t.Fatalf("after refused sign-ins the consent page answered %d at %s", p.status, p.url)
	}
	// The request was not used up: a known account still signs in.
	if loc := b.answer(t, b.signInAs(t, signIn, "Other"), "allow"); loc.Query().Get("code") == "" {
		t.Fatalf("sign-in after refused ones: %s", loc)
	}
}

func TestOAuthDeny(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, sandbox.Options{})
	clientID := e.client(t, "Denied")
	b := e.browser(t)
	q := e.authParams(clientID, oauth2.GenerateVerifier(), nil)
	consent := b.signIn(t, b.authorize(t, q))
	action, f := consent.form(t)
	f.Set("decision", "deny")
	p := b.post(t, action, f, map[string]string{"Origin": "null"}) // what some browsers send; the CSRF token decides
	loc := p.location(t)
	if p.status != http.StatusSeeOther || loc == nil {
		t.Fatalf("deny: %d %s", p.status, p.body)
	}
	got := loc.Query()
	if loc.Host != "127.0.0.1:54321" || got.Get("error") != "access_denied" || got.Get("state") != q.Get("state") || got.Get("code") != "" {
		t.Fatalf("deny redirect %s", loc)
	}
	// The request is answered: a second answer is refused.
	f.Set("decision", "allow")
	if p := b.post(t, action, f, nil); p.status != http.StatusBadRequest || p.header.Get("Location") != "" {
		t.Fatalf("second answer: %d", p.status)
	}
}

func TestOAuthTokenErrors(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, sandbox.Options{})
	clientID := e.client(t, "Tokens")
	otherID := e.client(t, "Other")
	newCode := func(t *testing.T) (string, string) {
		verifier := oauth2.GenerateVerifier()
		return e.code(t, e.authParams(clientID, verifier, nil)), verifier
	}
	tests := []struct {
		name   string
		change func(f url.Values)
		status int
		code   string
	}{
		{"wrong verifier", func(f url.Values) { f.Set("code_verifier", oauth2.GenerateVerifier()) }, 400, "invalid_grant"},
		{"short verifier", func(f url.Values) { f.Set("code_verifier", "short") }, 400, "invalid_grant"},
		{"missing verifier", func(f url.Values) { f.Del("code_verifier") }, 400, "invalid_request"},
		{"other redirect uri", func(f url.Values) { f.Set("redirect_uri", "http://127.0.0.1:1/callback") }, 400, "invalid_grant"},
		{"missing redirect uri", func(f url.Values) { f.Del("redirect_uri") }, 400, "invalid_request"},
		{"other client", func(f url.Values) { f.Set("client_id", otherID) }, 400, "invalid_grant"},
		{"unknown client", func(f url.Values) { f.Set("client_id", "c_nope") }, 401, "invalid_client"},
		{"missing client", func(f url.Values) { f.Del("client_id") }, 400, "invalid_request"},
		{"client secret", func(f url.Values) { f.Set("client_secret", "s") }, 401, "invalid_client"},
		{"other resource", func(f url.Values) { f.Set("resource", "https://other.example/open/v1") }, 400, "invalid_target"},
		{"unknown code", func(f url.Values) { f.Set("code", "nope") }, 400, "invalid_grant"},
		{"missing grant type", func(f url.Values) { f.Del("grant_type") }, 400, "invalid_request"},
		{"password grant", func(f url.Values) { f.Set("grant_type", "password") }, 400, "unsupported_grant_type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, verifier := newCode(t)
			f := codeForm(clientID, code, verifier)
			tt.change(f)
			e.wantTokenError(t, f, tt.status, tt.code)
		})
	}
	t.Run("a failed attempt uses the code up", func(t *testing.T) {
		code, verifier := newCode(t)
		f := codeForm(clientID, code, verifier)
		f.Set("code_verifier", oauth2.GenerateVerifier())
		e.wantTokenError(t, f, 400, "invalid_grant")
		e.wantTokenError(t, codeForm(clientID, code, verifier), 400, "invalid_grant")
	})
	t.Run("expired code", func(t *testing.T) {
		code, verifier := newCode(t)
		e.clock.Advance(61 * time.Second)
		e.wantTokenError(t, codeForm(clientID, code, verifier), 400, "invalid_grant")
	})
	t.Run("reused code revokes its tokens", func(t *testing.T) {
		code, verifier := newCode(t)
		status, tok := e.token(t, codeForm(clientID, code, verifier))
		if status != http.StatusOK {
			t.Fatalf("exchange %d %v", status, tok)
		}
		at, rt := tok["access_token"].(string), tok["refresh_token"].(string)
		e.wantAPI(t, at, http.StatusOK)
		e.wantTokenError(t, codeForm(clientID, code, verifier), 400, "invalid_grant")
		e.wantAPI(t, at, http.StatusUnauthorized)
		e.wantTokenError(t, refreshForm(clientID, rt), 400, "invalid_grant")
	})
	t.Run("basic auth header", func(t *testing.T) {
		code, verifier := newCode(t)
		f := codeForm(clientID, code, verifier)
		res, obj := e.do(t, "POST", "/oauth/token", "application/x-www-form-urlencoded", f.Encode(),
			map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(clientID+":"))})
		if res.StatusCode != http.StatusUnauthorized || obj["error"] != "invalid_client" || res.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("%d %v", res.StatusCode, obj)
		}
		// The refused attempt did not spend the code.
		if status, obj := e.token(t, f); status != http.StatusOK {
			t.Fatalf("exchange after the refused attempt: %d %v", status, obj)
		}
	})
	t.Run("form problems", func(t *testing.T) {
		for _, tc := range []struct{ ct, body string }{
			{"application/json", `{"grant_type":"authorization_code"}`},
			{"application/x-www-form-urlencoded", "grant_type=authorization_code&grant_type=refresh_token&client_id=" + clientID},
			{"application/x-www-form-urlencoded", "%zz"},
		} {
			res, obj := e.do(t, "POST", "/oauth/token", tc.ct, tc.body, nil)
			if res.StatusCode != http.StatusBadRequest || obj["error"] != "invalid_request" {
				t.Errorf("%s %q: %d %v", tc.ct, tc.body, res.StatusCode, obj)
			}
		}
	})
	t.Run("client without refresh", func(t *testing.T) {
		status, reg := e.register(t, map[string]any{"redirect_uris": []string{loopbackCB}, "grant_types": []string{"authorization_code"}})
		if status != http.StatusCreated {
			t.Fatal(reg)
		}
		id := reg["client_id"].(string)
		tok := e.tokens(t, id)
		if tok["refresh_token"] != nil {
			t.Fatalf("refresh token for a client without the grant type: %v", tok)
		}
		e.wantTokenError(t, refreshForm(id, "x"), 400, "unauthorized_client")
	})
}

func TestOAuthRefreshRotation(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, sandbox.Options{})
	clientID := e.client(t, "Rotation")
	otherID := e.client(t, "Other")
	tok := e.tokens(t, clientID)
	at1, rt1 := tok["access_token"].(string), tok["refresh_token"].(string)

	e.wantTokenError(t, refreshForm(otherID, rt1), 400, "invalid_grant") // another client's token; not revoked
	f := refreshForm(clientID, rt1)
	f.Set("resource", "https://other.example/open/v1")
	e.wantTokenError(t, f, 400, "invalid_target")
	f = refreshForm(clientID, rt1)
	f.Set("scope", "admin")
	e.wantTokenError(t, f, 400, "invalid_scope")

	f = refreshForm(clientID, rt1)
	f.Set("resource", e.resource())
	status, tok2 := e.token(t, f)
	if status != http.StatusOK {
		t.Fatalf("refresh: %d %v", status, tok2)
	}
	at2, rt2 := tok2["access_token"].(string), tok2["refresh_token"].(string)
	if rt2 == rt1 || at2 == at1 || tok2["scope"] != scope || tok2["token_type"] != "Bearer" {
		t.Fatalf("refresh response %v", tok2)
	}
	e.wantAPI(t, at2, http.StatusOK)
	e.wantAPI(t, at1, http.StatusOK) // still live until it expires

	// Reusing the rotated token revokes the whole grant.
	e.wantTokenError(t, refreshForm(clientID, rt1), 400, "invalid_grant")
	e.wantTokenError(t, refreshForm(clientID, rt2), 400, "invalid_grant")
	e.wantAPI(t, at1, http.StatusUnauthorized)
	e.wantAPI(t, at2, http.StatusUnauthorized)
}

func TestOAuthRevocation(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, sandbox.Options{})
	clientID := e.client(t, "Revoker")
	otherID := e.client(t, "Other")

	tok := e.tokens(t, clientID)
	at, rt := tok["access_token"].(string), tok["refresh_token"].(string)
	// Another client's revocation leaves the token alone (and says 200).
	if s := e.revoke(t, url.Values{"token": {at}, "client_id": {otherID}}); s != http.StatusOK {
		t.Fatalf("revoke: %d", s)
	}
	e.wantAPI(t, at, http.StatusOK)
	// Revoking the access token ends it, but not the grant.
	if s := e.revoke(t, url.Values{"token": {at}, "token_type_hint": {"access_token"}, "client_id": {clientID}}); s != http.StatusOK {
		t.Fatalf("revoke: %d", s)
	}
	e.wantAPI(t, at, http.StatusUnauthorized)
	status, tok2 := e.token(t, refreshForm(clientID, rt))
	if status != http.StatusOK {
		t.Fatalf("refresh after access revocation: %d %v", status, tok2)
	}
	// Revoking the refresh token revokes the grant's tokens.
	at2, rt2 := tok2["access_token"].(string), tok2["refresh_token"].(string)
	e.wantAPI(t, at2, http.StatusOK)
	if s := e.revoke(t, url.Values{"token": {rt2}}); s != http.StatusOK {
		t.Fatalf("revoke: %d", s)
	}
	e.wantAPI(t, at2, http.StatusUnauthorized)
	e.wantTokenError(t, refreshForm(clientID, rt2), 400, "invalid_grant")

	// Unknown tokens are fine; a missing token or a client secret is not.
	if s := e.revoke(t, url.Values{"token": {"nope"}}); s != http.StatusOK {
		t.Fatalf("unknown token: %d", s)
	}
	if s := e.revoke(t, url.Values{"token": {e.svc.DemoToken()}}); s != http.StatusOK {
		t.Fatalf("demo token: %d", s)
	}
	e.wantAPI(t, e.svc.DemoToken(), http.StatusOK) // not an OAuth token: revocation does not reach it
	if s := e.revoke(t, url.Values{"client_id": {clientID}}); s != http.StatusBadRequest {
		t.Fatalf("missing token: %d", s)
	}
	if s := e.revoke(t, url.Values{"token": {"x"}, "client_secret": {"s"}}); s != http.StatusUnauthorized {
		t.Fatalf("client secret: %d", s)
	}
}

func TestOAuthExpiry(t *testing.T) {
	t.Parallel()
	e := newOAuthEnv(t, sandbox.Options{AccessTokenTTL: 5 * time.Minute, RefreshTokenTTL: time.Hour, AuthCodeTTL: 10 * time.Second})
	clientID := e.client(t, "Expiry")

	verifier := oauth2.GenerateVerifier()
	code := e.code(t, e.authParams(clientID, verifier, nil))
	e.clock.Advance(11 * time.Second)
	e.wantTokenError(t, codeForm(clientID, code, verifier), 400, "invalid_grant")

	tok := e.tokens(t, clientID)
	at, rt := tok["access_token"].(string), tok["refresh_token"].(string)
	if num(tok["expires_in"]) != 300 {
		t.Fatalf("expires_in %v", tok["expires_in"])
	}
	e.clock.Advance(5*time.Minute - time.Second)
	e.wantAPI(t, at, http.StatusOK)
	e.clock.Advance(time.Second)
	e.wantAPI(t, at, http.StatusUnauthorized)

	e.clock.Advance(time.Hour)
	e.wantTokenError(t, refreshForm(clientID, rt), 400, "invalid_grant")
}

// TestOAuthPersistence: clients, grants and tokens survive a restart (as digests only); a token
// issued for another resource (the sandbox now has another BaseURL) is refused.
func TestOAuthPersistence(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "state.json")
	e := newOAuthEnv(t, sandbox.Options{DataFile: file})
	clientID := e.client(t, "Persistent")
	tok := e.tokens(t, clientID)
	at, rt := tok["access_token"].(string), tok["refresh_token"].(string)
	tok2 := e.tokens(t, clientID)

	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{at, rt, tok2["access_token"].(string), tok2["refresh_token"].(string)} {
		if bytes.Contains(data, []byte(secret)) {
			t.Fatal("the data file holds a token in the clear")
		}
	}

	// Same BaseURL: everything still works.
	same := newService(t, sandbox.Options{DataFile: file, BaseURL: e.base, Clock: e.clock.Now})
	c := &client{t: t, hc: &http.Client{Transport: same.RoundTripper()}, base: e.base, token: at}
	c.call("GET", "/me", nil, http.StatusOK)

	// Another BaseURL: the tokens were issued for another resource.
	e2 := newOAuthEnv(t, sandbox.Options{DataFile: file, Clock: e.clock.Now})
	if e2.base == e.base {
		t.Fatal("same address")
	}
	e2.wantAPI(t, at, http.StatusUnauthorized)
	e2.wantTokenError(t, refreshForm(clientID, rt), 400, "invalid_grant")
	// The client registration persisted: it can sign in again for the new resource.
	tok3 := e2.tokens(t, clientID)
	e2.wantAPI(t, tok3["access_token"].(string), http.StatusOK)
	e2.wantAPI(t, e2.svc.DemoToken(), http.StatusOK)
}

func TestOAuthOptions(t *testing.T) {
	t.Parallel()
	for _, opts := range []sandbox.Options{{AccessTokenTTL: -1}, {RefreshTokenTTL: -time.Hour}, {AuthCodeTTL: -time.Second}} {
		if _, err := sandbox.New(opts); err == nil {
			t.Errorf("New(%+v) accepted a negative lifetime", opts)
		}
	}
}
