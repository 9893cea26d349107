package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/auth/authtest"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

func TestPassthrough(t *testing.T) {
	e := newEnv(t, envOptions{})
	logger := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	pe := servePassthrough(t, e, e.sbURL, logger)
	pub := pe.url

	resp, err := http.Get(pub + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var prm map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&prm)
	resp.Body.Close()
	if prm["resource"] != e.sbURL+"/open/v1" || prm["authorization_servers"].([]any)[0] != e.sbURL {
		t.Errorf("passthrough metadata: %v", prm)
	}

	want := `Bearer resource_metadata="` + pub + `/.well-known/oauth-protected-resource/mcp", scope="mcp:card-writer"`
	if status, hd, _ := pe.mcpCall("", "", initBody); status != 401 || hd.Get("WWW-Authenticate") != want {
		t.Errorf("no token: %d %q", status, hd.Get("WWW-Authenticate"))
	}
	if status, hd, _ := pe.mcpCall("not-a-token", "", initBody); status != 401 || !strings.Contains(hd.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("a token the card service refuses: %d %q", status, hd.Get("WWW-Authenticate"))
	}
	status, hd, out := pe.mcpCall(e.sb.DemoToken(), "", initBody)
	if status != 200 || out["user"] != "u_demo" || out["principal"] != "u_demo" {
		t.Fatalf("the card service's token: %d %v", status, out)
	}
	sid := hd.Get("Mcp-Session-Id")

	// An OAuth token of the card service, refused by it while remembered as good here: the
	// refusal during the call becomes a 401 with the challenge.
	c := e.register("Passthrough", "http://127.0.0.1:9/cb")
	c.signIn()
	toks, err := e.srv.openGrant(onlyGrant(t, e))
	if err != nil {
		t.Fatal(err)
	}
	if status, _, out := pe.mcpCall(toks.Access.Reveal(), "", initBody); status != 200 || out["user"] != "u_demo" {
		t.Fatalf("an OAuth token of the card service: %d %v", status, out)
	}
	// The same user's session works with another of their tokens.
	if status, _, _ := pe.mcpCall(toks.Access.Reveal(), sid, listBody); status != 200 {
		t.Errorf("the user's session with another token of theirs: %d", status)
	}
	e.srv.up.revoke(context.Background(), toks)
	status, hd, out = pe.mcpCall(toks.Access.Reveal(), "", listBody)
	if status != 401 || !strings.Contains(hd.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("a token revoked at the card service: %d %v %v", status, hd, out)
	}
	other := e.sb.AddUser("other-user-token-0123456789", "Other")
	if status, _, _ := pe.mcpCall("other-user-token-0123456789", sid, listBody); status != 404 || other == "" {
		t.Errorf("another user's token with the session: %d", status)
	}
}

// TestPassthroughWithoutIdentity: a card service with no identity operation (404 where the
// contract guesses GET /me) still serves passthrough: its tokens are accepted and forwarded,
// each token's digest stands for its holder, and one token's session is not another's.
func TestPassthroughWithoutIdentity(t *testing.T) {
	e := newEnv(t, envOptions{})
	target, _ := url.Parse(e.sbURL)
	rp := httputil.NewSingleHostReverseProxy(target)
	noMe := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/open/v1/me" {
			http.NotFound(w, r)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(noMe.Close)
	pe := servePassthrough(t, e, noMe.URL, nil)
	status, hd, out := pe.mcpCall(e.sb.DemoToken(), "", initBody)
	ident, _ := out["identity"].(map[string]any)
	grant, _ := ident["grant"].(string)
	if status != 200 || out["principal"] != "" || !strings.HasPrefix(grant, "token-") {
		t.Fatalf("a token of a service without identity: %d %v", status, out)
	}
	sid := hd.Get("Mcp-Session-Id")
	e.sb.AddUser("other-user-token-0123456789", "Other")
	if status, _, _ := pe.mcpCall("other-user-token-0123456789", sid, listBody); status != 404 {
		t.Errorf("another token with the session: %d, want 404", status)
	}
	if status, _, _ := pe.mcpCall(e.sb.DemoToken(), sid, listBody); status != 200 {
		t.Errorf("the same token with its session: %d", status)
	}
}

