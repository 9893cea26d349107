package main

// End-to-end tests of the HTTP server's authorization: the built binary in proxy and
// passthrough mode in front of the sandbox (run as its own server), driven by the official
// MCP Go SDK's client, which performs MCP authorization itself (discovery from the 401,
// registration, PKCE), with a scripted browser or a headless Chromium in the place of the
// person.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/cardwriter/cardwriter-mcp/auth/authtest"
	"github.com/cardwriter/cardwriter-mcp/internal/browsertest"
	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
)

// syncBuffer is a buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// seenSecrets collects every secret a test saw (tokens, codes, verifiers, states), to look
// for them in all the logs of the run.
type seenSecrets struct {
	mu   sync.Mutex
	list []string
}

func (s *seenSecrets) add(v ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range v {
		if len(x) >= 8 {
			s.list = append(s.list, x)
		}
	}
}

// longToken is anything shaped like a token: 40 or more characters of the base64url alphabet.
var longToken = regexp.MustCompile(`[A-Za-z0-9_-]{40,}`)

// checkLogs fails when logs hold a secret seen in the test, or anything token-shaped.
func (s *seenSecrets) checkLogs(t *testing.T, what, logs string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.list {
		if strings.Contains(logs, x) {
			t.Errorf("%s contain a secret (%.10s…)", what, x)
		}
	}
	for _, line := range strings.Split(logs, "\n") {
		if m := longToken.FindString(line); m != "" {
			t.Errorf("%s: a line holds a token-shaped string (%.10s…): %.300s", what, m, line)
		}
	}
}

// recorder is an http.RoundTripper that notes every secret that crosses it: bearer tokens
// sent, tokens received from a token endpoint, codes and verifiers sent to one.
type recorder struct {
	sec       *seenSecrets
	mu        sync.Mutex
	refreshes int
	bearers   []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if a := req.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
		r.sec.add(strings.TrimPrefix(a, "Bearer "))
		r.mu.Lock()
		r.bearers = append(r.bearers, strings.TrimPrefix(a, "Bearer "))
		r.mu.Unlock()
	}
	isToken := req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/token")
	if isToken && req.Body != nil {
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		f, _ := url.ParseQuery(string(body))
		r.sec.add(f.Get("code"), f.Get("code_verifier"), f.Get("refresh_token"))
		if f.Get("grant_type") == "refresh_token" {
			r.mu.Lock()
			r.refreshes++
			r.mu.Unlock()
		}
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && isToken {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		var tr struct {
			Access  string `json:"access_token"`
			Refresh string `json:"refresh_token"`
		}
		_ = json.Unmarshal(body, &tr)
		r.sec.add(tr.Access, tr.Refresh)
	}
	return resp, err
}

func (r *recorder) lastBearer() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bearers) == 0 {
		return ""
	}
	return r.bearers[len(r.bearers)-1]
}

// authSandbox is the sandbox (API and OAuth server) on a loopback port of its own.
type authSandbox struct {
	URL  string
	svc  *sandbox.Service
	logs syncBuffer
}

