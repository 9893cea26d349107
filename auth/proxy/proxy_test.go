package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/oauthserver"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
const listBody = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

func TestMetadata(t *testing.T) {
	e := newEnv(t, envOptions{})
	get := func(path string) (int, http.Header, map[string]any) {
		resp, err := http.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, resp.Header, out
	}
	status, h, prm := get("/.well-known/oauth-protected-resource/mcp")
	if status != 200 || prm["resource"] != e.url+"/mcp" || prm["authorization_servers"].([]any)[0] != e.url {
		t.Errorf("PRM /mcp: %d %v", status, prm)
	}
	if h.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(h.Get("Access-Control-Expose-Headers"), "WWW-Authenticate") {
		t.Errorf("PRM CORS headers: %v", h)
	}
	if _, _, root := get("/.well-known/oauth-protected-resource"); root["resource"] != e.url {
		t.Errorf("root PRM resource = %v, want the origin (RFC 9728 section 3.3)", root["resource"])
	}
	_, _, asm := get("/.well-known/oauth-authorization-server")
	if asm["issuer"] != e.url || asm["token_endpoint"] != e.url+"/token" || asm["registration_endpoint"] != e.url+"/register" ||
		asm["code_challenge_methods_supported"].([]any)[0] != "S256" {
		t.Errorf("AS metadata: %v", asm)
	}
	// Preflight of the token endpoint.
	req, _ := http.NewRequest(http.MethodOptions, e.url+"/token", nil)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("token preflight: %d %v", resp.StatusCode, resp.Header)
	}
}

func TestChallenge(t *testing.T) {
	e := newEnv(t, envOptions{})
	want := `Bearer resource_metadata="` + e.url + `/.well-known/oauth-protected-resource/mcp", scope="mcp:card-writer"`
	status, h, _ := e.mcpCall("", "", initBody)
	if status != 401 || h.Get("WWW-Authenticate") != want {
		t.Errorf("no token: %d %q, want 401 %q", status, h.Get("WWW-Authenticate"), want)
	}
	status, h, _ = e.mcpCall("cwm_at_not-a-token", "", initBody)
	if status != 401 || !strings.HasPrefix(h.Get("WWW-Authenticate"), want+`, error="invalid_token"`) {
		t.Errorf("bad token: %d %q", status, h.Get("WWW-Authenticate"))
	}
	// The card service's own token is not a token of this server (no token passthrough).
	if status, _, _ = e.mcpCall(e.sb.DemoToken(), "", initBody); status != 401 {
		t.Errorf("the card service's token: status %d, want 401", status)
	}
}

func TestFlowRefreshAndRotation(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.register("Test Client", "http://127.0.0.1:9/cb")
	access, refresh := c.signIn()
	if !strings.HasPrefix(access, accessPrefix) || !strings.HasPrefix(refresh, refreshPrefix) {
		t.Fatalf("tokens lack their prefixes")
	}
	if got := e.signInOutcomes(); len(got) != 1 || got[0] != "ok" {
		t.Errorf("sign-in outcomes %v, want [ok]", got)
	}
	status, h, out := e.mcpCall(access, "", initBody)
	if status != 200 || out["user"] != "u_demo" || out["principal"] != "u_demo" {
		t.Fatalf("initialize: %d %v", status, out)
	}
	sid := h.Get("Mcp-Session-Id")
	if status, _, out = e.mcpCall(access, sid, listBody); status != 200 || out["user"] != "u_demo" {
		t.Fatalf("request in the session: %d %v", status, out)
	}

	// Refresh rotates; the new tokens work, and the old access token still does until it expires.
	status, tok := c.refresh(refresh)
	if status != 200 || tok["refresh_token"] == refresh || tok["access_token"] == nil {
		t.Fatalf("refresh: %d %v", status, tok)
	}
	access2, refresh2 := tok["access_token"].(string), tok["refresh_token"].(string)
	if status, _, _ = e.mcpCall(access2, sid, listBody); status != 200 {
		t.Fatalf("new access token: %d", status)
	}
	// Reusing the rotated refresh token revokes the whole grant.
	if status, out = c.refresh(refresh); status != 400 || out["error"] != "invalid_grant" {
		t.Fatalf("reused refresh token: %d %v", status, out)
	}
	for _, tk := range []string{access, access2} {
		if status, _, _ = e.mcpCall(tk, sid, listBody); status != 401 {
			t.Errorf("access token after refresh-token reuse: status %d, want 401", status)
		}
	}
	if status, _ = c.refresh(refresh2); status != 400 {
		t.Errorf("refresh token of a revoked grant: status %d", status)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "grant revoked") || !strings.Contains(logs, "tokens issued") {
		t.Errorf("the logs lack the grant's story:\n%s", logs)
	}
}

