// Package connlimit bounds the connections a listener keeps open at once: a connection over the
// limit is answered "503 Service Unavailable" with Retry-After and closed at once, so that a
// client is told rather than left waiting in the kernel's backlog, and an anonymous caller
// cannot hold more than the limit of the server's goroutines and buffers.
//
// Idle keep-alive connections give way: they are closed once idle longer than an idle time that
// shortens as the listener fills, and a new connection that finds no place takes the place of
// the longest idle one (of its own source first). One source (remote address) may hold at most
// its share of the places, so that it cannot lock the others out.
package connlimit

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// refusal is the whole answer to a connection over the limit.
const refusal = "HTTP/1.1 503 Service Unavailable\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"Retry-After: 1\r\n" +
	"Connection: close\r\n" +
	"Content-Length: 61\r\n" +
	"\r\n" +
	"The server has too many open connections; try again shortly.\n"

// writeTimeout bounds how long a refusal may take to write.
const writeTimeout = time.Second

// DefaultIdle is the longest a keep-alive connection stays idle on a listener less than half
// full; it shortens to MinIdle as the listener fills. A connection idle less than MinIdle (between
// the requests of a burst) never gives way: holding a place takes a request every MinIdle.
const (
	DefaultIdle = 2 * time.Minute
	MinIdle     = 5 * time.Second
)

// Listener is a net.Listener that keeps at most a fixed number of its connections open.
type Listener struct {
	net.Listener
	max     int
	refused func() // called for each connection refused; may be nil

	mu        sync.Mutex
	open      int
	conns     map[*conn]struct{}
	sources   map[netip.Addr]int
	perSource int                   // 0: no share
	trusted   func(netip.Addr) bool // sources exempt from the share (a reverse proxy is many sources)
	idle      time.Duration
	now       func() time.Time
}

// Listen wraps ln so that at most max of its connections are open at once; refused, when not
// nil, is called for each connection refused.
func Listen(ln net.Listener, max int, refused func()) *Listener {
	return &Listener{Listener: ln, max: max, refused: refused, conns: map[*conn]struct{}{}, sources: map[netip.Addr]int{},
		idle: DefaultIdle, now: time.Now}
}

// SetSourceShare limits the connections one source may hold to perSource (0: no limit); the
// sources trusted reports true for (reverse proxies, which carry many clients) are exempt.
func (l *Listener) SetSourceShare(perSource int, trusted func(netip.Addr) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.perSource, l.trusted = perSource, trusted
}

// SetIdle sets the longest a connection stays idle on a listener less than half full.
func (l *Listener) SetIdle(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.idle = d
}

// Idle returns how many of the open connections are idle between requests.
func (l *Listener) Idle() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for c := range l.conns {
		if !c.idleSince.IsZero() {
			n++
		}
	}
	return n
}

// Open returns how many accepted connections are open now.
func (l *Listener) Open() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(l.open)
}

// IdleTimeout returns how long a connection may stay idle now: the idle time while the listener
// is at most half full, shortening in proportion to MinIdle when full.
func (l *Listener) IdleTimeout() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.idleTimeoutLocked()
}

func (l *Listener) idleTimeoutLocked() time.Duration {
	half := l.max / 2
	if l.open <= half || l.idle <= MinIdle {
		return l.idle
	}
	frac := float64(l.max-l.open) / float64(l.max-half) // 1 at half full, 0 when full
	return max(MinIdle, MinIdle+time.Duration(frac*float64(l.idle-MinIdle)))
}

// Accept returns the next connection under the limits; those over them are refused meanwhile.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if wc := l.admit(c); wc != nil {
			return wc, nil
		}
		if l.refused != nil {
			l.refused()
		}
		go refuse(c)
	}
}

