package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// peakRSS is the most resident memory the process pid has had (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// rawPost opens a connection to addr and sends the head of a POST /mcp whose body is n bytes.
func rawPost(t *testing.T, addr string, n int64, header string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n%sContent-Length: %d\r\n\r\n", addr, header, n)
	return c
}

// bytesRead is how many bytes the process pid has read so far, from files and sockets alike
// (rchar of /proc/PID/io).
func bytesRead(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Skipf("no /proc/PID/io to count the bytes the server reads: %v", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "rchar:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no rchar in /proc/PID/io")
	return 0
}

// TestHTTPUnauthenticatedBodyNotRead sends several bodies just under --max-body-bytes without a
// token. At once: with none of its body sent, each request is answered 401 within 5 seconds (a
// server waiting for the body answers at --body-timeout, a minute). Unread: with the bodies sent as fast as the
// server takes them, each gets 401 and its connection is closed, and the server has read a few
// kilobytes per request, not the 240 MiB sent (bytes read, from /proc/PID/io: a server that
// reads and discards a body keeps its memory flat but not its reads); its peak memory stays
// near its idle size (before, each body was read whole first: about 90 MiB each).
func TestHTTPUnauthenticatedBodyNotRead(t *testing.T) {
	t.Parallel()
	p, urls := startProcess(t, nil, []string{"http", "--auth", "passthrough", "--api-host", "http://127.0.0.1:9", "--addr", "127.0.0.1:0",
		"--state-dir", t.TempDir(), "--body-timeout", "1m"}, `MCP endpoint: (http://\S+)/mcp`)
	addr := strings.TrimPrefix(urls[0], "http://")
	const bodies, size = 6, 40 << 20
	for i := range bodies {
		c := rawPost(t, addr, size, "")
		// The answer is due with no body byte sent: a server waiting for the body answers at
		// --body-timeout (a minute), far past this deadline.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("request %d, its body not sent: no answer at once (the server waits for the body?): %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("request %d, its body not sent: status %d, want 401", i, resp.StatusCode)
		}
		c.Close()
	}
	before, readBefore := peakRSS(t, p.cmd.Process.Pid), bytesRead(t, p.cmd.Process.Pid)
	chunk := make([]byte, 1<<20)
	var wg sync.WaitGroup
	statuses := make([]int, bodies)
	for i := range bodies {
		c := rawPost(t, addr, size, "")
		wg.Add(2)
		go func() { // the body, as fast as the server takes it
			defer wg.Done()
			for range size / len(chunk) {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Errorf("no answer: %v", err)
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
			if !resp.Close {
				t.Errorf("the answer keeps the connection: %v", resp.Header)
			}
			c.Close()
		}()
	}
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusUnauthorized {
			t.Errorf("request %d: status %d, want 401", i, s)
		}
	}
	read := bytesRead(t, p.cmd.Process.Pid) - readBefore
	peak := peakRSS(t, p.cmd.Process.Pid)
	t.Logf("read %d KiB for %d unauthenticated bodies of %d MiB; peak RSS: %d MiB before, %d MiB after", read>>10, bodies, size>>20, before>>20, peak>>20)
	if read > bodies*(64<<10) {
		t.Errorf("the server read %d KiB for %d unauthenticated requests whose bodies it must not read", read>>10, bodies)
	}
	if peak-before > 32<<20 {
		t.Errorf("the server's peak memory grew by %d MiB for unauthenticated bodies it must not read", (peak-before)>>20)
	}
}

// TestHTTPSlowBodyCutOff sends a body one byte and then nothing: at --body-timeout the server
// answers 408 and closes the connection (before, the connection and its goroutine stayed for
// good).
func TestHTTPSlowBodyCutOff(t *testing.T) {
	t.Parallel()
	_, urls := startProcess(t, nil, []string{"http", "--sandbox", "--addr", "127.0.0.1:0", "--body-timeout", "500ms"},
		`MCP endpoint: (http://\S+)/mcp`)
	c := rawPost(t, strings.TrimPrefix(urls[0], "http://"), 100, "")
	if _, err := c.Write([]byte("{")); err != nil {
		t.Fatal(err)
	}
	// A bound on the test, not on the server's speed: without a deadline no answer ever comes.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("a body that stopped arriving was not cut off: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), "--body-timeout") {
		t.Fatalf("status %d %s, want 408 naming --body-timeout", resp.StatusCode, body)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("the connection stayed open after the cut-off: %v", err)
	}
}

// TestHTTPConnectionLimit holds --max-connections connections open without a request: the next
// one is answered 503 at once, and a request on one of those held is still served (idle a moment
// only, it keeps its place). One source may hold them all here (--source-connections).
func TestHTTPConnectionLimit(t *testing.T) {
	t.Parallel()
	_, urls := startProcess(t, nil, []string{"http", "--sandbox", "--addr", "127.0.0.1:0", "--max-connections", "2", "--source-connections", "2"},
		`MCP endpoint: (http://\S+)/mcp`)
	addr := strings.TrimPrefix(urls[0], "http://")
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	// The server has accepted both once it answers on one of them.
	fmt.Fprintf(held[0], "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	br := bufio.NewReader(held[0])
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz on a held connection: %v %v", resp, err)
	}
	resp.Body.Close()
	over, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	_ = over.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err = http.ReadResponse(bufio.NewReader(over), nil)
	if err != nil {
		t.Fatalf("the connection over the limit got no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("over the limit: status %d, want 503", resp.StatusCode)
	}
	fmt.Fprintf(held[0], "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	if resp, err = http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz on a held connection after the refusal: %v %v", resp, err)
	}
}