func TestConsentRememberedPerUserAndClient(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.register("Remembered", "http://127.0.0.1:9/cb")
	c.signIn()
	// Same browser, same client: no consent page of the proxy this time.
	ar := c.newRequest()
	p, err := c.browser.Get(c.authURL(ar))
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(p.URL.String(), e.url+"/consent") || !strings.HasPrefix(p.URL.String(), e.sbURL) {
		t.Fatalf("second authorization landed on %s (%q), want the card service", p.URL, p.Title())
	}
	// Another client in the same browser asks again.
	other := e.register("Other", "http://127.0.0.1:9/cb")
	other.browser = c.browser
	p, err = other.browser.Get(other.authURL(other.newRequest()))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.URL.String(), e.url+"/consent") || !strings.Contains(p.Body, "Other") || !strings.Contains(p.Body, "http://127.0.0.1:9/cb") {
		t.Fatalf("another client: %s %q", p.URL, p.Title())
	}
}

func TestDenyOnConsentPage(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.register("Denied", "http://127.0.0.1:9/cb")
	ar := c.newRequest()
	p, err := c.browser.Get(c.authURL(ar))
	if err != nil {
		t.Fatal(err)
	}
	p, err = c.browser.Submit(p, "deny")
	if err != nil {
		t.Fatal(err)
	}
	u, ok := returnTarget(p)
	if !ok || u.Query().Get("error") != "access_denied" || u.Query().Get("state") != ar.state || u.Query().Get("iss") != e.url {
		t.Fatalf("deny: %v %v", u, ok)
	}
}

// TestAuthorizeRefusals: a request whose client or redirect URI cannot be trusted gets an error
// page; one with a bad parameter gets an error page too as long as the browser's user has not
// allowed the client (no open redirect before consent, RFC 9700 section 4.11.2), and is sent
// back to the client with the error once the user has.
func TestAuthorizeRefusals(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.register("Refusals", "http://127.0.0.1:9/cb")
	noFollow := func(jar http.CookieJar) *http.Client {
		return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	get := func(hc *http.Client, params url.Values) (*http.Response, string) {
		t.Helper()
		resp, err := hc.Get(e.url + "/authorize?" + params.Encode())
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}
	tests := []struct {
		name   string
		change func(v url.Values)
		status int    // 400: an error page, never a redirect, even after consent
		errStr string // once the user allowed the client: a redirect with this error code
	}{
		{"foreign redirect URI", func(v url.Values) { v.Set("redirect_uri", "https://evil.example/cb") }, 400, ""},
		{"redirect URI of another port", func(v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:10/cb") }, 400, ""},
		{"unknown client", func(v url.Values) { v.Set("client_id", "mcpc_nope") }, 400, ""},
		{"missing resource", func(v url.Values) { v.Del("resource") }, 302, "invalid_target"},
		{"another resource", func(v url.Values) { v.Set("resource", "https://other.example/mcp") }, 302, "invalid_target"},
		{"the card service as resource", func(v url.Values) { v.Set("resource", e.sbURL+"/open/v1") }, 302, "invalid_target"},
		{"no PKCE", func(v url.Values) { v.Del("code_challenge") }, 302, "invalid_request"},
		{"plain PKCE", func(v url.Values) { v.Set("code_challenge_method", "plain") }, 302, "invalid_request"},
		{"token response type", func(v url.Values) { v.Set("response_type", "token") }, 302, "unsupported_response_type"},
		{"unknown response type", func(v url.Values) { v.Set("response_type", "x") }, 302, "unsupported_response_type"},
	}
	// Before consent: an error page for all of them, never a redirect (a fresh browser, and the
	// browser of the user who will allow the client, before it did).
	for _, tc := range tests {
		for _, hc := range []*http.Client{noFollow(nil), noFollow(c.browser.Client.Jar)} {
			ar := c.newRequest()
			tc.change(ar.params)
			resp, body := get(hc, ar.params)
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
				t.Errorf("%s before consent: status %d, Location %q; want 400 and an error page", tc.name, resp.StatusCode, resp.Header.Get("Location"))
			}
			if tc.errStr != "" && !strings.Contains(body, "not allowed it yet") {
				t.Errorf("%s before consent: the page does not say why it does not go back:\n%.400s", tc.name, body)
			}
		}
	}
	c.signIn()
	// After consent, the same browser is sent back to the client with the error.
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ar := c.newRequest()
			tc.change(ar.params)
			resp, _ := get(noFollow(c.browser.Client.Jar), ar.params)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (Location %q)", resp.StatusCode, tc.status, resp.Header.Get("Location"))
			}
			if tc.errStr != "" {
				loc, _ := url.Parse(resp.Header.Get("Location"))
				if loc.Query().Get("error") != tc.errStr || loc.Query().Get("state") != ar.state || !strings.HasPrefix(loc.String(), c.redirectURI) {
					t.Errorf("redirect %s, want error %s to the client", loc, tc.errStr)
				}
			}
		})
	}
	// Another browser (no user, or a user who never allowed the client) still gets the page.
	ar := c.newRequest()
	ar.params.Set("response_type", "x")
	if resp, _ := get(noFollow(nil), ar.params); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a fresh browser after someone else's consent: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The origin is accepted as the resource too (what clients reading the root metadata send).
	ar = c.newRequest()
	ar.params.Set("resource", e.url+"/")
	if resp, _ := get(noFollow(nil), ar.params); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/consent") {
		t.Errorf("origin as resource: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestCodeRefusals(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.register("Codes", "http://127.0.0.1:9/cb")

	t.Run("wrong PKCE verifier", func(t *testing.T) {
		ar := c.newRequest()
		code := c.authorize(ar).Get("code")
		good := ar.verifier
		ar.verifier = strings.Repeat("x", 43)
		if status, out := c.exchange(code, ar); status != 400 || out["error"] != "invalid_grant" {
			t.Fatalf("wrong verifier: %d %v", status, out)
		}
		ar.verifier = good // the code is spent
		if status, _ := c.exchange(code, ar); status != 400 {
			t.Errorf("code after a wrong verifier: %d", status)
		}
	})
	t.Run("reused code revokes its tokens", func(t *testing.T) {
		ar := c.newRequest()
		code := c.authorize(ar).Get("code")
		status, out := c.exchange(code, ar)
		if status != 200 {
			t.Fatalf("exchange: %d %v", status, out)
		}
		if status, out := c.exchange(code, ar); status != 400 || out["error"] != "invalid_grant" {
			t.Fatalf("reused code: %d %v", status, out)
		}
		if status, _, _ := e.mcpCall(out["access_token"].(string), "", initBody); status != 401 {
			t.Errorf("token of a reused code: %d, want 401", status)
		}
	})
	t.Run("another redirect URI", func(t *testing.T) {
		ar := c.newRequest()
		code := c.authorize(ar).Get("code")
		status, out := c.e.tokenRequest(url.Values{"grant_type": {"authorization_code"}, "client_id": {c.id}, "code": {code},
			"redirect_uri": {"http://127.0.0.1:9/other"}, "code_verifier": {ar.verifier}})
		if status != 400 || out["error"] != "invalid_grant" {
			t.Errorf("%d %v", status, out)
		}
	})
	t.Run("another client", func(t *testing.T) {
		other := e.register("Thief", "http://127.0.0.1:9/cb")
		ar := c.newRequest()
		code := c.authorize(ar).Get("code")
		status, out := c.e.tokenRequest(url.Values{"grant_type": {"authorization_code"}, "client_id": {other.id}, "code": {code},
			"redirect_uri": {c.redirectURI}, "code_verifier": {ar.verifier}})
		if status != 400 || out["error"] != "invalid_grant" {
			t.Errorf("%d %v", status, out)
		}
	})
	t.Run("expired code", func(t *testing.T) {
		ar := c.newRequest()
		code := c.authorize(ar).Get("code")
		e.clock.Advance(2 * time.Minute)
		if status, out := c.exchange(code, ar); status != 400 || out["error"] != "invalid_grant" {
			t.Errorf("%d %v", status, out)
		}
	})
	t.Run("client secret refused", func(t *testing.T) {
		status, out := c.e.tokenRequest(url.Values{"grant_type": {"authorization_code"}, "client_id": {c.id}, "client_secret": {"x"}, "code": {"x"}})
		if status != 401 || out["error"] != "invalid_client" {
			t.Errorf("%d %v", status, out)
		}
	})
}

