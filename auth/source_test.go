package auth_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/auth"
	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// expire marks the saved access token as expired (the server still accepts it).
func expire(t *testing.T, store *auth.Store, resource string) {
	t.Helper()
	err := store.Update(context.Background(), func(d *auth.Data) error {
		g := d.Latest(resource)
		g.Expiry = time.Now().Add(-time.Minute)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRefreshSingleFlight: many callers of one source share one refresh.
func TestRefreshSingleFlight(t *testing.T) {
	t.Parallel()
	secrets := &secretSet{}
	logger, _ := testLogger(t, secrets)
	srv := newSandbox(t, sandbox.Options{})
	srv.tokenDelay.Store(int64(50 * time.Millisecond))
	store := newStore(t)
	g := login(t, srv, store, logger, secrets)
	expire(t, store, g.Resource)
	src, err := auth.NewSource(store, srv.URL, auth.SourceOptions{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	run := func(f func() (upstream.Token, error)) []upstream.Token {
		var wg sync.WaitGroup
		toks := make([]upstream.Token, 20)
		for i := range toks {
			wg.Go(func() {
				tok, err := f()
				if err != nil {
					t.Errorf("caller %d: %v", i, err)
				}
				toks[i] = tok
			})
		}
		wg.Wait()
		for _, tok := range toks[1:] {
			if tok != toks[0] {
				t.Fatal("callers got different tokens")
			}
		}
		return toks
	}
	before := srv.tokenCalls.Load()
	toks := run(func() (upstream.Token, error) { return src.Token(ctx) })
	if n := srv.tokenCalls.Load() - before; n != 1 {
		t.Errorf("%d token requests for 20 callers of an expired token, want 1", n)
	}
	if toks[0] == g.AccessToken {
		t.Error("the expired token was returned")
	}
	secrets.Add(toks[0].Reveal())

	// 20 calls refused with the same token: one refresh.
	before = srv.tokenCalls.Load()
	rejected := toks[0]
	toks = run(func() (upstream.Token, error) { return src.Refresh(ctx, rejected) })
	if n := srv.tokenCalls.Load() - before; n != 1 {
		t.Errorf("%d token requests for 20 refusals of one token, want 1", n)
	}
	if toks[0] == rejected {
		t.Error("Refresh returned the refused token")
	}
	secrets.Add(toks[0].Reveal())
	checkGrantWorks(t, srv, store, logger, secrets)
}

// checkGrantWorks forces a refresh of the saved grant (its refresh token must still be the
// live one) and calls the API with the result.
func checkGrantWorks(t *testing.T, srv *server, store *auth.Store, _ *slog.Logger, secrets *secretSet) {
	t.Helper()
	src, err := auth.NewSource(store, srv.URL, auth.SourceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cur, err := src.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := src.Refresh(ctx, cur)
	if err != nil {
		t.Fatalf("the saved grant no longer refreshes: %v", err)
	}
	secrets.Add(tok.Reveal())
	c, _ := upstream.New(srv.URL, src)
	if _, err := c.GetMe(ctx); err != nil {
		t.Fatalf("GetMe with the saved grant: %v", err)
	}
	g, _ := src.Grant(ctx)
	secrets.addGrant(g)
}

// TestRefreshAcrossSources: sources that share a store (as processes do) refresh once; the
// others take the new token from the store instead of spending the rotated refresh token.
func TestRefreshAcrossSources(t *testing.T) {
	t.Parallel()
	secrets := &secretSet{}
	logger, _ := testLogger(t, secrets)
	srv := newSandbox(t, sandbox.Options{})
	srv.tokenDelay.Store(int64(100 * time.Millisecond))
	store := newStore(t)
	g := login(t, srv, store, logger, secrets)
	expire(t, store, g.Resource)
	ctx := context.Background()
	var wg sync.WaitGroup
	toks := make([]upstream.Token, 6)
	before := srv.tokenCalls.Load()
	for i := range toks {
		// Each source has its own Store value: only the file lock is shared.
		st, err := auth.NewStore(store.Dir())
		if err != nil {
			t.Fatal(err)
		}
		src, err := auth.NewSource(st, srv.URL, auth.SourceOptions{Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			c, _ := upstream.New(srv.URL, src)
			if _, err := c.GetMe(ctx); err != nil {
				t.Errorf("source %d: %v", i, err)
			}
			toks[i], _ = src.Token(ctx)
		})
	}
	wg.Wait()
	if n := srv.tokenCalls.Load() - before; n != 1 {
		t.Errorf("%d token requests from 6 sources, want 1", n)
	}
	for _, tok := range toks {
		secrets.Add(tok.Reveal())
		if tok != toks[0] {
			t.Error("sources hold different tokens")
		}
	}
	checkGrantWorks(t, srv, store, logger, secrets)
}

// TestRefreshAcrossProcesses: processes (this test binary, run again) refreshing the same
// expired grant at once do not lose it.
func TestRefreshAcrossProcesses(t *testing.T) {
	t.Parallel()
	secrets := &secretSet{}
	logger, _ := testLogger(t, secrets)
	srv := newSandbox(t, sandbox.Options{})
	srv.tokenDelay.Store(int64(200 * time.Millisecond))
	store := newStore(t)
	g := login(t, srv, store, logger, secrets)
	expire(t, store, g.Resource)
	before := srv.tokenCalls.Load()
	var wg sync.WaitGroup
	outs := make([]string, 4)
	for i := range outs {
		cmd := child(t, "refresh", store.Dir(), srv.URL)
		wg.Go(func() {
			out, err := cmd.CombinedOutput()
			outs[i] = string(out)
			if err != nil || !strings.Contains(string(out), "child ok") {
				t.Errorf("process %d: %v\n%s", i, err, out)
			}
		})
	}
	wg.Wait()
	if n := srv.tokenCalls.Load() - before; n != 1 {
		t.Errorf("%d token requests from 4 processes, want 1", n)
	}
	for _, out := range outs {
		secrets.Check(t, "child output", out)
	}
	checkGrantWorks(t, srv, store, logger, secrets)
}

// child returns a command running this test binary as a helper process.
func child(t *testing.T, role, dir, apiHost string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "AUTH_TEST_CHILD="+role, auth.EnvConfigDir+"="+dir, "AUTH_TEST_API="+apiHost)
	return cmd
}

// TestHelperProcess is the body of the helper processes; it does nothing in a normal run.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv("AUTH_TEST_CHILD")
	if role == "" {
		t.Skip("helper process")
	}
	store, err := auth.NewStore("")
	if err != nil {
		fmt.Println("child:", err)
		os.Exit(1)
	}
	ctx := context.Background()
	switch role {
	case "refresh":
		src, err := auth.NewSource(store, os.Getenv("AUTH_TEST_API"), auth.SourceOptions{})
		if err != nil {
			fmt.Println("child:", err)
			os.Exit(1)
		}
		c, _ := upstream.New(os.Getenv("AUTH_TEST_API"), src)
		if _, err := c.GetMe(ctx); err != nil {
			fmt.Println("child:", err)
			os.Exit(1)
		}
	case "lock":
		unlock, err := store.Lock(ctx)
		if err != nil {
			fmt.Println("child:", err)
			os.Exit(1)
		}
		fmt.Println("locked")
		_, _ = io.Copy(io.Discard, os.Stdin) // hold the lock until the parent closes stdin
		unlock()
	}
	fmt.Println("child ok")
	os.Exit(0)
}

// TestLockAcrossProcesses: the store's lock excludes another process, and is free again when
// that process releases it.
func TestLockAcrossProcesses(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	cmd := child(t, "lock", store.Dir(), "")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "locked\n" {
		t.Fatalf("child: %q", line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := store.Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock while another process holds it = %v", err)
	}
	stdin.Close()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	unlock, err := store.Lock(ctx2)
	if err != nil {
		t.Fatalf("Lock after the other process released it: %v", err)
	}
	unlock()
	_ = cmd.Wait()
}

// TestLockInProcess: two Store values on one directory exclude each other.
func TestLockInProcess(t *testing.T) {
	t.Parallel()
	a := newStore(t)
	b, _ := auth.NewStore(a.Dir())
	unlock, err := a.Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := b.Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Lock = %v, want a timeout", err)
	}
	got := make(chan error, 1)
	go func() {
		u, err := b.Lock(context.Background())
		if err == nil {
			u()
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	unlock()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting Lock did not get the lock once it was released")
	}
}

// fakeTokenServer answers token requests with fn.
func fakeTokenServer(t *testing.T, fn http.HandlerFunc) string {
	t.Helper()
	return httptestServer(t, fn)
}

// storeGrant saves a grant for https://api.example at the given token endpoint.
func storeGrant(t *testing.T, store *auth.Store, tokenEndpoint string, expiry time.Time, refresh upstream.Token) auth.Grant {
	t.Helper()
	g := auth.Grant{Issuer: "https://api.example", Resource: "https://api.example/open/v1", ClientID: "c1",
		TokenEndpoint: tokenEndpoint, TokenType: "Bearer", AccessToken: "at-current-0123456789",
		RefreshToken: refresh, Expiry: expiry, ObtainedAt: time.Now()}
	if err := store.Update(context.Background(), func(d *auth.Data) error { d.PutGrant(g); return nil }); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestSourceFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	invalidGrant := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"invalid_grant","error_description":"revoked"}`)
	}
	down := func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, `<html>at-secret-in-a-body</html>`)
	}
	tests := []struct {
		name     string
		handler  http.HandlerFunc
		expiry   time.Duration // of the access token, from now
		refresh  upstream.Token
		wantTok  bool // the current token is returned
		wantAuth bool // an *upstream.AuthError (run login)
	}{
		{"refused", invalidGrant, -time.Minute, "rt-1", false, true},
		{"refused within the margin", invalidGrant, 30 * time.Second, "rt-1", false, true},
		{"server down, token still valid", down, 30 * time.Second, "rt-1", true, false},
		{"server down, token expired", down, -time.Minute, "rt-1", false, false},
		{"no refresh token", down, -time.Minute, "", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			secrets := &secretSet{}
			secrets.Add("at-secret-in-a-body", "at-current-0123456789", "rt-1")
			logger, _ := testLogger(t, secrets)
			store := newStore(t)
			g := storeGrant(t, store, fakeTokenServer(t, tc.handler), time.Now().Add(tc.expiry), tc.refresh)
			src, err := auth.NewSource(store, "https://api.example", auth.SourceOptions{Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			tok, err := src.Token(ctx)
			if tc.wantTok != (err == nil && tok == g.AccessToken) {
				t.Errorf("Token = %v, %v", tok, err)
			}
			var authErr *upstream.AuthError
			if tc.wantAuth != errors.As(err, &authErr) {
				t.Errorf("Token error = %v, want an AuthError: %v", err, tc.wantAuth)
			}
			if tc.wantAuth && !strings.Contains(authErr.Message, "run `cardwriter-mcp login --api-host https://api.example`") {
				t.Errorf("message = %q", authErr.Message)
			}
			if err != nil {
				secrets.Check(t, "error", err.Error())
			}
		})
	}
}

