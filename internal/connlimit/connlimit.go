// Package connlimit bounds the connections a listener keeps open at once: a connection over the
// limit is answered "503 Service Unavailable" with Retry-After and closed at once, so that a
// client is told rather than left waiting in the kernel's backlog, and an anonymous caller
// cannot hold more than the limit of the server's goroutines and buffers.
package connlimit

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
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

// Listener is a net.Listener that keeps at most a fixed number of its connections open.
type Listener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused func() // called for each connection refused; may be nil
}

// Listen wraps ln so that at most max of its connections are open at once; refused, when not
// nil, is called for each connection refused.
func Listen(ln net.Listener, max int, refused func()) *Listener {
	return &Listener{Listener: ln, max: int64(max), refused: refused}
}

// Open returns how many accepted connections are open now.
func (l *Listener) Open() int64 { return l.open.Load() }

// Accept returns the next connection under the limit; those over it are refused meanwhile.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			return &conn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		if l.refused != nil {
			l.refused()
		}
		go refuse(c)
	}
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
	l    *Listener
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