func TestReplayedState(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.register("State", "http://127.0.0.1:9/cb")
	// Stop at the proxy's callback to replay it.
	b := newBrowser()
	stopAt := b.Client.CheckRedirect
	b.Client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Path == CallbackPath {
			return http.ErrUseLastResponse
		}
		return stopAt(req, via)
	}
	c.browser = b
	ar := c.newRequest()
	p, _ := b.Get(c.authURL(ar))
	p, _ = b.Submit(p, "allow")
	p, _ = b.Submit(p, "sign in")
	p, err := b.Submit(p, "allow")
	if err != nil {
		t.Fatal(err)
	}
	cb, err := p.Location()
	if err != nil || cb.Path != CallbackPath {
		t.Fatalf("no callback: %v %v", cb, err)
	}
	e.secrets.Add(cb.Query().Get("code"), cb.Query().Get("state"))

	// Another browser cannot use the callback.
	other := newBrowser()
	if p, _ := other.Get(cb.String()); p.Status != http.StatusForbidden {
		t.Errorf("callback in another browser: %d %q", p.Status, p.Title())
	}
	// The state is spent now, even for the right browser: a replay is refused.
	if p, _ := b.Get(cb.String()); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "already used") {
		t.Errorf("replayed state: %d %q", p.Status, p.Title())
	}
	// A forged state is refused.
	forged := *cb
	q := forged.Query()
	q.Set("state", oauthserver.NewSecret(""))
	forged.RawQuery = q.Encode()
	if p, _ := b.Get(forged.String()); p.Status != http.StatusBadRequest {
		t.Errorf("forged state: %d", p.Status)
	}
}