func startAuthSandbox(t *testing.T, sec *seenSecrets) *authSandbox {
	t.Helper()
	sb := &authSandbox{}
	var h http.Handler
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	sb.URL = "http://" + srv.Listener.Addr().String()
	svc, err := sandbox.New(sandbox.Options{BaseURL: sb.URL, CheckResponses: true,
		Logger: slog.New(slog.NewJSONHandler(&sb.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	sb.svc = svc
	h = svc.Handler()
	srv.Start()
	sec.add(svc.DemoToken())
	t.Cleanup(func() {
		srv.Close()
		sec.checkLogs(t, "the sandbox's logs", sb.logs.String())
	})
	return sb
}

// httpServer is a running `cardwriter-mcp http`.
type httpServer struct {
	base string
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan error
}

// startServer runs `cardwriter-mcp http` with args and returns its base URL. Its stderr is
// kept and checked for secrets at the end of the test; it is stopped with SIGTERM.
func startServer(t *testing.T, sec *seenSecrets, args ...string) *httpServer {
	t.Helper()
	if !slices.Contains(args, "--state-dir") {
		// One server per state directory: servers of tests run in parallel get one each.
		args = append(args, "--state-dir", t.TempDir())
	}
	cmd := exec.Command(binPath, append([]string{"http", "--log-level", "debug", "--log-format", "json"}, args...)...)
	cmd.Env = cleanEnv()
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &httpServer{cmd: cmd, logs: &syncBuffer{}, done: make(chan error, 1)}
	endpoint := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		re := regexp.MustCompile(`MCP endpoint: (http://\S+)/mcp`)
		for sc.Scan() {
			s.logs.Write([]byte(sc.Text() + "\n"))
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				endpoint <- m[1]
			}
		}
	}()
	go func() { s.done <- cmd.Wait(); pw.Close() }()
	t.Cleanup(func() {
		s.stop(t)
		sec.checkLogs(t, "the server's logs", s.logs.String())
	})
	select {
	case s.base = <-endpoint:
		return s
	case err := <-s.done:
		t.Fatalf("http server exited: %v\n%s", err, s.logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("http server did not start:\n%s", s.logs.String())
	}
	return nil
}

func (s *httpServer) stop(t *testing.T) {
	t.Helper()
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("http server did not exit cleanly on SIGTERM: %v\n%s", err, s.logs.String())
		}
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		t.Errorf("http server did not stop within 20s of SIGTERM")
	}
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

var metaRefreshURL = regexp.MustCompile(`http-equiv="refresh" content="0;url=([^"]+)"`)

// scriptedFetcher is the browser part of the SDK's authorization flow, played by a scripted
// browser of its own: the proxy's consent page (Allow), the sandbox's sign-in page (signing in
// as the account named account; "" is the first one, the demo user) and consent page, and the
// proxy's page that returns to the client's redirect URI.
func scriptedFetcher(sec *seenSecrets, consentPages *int, account string) sdkauth.AuthorizationCodeFetcher {
	signIn := "sign in"
	if account != "" {
		signIn = authtest.SignInButton(account)
	}
	b := authtest.New()
	b.StopAtCallback = true
	return func(_ context.Context, args *sdkauth.AuthorizationArgs) (*sdkauth.AuthorizationResult, error) {
		p, err := b.Get(args.URL)
		for range 8 {
			if err != nil {
				return nil, err
			}
			var target *url.URL
			if loc := p.Header.Get("Location"); loc != "" {
				target, _ = p.URL.Parse(loc)
			} else if m := metaRefreshURL.FindStringSubmatch(p.Body); m != nil {
				target, _ = url.Parse(html.UnescapeString(m[1]))
			}
			if target != nil && target.Path == "/callback" {
				q := target.Query()
				sec.add(q.Get("code"), q.Get("state"))
				if q.Get("error") != "" {
					return nil, fmt.Errorf("authorization failed: %s", q.Get("error"))
				}
				return &sdkauth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
			}
			if p.Status != http.StatusOK {
				return nil, fmt.Errorf("page %s: %d %q", p.URL, p.Status, p.Title())
			}
			button := "allow"
			if strings.Contains(p.Body, "Sign in as") {
				button = signIn
			} else if strings.Contains(p.Body, "wants to use cardwriter-mcp") && consentPages != nil {
				*consentPages++
			}
			p, err = b.Submit(p, button)
		}
		return nil, errors.New("the authorization did not come back to the client")
	}
}

// oauthClient is an MCP client of the SDK that authorizes itself with fetch.
func oauthClient(t *testing.T, base string, rec *recorder, fetch sdkauth.AuthorizationCodeFetcher, redirect string) *mcp.StreamableClientTransport {
	t.Helper()
	hc := &http.Client{Transport: rec}
	h, err := sdkauth.NewAuthorizationCodeHandler(&sdkauth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &sdkauth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "e2e go-sdk client", RedirectURIs: []string{redirect}, TokenEndpointAuthMethod: "none",
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		}},
		RedirectURL:              redirect,
		AuthorizationCodeFetcher: fetch,
		Client:                   hc,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc, OAuthHandler: h}
}

