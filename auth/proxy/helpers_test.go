package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/cardwriter/cardwriter-mcp/auth/authtest"
	"github.com/cardwriter/cardwriter-mcp/internal/oauthserver"
	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// env is a sandbox (the card service with its OAuth server) and the proxy in front of it,
// with an MCP endpoint stand-in that calls the card service with the request's token.
type env struct {
	t       *testing.T
	clock   *authtest.Clock
	sb      *sandbox.Service
	sbURL   string
	srv     *Server
	store   *KVStore
	kv      store.KV
	dir     string
	key     []byte
	prevKey [][]byte // Options.PreviousKeys
	url     string   // the proxy's public URL
	logs    *authtest.LogBuffer
	secrets *authtest.Secrets

	signInsMu sync.Mutex
	signIns   []string // OnSignIn's outcomes, in order

	metadataClient *http.Client // envOptions.metadataClient
	bounds         *Options     // envOptions.bounds
}

// signInOutcomes returns what OnSignIn was told so far.
func (e *env) signInOutcomes() []string {
	e.signInsMu.Lock()
	defer e.signInsMu.Unlock()
	return append([]string(nil), e.signIns...)
}

type envOptions struct {
	upstreamAccessTTL time.Duration
	accessTTL         time.Duration
	metadataClient    *http.Client // fetches client metadata documents (a test's TLS server)
	bounds            *Options     // when set: its bounds of unauthenticated state and trusted proxies
	noIdentity        bool         // the card service has no identity operation (404 at /me)
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	e := &env{t: t, clock: authtest.NewClock(time.Now().Truncate(time.Second)), logs: &authtest.LogBuffer{}, secrets: &authtest.Secrets{}, dir: t.TempDir(),
		metadataClient: o.metadataClient, bounds: o.bounds}
	logger := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.sbURL = authtest.Serve(t, func(url string) http.Handler {
		sb, err := sandbox.New(sandbox.Options{BaseURL: url, Clock: e.clock.Now, CheckResponses: true,
			AccessTokenTTL: o.upstreamAccessTTL, Logger: logger.With("component", "sandbox")})
		if err != nil {
			t.Fatal(err)
		}
		e.sb = sb
		if o.noIdentity {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/open/v1/me" {
					http.NotFound(w, r)
					return
				}
				sb.Handler().ServeHTTP(w, r)
			})
		}
		return sb.Handler()
	})
	e.secrets.Add(e.sb.DemoToken())

	e.key = make([]byte, KeySize)
	_, _ = rand.Read(e.key)
	e.url = authtest.Serve(t, func(url string) http.Handler {
		e.url = url
		e.start(o.accessTTL, logger)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { e.handler().ServeHTTP(w, r) })
	})
	t.Cleanup(func() {
		e.secrets.Check(t, "the logs", e.logs.String())
	})
	return e
}

var handlerMu sync.Mutex

// start (re)starts the proxy on the same state directory and address.
func (e *env) start(accessTTL time.Duration, logger *slog.Logger) {
	e.t.Helper()
	if e.srv != nil {
		e.srv.Close()
		e.kv.Close()
	}
	kv, err := store.OpenBolt(filepath.Join(e.dir, store.BoltFile))
	if err != nil {
		e.t.Fatal(err)
	}
	opts := Options{PublicURL: e.url, APIHost: e.sbURL, KV: kv, Key: e.key, PreviousKeys: e.prevKey, AccessTokenTTL: accessTTL,
		Logger: logger.With("component", "proxy"), Now: e.clock.Now,
		MetadataHTTPClient: e.metadataClient, AllowPrivateMetadata: e.metadataClient != nil,
		OnSignIn: func(outcome string) {
			e.signInsMu.Lock()
			defer e.signInsMu.Unlock()
			e.signIns = append(e.signIns, outcome)
		}}
	if b := e.bounds; b != nil {
		opts.MaxPending, opts.MaxPendingPerSource, opts.MaxClients, opts.MaxClientsPerSource = b.MaxPending, b.MaxPendingPerSource, b.MaxClients, b.MaxClientsPerSource
		opts.UnusedClientTTL, opts.TrustedProxies = b.UnusedClientTTL, b.TrustedProxies
	}
	srv, err := New(opts)
	if err != nil {
		e.t.Fatal(err)
	}
	handlerMu.Lock()
	e.srv, e.store, e.kv = srv, srv.store, kv
	handlerMu.Unlock()
	e.t.Cleanup(func() { srv.Close(); kv.Close() })
}

func (e *env) handler() http.Handler {
	handlerMu.Lock()
	srv := e.srv
	handlerMu.Unlock()
	mux := http.NewServeMux()
	api, _ := upstream.New(e.sbURL, upstream.ContextTokenSource{}, upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 1}))
	mux.Handle(MCPPath, srv.Protect(mcpStandIn(api)))
	mux.Handle("/", srv.Handler())
	return mux
}