// servePassthrough serves a passthrough server in front of the card service at apiHost, with
// mcpStandIn behind it, and returns an env calling it.
func servePassthrough(t *testing.T, e *env, apiHost string, logger *slog.Logger) *env {
	pub := authtest.Serve(t, func(u string) http.Handler {
		p, err := NewPassthrough(PassthroughOptions{PublicURL: u, APIHost: apiHost, Logger: logger, Now: e.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		api, _ := upstream.New(apiHost, upstream.ContextTokenSource{}, upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 1}))
		mux := http.NewServeMux()
		mux.Handle(MCPPath, p.Protect(mcpStandIn(api)))
		mux.Handle("/", p.Handler())
		return mux
	})
	return &env{t: t, url: pub, secrets: e.secrets}
}

// TestSignInWithoutIdentity: proxy mode in front of a card service with no identity operation
// (404 at the guessed /me): the sign-in completes, its grant names no user and stands for one
// (requests carry the grant), and no consent is remembered for a user nobody named.
func TestSignInWithoutIdentity(t *testing.T) {
	e := newEnv(t, envOptions{noIdentity: true})
	c := e.register("No identity", "http://127.0.0.1:9/cb")
	access, _ := c.signIn()
	g := onlyGrant(t, e)
	if g.UserID != "" {
		t.Errorf("the grant names user %q", g.UserID)
	}
	status, _, out := e.mcpCall(access, "", initBody)
	ident, _ := out["identity"].(map[string]any)
	if status != 200 || out["principal"] != "" || ident["grant"] != g.ID {
		t.Errorf("a request of the grant: %d %v", status, out)
	}
	if _, err := e.store.GetConsent(context.Background(), "", c.id, c.redirectURI); err == nil {
		t.Error("a consent was remembered for nobody")
	}
}

// TestPassthroughUnknownTokensBounded: a random bearer token costs at most one card service call
// (a refused token is refused again unasked for a while), and one source has only so many
// unknown tokens checked a second (429 with Retry-After past it), while another source is not
// held back.
func TestPassthroughUnknownTokensBounded(t *testing.T) {
	t.Parallel()
	clock := authtest.NewClock(time.Now().Truncate(time.Second))
	sb, err := sandbox.New(sandbox.Options{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	var meCalls atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/me") {
			meCalls.Add(1)
		}
		sb.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(api.Close)
	p, err := NewPassthrough(PassthroughOptions{PublicURL: "http://127.0.0.1:1", APIHost: api.URL, Now: clock.Now, CheckRate: 1,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")},
		APIOptions:     []upstream.Option{upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 1})}})
	if err != nil {
		t.Fatal(err)
	}
	h := p.Protect(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	call := func(token, forwardedFor string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, MCPPath, strings.NewReader(initBody))
		r.RemoteAddr = "10.0.0.1:1234"
		r.Header.Set("X-Forwarded-For", forwardedFor)
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for i := range 5 {
		if w := call("not-a-token", "192.0.2.1"); w.Code != http.StatusUnauthorized {
			t.Fatalf("a refused token, try %d: %d", i, w.Code)
		}
	}
	if n := meCalls.Load(); n != 1 {
		t.Fatalf("one refused token asked the card service %d times, want once", n)
	}
	var limited *httptest.ResponseRecorder
	for i := range 20 {
		if w := call(fmt.Sprintf("random-%d", i), "192.0.2.1"); w.Code == http.StatusTooManyRequests {
			limited = w
			break
		}
	}
	if limited == nil || limited.Header().Get("Retry-After") == "" {
		t.Fatalf("20 random tokens from one source were all checked (%d card service calls)", meCalls.Load())
	}
	if n := meCalls.Load(); n > 11 {
		t.Errorf("one source had %d tokens checked in a burst, want at most 11", n)
	}
	if w := call(sb.DemoToken(), "192.0.2.2"); w.Code != http.StatusOK {
		t.Fatalf("another source's good token: %d", w.Code)
	}
	clock.Advance(DefaultRefusedTTL)
	before := meCalls.Load()
	call("not-a-token", "192.0.2.3")
	if meCalls.Load() != before+1 {
		t.Errorf("a refused token is asked again once its refusal has expired")
	}
}
