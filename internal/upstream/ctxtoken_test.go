package upstream_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

func TestContextTokenSource(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer alice" && r.Header.Get("Authorization") != "Bearer new-1" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(env401))
			return
		}
		_, _ = w.Write([]byte(`{"userId":"u_1","nickname":"A","scopes":["mcp:card-writer"]}`))
	}))
	defer srv.Close()
	c, err := upstream.New(srv.URL, upstream.ContextTokenSource{}, upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// No token source in the context: nobody is signed in, nothing is sent.
	_, err = c.GetMe(ctx)
	var apiErr *upstream.Error
	if !errors.As(err, &apiErr) || apiErr.Code != "unauthorized" || len(seen) != 0 {
		t.Fatalf("without a token source: %v (requests %d)", err, len(seen))
	}
	// Each call uses the token source of its own context.
	if me, err := c.GetMe(upstream.WithTokenSource(ctx, upstream.StaticToken("alice"))); err != nil || me.UserID != "u_1" {
		t.Fatalf("with alice's token: %v %v", me, err)
	}
	// A token source that cannot refresh: the refusal is final, one request.
	_, err = c.GetMe(upstream.WithTokenSource(ctx, upstream.StaticToken("bob")))
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized || !strings.Contains(apiErr.Message, "authorize") {
		t.Fatalf("refused token: %v", err)
	}
	// A Refresher in the context is asked for a new token.
	rs := &refreshingSource{}
	if me, err := c.GetMe(upstream.WithTokenSource(ctx, rs)); err != nil || me.UserID != "u_1" {
		t.Fatalf("with a refresher: %v %v", me, err)
	}
	if n, rejected := rs.calls(); n != 1 || len(rejected) != 1 || rejected[0] != "old" {
		t.Errorf("refresh calls %d, rejected %v", n, rejected)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != "Bearer alice,Bearer bob,Bearer old,Bearer new-1" {
		t.Errorf("Authorization headers sent: %v", seen)
	}
}