// mcpStandIn plays the MCP endpoint: initialize opens a session; every request asks the card
// service who the request's token belongs to.
func mcpStandIn(api *upstream.Client) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"initialize"`)) {
			w.Header().Set("Mcp-Session-Id", newID("mcp-session-"))
		}
		w.Header().Set("Content-Type", "application/json")
		me, err := api.GetMe(r.Context())
		who := api.Identity(r.Context())
		out := map[string]any{"principal": PrincipalFrom(r.Context()).UserID,
			"identity": map[string]any{"user": api.Principal(r.Context()), "grant": who.GrantID, "client": who.ClientID}}
		if err != nil {
			out["error"] = err.Error()
		} else {
			out["user"] = me.UserID
		}
		w.WriteHeader(http.StatusOK)
		_ = json.NewEncoder(w).Encode(out)
	})
}

// client is an MCP client doing OAuth by hand.
type client struct {
	e           *env
	id          string
	redirectURI string
	browser     *authtest.Browser
}

func (e *env) register(name, redirectURI string) *client {
	e.t.Helper()
	status, id := e.registerFrom(http.DefaultClient, name, redirectURI)
	if status != http.StatusCreated {
		e.t.Fatalf("register: %d", status)
	}
	return &client{e: e, id: id, redirectURI: redirectURI, browser: newBrowser()}
}

// registerFrom registers a public client with hc (whose transport may say which source it
// comes from); it returns the status and the client id.
func (e *env) registerFrom(hc *http.Client, name, redirectURI string) (int, string) {
	e.t.Helper()
	body, _ := json.Marshal(map[string]any{"client_name": name, "redirect_uris": []string{redirectURI},
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"}})
	resp, err := hc.Post(e.url+"/register", "application/json", bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	id, _ := out["client_id"].(string)
	return resp.StatusCode, id
}

// newBrowser returns a scripted browser that stops at the MCP client's redirect (path /cb).
func newBrowser() *authtest.Browser {
	b := authtest.New()
	b.Client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > 10 {
			return fmt.Errorf("too many redirects")
		}
		if req.URL.Path == "/cb" {
			return http.ErrUseLastResponse
		}
		return nil
	}
	return b
}

// authRequest is the pieces of one authorization request.
type authRequest struct {
	verifier string
	state    string
	params   url.Values
}

func (c *client) newRequest() *authRequest {
	v := oauth2.GenerateVerifier()
	ar := &authRequest{verifier: v, state: oauthserver.NewSecret("")}
	ar.params = url.Values{
		"response_type": {"code"}, "client_id": {c.id}, "redirect_uri": {c.redirectURI}, "state": {ar.state},
		"code_challenge": {oauth2.S256ChallengeFromVerifier(v)}, "code_challenge_method": {"S256"},
		"resource": {c.e.url + "/mcp"}, "scope": {Scope},
	}
	c.e.secrets.Add(v, ar.state)
	return ar
}

func (c *client) authURL(ar *authRequest) string { return c.e.url + "/authorize?" + ar.params.Encode() }

// returnTarget reads where a page sends the browser back to the MCP client: the Location of a
// redirect, or the meta refresh of the proxy's return page.
var metaRefresh = regexp.MustCompile(`http-equiv="refresh" content="0;url=([^"]+)"`)

func returnTarget(p *authtest.Page) (*url.URL, bool) {
	if loc := p.Header.Get("Location"); loc != "" {
		u, err := p.URL.Parse(loc)
		return u, err == nil
	}
	if m := metaRefresh.FindStringSubmatch(p.Body); m != nil {
		u, err := url.Parse(html.UnescapeString(m[1]))
		return u, err == nil
	}
	return nil, false
}

// authorize plays the whole browser part: the proxy's consent page (when shown), the
// sandbox's sign-in and consent, and the return. It returns the query the MCP client gets.
func (c *client) authorize(ar *authRequest) url.Values {
	c.e.t.Helper()
	p, err := c.browser.Get(c.authURL(ar))
	if err != nil {
		c.e.t.Fatal(err)
	}
	for range 6 {
		if u, ok := returnTarget(p); ok && u.Path == "/cb" {
			q := u.Query()
			c.e.secrets.Add(q.Get("code"))
			return q
		}
		if p.Status != http.StatusOK {
			c.e.t.Fatalf("page %s: status %d %q", p.URL, p.Status, p.Title())
		}
		button := "allow"
		if strings.Contains(p.Body, "Sign in as") {
			button = "sign in"
		}
		if p, err = c.browser.Submit(p, button); err != nil {
			c.e.t.Fatal(err)
		}
	}
	c.e.t.Fatalf("the authorization did not come back; last page %s %q", p.URL, p.Title())
	return nil
}

// tokenRequest posts form to the token endpoint.
func (e *env) tokenRequest(form url.Values) (int, map[string]any) {
	e.t.Helper()
	resp, err := http.PostForm(e.url+"/token", form)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	for _, k := range []string{"access_token", "refresh_token"} {
		if v, ok := out[k].(string); ok {
			e.secrets.Add(v)
		}
	}
	return resp.StatusCode, out
}

func (c *client) exchange(code string, ar *authRequest) (int, map[string]any) {
	return c.e.tokenRequest(url.Values{"grant_type": {"authorization_code"}, "client_id": {c.id}, "code": {code},
		"redirect_uri": {c.redirectURI}, "code_verifier": {ar.verifier}, "resource": {c.e.url + "/mcp"}})
}

func (c *client) refresh(rt string) (int, map[string]any) {
	return c.e.tokenRequest(url.Values{"grant_type": {"refresh_token"}, "client_id": {c.id}, "refresh_token": {rt},
		"resource": {c.e.url + "/mcp"}})
}

// signIn runs a whole authorization and returns the tokens.
func (c *client) signIn() (access, refresh string) {
	c.e.t.Helper()
	ar := c.newRequest()
	q := c.authorize(ar)
	if q.Get("state") != ar.state || q.Get("code") == "" {
		c.e.t.Fatalf("authorization answer: %v", q)
	}
	status, out := c.exchange(q.Get("code"), ar)
	if status != http.StatusOK {
		c.e.t.Fatalf("token: %d %v", status, out)
	}
	a, _ := out["access_token"].(string)
	r, _ := out["refresh_token"].(string)
	return a, r
}

// mcpCall posts to the MCP endpoint with token (and session id) and returns the status, the
// headers and the body.
func (e *env) mcpCall(token, sid, body string) (int, http.Header, map[string]any) {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, e.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, resp.Header, out
}
