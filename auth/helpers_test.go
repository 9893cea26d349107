package auth_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/auth"
	"github.com/cardwriter/cardwriter-mcp/auth/authtest"
	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
)

// testLogger returns a Debug-level JSON logger whose output is checked for secrets at the end
// of the test.
func testLogger(t *testing.T, secrets *secretSet) (*slog.Logger, *authtest.LogBuffer) {
	t.Helper()
	buf := &authtest.LogBuffer{}
	t.Cleanup(func() { secrets.Check(t, "log output", buf.String()) })
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// secretSet collects the secrets a test has seen, to look for them in output.
type secretSet struct{ authtest.Secrets }

func (s *secretSet) addGrant(g auth.Grant) { s.Add(g.AccessToken.Reveal(), g.RefreshToken.Reveal()) }

// server is a sandbox served over HTTP on a loopback port.
type server struct {
	svc        *sandbox.Service
	URL        string
	clock      *authtest.Clock
	tokenCalls atomic.Int64 // POST /oauth/token requests
	tokenDelay atomic.Int64 // nanoseconds each token request is held back
}

// newSandbox starts the sandbox (API and OAuth server) with a clock that starts now.
func newSandbox(t *testing.T, opts sandbox.Options) *server {
	t.Helper()
	s := &server{clock: authtest.NewClock(time.Now())}
	if opts.Clock == nil {
		opts.Clock = s.clock.Now
	}
	opts.CheckResponses = true
	s.URL = authtest.Serve(t, func(url string) http.Handler {
		opts.BaseURL = url
		svc, err := sandbox.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		s.svc = svc
		h := svc.Handler()
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/oauth/token" {
				s.tokenCalls.Add(1)
				time.Sleep(time.Duration(s.tokenDelay.Load()))
			}
			h.ServeHTTP(w, r)
		})
	})
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
	var out authtest.LogBuffer
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