func TestConsentCSRF(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.register("CSRF", "https://app.example/cb")
	ar := c.newRequest()
	page, err := c.browser.Get(c.authURL(ar))
	if err != nil || !strings.HasPrefix(page.URL.Path, "/consent") {
		t.Fatalf("consent page: %v %v", page.URL, err)
	}
	if page.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(page.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("consent page can be framed: %v", page.Header)
	}
	if !strings.Contains(page.Body, "CSRF") || !strings.Contains(page.Body, "https://app.example/cb") || !strings.Contains(page.Body, "mcp:card-writer") {
		t.Errorf("consent page lacks the client, redirect URI or scope")
	}
	reqID := page.URL.Query().Get("request")
	csrf := regexpFind(`name="csrf" value="([^"]+)"`, page.Body)
	post := func(cl *http.Client, form url.Values, origin string) int {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/consent", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	noRedirect := func(cl *http.Client) *http.Client {
		cp := *cl
		cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		return &cp
	}
	allow := url.Values{"request": {reqID}, "csrf": {csrf}, "decision": {"allow"}}
	// A forged cross-site POST: no cookie of the victim's browser.
	if s := post(http.DefaultClient, allow, ""); s != http.StatusForbidden {
		t.Errorf("POST without the browser's cookie: %d", s)
	}
	// Another browser that has a cookie of its own, with the stolen CSRF token.
	attacker := newBrowser()
	_, _ = attacker.Get(e.url + "/consent?request=" + reqID) // gets a cookie; the request is not its
	if s := post(noRedirect(attacker.Client), allow, e.url); s != http.StatusForbidden {
		t.Errorf("POST from another browser: %d", s)
	}
	// The right browser, a wrong token.
	bad := url.Values{"request": {reqID}, "csrf": {"x" + csrf[1:]}, "decision": {"allow"}}
	if s := post(noRedirect(c.browser.Client), bad, e.url); s != http.StatusForbidden {
		t.Errorf("POST with a wrong CSRF token: %d", s)
	}
	// The right browser, but posted from another site.
	if s := post(noRedirect(c.browser.Client), allow, "https://evil.example"); s != http.StatusForbidden {
		t.Errorf("POST with a foreign Origin: %d", s)
	}
	// The consent page of a request opened in another browser is refused.
	if p, _ := attacker.Get(e.url + "/consent?request=" + reqID); p.Status != http.StatusForbidden {
		t.Errorf("consent page in another browser: %d", p.Status)
	}
	// The real answer works.
	if s := post(noRedirect(c.browser.Client), allow, e.url); s != http.StatusSeeOther {
		t.Errorf("the real answer: %d", s)
	}
}