// TestHTTPBodyTimeoutSparesLongResponses: the deadline is on reading a request's body, not on
// the connection: a call whose answer takes longer than --body-timeout (the card service slowed
// down on purpose) still gets its result.
func TestHTTPBodyTimeoutSparesLongResponses(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, sb := startProcess(t, []string{"CARDWRITER_SANDBOX_TOKEN=slow-demo-token"}, []string{"sandbox", "--addr", "127.0.0.1:0", "--faults", "latency=1500ms"},
		`API at (http://\S+)/open/v1`)
	_, urls := startProcess(t, []string{"CARDWRITER_TOKEN=slow-demo-token"}, []string{"http", "--auth", "none", "--api-host", sb[0],
		"--addr", "127.0.0.1:0", "--body-timeout", "200ms"}, `MCP endpoint: (http://\S+)/mcp`)
	cs := connectHTTP(ctx, t, urls[0])
	defer cs.Close()
	card := call(ctx, t, cs, "create_card", map[string]any{"roleName": "Slow"}, false)
	if card["roleId"] == nil {
		t.Fatalf("create_card: %v", card)
	}
}

// TestHTTPSlowSignInBodyCutOff: the OAuth endpoints, which anyone may call before signing in,
// cut off a body that stops arriving too (/register here).
func TestHTTPSlowSignInBodyCutOff(t *testing.T) {
	t.Parallel()
	_, urls := startProcess(t, nil, []string{"http", "--auth", "proxy", "--api-host", "http://127.0.0.1:9", "--addr", "127.0.0.1:0",
		"--state-dir", t.TempDir(), "--state-key", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "--body-timeout", "500ms"}, `MCP endpoint: (http://\S+)/mcp`)
	addr := strings.TrimPrefix(urls[0], "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /register HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{", addr)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound on the test, not on the server
	br := bufio.NewReader(c)
	// Whatever the endpoint answers (an error about the body), the connection ends.
	if !closedByServer(br) {
		t.Fatal("a /register body that stopped arriving was not cut off")
	}
}

// TestHTTPUnauthenticatedTrickleNotWaitedOn: a request without a token whose body trickles is
// answered 401 at once and its connection closed, the body never read, when the body declares
// more than the few KiB drained before authorization; net/http used to read up to 256 KiB of
// such a body before answering, for as long as it took. A small one is drained, and cut off at
// --body-timeout.
func TestHTTPUnauthenticatedTrickleNotWaitedOn(t *testing.T) {
	t.Parallel()
	_, urls := startProcess(t, nil, []string{"http", "--auth", "passthrough", "--api-host", "http://127.0.0.1:9", "--addr", "127.0.0.1:0",
		"--state-dir", t.TempDir(), "--body-timeout", "500ms"}, `MCP endpoint: (http://\S+)/mcp`)
	addr := strings.TrimPrefix(urls[0], "http://")
	for _, tc := range []struct {
		method string
		length int
		answer bool // a 401 comes, rather than only the end of the connection
	}{
		{http.MethodGet, 100_000, true},
		{http.MethodPost, 100_000, true},
		{http.MethodPost, 1000, false},
	} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "%s /mcp HTTP/1.1\r\nHost: %s\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n{", tc.method, addr, tc.length)
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound on the test, not on the server
		br := bufio.NewReader(c)
		if tc.answer {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s of %d bytes: no answer while the body trickles: %v", tc.method, tc.length, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
				t.Fatalf("%s: %d, close %v; want 401 and the connection closed", tc.method, resp.StatusCode, resp.Close)
			}
		}
		if !closedByServer(br) {
			t.Fatalf("%s of %d bytes: the connection stayed open", tc.method, tc.length)
		}
	}
}

// TestHTTPTrickleToAnyEndpointCutOff: a body trickled to an endpoint that reads none (/healthz)
// is cut off too (net/http drains up to 256 KiB of an unread body before it answers).
func TestHTTPTrickleToAnyEndpointCutOff(t *testing.T) {
	t.Parallel()
	_, urls := startProcess(t, nil, []string{"http", "--sandbox", "--addr", "127.0.0.1:0", "--body-timeout", "500ms"}, `MCP endpoint: (http://\S+)/mcp`)
	addr := strings.TrimPrefix(urls[0], "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\n{", addr)
	go func() { // a slow client: a byte every 100 ms, until the server hangs up
		for {
			time.Sleep(100 * time.Millisecond)
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a bound on the test, not on the server
	if !closedByServer(bufio.NewReader(c)) {
		t.Fatal("a body trickled to /healthz kept its connection")
	}
}

// closedByServer reads what is left of a connection whose read deadline is set; it reports
// whether the server closed it before the deadline.
func closedByServer(br *bufio.Reader) bool {
	for {
		if _, err := br.ReadByte(); err != nil {
			return !errors.Is(err, os.ErrDeadlineExceeded)
		}
	}
}
