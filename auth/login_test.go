package auth_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/auth"
	"github.com/cardwriter/cardwriter-mcp/auth/authtest"
	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// TestLoginEndToEnd signs in against the sandbox's OAuth server through a scripted browser,
// calls the API with the saved grant, lets the access token expire (refresh on 401 and before
// expiry), and revokes the grant (the call then says to run login).
func TestLoginEndToEnd(t *testing.T) {
	t.Parallel()
	secrets := &secretSet{}
	logger, _ := testLogger(t, secrets)
	srv := newSandbox(t, sandbox.Options{Logger: logger.With("component", "sandbox")})
	store := newStore(t)

	g := login(t, srv, store, logger, secrets)
	resource := srv.URL + "/open/v1"
	if g.Resource != resource || g.Issuer != srv.URL || g.ClientID == "" || g.RefreshToken == "" || g.Scope != auth.Scope {
		t.Fatalf("grant = %+v", g)
	}
	if d := time.Until(g.Expiry); d < 50*time.Minute || d > 61*time.Minute {
		t.Errorf("access token expiry in %s, want about 1h", d)
	}

	// The registration is kept: a second sign-in does not register again.
	g2 := login(t, srv, store, logger, secrets)
	d, err := store.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Clients) != 1 || g2.ClientID != g.ClientID {
		t.Errorf("clients after two sign-ins: %d, client ids %s / %s", len(d.Clients), g.ClientID, g2.ClientID)
	}
	if len(d.Grants) != 1 {
		t.Errorf("grants after two sign-ins with one client: %d, want 1 (same key)", len(d.Grants))
	}
	// The replaced sign-in was revoked at the server.
	if refreshWorks(t, srv.URL, g.ClientID, g.RefreshToken.Reveal()) {
		t.Error("the refresh token of the replaced sign-in still works")
	}
	g = g2

	src, err := auth.NewSource(store, srv.URL, auth.SourceOptions{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	client, err := upstream.New(srv.URL, src, upstream.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	me, err := client.GetMe(ctx)
	if err != nil || me.Nickname != "Demo Author" {
		t.Fatalf("GetMe = %+v, %v", me, err)
	}

	// The server's clock passes the access token's expiry while the client thinks it is
	// fresh: the 401 makes the client refresh once and retry, for a create too.
	before := grantNow(t, store, resource)
	srv.clock.Advance(2 * time.Hour)
	card, _, err := client.CreateCard(ctx, upstream.CardCreateInput{RoleName: "Mira"})
	if err != nil {
		t.Fatalf("CreateCard after the access token expired: %v", err)
	}
	after := grantNow(t, store, resource)
	secrets.addGrant(after)
	if after.AccessToken == before.AccessToken || after.RefreshToken == before.RefreshToken {
		t.Error("the refresh did not save a new access token and a rotated refresh token")
	}
	if _, err := client.GetCard(ctx, card.RoleID); err != nil {
		t.Fatalf("GetCard: %v", err)
	}

	// Before expiry: a client whose clock is within the margin refreshes before calling.
	early, err := auth.NewSource(store, srv.URL, auth.SourceOptions{Logger: logger,
		Now: func() time.Time { return after.Expiry.Add(-30 * time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := early.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	third := grantNow(t, store, resource)
	secrets.addGrant(third)
	if tok == after.AccessToken || third.AccessToken != tok || third.RefreshToken == after.RefreshToken {
		t.Error("a token within the refresh margin was not refreshed (and saved) before use")
	}

	// Revoked: the refresh token ends the grant; the next call says to run login.
	revokeToken(t, srv.URL, third.ClientID, third.RefreshToken.Reveal())
	earlyClient, err := upstream.New(srv.URL, early, upstream.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	_, err = earlyClient.GetMe(ctx)
	assertRunLogin(t, err, srv.URL)

	// The first client still holds the token before the last refresh: its 401 makes it take
	// the newer token from the store (another process's refresh, as far as it knows), which
	// is refused too; its next call refreshes, and learns that the grant is gone.
	_, _ = client.GetMe(ctx)
	_, err = client.GetMe(ctx)
	assertRunLogin(t, err, srv.URL)
}

// assertRunLogin checks that err is the "run login" error of a dead grant.
func assertRunLogin(t *testing.T, err error, apiHost string) {
	t.Helper()
	var apiErr *upstream.Error
	if !errors.As(err, &apiErr) || apiErr.Code != "unauthorized" || apiErr.Status != 401 ||
		!strings.Contains(apiErr.Message, "run `cardwriter-mcp login --api-host "+apiHost+"`") {
		t.Fatalf("err = %v, want the sign-in error that says to run login", err)
	}
}

// grantNow reads the latest grant for resource from the store.
func grantNow(t *testing.T, store *auth.Store, resource string) auth.Grant {
	t.Helper()
	d, err := store.Load()
	if err != nil {
		t.Fatal(err)
	}
	g := d.Latest(resource)
	if g == nil {
		t.Fatal("no grant in the store")
	}
	return *g
}

// startLogin runs Login in the background; open receives the authorization address.
func startLogin(t *testing.T, opts auth.LoginOptions) (<-chan string, <-chan loginResult) {
	t.Helper()
	urls := make(chan string, 1)
	done := make(chan loginResult, 1)
	opts.OpenBrowser = func(u string) error { urls <- u; return nil }
	if opts.Out == nil {
		opts.Out = &authtest.LogBuffer{}
	}
	go func() {
		g, err := auth.Login(context.Background(), opts)
		done <- loginResult{g, err}
	}()
	return urls, done
}

type loginResult struct {
	g   *auth.Grant
	err error
}

// callbackOf returns the loopback redirect URI and state of an authorization address.
func callbackOf(t *testing.T, authURL string) (redirectURI, state string) {
	t.Helper()
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	for _, k := range []string{"response_type", "client_id", "redirect_uri", "scope", "resource", "state", "code_challenge", "code_challenge_method"} {
		if q.Get(k) == "" {
			t.Errorf("authorization address lacks %s", k)
		}
	}
	if q.Get("code_challenge_method") != "S256" || q.Get("scope") != auth.Scope || !strings.HasSuffix(q.Get("resource"), "/open/v1") {
		t.Errorf("authorization address: %v", q)
	}
	if !strings.HasPrefix(q.Get("redirect_uri"), "http://127.0.0.1:") || !strings.HasSuffix(q.Get("redirect_uri"), "/callback") {
		t.Errorf("redirect_uri = %q", q.Get("redirect_uri"))
	}
	return q.Get("redirect_uri"), q.Get("state")
}

func getStatus(t *testing.T, address string) (int, string) {
	t.Helper()
	resp, err := http.Get(address)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestLoginStateChecked: an answer with another state is refused and the wait goes on; the
// real answer is taken once, and the same answer again is refused.
func TestLoginStateChecked(t *testing.T) {
	t.Parallel()
	secrets := &secretSet{}
	logger, _ := testLogger(t, secrets)
	srv := newSandbox(t, sandbox.Options{})
	store := newStore(t)
	urls, done := startLogin(t, auth.LoginOptions{APIHost: srv.URL, Store: store, Logger: logger, Timeout: 30 * time.Second})
	authURL := <-urls
	redirectURI, state := callbackOf(t, authURL)

	// Forged answers: another state, no state, a forged error. None ends the sign-in.
	for _, q := range []url.Values{
		{"state": {"forged"}, "code": {"forged-code"}},
		{"code": {"forged-code"}},
		{"state": {"forged"}, "error": {"access_denied"}},
		{"state": {state, state}, "code": {"forged-code"}},
	} {
		if status, body := getStatus(t, redirectURI+"?"+q.Encode()); status != http.StatusBadRequest || !strings.Contains(body, "Unknown sign-in") {
			t.Errorf("answer %v: status %d, %s", q, status, body)
		}
	}
	if status, _ := getStatus(t, strings.Replace(redirectURI, "/callback", "/other", 1)); status != http.StatusNotFound {
		t.Errorf("another path: status %d", status)
	}
	select {
	case r := <-done:
		t.Fatalf("Login ended on a forged answer: %v", r.err)
	default:
	}

	// The real answer: the browser stops at the redirect, then delivers it twice.
	b := authtest.New()
	b.StopAtCallback = true
	p, err := b.SignIn(authURL, "Sign in", "allow")
	if err != nil {
		t.Fatal(err)
	}
	loc, err := p.Location()
	if err != nil {
		t.Fatal(err)
	}
	secrets.Add(loc.Query().Get("code"))
	if loc.Query().Get("state") != state {
		t.Fatalf("the server changed the state")
	}
	if status, body := getStatus(t, loc.String()); status != http.StatusOK || !strings.Contains(body, "Signed in") {
		t.Fatalf("the real answer: status %d, %s", status, body)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("Login: %v", r.err)
	}
	secrets.addGrant(*r.g)
	if status, body := getStatus(t, loc.String()); status == http.StatusOK {
		t.Errorf("the replayed answer was accepted: %s", body)
	}
	d, _ := store.Load()
	if len(d.Grants) != 1 {
		t.Errorf("%d grants saved, want 1", len(d.Grants))
	}
}

// TestLoginReplayWhileListening: a second answer with the right state, while the first one
// is still being exchanged, is refused.
func TestLoginReplayWhileListening(t *testing.T) {
	t.Parallel()
	secrets := &secretSet{}
	logger, _ := testLogger(t, secrets)
	// The token endpoint is slowed down so that the listener is surely still up.
	srv := newSandbox(t, sandbox.Options{})
	srv.tokenDelay.Store(int64(300 * time.Millisecond))
	store := newStore(t)
	urls, done := startLogin(t, auth.LoginOptions{APIHost: srv.URL, Store: store, Logger: logger, Timeout: 30 * time.Second})
	authURL := <-urls
	b := authtest.New()
	b.StopAtCallback = true
	p, err := b.SignIn(authURL, "Sign in", "allow")
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := p.Location()
	secrets.Add(loc.Query().Get("code"))
	first := make(chan int, 1)
	go func() { s, _ := getStatus(t, loc.String()); first <- s }()
	time.Sleep(100 * time.Millisecond)
	if status, body := getStatus(t, loc.String()); status != http.StatusBadRequest || !strings.Contains(body, "already") {
		t.Errorf("replay during the exchange: status %d, %s", status, body)
	}
	if s := <-first; s != http.StatusOK {
		t.Errorf("first answer: status %d", s)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	secrets.addGrant(*r.g)
}

func TestLoginDenied(t *testing.T) {
	t.Parallel()
	secrets := &secretSet{}
	logger, _ := testLogger(t, secrets)
	srv := newSandbox(t, sandbox.Options{})
	store := newStore(t)
	open, browser := playBrowser("deny")
	_, err := auth.Login(context.Background(), auth.LoginOptions{APIHost: srv.URL, Store: store, Logger: logger, Timeout: 30 * time.Second, OpenBrowser: open})
	if err == nil || !strings.Contains(err.Error(), "access_denied") {
		t.Fatalf("Login = %v, want access_denied", err)
	}
	if r := <-browser; r.err != nil || !strings.Contains(r.page.Body, "did not grant access") {
		t.Errorf("browser: %v", r.err)
	}
	d, _ := store.Load()
	if len(d.Grants) != 0 {
		t.Error("a grant was saved")
	}
}

func TestLoginTimeout(t *testing.T) {
	t.Parallel()
	srv := newSandbox(t, sandbox.Options{})
	var out authtest.LogBuffer
	start := time.Now()
	_, err := auth.Login(context.Background(), auth.LoginOptions{APIHost: srv.URL, Store: newStore(t), Timeout: 200 * time.Millisecond, Out: &out})
	if err == nil || !strings.Contains(err.Error(), "within 200ms") {
		t.Fatalf("Login = %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Error("Login outlived its time limit")
	}
	if !strings.Contains(out.String(), srv.URL+"/oauth/authorize?") {
		t.Errorf("the address was not printed: %s", out.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := auth.Login(ctx, auth.LoginOptions{APIHost: srv.URL, Store: newStore(t)}); !errors.Is(err, context.Canceled) {
		t.Errorf("Login with a cancelled context = %v", err)
	}
}

// TestLoginWithoutMetadata: a server that publishes no RFC 8414 metadata is reached at the
// contract's endpoints.
func TestLoginWithoutMetadata(t *testing.T) {
	t.Parallel()
	secrets := &secretSet{}
	logger, _ := testLogger(t, secrets)
	var h http.Handler
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/.well-known/") {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	svc, err := sandbox.New(sandbox.Options{BaseURL: "http://" + front.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	h = svc.Handler()
	front.Start()
	t.Cleanup(front.Close)
	md, err := auth.Discover(context.Background(), nil, front.URL)
	if err != nil || md.Discovered || md.TokenEndpoint != front.URL+"/oauth/token" ||
		md.RegistrationEndpoint != front.URL+"/oauth/register" || md.AuthorizationEndpoint != front.URL+"/oauth/authorize" ||
		md.RevocationEndpoint != front.URL+"/oauth/revoke" {
		t.Fatalf("Discover = %+v, %v", md, err)
	}
	store := newStore(t)
	g := login(t, &server{URL: front.URL}, store, logger, secrets)
	src, err := auth.NewSource(store, front.URL, auth.SourceOptions{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := upstream.New(front.URL, src)
	if _, err := c.GetMe(context.Background()); err != nil {
		t.Fatalf("GetMe: %v", err)
	}
	if g.TokenEndpoint != front.URL+"/oauth/token" {
		t.Errorf("grant's token endpoint = %s", g.TokenEndpoint)
	}
}

func TestLoginRefusesNonLoopbackListener(t *testing.T) {
	t.Parallel()
	srv := newSandbox(t, sandbox.Options{})
	for _, addr := range []string{"0.0.0.0:0", "localhost:0", ":0"} {
		_, err := auth.Login(context.Background(), auth.LoginOptions{APIHost: srv.URL, Store: newStore(t), ListenAddr: addr})
		if err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("ListenAddr %q: %v", addr, err)
		}
	}
}

// refreshWorks reports whether the server accepts a refresh token (and spends it).
func refreshWorks(t *testing.T, base, clientID, rt string) bool {
	t.Helper()
	resp, err := http.PostForm(base+"/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {clientID}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// TestLoginReregistersForgottenClient: a kept registration the server no longer knows is
// replaced by a new one before the browser is sent anywhere.
func TestLoginReregistersForgottenClient(t *testing.T) {
	t.Parallel()
	secrets := &secretSet{}
	logger, _ := testLogger(t, secrets)
	srv := newSandbox(t, sandbox.Options{})
	store := newStore(t)
	login(t, srv, store, logger, secrets)
	err := store.Update(context.Background(), func(d *auth.Data) error {
		d.Clients[0].ClientID = "c_forgotten"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	g := login(t, srv, store, logger, secrets)
	d, _ := store.Load()
	if len(d.Clients) != 1 || d.Clients[0].ClientID == "c_forgotten" || g.ClientID != d.Clients[0].ClientID {
		t.Errorf("clients = %+v, grant client %s", d.Clients, g.ClientID)
	}
	if len(d.Grants) != 1 {
		t.Errorf("%d grants, want the new one only", len(d.Grants))
	}
}