func TestExpiredAndRevokedTokens(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.register("Lifetimes", "http://127.0.0.1:9/cb")
	access, refresh := c.signIn()
	e.clock.Advance(DefaultAccessTokenTTL + time.Second)
	if status, h, _ := e.mcpCall(access, "", initBody); status != 401 || !strings.Contains(h.Get("WWW-Authenticate"), "invalid_token") {
		t.Errorf("expired access token: %d %v", status, h)
	}
	// The refresh also renews the card service's token, which expired meanwhile.
	status, tok := c.refresh(refresh)
	if status != 200 {
		t.Fatalf("refresh: %d %v", status, tok)
	}
	access = tok["access_token"].(string)
	if status, _, out := e.mcpCall(access, "", initBody); status != 200 || out["user"] != "u_demo" {
		t.Fatalf("after refresh: %d %v", status, out)
	}
	// Revoking the access token.
	resp, err := http.PostForm(e.url+"/revoke", url.Values{"token": {access}, "client_id": {c.id}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if status, _, _ := e.mcpCall(access, "", initBody); resp.StatusCode != 200 || status != 401 {
		t.Errorf("revoked access token: revoke %d, then %d", resp.StatusCode, status)
	}
	// Revoking the refresh token ends the grant.
	resp, _ = http.PostForm(e.url+"/revoke", url.Values{"token": {tok["refresh_token"].(string)}, "client_id": {c.id}})
	resp.Body.Close()
	if status, _ := c.refresh(tok["refresh_token"].(string)); status != 400 {
		t.Errorf("refresh after revocation: %d", status)
	}
}

func TestUpstreamRefreshAndFailure(t *testing.T) {
	e := newEnv(t, envOptions{upstreamAccessTTL: 5 * time.Minute})
	c := e.register("Upstream", "http://127.0.0.1:9/cb")
	access, _ := c.signIn()
	// Past the card service's token lifetime, within ours: the proxy refreshes upstream.
	e.clock.Advance(10 * time.Minute)
	if status, _, out := e.mcpCall(access, "", initBody); status != 200 || out["user"] != "u_demo" {
		t.Fatalf("after the card service's token expired: %d %v", status, out)
	}
	g := onlyGrant(t, e)
	if g.UpstreamRefreshed.IsZero() {
		t.Errorf("the grant was not refreshed upstream")
	}
	// The card service drops the grant (its refresh token expires): the grant ends here, and
	// the request gets a 401.
	e.clock.Advance(31 * 24 * time.Hour)
	// Our access token has expired too by now; use a fresh one of the same grant.
	fresh := oauthserver.NewSecret(accessPrefix)
	e.secrets.Add(fresh)
	if err := e.store.PutSecret(context.Background(), oauthserver.Digest(fresh), &Secret{Kind: KindAccess, GrantID: g.ID, ClientID: c.id, Scope: Scope,
		Resource: e.url + "/mcp", Expires: e.clock.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	status, h, _ := e.mcpCall(fresh, "", initBody)
	if status != 401 || !strings.Contains(h.Get("WWW-Authenticate"), "invalid_token") {
		t.Errorf("after the card service dropped the grant: %d %v", status, h)
	}
	if _, err := e.store.GetGrant(context.Background(), g.ID); err == nil {
		t.Errorf("the grant survived the card service's refusal")
	}
}

func onlyGrant(t *testing.T, e *env) *Grant {
	t.Helper()
	var ids []string
	if err := e.kv.Scan(context.Background(), keyGrant, func(k string) error { ids = append(ids, k[len(keyGrant):]); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 {
		t.Fatalf("%d grants", len(ids))
	}
	g, err := e.store.GetGrant(context.Background(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestAccessTokenNeverOutlivesUpstream(t *testing.T) {
	e := newEnv(t, envOptions{})
	now := e.clock.Now()
	c := &Client{ID: "mcpc_x", GrantTypes: oauthserver.GrantTypes}
	g := &Grant{ID: "g_x", Scope: Scope, Resource: e.url + "/mcp", UpstreamExpiry: now.Add(5 * time.Minute)}
	resp, ge := e.srv.issueTokens(context.Background(), c, g, Scope)
	if ge != nil {
		t.Fatal(ge)
	}
	if resp.ExpiresIn > 300 || resp.RefreshToken != "" {
		t.Errorf("without a card service refresh token: expires_in %d, refresh token %t", resp.ExpiresIn, resp.RefreshToken != "")
	}
	e.secrets.Add(resp.AccessToken)
	g.UpstreamExpiry = now.Add(-time.Second)
	if _, ge := e.srv.issueTokens(context.Background(), c, g, Scope); ge == nil || ge.Code != "invalid_grant" {
		t.Errorf("after the card service's token expired: %v", ge)
	}
}

func TestSessionBelongsToItsUser(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.register("Sessions", "http://127.0.0.1:9/cb")
	access, _ := c.signIn()
	status, h, _ := e.mcpCall(access, "", initBody)
	sid := h.Get("Mcp-Session-Id")
	if status != 200 || sid == "" {
		t.Fatalf("initialize: %d %q", status, sid)
	}
	// A second user, with a grant of their own at the card service.
	otherUpstream := oauthserver.NewSecret("sb_")
	e.secrets.Add(otherUpstream)
	otherUser := e.sb.AddUser(otherUpstream, "Other Author")
	g := &Grant{ID: newID("g_"), ClientID: c.id, UserID: otherUser, Scope: Scope, Resource: e.url + "/mcp", Created: e.clock.Now(), Active: true}
	e.srv.sealTokens(g, &upstreamTokens{Access: upstream.Token(otherUpstream), ClientID: "c_x", TokenEndpoint: e.sbURL + "/oauth/token"})
	if err := e.store.PutGrant(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	otherAccess := oauthserver.NewSecret(accessPrefix)
	e.secrets.Add(otherAccess)
	if err := e.store.PutSecret(context.Background(), oauthserver.Digest(otherAccess), &Secret{Kind: KindAccess, GrantID: g.ID, ClientID: c.id,
		Scope: Scope, Resource: e.url + "/mcp", Expires: e.clock.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if status, _, out := e.mcpCall(otherAccess, "", initBody); status != 200 || out["user"] != otherUser {
		t.Fatalf("the other user's own session: %d %v", status, out)
	}
	// The other user's token with the first user's session id.
	if status, _, out := e.mcpCall(otherAccess, sid, listBody); status != http.StatusNotFound {
		t.Errorf("another user's session: %d %v, want 404", status, out)
	}
	// An unknown session id gets the same answer.
	if status, _, _ := e.mcpCall(access, "mcp-session-unknown", listBody); status != http.StatusNotFound {
		t.Errorf("unknown session: %d", status)
	}
	if status, _, _ := e.mcpCall(access, sid, listBody); status != 200 {
		t.Errorf("the owner's session: %d", status)
	}
}

// TestSessionBelongsToItsGrant: another MCP client of the same user (another grant) cannot use
// a session it did not open; the client that opened it can.
func TestSessionBelongsToItsGrant(t *testing.T) {
	e := newEnv(t, envOptions{})
	first := e.register("First client", "http://127.0.0.1:9/cb")
	second := e.register("Second client", "http://127.0.0.1:9/cb")
	second.browser = first.browser // the same person, at the same browser
	access, _ := first.signIn()
	otherAccess, _ := second.signIn()
	status, h, out := e.mcpCall(access, "", initBody)
	sid := h.Get("Mcp-Session-Id")
	if status != 200 || sid == "" {
		t.Fatalf("initialize: %d %q", status, sid)
	}
	if status, _, other := e.mcpCall(otherAccess, "", listBody); status != 200 || other["user"] != out["user"] {
		t.Fatalf("the second client is not the same user: %d %v / %v", status, other, out)
	}
	if status, _, out := e.mcpCall(otherAccess, sid, listBody); status != http.StatusNotFound {
		t.Errorf("the same user's other client on the session: %d %v, want 404", status, out)
	}
	if !strings.Contains(e.logs.String(), "the session is not this grant's") {
		t.Error("the refusal is not logged")
	}
	if status, _, _ := e.mcpCall(access, sid, listBody); status != 200 {
		t.Errorf("the client that opened the session: %d", status)
	}
}

// TestPrincipalStableAcrossRefresh: the principal the tools see (upstream.Client.Principal,
// which the audit lines and the per-user limits use) is the card service's user id, with the
// grant and the client: the same before and after the card service's token was refreshed.
func TestPrincipalStableAcrossRefresh(t *testing.T) {
	e := newEnv(t, envOptions{upstreamAccessTTL: 5 * time.Minute})
	c := e.register("Refreshing", "http://127.0.0.1:9/cb")
	access, _ := c.signIn()
	status, _, before := e.mcpCall(access, "", listBody)
	if status != 200 {
		t.Fatalf("%d %v", status, before)
	}
	id := before["identity"].(map[string]any)
	if id["user"] != "u_demo" || !strings.HasPrefix(id["grant"].(string), "g_") || id["client"] != c.id {
		t.Fatalf("identity %v, want u_demo with the grant and client %s", id, c.id)
	}
	g, err := e.store.GetGrant(context.Background(), id["grant"].(string))
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(10 * time.Minute) // past the card service's access token
	status, _, after := e.mcpCall(access, "", listBody)
	if status != 200 || after["user"] != "u_demo" {
		t.Fatalf("after the card service's token expired: %d %v", status, after)
	}
	g2, err := e.store.GetGrant(context.Background(), g.ID)
	if err != nil || !g2.UpstreamRefreshed.After(g.UpstreamRefreshed) {
		t.Fatalf("the card service's token was not refreshed: %v", err)
	}
	if got := after["identity"]; fmt.Sprint(got) != fmt.Sprint(id) {
		t.Errorf("identity after the refresh %v, before %v", got, id)
	}
}

func TestStateSurvivesRestartAndKeyChange(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.register("Restart", "http://127.0.0.1:9/cb")
	access, refresh := c.signIn()
	logger := e.srv.log
	e.start(0, logger)
	if status, _, out := e.mcpCall(access, "", initBody); status != 200 || out["user"] != "u_demo" {
		t.Fatalf("after a restart: %d %v", status, out)
	}
	if status, _ := c.refresh(refresh); status != 200 {
		t.Errorf("refresh after a restart: %d", status)
	}
	// Nothing secret is in the state file in the clear.
	raw, err := os.ReadFile(filepath.Join(e.dir, store.BoltFile))
	if err != nil {
		t.Fatal(err)
	}
	e.secrets.CheckKnown(t, "the state file", string(raw))
	fi, _ := os.Stat(filepath.Join(e.dir, store.BoltFile))
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v", fi.Mode().Perm())
	}
	// Another state key: the sealed tokens cannot be opened, the grant ends.
	e.key = make([]byte, KeySize)
	e.start(0, logger)
	status, _, out := e.mcpCall(access, "", initBody)
	if status != 401 {
		t.Errorf("with another state key: %d %v, want 401", status, out)
	}
}

func TestTokenForAnotherResource(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.register("Moved", "http://127.0.0.1:9/cb")
	access, _ := c.signIn()
	// The same state served under another public URL: tokens issued for the old one are not
	// for this resource.
	srv, err := New(Options{PublicURL: "http://localhost:1", APIHost: e.sbURL, KV: e.kv, Key: e.key, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, "http://localhost:1/mcp", strings.NewReader(initBody))
	req.Header.Set("Authorization", "Bearer "+access)
	rec := httptest.NewRecorder()
	srv.Protect(http.NotFoundHandler()).ServeHTTP(rec, req)
	if rec.Code != 401 || !strings.Contains(rec.Header().Get("WWW-Authenticate"), "another resource") {
		t.Errorf("token of another resource: %d %v", rec.Code, rec.Header())
	}
}

func TestRegistration(t *testing.T) {
	e := newEnv(t, envOptions{})
	post := func(body string) (int, map[string]any) {
		resp, err := http.Post(e.url+"/register", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	for _, tc := range []struct {
		body   string
		status int
	}{
		{`{"redirect_uris":["http://evil.example/cb"]}`, 400},
		{`{"redirect_uris":["https://app.example/cb#frag"]}`, 400},
		{`{"redirect_uris":[]}`, 400},
		{`{"redirect_uris":["https://app.example/cb"],"grant_types":["client_credentials"]}`, 400},
		{`{"redirect_uris":["https://app.example/cb"],"token_endpoint_auth_method":"client_secret_basic"}`, 201},
		{`{"redirect_uris":["http://localhost:3000/callback"],"client_name":"VS Code"}`, 201},
	} {
		status, out := post(tc.body)
		if status != tc.status {
			t.Errorf("%s: %d %v, want %d", tc.body, status, out, tc.status)
		}
		if status == 201 && out["token_endpoint_auth_method"] != "none" {
			t.Errorf("%s: registered as %v, want a public client", tc.body, out["token_endpoint_auth_method"])
		}
	}
}

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	k1, gen, err := LoadKey("", dir)
	if err != nil || !gen || len(k1) != KeySize {
		t.Fatalf("generate: %v %v", gen, err)
	}
	k2, gen, err := LoadKey("", dir)
	if err != nil || gen || string(k1) != string(k2) {
		t.Fatalf("reload: %v %v", gen, err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, KeyFile)); fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v", fi.Mode().Perm())
	}
	if _, _, err := LoadKey("c2hvcnQ=", dir); err == nil {
		t.Error("a short key was accepted")
	}
}

func regexpFind(expr, s string) string {
	m := regexp.MustCompile(expr).FindStringSubmatch(s)
	if m == nil {
		return ""
	}
	return m[1]
}

// An earlier version's state file is moved into the store: its tokens keep working.
func TestImportStateFile(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.register("Upgrade", "http://127.0.0.1:9/cb")
	access, refresh := c.signIn()
	// Write what the store holds as an earlier version's file, on a fresh store.
	ctx := context.Background()
	old := map[string]any{"version": 1, "clients": map[string]any{}, "consents": map[string]any{}, "requests": map[string]any{},
		"grants": map[string]any{}, "secrets": map[string]any{}, "upstream": map[string]any{}}
	for prefix, field := range map[string]string{keyClient: "clients", keyGrant: "grants", keySecret: "secrets", keyUpstream: "upstream", keyConsent: "consents"} {
		if err := e.kv.Scan(ctx, prefix, func(k string) error {
			raw, err := e.kv.Get(ctx, k)
			if err != nil {
				return err
			}
			old[field].(map[string]any)[k[len(prefix):]] = json.RawMessage(raw)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	raw, _ := json.Marshal(old)
	logger := e.srv.log
	e.srv.Close()
	e.kv.Close()
	if err := os.Remove(filepath.Join(e.dir, store.BoltFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, StateFile), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	kv, err := store.OpenBolt(filepath.Join(e.dir, store.BoltFile))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := ImportStateFile(ctx, e.dir, kv, e.key); err != nil || n == 0 {
		t.Fatalf("import: %d %v", n, err)
	}
	kv.Close()
	e.srv = nil
	e.start(0, logger)
	if status, _, out := e.mcpCall(access, "", initBody); status != 200 || out["user"] != "u_demo" {
		t.Errorf("an imported access token: %d %v", status, out)
	}
	if status, _ := c.refresh(refresh); status != 200 {
		t.Errorf("an imported refresh token: %d", status)
	}
	if _, err := os.Stat(filepath.Join(e.dir, StateFile+".imported")); err != nil {
		t.Errorf("the file was not renamed: %v", err)
	}
}

// downKV is a store whose writes fail as Redis's do while it fails over.
type downKV struct{ store.KV }

func (downKV) Set(context.Context, string, []byte, time.Duration) error {
	return &store.UnavailableError{Backend: "redis test", Err: errors.New("failing over")}
}

func (downKV) Create(context.Context, string, []byte, time.Duration) (bool, error) {
	return false, &store.UnavailableError{Backend: "redis test", Err: errors.New("failing over")}
}

func (downKV) Update(context.Context, string, time.Duration, func([]byte) ([]byte, error)) ([]byte, error) {
	return nil, &store.UnavailableError{Backend: "redis test", Err: errors.New("failing over")}
}

// A registration the store cannot take while it fails over is "try again" (503
// temporarily_unavailable), not a server error; so is a browser's return from the card service
// whose state cannot be checked (not "unknown sign-in").
func TestRegisterStoreUnavailable(t *testing.T) {
	t.Parallel()
	key := make([]byte, KeySize)
	srv, err := New(Options{PublicURL: "http://127.0.0.1:1", APIHost: "http://127.0.0.1:2", KV: downKV{store.NewMemory()}, Key: key,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	body := `{"client_name":"c","redirect_uris":["http://127.0.0.1:9/cb"],"token_endpoint_auth_method":"none"}`
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/register", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	srv.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"temporarily_unavailable"`) {
		t.Errorf("register while the store fails over: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/oauth/callback?state=s&code=c", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "connect again") {
		t.Errorf("callback while the store fails over: %d %s", rec.Code, rec.Body)
	}
}

// grantsDownKV is a store whose reads of grants fail as a Redis failing over does, while
// failing is set.
type grantsDownKV struct {
	store.KV
	failing *atomic.Bool
}

func (k grantsDownKV) Get(ctx context.Context, key string) ([]byte, error) {
	if k.failing.Load() && strings.HasPrefix(key, keyGrant) {
		return nil, &store.UnavailableError{Backend: "redis test", Err: errors.New("failing over")}
	}
	return k.KV.Get(ctx, key)
}

// TestAuthenticateWhileTheStoreFailsOver: an access token whose grant cannot be read because
// the store is failing over is "try again" (503), not "the authorization has ended" (401, after
// which a client signs the user in again); a grant that is gone is 401.
func TestAuthenticateWhileTheStoreFailsOver(t *testing.T) {
	t.Parallel()
	failing := &atomic.Bool{}
	key := make([]byte, KeySize)
	srv, err := New(Options{PublicURL: "http://127.0.0.1:1", APIHost: "http://127.0.0.1:2", KV: grantsDownKV{store.NewMemory(), failing}, Key: key,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	resource := "http://127.0.0.1:1/mcp"
	if err := srv.store.PutGrant(ctx, &Grant{ID: "g1", ClientID: "c1", UserID: "u1", Scope: Scope, Resource: resource, Active: true}); err != nil {
		t.Fatal(err)
	}
	token := "access-token-of-g1"
	if err := srv.store.PutSecret(ctx, oauthserver.Digest(token), &Secret{Kind: KindAccess, GrantID: "g1", ClientID: "c1", Scope: Scope,
		Resource: resource, Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	if p, _, f := srv.authenticate(req, token); f != nil || p.UserID != "u1" {
		t.Fatalf("a live token: %+v %+v", p, f)
	}
	failing.Store(true)
	if _, _, f := srv.authenticate(req, token); f == nil || f.status != http.StatusServiceUnavailable {
		t.Errorf("the grant unreadable: %+v, want 503", f)
	}
	failing.Store(false)
	if _, err := srv.store.DeleteGrant(ctx, "g1"); err != nil {
		t.Fatal(err)
	}
	if err := srv.store.PutSecret(ctx, oauthserver.Digest(token), &Secret{Kind: KindAccess, GrantID: "g1", ClientID: "c1", Scope: Scope,
		Resource: resource, Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, _, f := srv.authenticate(req, token); f == nil || f.status != http.StatusUnauthorized {
		t.Errorf("the grant gone: %+v, want 401", f)
	}
}

// TestRevocationNotUndoneByPutBack: a revoked access token whose record (copied before the
// revocation) is put back in the store stays revoked; so do the tokens of a revoked grant whose
// records are all put back.
func TestRevocationNotUndoneByPutBack(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	c := e.register("PutBack", "http://127.0.0.1:9/cb")
	access, refresh := c.signIn()
	copyOf := func(key string) []byte {
		raw, err := e.kv.Get(ctx, key)
		if err != nil {
			t.Fatalf("copy %s: %v", key, err)
		}
		return raw
	}
	accessKey := keySecret + oauthserver.Digest(access)
	saved := copyOf(accessKey)
	resp, err := http.PostForm(e.url+"/revoke", url.Values{"token": {access}, "client_id": {c.id}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := e.kv.Set(ctx, accessKey, saved, time.Hour); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := e.mcpCall(access, "", initBody); status != 401 {
		t.Fatalf("a revoked access token put back: %d, want 401", status)
	}

	status, tok := c.refresh(refresh)
	if status != 200 {
		t.Fatalf("refresh: %d %v", status, tok)
	}
	access, refresh = tok["access_token"].(string), tok["refresh_token"].(string)
	g := onlyGrant(t, e)
	keys := []string{keySecret + oauthserver.Digest(access), keySecret + oauthserver.Digest(refresh), keyGrant + g.ID}
	copies := map[string][]byte{}
	for _, k := range keys {
		copies[k] = copyOf(k)
	}
	resp, _ = http.PostForm(e.url+"/revoke", url.Values{"token": {refresh}, "client_id": {c.id}})
	resp.Body.Close()
	for k, v := range copies {
		if err := e.kv.Set(ctx, k, v, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if status, _, _ := e.mcpCall(access, "", initBody); status != 401 {
		t.Errorf("an access token of a revoked grant, its records put back: %d, want 401", status)
	}
	if status, _ := c.refresh(refresh); status != 400 {
		t.Errorf("a refresh token of a revoked grant, its records put back: %d, want 400", status)
	}
}
