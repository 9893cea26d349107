package upstream_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// secret is the bearer token of every test client; no error, log or printout may contain it.
const secret = "tok-SECRET-4242"

// cardJSON is a schema-valid answer of getCard.
const cardJSON = `{"roleId":"r1","roleName":"Mira","roleDesc":"A lighthouse keeper.","roleWelcome":"Hello.","welcomeAlternates":["Hi."],"prologue":["Who are you?"]}`

// recorded is one request a test server received.
type recorded struct {
	Method     string
	Path       string // decoded
	EscapedURI string // as sent: escaped path and query
	Query      string
	Header     http.Header
	Body       []byte
}

// step answers one request; the n-th request gets the n-th step, the last step repeats.
type step func(w http.ResponseWriter, r *http.Request)

// script is an http.Handler that records every request and answers it with the next step.
type script struct {
	mu    sync.Mutex
	steps []step
	reqs  []recorded
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.reqs)
	s.reqs = append(s.reqs, recorded{
		Method: r.Method, Path: r.URL.Path, EscapedURI: r.RequestURI, Query: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body,
	})
	st := s.steps[min(n, len(s.steps)-1)]
	s.mu.Unlock()
	st(w, r)
}

func (s *script) requests() []recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recorded(nil), s.reqs...)
}

// serve starts a test server answering with steps in turn.
func serve(t *testing.T, steps ...step) (*httptest.Server, *script) {
	t.Helper()
	s := &script{steps: steps}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, s
}

// reply answers status with body as JSON, and the given header pairs.
func reply(status int, body string, headers ...string) step {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// replyRaw answers status with body and content type as given.
func replyRaw(status int, contentType, body string) step {
	return func(w http.ResponseWriter, _ *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// hangUp closes the connection without answering; with reset, it sends a TCP RST.
func hangUp(reset bool) step {
	return func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		if tcp, ok := conn.(*net.TCPConn); ok && reset {
			_ = tcp.SetLinger(0)
		}
		_ = conn.Close()
	}
}

// sleeps records the delays a client asked to wait, instead of waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) delays() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// newClient returns a client of srvURL with the test token, whose waits are recorded.
func newClient(t *testing.T, srvURL string, opts ...upstream.Option) (*upstream.Client, *sleeps) {
	t.Helper()
	c, err := upstream.New(srvURL, upstream.StaticToken(secret), opts...)
	if err != nil {
		t.Fatalf("New(%q): %v", srvURL, err)
	}
	s := &sleeps{}
	upstream.SetSleep(c, s.sleep)
	return c, s
}

// closedAddr returns a local address nothing listens on, so dialing it is refused.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// refuseFirstDials is a real transport whose first n dials go to a closed port (refused).
func refuseFirstDials(t *testing.T, n int) *http.Transport {
	t.Helper()
	dead := closedAddr(t)
	var mu sync.Mutex
	dials := 0
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dials++
		refuse := dials <= n
		mu.Unlock()
		if refuse {
			addr = dead
		}
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

func assertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	if strings.Contains(s, secret) {
		t.Errorf("%s contains the token: %s", what, s)
	}
}
