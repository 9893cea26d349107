package upstream_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// TestLimits: a call over a limit is refused at once with a retryable rate_limited error,
// and the limits of one user do not hold back another.
func TestLimits(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/open/v1/worldbook/list" {
			<-release // a slow call, held until the test lets it go
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"list":[],"slots":{"used":0,"max":5},"ttlHours":24}`))
	}))
	defer srv.Close()
	defer close(release)

	newClient := func(t *testing.T, l upstream.Limits) *upstream.Client {
		c, err := upstream.New(srv.URL, upstream.ContextTokenSource{}, upstream.WithLimits(l), upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 1}))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	as := func(token string) context.Context {
		return upstream.WithTokenSource(context.Background(), upstream.StaticToken(token))
	}
	limited := func(t *testing.T, err error, want string) {
		t.Helper()
		var apiErr *upstream.Error
		if !errors.As(err, &apiErr) || apiErr.Code != "rate_limited" || !apiErr.Retryable || apiErr.RetryAfter <= 0 {
			t.Fatalf("%v, want a retryable rate_limited error", err)
		}
		if !strings.Contains(apiErr.Message, want) {
			t.Errorf("message %q lacks %q", apiErr.Message, want)
		}
	}
	slowCall := func(c *upstream.Client, token string) chan error {
		done := make(chan error, 1)
		go func() { done <- c.Call(as(token), "listWorldbooks", nil, nil, nil) }()
		time.Sleep(50 * time.Millisecond) // under way
		return done
	}

	t.Run("per user concurrency", func(t *testing.T) {
		c := newClient(t, upstream.Limits{UserConcurrency: 1, Wait: 50 * time.Millisecond})
		slowCall(c, "alice")
		limited(t, c.Call(as("alice"), "listTrialCards", nil, nil, nil), "at most 1 card service calls under way")
		if err := c.Call(as("bob"), "listTrialCards", nil, nil, nil); err != nil {
			t.Errorf("another user was held back: %v", err)
		}
	})
	t.Run("total concurrency", func(t *testing.T) {
		c := newClient(t, upstream.Limits{Concurrency: 1, Wait: 50 * time.Millisecond})
		slowCall(c, "alice")
		limited(t, c.Call(as("bob"), "listTrialCards", nil, nil, nil), "as many card service calls under way as it allows")
	})
	t.Run("per user rate", func(t *testing.T) {
		c := newClient(t, upstream.Limits{UserRate: 1, UserBurst: 1})
		if err := c.Call(as("alice"), "listTrialCards", nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		limited(t, c.Call(as("alice"), "listTrialCards", nil, nil, nil), "at most 1 card service calls per second")
		if err := c.Call(as("bob"), "listTrialCards", nil, nil, nil); err != nil {
			t.Errorf("another user was held back: %v", err)
		}
	})
}