// rawMCP posts body to /mcp with token and returns the answer.
func rawMCP(t *testing.T, base, token, sid, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

const rawInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func TestHTTPProxyWithGoSDKClient(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sec := &seenSecrets{}
	sb := startAuthSandbox(t, sec)
	addr := freeAddr(t)
	stateDir := t.TempDir()
	args := []string{"--addr", addr, "--api-host", sb.URL, "--state-dir", stateDir, "--access-token-ttl", "4s"}
	srv := startServer(t, sec, args...)

	// Unauthenticated: 401 with the challenge.
	resp, _ := rawMCP(t, srv.base, "", "", rawInit)
	want := `Bearer resource_metadata="` + srv.base + `/.well-known/oauth-protected-resource/mcp", scope="mcp:card-writer"`
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("no token: %d %q, want 401 %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), want)
	}

	rec := &recorder{sec: sec}
	consentPages := 0
	transport := oauthClient(t, srv.base, rec, scriptedFetcher(sec, &consentPages, ""), "http://127.0.0.1:9/callback")
	cs, err := newClient().Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect: %v\nserver logs:\n%s", err, srv.logs.String())
	}
	authoringSession(ctx, t, cs)
	if consentPages != 1 {
		t.Errorf("the proxy's consent page was shown %d times, want 1", consentPages)
	}
	// The access token lives 4s: the SDK refreshes it, the proxy rotates it.
	time.Sleep(5 * time.Second)
	me := call(ctx, t, cs, "whoami", map[string]any{}, false)
	if me["userId"] != "u_demo" {
		t.Errorf("whoami after the access token expired: %v", me)
	}
	rec.mu.Lock()
	refreshes := rec.refreshes
	rec.mu.Unlock()
	if refreshes == 0 {
		t.Error("the client never refreshed its token")
	}
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}

	// The state survives a restart: the last token the client used still works.
	token := rec.lastBearer()
	srv.stop(t)
	srv2 := startServer(t, sec, args...)
	resp, body := rawMCP(t, srv2.base, token, "", rawInit)
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("after a restart: %d %s", resp.StatusCode, body)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	// The card service's own token is refused: no token passthrough in proxy mode.
	if resp, _ := rawMCP(t, srv2.base, sb.svc.DemoToken(), "", rawInit); resp.StatusCode != 401 {
		t.Errorf("the card service's token at the proxy: %d, want 401", resp.StatusCode)
	}
	// A session id with a bad token is refused before the session is looked at.
	if resp, _ := rawMCP(t, srv2.base, "cwm_at_forged", sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != 401 {
		t.Errorf("a session with a forged token: %d, want 401", resp.StatusCode)
	}
	if resp, body := rawMCP(t, srv2.base, token, sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != 200 {
		t.Errorf("the session with its token: %d %s", resp.StatusCode, body)
	}
	// Logs must say what happened, without secrets (checked at cleanup).
	for _, want := range []string{"client registered", "authorization granted", "tokens issued", "tokens refreshed"} {
		if !strings.Contains(srv.logs.String(), want) {
			t.Errorf("the server's logs lack %q", want)
		}
	}
}

// TestHTTPProxySessionOwner: in proxy mode, with the real MCP server behind it,
// two card service users each sign in through the proxy (the Go SDK's authorization, a browser
// each, choosing their account on the sandbox's sign-in page). An MCP session belongs to the user
// who opened it: B's token with A's Mcp-Session-Id is refused on POST, GET and DELETE, as an
// unknown session would be, while A's own calls go on; and B cannot reach A's card through a
// tool of B's own session.
func TestHTTPProxySessionOwner(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sec := &seenSecrets{}
	sb := startAuthSandbox(t, sec) // in-process, so that users can be added
	adaToken, beaToken := "ada-card-service-token-0123456789", "bea-card-service-token-0123456789"
	sec.add(adaToken, beaToken)
	ada := sb.svc.AddUser(adaToken, "Ada Author")
	bea := sb.svc.AddUser(beaToken, "Bea Builder")
	addr := freeAddr(t)
	srv := startServer(t, sec, "--addr", addr, "--public-url", "http://"+addr, "--api-host", sb.URL, "--state-dir", t.TempDir())

	connect := func(account string, rec *recorder) *mcp.ClientSession {
		t.Helper()
		transport := oauthClient(t, srv.base, rec, scriptedFetcher(sec, nil, account), "http://127.0.0.1:9/callback")
		// Sessions (and so their owners) exist up to 2025-11-25; 2026-07-28 has none.
		cs, err := newClient().Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatalf("connect as %s: %v\nserver logs:\n%s", account, err, srv.logs.String())
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	recA, recB := &recorder{sec: sec}, &recorder{sec: sec}
	csA := connect("Ada Author", recA)
	if me := call(ctx, t, csA, "whoami", map[string]any{}, false); me["userId"] != ada {
		t.Fatalf("A's whoami: %v, want %s", me, ada)
	}
	card := call(ctx, t, csA, "create_card", map[string]any{"roleName": "Ada's Secret Captain"}, false)
	roleA, _ := card["roleId"].(string)
	if roleA == "" {
		t.Fatalf("create_card: %v", card)
	}
	csB := connect("Bea Builder", recB)
	if me := call(ctx, t, csB, "whoami", map[string]any{}, false); me["userId"] != bea {
		t.Fatalf("B's whoami: %v, want %s", me, bea)
	}
	tokA, tokB := recA.lastBearer(), recB.lastBearer()
	sidA := csA.ID()
	if tokA == "" || tokB == "" || tokA == tokB || sidA == "" || sidA == csB.ID() {
		t.Fatalf("tokens or sessions not distinct (session ids %q, %q)", sidA, csB.ID())
	}

	// B's own session: A's card is not B's.
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"get_card", map[string]any{"roleId": roleA}},
		{"write_card_document", map[string]any{"roleId": roleA, "sections": map[string]any{"description": "Taken over."}}},
	} {
		if out := call(ctx, t, csB, tc.tool, tc.args, true); out["error"] != "role_not_found" {
			t.Errorf("B's %s of A's card: %v, want role_not_found", tc.tool, out)
		}
	}

	// B's token with A's session id: refused before the MCP server sees it, with the answer an
	// unknown session gets.
	version := csA.InitializeResult().ProtocolVersion
	send := func(method, token, sid, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, method, srv.base+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", version)
		if method == http.MethodGet {
			req.Header.Set("Accept", "text/event-stream")
		} else {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return resp.StatusCode, string(b)
	}
	getCard := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_card","arguments":{"roleId":"` + roleA + `"}}}`
	unknownStatus, unknownBody := send(http.MethodPost, tokB, "no-such-session", getCard)
	if unknownStatus != http.StatusNotFound {
		t.Fatalf("an unknown session: %d %s", unknownStatus, unknownBody)
	}
	for _, tc := range []struct{ method, body string }{
		{http.MethodPost, getCard},
		{http.MethodPost, `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`},
		{http.MethodGet, ""},
		{http.MethodDelete, ""},
	} {
		status, body := send(tc.method, tokB, sidA, tc.body)
		if status != http.StatusNotFound || body != unknownBody || strings.Contains(body, "Secret Captain") {
			t.Errorf("B's token with A's session, %s %.40s: %d %.300s, want 404 %s", tc.method, tc.body, status, body, unknownBody)
		}
	}
	// And the other way round: A's token with B's session.
	if status, body := send(http.MethodPost, tokA, csB.ID(), `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`); status != http.StatusNotFound {
		t.Errorf("A's token with B's session: %d %s", status, body)
	}

	// A's session is untouched: A's own raw request and A's client go on.
	if status, body := send(http.MethodPost, tokA, sidA, getCard); status != http.StatusOK || !strings.Contains(body, "Secret Captain") {
		t.Errorf("A's own request in A's session: %d %.300s", status, body)
	}
	if got := call(ctx, t, csA, "get_card", map[string]any{"roleId": roleA}, false); got["roleName"] != "Ada's Secret Captain" {
		t.Errorf("A's get_card after B's attempts: %v", got)
	}
	if me := call(ctx, t, csB, "whoami", map[string]any{}, false); me["userId"] != bea {
		t.Errorf("B's own session after the refusals: %v", me)
	}
	if !strings.Contains(srv.logs.String(), "the session is not this grant's") {
		t.Error("the server's logs do not record the refused session use")
	}
}

func TestHTTPProxyWithChromium(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	browserCtx := browsertest.Chromium(ctx, t)
	sec := &seenSecrets{}
	sb := startAuthSandbox(t, sec)
	srv := startServer(t, sec, "--addr", "127.0.0.1:0", "--api-host", sb.URL, "--state-dir", t.TempDir())

	// The MCP client's redirect URI: a loopback listener, as a desktop client has.
	got := make(chan url.Values, 1)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		select {
		case got <- r.URL.Query():
		default:
		}
		_, _ = io.WriteString(w, "<!doctype html><title>Connected</title><p>You can close this tab.</p>")
	}))
	defer cb.Close()

	var clicks []string
	fetch := func(_ context.Context, args *sdkauth.AuthorizationArgs) (*sdkauth.AuthorizationResult, error) {
		if err := chromedp.Do(browserCtx, chromedp.Navigate(args.URL)); err != nil {
			return nil, fmt.Errorf("navigate: %w", err)
		}
		clicked := map[string]bool{}
		deadline := time.Now().Add(90 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case q := <-got:
				sec.add(q.Get("code"), q.Get("state"))
				return &sdkauth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
			default:
			}
			title, err := chromedp.Run(browserCtx, chromedp.Title())
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			page := ""
			switch {
			case strings.HasPrefix(title, "Allow access") && strings.Contains(title, "cardwriter-mcp"):
				page = "proxy consent"
			case strings.HasPrefix(title, "Sign in to the card service"):
				page = "card service sign-in"
			case strings.HasPrefix(title, "Allow access") && strings.Contains(title, "sandbox"):
				page = "card service consent"
			}
			if page == "" || clicked[page] {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			sel := `button[value="allow"]`
			if page == "card service sign-in" {
				sel = `button[type="submit"]`
			}
			clicked[page] = true
			clicks = append(clicks, page)
			if err := chromedp.Do(browserCtx, chromedp.Click(chromedp.CSS(sel))); err != nil {
				return nil, fmt.Errorf("click on the %s page: %w", page, err)
			}
		}
		title, _ := chromedp.Run(browserCtx, chromedp.Title())
		loc, _ := chromedp.Run(browserCtx, chromedp.Location())
		return nil, fmt.Errorf("the browser did not come back to the client; it is at %s (%q) after %v", loc, title, clicks)
	}
	rec := &recorder{sec: sec}
	transport := oauthClient(t, srv.base, rec, fetch, cb.URL+"/callback")
	cs, err := newClient().Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect: %v\nserver logs:\n%s", err, srv.logs.String())
	}
	defer cs.Close()
	if want := []string{"proxy consent", "card service sign-in", "card service consent"}; strings.Join(clicks, ",") != strings.Join(want, ",") {
		t.Errorf("pages clicked %v, want %v", clicks, want)
	}
	me := call(ctx, t, cs, "whoami", map[string]any{}, false)
	if me["userId"] != "u_demo" {
		t.Errorf("whoami: %v", me)
	}
	card := call(ctx, t, cs, "create_card", map[string]any{"roleName": "Chromium Captain"}, false)
	if card["roleId"] == "" {
		t.Errorf("create_card: %v", card)
	}
}

