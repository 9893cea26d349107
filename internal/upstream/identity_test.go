package upstream_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// switchingToken is a token source whose token changes at each Refresh, as a stdio sign-in's
// does when its access token is refreshed.
type switchingToken struct {
	mu     sync.Mutex
	tokens []string
}

func (s *switchingToken) Token(context.Context) (upstream.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return upstream.Token(s.tokens[0]), nil
}

func (s *switchingToken) Refresh(context.Context, upstream.Token) (upstream.Token, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = s.tokens[1:]
	return upstream.Token(s.tokens[0]), nil
}

// TestPrincipalIsTheUserID: the principal of a call is the card service's user id, the same
// before and after a token refresh; GET /me is asked once per token; the identity an HTTP
// authorization puts in the context wins without asking; and the per-user limits count the
// refreshed token's calls against the same user.
func TestPrincipalIsTheUserID(t *testing.T) {
	t.Parallel()
	var meCalls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.Header.Get("Authorization") {
		case "Bearer first", "Bearer second":
		default:
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"unauthorized","message":"no"}`))
			return
		}
		if r.URL.Path == "/open/v1/me" {
			meCalls.Add(1)
			_, _ = w.Write([]byte(`{"userId":"u_alice","nickname":"Alice","scopes":["card:write"]}`))
			return
		}
		_, _ = w.Write([]byte(`{"list":[],"slots":{"used":0,"max":5},"ttlHours":24}`))
	}))
	defer srv.Close()
	ts := &switchingToken{tokens: []string{"first", "second", "first"}}
	c, err := upstream.New(srv.URL, ts, upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 1}),
		upstream.WithLimits(upstream.Limits{UserRate: 0.001, UserBurst: 1}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before := c.Principal(ctx)
	if before != "u_alice" || c.Principal(ctx) != "u_alice" || meCalls.Load() != 1 {
		t.Fatalf("principal %q, GET /me asked %d times; want u_alice, once", before, meCalls.Load())
	}
	if _, err := ts.Refresh(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if after := c.Principal(ctx); after != before || meCalls.Load() != 2 {
		t.Errorf("after a refresh: principal %q (before %q), GET /me asked %d times; want the same user, asked once more", after, before, meCalls.Load())
	}
	// Once the user of a token is known, its calls count against the user: a call with the
	// second token takes the user's burst of 1, and one with the first token is over it.
	if err := c.Call(ctx, "listWorldbooks", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Refresh(ctx, ""); err != nil {
		t.Fatal(err)
	}
	var apiErr *upstream.Error
	if err := c.Call(ctx, "listWorldbooks", nil, nil, nil); !errors.As(err, &apiErr) || apiErr.Code != "rate_limited" {
		t.Errorf("a call of the same user with another token past its burst: %v, want rate_limited", err)
	}

	id := &upstream.Identity{UserID: "u_bob", GrantID: "g_1", ClientID: "mcpc_1"}
	if got := c.Identity(upstream.WithIdentity(ctx, id)); got != *id || meCalls.Load() != 2 {
		t.Errorf("with an identity in the context: %+v (GET /me asked %d times)", got, meCalls.Load())
	}
	nobody, _ := upstream.New(srv.URL, upstream.ContextTokenSource{})
	if p := nobody.Principal(ctx); p != "" {
		t.Errorf("without a token: %q, want \"\"", p)
	}
}
