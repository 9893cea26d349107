package auth

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// DefaultLoginTimeout is how long Login waits for the browser to come back.
const DefaultLoginTimeout = 5 * time.Minute

// callbackPath is the path of the loopback redirect URI.
const callbackPath = "/callback"

// LoginOptions configures Login.
type LoginOptions struct {
	APIHost string // the card service, scheme://host[:port]; required
	Store   *Store // where the registration and the grant are kept; required

	HTTPClient *http.Client     // of discovery, registration and token requests; default NewHTTPClient()
	Logger     *slog.Logger     // default discard
	Now        func() time.Time // default time.Now
	Timeout    time.Duration    // the wait for the browser; default DefaultLoginTimeout

	// Out receives the instructions: the address to open (always printed) and what happens.
	Out io.Writer
	// OpenBrowser opens the address in the user's browser; nil prints it only. OpenURL is the
	// usual value.
	OpenBrowser func(url string) error
	// ListenAddr is where the loopback redirect is received; default "127.0.0.1:0" (a port
	// the system chooses). It must be a 127.0.0.1 address.
	ListenAddr string
	// Paste, when set, is read line by line for the address the browser ended on (or the code
	// alone): a browser on another machine (over SSH, say) cannot reach the loopback redirect,
	// and ends on a page that does not load, whose address the person pastes back.
	Paste io.Reader
	// Device signs in with the device authorization grant (RFC 8628) instead: the person opens
	// the printed address on any device and types the printed code, and nothing listens on
	// this machine. The server's metadata must name its device_authorization_endpoint.
	Device bool
}

