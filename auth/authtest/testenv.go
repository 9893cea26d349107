package authtest

// Pieces of a sign-in test's setting: a settable clock, a log sink, the secrets the test has
// seen (to look for them where they must not be), and a server that knows its address before
// its handler exists (the sandbox's OAuth server names itself in its metadata).

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// Clock is a settable clock, safe for concurrent use. Its Now method is what the sandbox's and
// the proxy's options take.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock that stands at now until it is advanced.
func NewClock(now time.Time) *Clock { return &Clock{now: now} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// LogBuffer is a buffer safe for concurrent writers: a log sink, or a command's output.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TokenShaped matches what a token, code, state or verifier of 32 random bytes looks like in
// base64url.
var TokenShaped = regexp.MustCompile(`[A-Za-z0-9_-]{40,}`)

// bearerValue matches an Authorization header's value.
var bearerValue = regexp.MustCompile(`(?i)bearer\s+[A-Za-z0-9._~+/-]{20,}`)

// Secrets collects the secrets a test has seen (tokens, codes, verifiers, states), to look for
// them in what the code under test writes: logs, errors, printed values. It is safe for
// concurrent use; the zero value is empty.
type Secrets struct {
	mu   sync.Mutex
	list []string
}

// Add adds secrets; empty strings are skipped.
func (s *Secrets) Add(v ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range v {
		if x != "" {
			s.list = append(s.list, x)
		}
	}
}

// CheckKnown fails the test when out (named what in the failure) holds one of the secrets.
func (s *Secrets) CheckKnown(t testing.TB, what, out string) {
	t.Helper()
	for _, p := range s.find(out, false) {
		t.Errorf("%s: %s", what, p)
	}
}

// Check fails the test when out holds one of the secrets, a line with anything token-shaped
// (even a secret the test never saw), or an Authorization header's bearer value.
func (s *Secrets) Check(t testing.TB, what, out string) {
	t.Helper()
	for _, p := range s.find(out, true) {
		t.Errorf("%s: %s", what, p)
	}
}

// find describes each secret in out; with shapes, token-shaped lines and bearer values too.
func (s *Secrets) find(out string, shapes bool) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var found []string
	for _, x := range s.list {
		if strings.Contains(out, x) {
			found = append(found, fmt.Sprintf("holds a secret (%.6s…)", x))
		}
	}
	if !shapes {
		return found
	}
	for line := range strings.SplitSeq(out, "\n") {
		if m := TokenShaped.FindString(line); m != "" {
			found = append(found, fmt.Sprintf("a line holds a token-shaped string %.8s…: %.300s", m, line))
		}
	}
	if m := bearerValue.FindString(out); m != "" {
		found = append(found, fmt.Sprintf("holds an Authorization header value: %.12s…", m))
	}
	return found
}

// Serve starts an HTTP server on a loopback port whose handler needs the server's own address:
// newHandler gets the server's URL ("http://127.0.0.1:port") and returns the handler. It returns
// the URL; the server is closed when the test ends.
func Serve(t testing.TB, newHandler func(url string) http.Handler) string {
	t.Helper()
	var h http.Handler
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	h = newHandler("http://" + srv.Listener.Addr().String())
	srv.Start()
	return srv.URL
}
