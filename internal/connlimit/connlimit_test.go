package connlimit

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
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