func TestHTTPPassthrough(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sec := &seenSecrets{}
	sb := startAuthSandbox(t, sec)
	srv := startServer(t, sec, "--addr", "127.0.0.1:0", "--api-host", sb.URL, "--auth", "passthrough")

	resp, _ := rawMCP(t, srv.base, "", "", rawInit)
	want := `Bearer resource_metadata="` + srv.base + `/.well-known/oauth-protected-resource/mcp", scope="mcp:card-writer"`
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("no token: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	mresp, err := http.Get(srv.base + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var prm map[string]any
	_ = json.NewDecoder(mresp.Body).Decode(&prm)
	mresp.Body.Close()
	if prm["resource"] != sb.URL+"/open/v1" || fmt.Sprint(prm["authorization_servers"]) != "["+sb.URL+"]" {
		t.Errorf("passthrough metadata: %v", prm)
	}
	if resp, _ := rawMCP(t, srv.base, "not-a-card-service-token", "", rawInit); resp.StatusCode != 401 ||
		!strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("a token the card service refuses: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	// The card service's token is forwarded as it came.
	rec := &recorder{sec: sec}
	hc := &http.Client{Transport: &bearer{token: sb.svc.DemoToken(), next: rec}}
	cs, err := newClient().Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.base + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, srv.logs.String())
	}
	defer cs.Close()
	authoringSession(ctx, t, cs)

	// A session belongs to the user who opened it: another user's token with its id is
	// refused, on POST and on the GET stream alike.
	resp, body := rawMCP(t, srv.base, sb.svc.DemoToken(), "", rawInit)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	otherToken := "other-user-token-0123456789abcdef"
	sec.add(otherToken)
	sb.svc.AddUser(otherToken, "Other Author")
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if resp, body := rawMCP(t, srv.base, otherToken, sid, list); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another user's token with the session: %d %s, want 404", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.base+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+otherToken)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Accept", "text/event-stream")
	if gr, err := http.DefaultClient.Do(req); err != nil || gr.StatusCode != http.StatusNotFound {
		t.Errorf("another user's GET stream of the session: %v %v", gr, err)
	} else {
		gr.Body.Close()
	}
	if resp, body := rawMCP(t, srv.base, sb.svc.DemoToken(), sid, list); resp.StatusCode != 200 {
		t.Errorf("the owner's request: %d %s", resp.StatusCode, body)
	}
}

