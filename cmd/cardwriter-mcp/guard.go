package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cardwriter/cardwriter-mcp/internal/msglimit"
)

// guard protects the MCP endpoint of the HTTP server: it refuses requests whose Origin or Host
// is not allowed (DNS-rebinding protection), and reads a request's body only once the request is
// authenticated (body, inside the authorization layer), capped and within a deadline.
type guard struct {
	allowedOrigins []string // exact origins, e.g. https://app.example.com
	allowedHosts   []string // host or host:port values accepted in the Host header
	loopback       bool     // the server listens on a loopback address
	public         bool     // deployed on a non-loopback --public-url: loopback origins are not allowed
	maxBody        int64
	bodyTimeout    time.Duration // the longest a request body may take to arrive
	logger         *slog.Logger
	limited        func(limit string) // counts a request refused by a limit; may be nil
	messages       *msglimit.Limits   // what a message may hold, checked before it is decoded
	next           http.Handler       // the authorization layer, whose next is body(...)
}

// bodyState is what the guard and its body layer share about one request: whether the
// request got past authorization.
type bodyState struct{ authenticated bool }

type bodyStateKey struct{}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.hostAllowed(r.Host) {
		g.refuse(w, r, http.StatusForbidden, "Forbidden: the Host header "+quote(r.Host)+" is not allowed by this server.")
		return
	}
	if origin := r.Header.Get("Origin"); origin != "" && !g.originAllowed(origin) {
		g.refuse(w, r, http.StatusForbidden, "Forbidden: the Origin "+quote(origin)+" is not allowed by this server (see --allowed-origins).")
		return
	}
	if r.Body == nil || r.Body == http.NoBody {
		g.next.ServeHTTP(w, r)
		return
	}
	// A body sent slowly is cut off at the deadline. A request refused by authorization has its
	// body drained (for the connection to serve the client's next request) only when it is
	// small; else the connection closes after the response, the body unread (net/http would
	// read up to 256 KiB of it).
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(g.bodyTimeout))
	small := r.ContentLength >= 0 && r.ContentLength <= unauthenticatedBody
	if !small {
		w.Header().Set("Connection", "close")
	}
	st := &bodyState{}
	g.next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), bodyStateKey{}, st)))
	if !st.authenticated && !small {
		// Nothing more of an unauthenticated body is read, not even to drain it.
		_ = rc.SetReadDeadline(time.Now())
	}
}

// unauthenticatedBody is the most of a request body read before authorization: drained after
// a 401 when it is no larger (an initialize is a few hundred bytes); a larger one is not read.
const unauthenticatedBody = 4 << 10

// body is the layer inside authorization that reads a POST's body: at most maxBody bytes, by
// the deadline the guard set, after which the connection's reads have no deadline again (a
// response streamed as SSE may last long). A body it refuses (too large, too slow) is left to
// net/http, which drains a little of it within the deadline so that the client, authenticated,
// reads the answer rather than a broken connection.
func (g *guard) body(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st, _ := r.Context().Value(bodyStateKey{}).(*bodyState)
		if st == nil {
			next.ServeHTTP(w, r)
			return
		}
		st.authenticated = true
		w.Header().Del("Connection")
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r) // only a POST carries a message
			return
		}
		if r.ContentLength > g.maxBody {
			g.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("The request body is larger than the %d bytes this server accepts (--max-body-bytes).", g.maxBody))
			return
		}
		body, err := readBody(r, g.maxBody)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if g.limited != nil {
					g.limited("body_timeout")
				}
				g.refuse(w, r, http.StatusRequestTimeout, fmt.Sprintf("The request body did not arrive within %s (--body-timeout).", g.bodyTimeout))
				return
			}
			g.refuse(w, r, http.StatusBadRequest, "The request body could not be read.")
			return
		}
		if int64(len(body)) > g.maxBody {
			g.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("The request body is larger than the %d bytes this server accepts (--max-body-bytes).", g.maxBody))
			return
		}
		_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
		if refused := g.messages.Check(body); refused != nil {
			g.logger.Warn("mcp message refused before decoding", "reason", refused.Reason, "tool", refused.Tool)
			if g.limited != nil && !refused.Invalid {
				g.limited("message")
			}
			answer := refused.Response()
			if answer == nil {
				g.refuse(w, r, http.StatusBadRequest, "Invalid Request: "+refused.Reason)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			if refused.Invalid && mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
				w.WriteHeader(http.StatusBadRequest) // 2026-07-28 answers Invalid params 400
			}
			_, _ = w.Write(answer)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// readBody reads a request's body, at most max+1 bytes: into one buffer of its declared length
// when it has one (io.ReadAll would grow its buffer by doubling, holding up to twice the body).
func readBody(r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength < 0 || r.ContentLength > max {
		return io.ReadAll(io.LimitReader(r.Body, max+1))
	}
	body := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(r.Body, body); err != nil {
		return nil, err
	}
	// Nothing may follow the declared length (net/http ends the body there).
	return body, nil
}

// hostAllowed accepts loopback names when serving on loopback, any host listed in allowedHosts,
// and (when serving on a non-loopback address with no list) any host.
func (g *guard) hostAllowed(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	for _, a := range g.allowedHosts {
		if strings.EqualFold(a, host) || strings.EqualFold(a, name) {
			return true
		}
	}
	if g.loopback {
		return isLoopbackName(name)
	}
	return len(g.allowedHosts) == 0
}

// originAllowed accepts origins listed in allowedOrigins, and loopback origins unless the
// server is deployed on a public URL (where a page on the user's own machine is no more
// trusted than any other site).
func (g *guard) originAllowed(origin string) bool {
	if slices.ContainsFunc(g.allowedOrigins, func(a string) bool { return strings.EqualFold(a, origin) }) {
		return true
	}
	u, err := url.Parse(origin)
	if g.public || err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return isLoopbackName(u.Hostname())
}

func (g *guard) refuse(w http.ResponseWriter, r *http.Request, status int, message string) {
	g.logger.Warn("http request refused", "status", status, "method", r.Method, "path", r.URL.Path, "reason", message)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// A JSON-RPC error without an id: the request was refused before it was read as JSON-RPC.
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32600, "message": message},
	})
}

// deployedPublic reports whether --public-url names a host other than a loopback one.
func deployedPublic(publicURL string) bool {
	return publicURL != "" && !isLoopbackName(hostname(publicURL))
}

// isLoopbackName reports whether a host name (no port) is localhost or a loopback address.
func isLoopbackName(name string) bool {
	name = strings.Trim(name, "[]")
	if strings.EqualFold(name, "localhost") || strings.HasSuffix(strings.ToLower(name), ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(name)
	return err == nil && ip.IsLoopback()
}

// quote renders an untrusted header value for a message, shortened.
func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// hostOnly guards the server's other endpoints (metadata, OAuth, consent pages) with the Host
// check alone: they are called cross-origin by browser-based clients and answer with their
// own CORS headers, and they cap their own bodies (within --body-timeout: bodyDeadline).
func (g *guard) hostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.hostAllowed(r.Host) {
			g.refuse(w, r, http.StatusForbidden, "Forbidden: the Host header "+quote(r.Host)+" is not allowed by this server.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bodyDeadline wraps every endpoint of the server: a request's body must arrive within
// --body-timeout, whoever reads it (an OAuth endpoint before anyone signed in, or net/http
// draining the unread body of a /healthz before it answers). net/http clears the deadline once
// the body has been read whole; /mcp sets its own (ServeHTTP).
func (g *guard) bodyDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(g.bodyTimeout))
		}
		next.ServeHTTP(w, r)
	})
}