// TestSourceFollowsStore: a sign-out elsewhere ends the source; a new sign-in is taken up.
func TestSourceFollowsStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newStore(t)
	endpoint := fakeTokenServer(t, func(w http.ResponseWriter, _ *http.Request) { t.Error("unexpected token request") })
	g := storeGrant(t, store, endpoint, time.Now().Add(time.Hour), "rt-1")
	src, err := auth.NewSource(store, "https://api.example", auth.SourceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A new sign-in (another client) is saved: the refused token is replaced by its token.
	newer := g
	newer.ClientID, newer.AccessToken, newer.ObtainedAt = "c2", "at-newer-0123456789", time.Now().Add(time.Second)
	if err := store.Update(ctx, func(d *auth.Data) error { d.PutGrant(newer); return nil }); err != nil {
		t.Fatal(err)
	}
	tok, err := src.Refresh(ctx, g.AccessToken)
	if err != nil || tok != newer.AccessToken {
		t.Fatalf("Refresh after a new sign-in = %v, %v", tok, err)
	}
	// Signed out elsewhere.
	if err := store.Update(ctx, func(d *auth.Data) error { d.DeleteGrants(g.Resource); return nil }); err != nil {
		t.Fatal(err)
	}
	_, err = src.Refresh(ctx, tok)
	var authErr *upstream.AuthError
	if !errors.As(err, &authErr) {
		t.Fatalf("Refresh after a sign-out = %v", err)
	}
	if _, err := auth.NewSource(store, "https://api.example", auth.SourceOptions{}); !errors.Is(err, auth.ErrNotSignedIn) {
		t.Errorf("NewSource without a grant = %v", err)
	}
}

func TestSourceContext(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	storeGrant(t, store, "http://127.0.0.1:1/token", time.Now().Add(-time.Minute), "rt-1")
	src, _ := auth.NewSource(store, "https://api.example", auth.SourceOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := src.Token(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Token with a cancelled context = %v", err)
	}
}
