package tools

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// rotatingTokens is a signed-in user's token source whose access token is replaced at each
// Refresh, as a stdio sign-in's is.
type rotatingTokens struct {
	mu  sync.Mutex
	gen int
}

func (r *rotatingTokens) Token(context.Context) (upstream.Token, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return upstream.Token("rotating-token-" + string(rune('a'+r.gen))), nil
}

func (r *rotatingTokens) Refresh(ctx context.Context, _ upstream.Token) (upstream.Token, error) {
	r.mu.Lock()
	r.gen++
	r.mu.Unlock()
	return r.Token(ctx)
}

// asDemoUser lets the sandbox take every rotating token for its demo user's.
func asDemoUser(demo string) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if strings.HasPrefix(r.Header.Get("Authorization"), "Bearer rotating-token-") {
				r = r.Clone(r.Context())
				r.Header.Set("Authorization", "Bearer "+demo)
			}
			return next.RoundTrip(r)
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestAuditUserStableAcrossRefresh: the audit lines of one user name the same user (the card
// service's user id) before and after the access token was refreshed.
func TestAuditUserStableAcrossRefresh(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return buf.Write(p) })
	tokens := &rotatingTokens{}
	e, _ := newTavernEnv(t, tavernEnvConfig{opts: Options{Audit: slog.New(slog.NewJSONHandler(w, nil))},
		tokens: tokens, wrap: asDemoUser(demoToken)})
	roleID := e.ok("create_card", `{"roleName":"Before"}`)["roleId"].(string)
	if _, err := tokens.Refresh(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	e.ok("set_opening_lines", `{"roleId":"`+roleID+`","roleWelcome":"After the refresh."}`)
	mu.Lock()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	mu.Unlock()
	if len(lines) != 2 {
		t.Fatalf("%d audit lines, want 2:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for i, l := range lines {
		if !strings.Contains(l, `"user":"u_demo"`) {
			t.Errorf("line %d does not name the user u_demo: %s", i, l)
		}
	}
}