// Login signs the user in through the browser and saves the grant: discovery, registration
// (once per issuer, kept in the store), an authorization request with PKCE S256, state and
// the resource indicator, the loopback redirect, and the code exchange. It returns the saved
// grant (use its tokens only through upstream.Token).
func Login(ctx context.Context, opts LoginOptions) (*Grant, error) {
	if opts.Store == nil {
		return nil, errors.New("auth: Login needs a Store")
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = NewHTTPClient()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultLoginTimeout
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.ListenAddr == "" {
		opts.ListenAddr = "127.0.0.1:0"
	}
	log := opts.Logger
	resource, err := Resource(opts.APIHost)
	if err != nil {
		return nil, err
	}

	md, err := Discover(ctx, opts.HTTPClient, opts.APIHost)
	if err != nil {
		return nil, err
	}
	log.Info("authorization server found", "issuer", md.Issuer, "metadata", md.Discovered)
	if opts.Device && !offersDevice(md) {
		return nil, fmt.Errorf("auth: the card service at %s offers no device sign-in (its metadata names no device_authorization_endpoint): run login --no-browser and paste back the address the browser ends on, or set CARDWRITER_TOKEN", apiHostOf(resource))
	}
	reg, err := registration(ctx, opts, md)
	if err != nil {
		return nil, err
	}
	if opts.Device {
		return loginDevice(ctx, opts, md, reg, resource)
	}

	ln, err := listenLoopback(opts.ListenAddr)
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	redirectURI := "http://127.0.0.1:" + strconv.Itoa(port) + callbackPath
	state := randomString()
	verifier := oauth2.GenerateVerifier()
	cfg := oauthConfig(md, reg.ClientID, redirectURI)
	authURL := cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", resource))

	cb := newCallback(state, md)
	srv := &http.Server{Handler: cb, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()

	fmt.Fprintf(opts.Out, "To sign in to %s, open this address in your browser:\n\n  %s\n\n", apiHostOf(resource), authURL)
	if opts.OpenBrowser != nil {
		if err := opts.OpenBrowser(authURL); err != nil {
			fmt.Fprintf(opts.Out, "The browser could not be opened (%v); open the address above yourself.\n", err)
		}
	}
	if opts.Paste != nil {
		fmt.Fprintf(opts.Out, "If the browser runs on another machine (over SSH, say), it ends on a page that does not load,\n"+
			"at an address starting with %s: copy that address from the address bar,\npaste it here and press Enter.\n", redirectURI)
		if offersDevice(md) {
			fmt.Fprintln(opts.Out, "(This card service also offers `login --device`: a code typed on any device, nothing to paste.)")
		}
		go readPasted(opts.Paste, opts.Out, cb)
	}
	fmt.Fprintf(opts.Out, "Waiting up to %s for the sign-in to finish in the browser...\n", opts.Timeout)
	log.Info("waiting for the browser", "redirect_uri", redirectURI, "timeout", opts.Timeout)

	g, err := wait(ctx, opts, cb, func(code string) (*Grant, error) {
		return finish(ctx, opts, md, reg, cfg, code, verifier, resource)
	})
	cb.done(err) // the page the browser waits on says how it ended; later requests are refused
	if err != nil {
		return nil, err
	}
	log.Info("signed in", "grant", *g)
	return g, nil
}

// wait waits for the browser's answer until the time limit, then finishes with its code.
func wait(ctx context.Context, opts LoginOptions, cb *callback, finish func(code string) (*Grant, error)) (*Grant, error) {
	timer := time.NewTimer(opts.Timeout)
	defer timer.Stop()
	select {
	case code := <-cb.codes:
		return finish(code)
	case err := <-cb.failures:
		return nil, err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
		return nil, fmt.Errorf("auth: no sign-in came back from the browser within %s; run login again", opts.Timeout)
	}
}

// registration returns the client kept for the issuer, registering one when there is none.
func registration(ctx context.Context, opts LoginOptions, md *Metadata) (*Registration, error) {
	d, err := opts.Store.Load()
	if err != nil {
		return nil, err
	}
	if r := d.Client(md.Issuer); r != nil && r.usable() && (!opts.Device || slices.Contains(r.GrantTypes, DeviceGrantType)) {
		if clientKnown(ctx, opts.HTTPClient, md, r.ClientID) {
			opts.Logger.Debug("using the registered client", "issuer", md.Issuer, "client_id", r.ClientID)
			return r, nil
		}
		// A server that lost its registrations (a sandbox restarted without --data, say)
		// would show an "unknown application" page in the browser: register anew.
		opts.Logger.Info("the authorization server no longer knows the registered client; registering again", "issuer", md.Issuer, "client_id", r.ClientID)
	}
	reg, err := Register(ctx, opts.HTTPClient, md, opts.Now())
	if err != nil {
		return nil, err
	}
	if err := opts.Store.Update(ctx, func(d *Data) error { d.PutClient(*reg); return nil }); err != nil {
		return nil, err
	}
	opts.Logger.Info("client registered", "issuer", md.Issuer, "client_id", reg.ClientID)
	return reg, nil
}

// finish exchanges the code and saves the grant.
func finish(ctx context.Context, opts LoginOptions, md *Metadata, reg *Registration, cfg *oauth2.Config, code, verifier, resource string) (*Grant, error) {
	now := opts.Now()
	tok, err := exchange(ctx, opts.HTTPClient, cfg, code, verifier, resource)
	if err != nil {
		var oe *OAuthError
		if errors.As(err, &oe) && oe.Code == "invalid_client" {
			// The server forgot the client: register anew at the next login.
			_ = opts.Store.Update(ctx, func(d *Data) error { d.DeleteClient(md.Issuer); return nil })
			return nil, fmt.Errorf("auth: the authorization server no longer knows this client (%w); run login again to register it anew", err)
		}
		return nil, fmt.Errorf("auth: exchange the authorization code: %w", err)
	}
	return saveGrant(ctx, opts, md, reg, tok, resource, now)
}

// saveGrant saves the tokens of a sign-in as the grant for resource, replacing (and revoking)
// the ones before it.
func saveGrant(ctx context.Context, opts LoginOptions, md *Metadata, reg *Registration, tok *oauth2.Token, resource string, now time.Time) (*Grant, error) {
	g := Grant{
		Issuer: md.Issuer, Resource: resource, ClientID: reg.ClientID,
		TokenEndpoint: md.TokenEndpoint, RevocationEndpoint: md.RevocationEndpoint,
		TokenType:   "Bearer",
		AccessToken: upstream.Token(tok.AccessToken), RefreshToken: upstream.Token(tok.RefreshToken),
		ObtainedAt: now.UTC(),
	}
	if !tok.Expiry.IsZero() {
		g.Expiry = tok.Expiry.UTC()
	}
	if sc, ok := tok.Extra("scope").(string); ok {
		g.Scope = sc
	}
	var replaced []Grant
	if err := opts.Store.Update(ctx, func(d *Data) error {
		replaced = d.DeleteGrants(resource)
		d.PutGrant(g)
		return nil
	}); err != nil {
		return nil, err
	}
	// The sign-ins this one replaces are ended at the server too (best effort), so that no
	// refresh token outlives its place in the store.
	for _, old := range replaced {
		if old.RefreshToken == "" || old.RefreshToken == g.RefreshToken {
			continue
		}
		if err := revoke(ctx, opts.HTTPClient, old.RevocationEndpoint, old.ClientID, old.RefreshToken, "refresh_token"); err != nil {
			opts.Logger.Debug("the replaced sign-in could not be revoked", "grant", old, "err", err)
		}
	}
	return &g, nil
}

// clientKnown asks the token endpoint whether it still knows clientID, with a refresh token
// that cannot exist: a server that forgot the client answers invalid_client (RFC 6749 section
// 5.2), one that knows it invalid_grant. Any other outcome counts as known.
func clientKnown(ctx context.Context, hc *http.Client, md *Metadata, clientID string) bool {
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := postTokenForm(tctx, hc, md.TokenEndpoint, url.Values{
		"grant_type": {"refresh_token"}, "refresh_token": {"cardwriter-mcp-client-check-" + randomString()[:8]}, "client_id": {clientID},
	})
	var oe *OAuthError
	return !errors.As(err, &oe) || oe.Code != "invalid_client"
}

// listenLoopback listens on a 127.0.0.1 address (RFC 8252 section 7.3: the IP literal, not
// "localhost", which could resolve elsewhere).
func listenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" {
		return nil, fmt.Errorf("auth: the redirect listener must be on 127.0.0.1, not %q", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("auth: listen for the browser's redirect: %w", err)
	}
	return ln, nil
}

// randomString returns 256 random bits, base64url (the state).
func randomString() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// callback receives the browser's redirect. It accepts exactly one answer carrying the
// expected state: a request with another state (or none) is refused with an error page and the
// wait goes on, so a stray or forged request cannot end the sign-in; once an answer was taken,
// every later request, the same state included, is refused.
type callback struct {
	state  string
	issuer string
	needIs bool // the server promised the iss parameter (RFC 9207)

	codes    chan string
	failures chan error

	mu       sync.Mutex
	taken    bool
	closed   bool
	outcome  chan error // the result of the exchange, for the page shown to the browser
	finished bool
}

func newCallback(state string, md *Metadata) *callback {
	return &callback{
		state: state, issuer: md.Issuer, needIs: md.AuthorizationResponseIssParameterSupported,
		codes: make(chan string, 1), failures: make(chan error, 1), outcome: make(chan error, 1),
	}
}

// done ends the wait: the page waiting for the exchange gets its result, and every later
// request is refused.
func (c *callback) done(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if !c.finished {
		c.finished = true
		c.outcome <- err
	}
}

func (c *callback) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != callbackPath {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		page(w, http.StatusMethodNotAllowed, "Wrong method", "This address only takes the browser's return from the sign-in page.")
		return
	}
	if ok, status, title, msg := c.receive(r.URL.Query()); !ok {
		page(w, status, title, msg)
		return
	}
	var err error
	select {
	case err = <-c.outcome:
	case <-r.Context().Done():
		return
	}
	if err != nil {
		page(w, http.StatusOK, "Sign-in failed", "cardwriter-mcp could not finish signing in; the terminal says why. You can close this tab.")
		return
	}
	page(w, http.StatusOK, "Signed in", "cardwriter-mcp is signed in to the card service. You can close this tab.")
}

