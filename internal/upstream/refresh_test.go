package upstream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

const env401 = `{"error":"unauthorized","message":"The access token is expired."}`

// refreshingSource hands out "old" until Refresh is called, then "new-N"; err makes Refresh fail.
type refreshingSource struct {
	mu       sync.Mutex
	current  string
	refresh  int
	rejected []upstream.Token
	err      error
	tokenErr error
}

func (s *refreshingSource) Token(context.Context) (upstream.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tokenErr != nil {
		return "", s.tokenErr
	}
	if s.current == "" {
		s.current = "old"
	}
	return upstream.Token(s.current), nil
}

func (s *refreshingSource) Refresh(_ context.Context, rejected upstream.Token) (upstream.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refresh++
	s.rejected = append(s.rejected, rejected)
	if s.err != nil {
		return "", s.err
	}
	s.current = fmt.Sprintf("new-%d", s.refresh)
	return upstream.Token(s.current), nil
}

func (s *refreshingSource) calls() (int, []upstream.Token) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refresh, append([]upstream.Token(nil), s.rejected...)
}

func newRefreshClient(t *testing.T, url string, ts upstream.TokenSource, opts ...upstream.Option) (*upstream.Client, *sleeps) {
	t.Helper()
	c, err := upstream.New(url, ts, opts...)
	if err != nil {
		t.Fatal(err)
	}
	sl := &sleeps{}
	upstream.SetSleep(c, sl.sleep)
	return c, sl
}

// TestRefreshOn401 checks one refresh and one retry after a 401, for a non-idempotent
// operation too, with retries disabled, and that the refused token is named.
func TestRefreshOn401(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(401, env401), reply(200, `{"roleId":"r1","roleVisibility":"private","reviewStatus":"draft"}`))
	ts := &refreshingSource{}
	c, sl := newRefreshClient(t, srv.URL, ts, upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 1}))
	if _, _, err := c.CreateCard(context.Background(), upstream.CardCreateInput{RoleName: "Mira"}); err != nil {
		t.Fatalf("CreateCard: %v", err)
	}
	reqs := sc.requests()
	if len(reqs) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(reqs))
	}
	if got := reqs[0].Header.Get("Authorization"); got != "Bearer old" {
		t.Errorf("first Authorization = %q", got)
	}
	if got := reqs[1].Header.Get("Authorization"); got != "Bearer new-1" {
		t.Errorf("retry Authorization = %q", got)
	}
	if !bytes.Equal(reqs[0].Body, reqs[1].Body) {
		t.Errorf("the retry sent another body:\n%s\n%s", reqs[0].Body, reqs[1].Body)
	}
	n, rejected := ts.calls()
	if n != 1 || len(rejected) != 1 || rejected[0].Reveal() != "old" {
		t.Errorf("Refresh calls = %d, rejected = %q", n, rejected)
	}
	if len(sl.delays()) != 0 {
		t.Errorf("the refresh retry waited: %v", sl.delays())
	}
}

// TestRefreshOnlyOnce checks that a second 401 after the refresh is returned as it is.
func TestRefreshOnlyOnce(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(401, env401))
	ts := &refreshingSource{}
	c, _ := newRefreshClient(t, srv.URL, ts)
	_, err := c.GetCard(context.Background(), "r1")
	var apiErr *upstream.Error
	if !errors.As(err, &apiErr) || apiErr.Code != "unauthorized" || apiErr.Message != "The access token is expired." {
		t.Fatalf("err = %v, want the service's 401", err)
	}
	if n := len(sc.requests()); n != 2 {
		t.Errorf("server saw %d requests, want 2 (one retry)", n)
	}
	if n, _ := ts.calls(); n != 1 {
		t.Errorf("Refresh called %d times, want 1", n)
	}
}

// TestRefreshKeepsRetryBudget checks that the refresh retry does not use up the retry policy.
func TestRefreshKeepsRetryBudget(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(401, env401), reply(503, env503), reply(200, cardJSON))
	c, _ := newRefreshClient(t, srv.URL, &refreshingSource{}, upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 2}))
	if _, err := c.GetCard(context.Background(), "r1"); err != nil {
		t.Fatalf("GetCard: %v", err)
	}
	if n := len(sc.requests()); n != 3 {
		t.Errorf("server saw %d requests, want 3", n)
	}
}

// TestNoRefreshWithoutRefresher checks that a plain TokenSource gets the 401 back.
func TestNoRefreshWithoutRefresher(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(401, env401), reply(200, cardJSON))
	c, _ := newClient(t, srv.URL)
	_, err := c.GetCard(context.Background(), "r1")
	var apiErr *upstream.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Fatalf("err = %v, want the 401", err)
	}
	if n := len(sc.requests()); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

