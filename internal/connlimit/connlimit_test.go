package connlimit

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestListenRefusesOverLimit holds the limit's connections open and checks that the next one
// is answered 503 at once, and that a closed connection gives its place back.
func TestListenRefusesOverLimit(t *testing.T) {
	t.Parallel()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := make(chan struct{}, 10)
	l := Listen(inner, 2, func() { refused <- struct{}{} })
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	dial()
	first, second := <-accepted, <-accepted
	over := dial()
	<-refused
	resp, err := http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil {
		t.Fatalf("the connection over the limit got no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "too many open connections") {
		t.Fatalf("over the limit: %d %v %q, want 503 with Retry-After", resp.StatusCode, resp.Header, body)
	}
	if n := l.Open(); n != 2 {
		t.Fatalf("open = %d, want 2", n)
	}
	first.Close()
	first.Close() // a second Close gives nothing back twice
	if n := l.Open(); n != 1 {
		t.Fatalf("open after a close = %d, want 1", n)
	}
	dial()
	third := <-accepted
	if n := l.Open(); n != 2 {
		t.Fatalf("open = %d, want 2", n)
	}
	second.Close()
	third.Close()
}

// serveHTTP serves a handler answering "ok" on a Listener of max places, with its ConnState hook.
func serveHTTP(t *testing.T, max int) (*Listener, string) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(inner, max, nil)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ConnState: l.ConnState}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return l, inner.Addr().String()
}

// dialFrom opens a connection to addr from the loopback address from (a source of its own).
func dialFrom(t *testing.T, from, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// get sends one keep-alive GET on c and returns the answer's status.
func get(t *testing.T, c net.Conn, r *bufio.Reader) int {
	t.Helper()
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestIdleKeepAliveGivesWay: every place held by idle keep-alive connections (each sent one GET)
// no longer locks a newcomer out: it takes the longest idle one's place.
func TestIdleKeepAliveGivesWay(t *testing.T) {
	t.Parallel()
	l, addr := serveHTTP(t, 8)
	for range 8 {
		c := dialFrom(t, "127.0.0.1", addr)
		if code := get(t, c, bufio.NewReader(c)); code != http.StatusOK {
			t.Fatalf("holder: %d", code)
		}
	}
	if n := l.Open(); n != 8 {
		t.Fatalf("open = %d, want 8", n)
	}
	// A connection just idle keeps its place (a burst's next request is on its way): the
	// holders give way once idle MinIdle, here on the listener's clock.
	waitFor(t, "every holder idle", func() bool { return l.Idle() == 8 })
	later := time.Now().Add(MinIdle)
	l.mu.Lock()
	l.now = func() time.Time { return later }
	l.mu.Unlock()
	c := dialFrom(t, "127.0.0.2", addr)
	if code := get(t, c, bufio.NewReader(c)); code != http.StatusOK {
		t.Fatalf("a newcomer while idle keep-alive connections hold every place: %d, want 200", code)
	}
}

// TestSourceShare: one source holds at most its share of the places; another source still gets
// in; a trusted source (a reverse proxy) is exempt.
func TestSourceShare(t *testing.T) {
	t.Parallel()
	l, addr := serveHTTP(t, 8)
	l.SetSourceShare(3, func(a netip.Addr) bool { return a == netip.MustParseAddr("127.0.0.4") })
	for range 3 {
		dialFrom(t, "127.0.0.2", addr) // connected, no request yet: not idle
	}
	over := dialFrom(t, "127.0.0.2", addr)
	_ = over.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound on failure, not an ordering
	if resp, err := http.ReadResponse(bufio.NewReader(over), nil); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("over its share: %v %v, want 503", resp, err)
	}
	c := dialFrom(t, "127.0.0.3", addr)
	if code := get(t, c, bufio.NewReader(c)); code != http.StatusOK {
		t.Fatalf("another source: %d", code)
	}
	for range 4 {
		c := dialFrom(t, "127.0.0.4", addr)
		if code := get(t, c, bufio.NewReader(c)); code != http.StatusOK {
			t.Fatalf("a trusted proxy: %d", code)
		}
	}
}

// waitFor waits until cond holds (the server sets a connection's state on its own goroutine).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// TestIdleTimeoutShortens: the idle time is whole up to half full, then shortens to MinIdle.
func TestIdleTimeoutShortens(t *testing.T) {
	t.Parallel()
	l := Listen(nil, 100, nil)
	for _, tc := range []struct {
		open int
		want time.Duration
	}{{0, DefaultIdle}, {50, DefaultIdle}, {75, MinIdle + (DefaultIdle-MinIdle)/2}, {100, MinIdle}} {
		l.open = tc.open
		if got := l.IdleTimeout(); got != tc.want {
			t.Errorf("%d open: idle %s, want %s", tc.open, got, tc.want)
		}
	}
}