// receive takes the answer of the authorization server (the redirect's query): with the
// expected state and a code, the code goes to the wait and ok is true; otherwise the page to
// show says why it was refused (an error answer also ends the wait).
func (c *callback) receive(q url.Values) (ok bool, status int, title, message string) {
	c.mu.Lock()
	switch {
	case c.taken || c.closed:
		c.mu.Unlock()
		return false, http.StatusBadRequest, "Sign-in already finished",
			"cardwriter-mcp has already received an answer for this sign-in and refuses any other. If you did not expect this page, you can close it."
	case len(q["state"]) != 1 || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(c.state)) != 1:
		c.mu.Unlock()
		return false, http.StatusBadRequest, "Unknown sign-in",
			"This answer does not belong to the sign-in cardwriter-mcp is waiting for (its state does not match), so it was ignored. Finish the sign-in in the window it opened."
	}
	c.taken = true
	c.mu.Unlock()

	if iss := q.Get("iss"); (iss != "" && strings.TrimSuffix(iss, "/") != c.issuer) || (iss == "" && c.needIs) {
		c.failures <- errors.New("auth: the sign-in answer came from another authorization server (iss does not match, RFC 9207): refused")
		return false, http.StatusBadRequest, "Sign-in refused", "The answer did not come from the expected card service, so it was refused. Nothing was saved."
	}
	if e := q.Get("error"); e != "" {
		msg := Printable(e, 64)
		if d := q.Get("error_description"); d != "" {
			msg += ": " + Printable(d, 200)
		}
		c.failures <- fmt.Errorf("auth: the card service did not grant access (%s)", msg)
		return false, http.StatusOK, "Sign-in not completed", "The card service did not grant access (" + msg + "). You can close this tab."
	}
	code := q.Get("code")
	if code == "" || len(q["code"]) != 1 {
		c.failures <- errors.New("auth: the sign-in answer carried no authorization code")
		return false, http.StatusBadRequest, "Sign-in failed", "The answer carried no authorization code. Run login again."
	}
	c.codes <- code
	return true, 0, "", ""
}