// bearer adds a static bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func TestHTTPAuthCommandLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		out  string
	}{
		{"unknown mode", []string{"http", "--api-host", "http://127.0.0.1:1", "--auth", "magic"}, "--auth"},
		{"plain http public URL", []string{"http", "--api-host", "http://127.0.0.1:1", "--public-url", "http://mcp.example.com"}, "https"},
		{"public URL with a path", []string{"http", "--api-host", "http://127.0.0.1:1", "--public-url", "https://mcp.example.com/x"}, "origin"},
		{"bad state key", []string{"http", "--addr", "127.0.0.1:0", "--api-host", "http://127.0.0.1:1", "--state-key", "c2hvcnQ=", "--state-dir", t.TempDir()}, "state key"},
		{"help lists the auth flags", []string{"http", "--help"}, "CARDWRITER_STATE_KEY"},
		{"bad trusted proxy", []string{"http", "--addr", "127.0.0.1:0", "--api-host", "http://127.0.0.1:1", "--trusted-proxies", "10.0.0.0/8,nope", "--state-dir", t.TempDir()}, "--trusted-proxies"},
		{"public URL without a state key from outside", []string{"http", "--addr", "127.0.0.1:0", "--api-host", "http://127.0.0.1:1", "--public-url", "https://mcp.example.com", "--state-dir", t.TempDir()}, "needs a state key kept outside the state directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(binPath, tc.args...)
			cmd.Env = cleanEnv()
			out, _ := cmd.CombinedOutput()
			if !strings.Contains(string(out), tc.out) {
				t.Errorf("output lacks %q:\n%s", tc.out, out)
			}
		})
	}
}
