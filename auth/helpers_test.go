package auth_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/auth"
	"github.com/cardwriter/cardwriter-mcp/auth/authtest"
	"github.com/cardwriter/cardwriter-mcp/sandbox"
)

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testLogger returns a Debug-level JSON logger whose output is checked for secrets at the end
// of the test.
func testLogger(t *testing.T, secrets *secretSet) (*slog.Logger, *syncBuffer) {
	t.Helper()
	buf := &syncBuffer{}
	t.Cleanup(func() { secrets.check(t, "log output", buf.String()) })
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// tokenShaped matches what a token, code, state or verifier of 32 random bytes looks like.
var tokenShaped = regexp.MustCompile(`[A-Za-z0-9_-]{40,}`)

// bearerValue matches an Authorization header's value.
var bearerValue = regexp.MustCompile(`(?i)bearer\s+[A-Za-z0-9._~+/-]{20,}`)

// secretSet collects the secrets a test has seen, to look for them in output.
type secretSet struct {
	mu sync.Mutex
	s  []string
}

func (s *secretSet) add(v ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range v {
		if x != "" {
			s.s = append(s.s, x)
		}
	}
}

func (s *secretSet) addGrant(g auth.Grant) { s.add(g.AccessToken.Reveal(), g.RefreshToken.Reveal()) }

// check fails when out holds a known secret or anything token-shaped.
func (s *secretSet) check(t *testing.T, what, out string) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.s {
		if strings.Contains(out, x) {
			t.Errorf("%s contains a secret (%.6s…)", what, x)
		}
	}
	if m := tokenShaped.FindString(out); m != "" {
		t.Errorf("%s contains a token-shaped string %.8s…", what, m)
	}
	if m := bearerValue.FindString(out); m != "" {
		t.Errorf("%s holds an Authorization header value: %.12s…", what, m)
	}
}

// clock is a settable clock for the sandbox.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// server is a sandbox served over HTTP on a loopback port.
type server struct {
	svc        *sandbox.Service
	URL        string
	clock      *clock
	tokenCalls atomic.Int64 // POST /oauth/token requests
	tokenDelay atomic.Int64 // nanoseconds each token request is held back
}

// newSandbox starts the sandbox (API and OAuth server) with a clock that starts now.
func newSandbox(t *testing.T, opts sandbox.Options) *server {
	t.Helper()
	var h http.Handler
	s := &server{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/oauth/token" {
			s.tokenCalls.Add(1)
			time.Sleep(time.Duration(s.tokenDelay.Load()))
		}
		h.ServeHTTP(w, r)
	}))
	c := &clock{t: time.Now()}
	opts.BaseURL = "http://" + srv.Listener.Addr().String()
	if opts.Clock == nil {
		opts.Clock = c.Now
	}
	opts.CheckResponses = true
	svc, err := sandbox.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	h = svc.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	s.svc, s.URL, s.clock = svc, srv.URL, c
	return s
}

// browserResult is how a scripted browser's sign-in ended.
type browserResult struct {
	page *authtest.Page
	err  error
}

// playBrowser returns an OpenBrowser function that signs in through the pages in the
// background (pressing decide on the consent page) and reports how it went.
func playBrowser(decide string) (func(string) error, <-chan browserResult) {
	done := make(chan browserResult, 1)
	return func(authURL string) error {
		go func() {
			p, err := authtest.New().SignIn(authURL, "Sign in", decide)
			done <- browserResult{p, err}
		}()
		return nil
	}, done
}

// login signs in to srv through a scripted browser that allows access.
func login(t *testing.T, srv *server, store *auth.Store, logger *slog.Logger, secrets *secretSet) *auth.Grant {
	t.Helper()
	open, done := playBrowser("allow")
	var out syncBuffer
	g, err := auth.Login(context.Background(), auth.LoginOptions{
		APIHost: srv.URL, Store: store, Logger: logger, Timeout: 30 * time.Second, Out: &out, OpenBrowser: open,
	})
	if err != nil {
		t.Fatalf("Login: %v\n%s", err, out.String())
	}
	res := <-done
	if res.err != nil {
		t.Fatalf("browser: %v", res.err)
	}
	if res.page.Status != http.StatusOK || res.page.Title() != "Signed in" {
		t.Errorf("the browser ended on %d %q", res.page.Status, res.page.Title())
	}
	secrets.addGrant(*g)
	return g
}

func newStore(t *testing.T) *auth.Store {
	t.Helper()
	s, err := auth.NewStore(t.TempDir() + "/cardwriter-mcp")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fmtAll prints v with every common verb.
func fmtAll(v any) string {
	var sb strings.Builder
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		sb.WriteString(fmt.Sprintf(f, v))
		sb.WriteByte('\n')
	}
	return sb.String()
}