// TestNoRefreshOnOtherErrors checks that 403 and a 401 with another code are not refreshed.
func TestNoRefreshOnOtherErrors(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"error":"forbidden","message":"No."}`, `{"error":"insufficient_scope","message":"No."}`} {
		status := 403
		if strings.Contains(body, "scope") {
			status = 401
		}
		srv, _ := serve(t, reply(status, body))
		ts := &refreshingSource{}
		c, _ := newRefreshClient(t, srv.URL, ts)
		if _, err := c.GetCard(context.Background(), "r1"); err == nil {
			t.Fatal("no error")
		}
		if n, _ := ts.calls(); n != 0 {
			t.Errorf("%d %s: Refresh called %d times", status, body, n)
		}
	}
}

// TestRefreshFailures checks what a failed refresh becomes: a sign-in error with the
// AuthError's message, "unavailable" for other failures, the context's error on cancel.
func TestRefreshFailures(t *testing.T) {
	t.Parallel()
	const signIn = "Your card service sign-in has expired or was revoked; run `cardwriter-mcp login` to sign in again."
	dialErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name       string
		err        error
		status     int
		code, text string
	}{
		{"grant dead", fmt.Errorf("refresh: %w", &upstream.AuthError{Message: signIn, Err: errors.New(`invalid_grant`)}), 401, "unauthorized", signIn},
		{"token endpoint down", dialErr, 503, "unavailable", "try again"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			srv, sc := serve(t, reply(401, env401), reply(200, cardJSON))
			c, _ := newRefreshClient(t, srv.URL, &refreshingSource{err: tc.err},
				upstream.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
			_, err := c.GetCard(context.Background(), "r1")
			var apiErr *upstream.Error
			if !errors.As(err, &apiErr) || apiErr.Status != tc.status || apiErr.Code != tc.code || !strings.Contains(apiErr.Message, tc.text) {
				t.Fatalf("err = %#v", err)
			}
			if apiErr.Operation != "getCard" {
				t.Errorf("Operation = %q", apiErr.Operation)
			}
			if n := len(sc.requests()); n != 1 {
				t.Errorf("server saw %d requests, want 1", n)
			}
			assertNoSecret(t, "logs", logs.String())
			if strings.Contains(logs.String(), "Bearer") {
				t.Errorf("logs mention the Authorization header: %s", logs.String())
			}
		})
	}

	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		srv, _ := serve(t, reply(401, env401))
		ctx, cancel := context.WithCancel(context.Background())
		ts := &cancellingSource{cancel: cancel}
		c, _ := newRefreshClient(t, srv.URL, ts)
		_, err := c.GetCard(ctx, "r1")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
}

// cancellingSource cancels the call's context while refreshing.
type cancellingSource struct{ cancel context.CancelFunc }

func (s *cancellingSource) Token(context.Context) (upstream.Token, error) { return "old", nil }

func (s *cancellingSource) Refresh(ctx context.Context, _ upstream.Token) (upstream.Token, error) {
	s.cancel()
	return "", ctx.Err()
}

// TestTokenSourceAuthError checks that a token source asking for a new sign-in (before any
// request) becomes an *Error "unauthorized" with its message, and sends nothing.
func TestTokenSourceAuthError(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(200, cardJSON))
	ts := &refreshingSource{tokenErr: &upstream.AuthError{Message: "Run login.", Err: errors.New("no grant")}}
	c, sl := newRefreshClient(t, srv.URL, ts)
	_, err := c.GetMe(context.Background())
	var apiErr *upstream.Error
	if !errors.As(err, &apiErr) || apiErr.Code != "unauthorized" || apiErr.Message != "Run login." || apiErr.Operation != "getMe" {
		t.Fatalf("err = %#v", err)
	}
	if len(sc.requests()) != 0 || len(sl.delays()) != 0 {
		t.Errorf("requests %d, waits %v", len(sc.requests()), sl.delays())
	}
	if n, _ := ts.calls(); n != 0 {
		t.Errorf("Refresh called %d times", n)
	}
}

// TestTokenSourceFailureIsUnavailable: a token source that fails for another reason (its
// token endpoint is down) makes an *Error "unavailable" that names no cause, and sends nothing.
func TestTokenSourceFailureIsUnavailable(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(200, cardJSON))
	var logs bytes.Buffer
	ts := &refreshingSource{tokenErr: errors.New("the token endpoint answered 502")}
	c, sl := newRefreshClient(t, srv.URL, ts, upstream.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	_, err := c.GetCard(context.Background(), "r1")
	var apiErr *upstream.Error
	if !errors.As(err, &apiErr) || apiErr.Code != "unavailable" || !apiErr.Retryable || apiErr.Operation != "getCard" ||
		!strings.Contains(apiErr.Message, "access token") {
		t.Fatalf("err = %#v", err)
	}
	if len(sc.requests()) != 0 || len(sl.delays()) != 0 {
		t.Errorf("requests %d, waits %v", len(sc.requests()), sl.delays())
	}
	if !strings.Contains(logs.String(), "answered 502") {
		t.Errorf("the cause is not logged: %s", logs.String())
	}
}

func TestAuthErrorText(t *testing.T) {
	t.Parallel()
	cause := errors.New("invalid_grant")
	e := &upstream.AuthError{Message: "Sign in again.", Err: cause}
	if e.Error() != "Sign in again. (invalid_grant)" || !errors.Is(e, cause) {
		t.Errorf("Error = %q, Is = %v", e.Error(), errors.Is(e, cause))
	}
	if (&upstream.AuthError{Message: "Sign in again."}).Error() != "Sign in again." {
		t.Error("AuthError without a cause")
	}
}

var _ http.Handler = (*script)(nil)