// admit takes c in, making room by closing idle connections, or returns nil when there is none.
func (l *Listener) admit(c net.Conn) *conn {
	src := sourceOf(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.closeIdleLocked(now, l.idleTimeoutLocked())
	shared := l.perSource > 0 && src.IsValid() && (l.trusted == nil || !l.trusted(src))
	if shared && l.sources[src] >= l.perSource && !l.evictLocked(src, true) {
		return nil
	}
	if l.open >= l.max && !l.evictLocked(src, false) {
		return nil
	}
	wc := &conn{Conn: c, l: l, src: src}
	l.open++
	l.sources[src]++
	l.conns[wc] = struct{}{}
	return wc
}

// closeIdleLocked closes the connections idle longer than d.
func (l *Listener) closeIdleLocked(now time.Time, d time.Duration) {
	for c := range l.conns {
		if !c.idleSince.IsZero() && now.Sub(c.idleSince) >= d {
			l.dropLocked(c)
		}
	}
}

// evictLocked closes the longest idle connection of src (only of src when own, else of src
// first, then of the source holding the most), reporting whether it found one.
func (l *Listener) evictLocked(src netip.Addr, own bool) bool {
	var best *conn
	better := func(c *conn) bool {
		if best == nil {
			return true
		}
		if !own && (c.src == src) != (best.src == src) {
			return c.src == src
		}
		if !own && l.sources[c.src] != l.sources[best.src] {
			return l.sources[c.src] > l.sources[best.src]
		}
		return c.idleSince.Before(best.idleSince)
	}
	now := l.now()
	for c := range l.conns {
		if c.idleSince.IsZero() || now.Sub(c.idleSince) < MinIdle || (own && c.src != src) {
			continue
		}
		if better(c) {
			best = c
		}
	}
	if best == nil {
		return false
	}
	l.dropLocked(best)
	return true
}

// dropLocked closes c (idle: the server's goroutine waiting for its next request ends) and gives
// its place back.
func (l *Listener) dropLocked(c *conn) {
	l.releaseLocked(c)
	_ = c.Conn.Close()
}

// releaseLocked gives c's place back, once.
func (l *Listener) releaseLocked(c *conn) {
	if c.released {
		return
	}
	c.released = true
	if c.timer != nil {
		c.timer.Stop()
	}
	delete(l.conns, c)
	l.open--
	if l.sources[c.src]--; l.sources[c.src] <= 0 {
		delete(l.sources, c.src)
	}
}

// ConnState is the http.Server's ConnState hook: it tells the listener which connections are
// idle keep-alive ones, which give way when places run out, and closes one idle past the idle
// time. An http.Server serving the listener must set it.
func (l *Listener) ConnState(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if state != http.StateIdle {
		c.idleSince = time.Time{}
		return
	}
	c.idleSince = l.now()
	if c.timer == nil {
		c.timer = time.AfterFunc(l.idleTimeoutLocked(), c.idleCheck)
	} else {
		c.timer.Reset(l.idleTimeoutLocked())
	}
}

// idleCheck closes c when it has been idle past the idle time, else looks again when it will be.
func (c *conn) idleCheck() {
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.released || c.idleSince.IsZero() {
		return
	}
	if left := l.idleTimeoutLocked() - l.now().Sub(c.idleSince); left > 0 {
		c.timer.Reset(left)
		return
	}
	l.dropLocked(c)
}

// sourceOf returns the remote address of c, unmapped; the zero Addr when it has none.
func sourceOf(c net.Conn) netip.Addr {
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// refuse answers 503 on c and closes it. What the client sent is read (a little, briefly)
// after the answer, so that the close does not reset the connection before the client has
// read the answer.
func refuse(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(writeTimeout))
	if _, err := c.Write([]byte(refusal)); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.CopyN(io.Discard, c, drainBytes)
}

// drainBytes is how much of a refused connection's request is read before it is closed.
const drainBytes = 4 << 10

// conn gives its place back when it is closed (once, however often Close is called).
type conn struct {
	net.Conn
	l         *Listener
	src       netip.Addr
	idleSince time.Time   // zero unless idle between requests (Listener.mu)
	released  bool        // its place was given back (Listener.mu)
	timer     *time.Timer // closes it idle past the idle time (Listener.mu)
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return err
}