// readPasted reads the addresses (or codes) a person pastes, each line given to cb as the
// browser's redirect would be, until one is taken; a refused one is explained on out.
func readPasted(in io.Reader, out io.Writer, cb *callback) {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var q url.Values
		switch {
		case strings.Contains(line, "?"):
			u, err := url.Parse(line)
			if err != nil {
				fmt.Fprintln(out, "That is not an address; paste the whole address the browser shows.")
				continue
			}
			q = u.Query()
		case strings.Contains(line, "="):
			q, _ = url.ParseQuery(line)
		default: // the code alone: it answers this sign-in
			q = url.Values{"code": {line}, "state": {cb.state}, "iss": {cb.issuer}}
		}
		ok, _, title, msg := cb.receive(q)
		if ok {
			fmt.Fprintln(out, "Received; finishing the sign-in...")
			return
		}
		fmt.Fprintf(out, "%s: %s\n", title, msg)
		if title != "Unknown sign-in" {
			return // the sign-in ended
		}
	}
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer"><title>{{.Title}} · cardwriter-mcp</title></head>
<body style="font-family:system-ui,sans-serif;max-width:34rem;margin:3rem auto;padding:0 1rem">
<h1>{{.Title}}</h1><p>{{.Message}}</p></body></html>
`))

// page answers with a small HTML page that loads nothing and cannot be framed; the address
// (which holds the code) is not sent anywhere as a referrer.
func page(w http.ResponseWriter, status int, title, message string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.WriteHeader(status)
	_ = pageTemplate.Execute(w, map[string]string{"Title": title, "Message": message})
}
