package sandbox

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// RoundTripper returns a transport that serves every request through Handler in-process, whatever its host.
func (s *Service) RoundTripper() http.RoundTripper { return roundTripper{h: s.handler} }

type roundTripper struct{ h http.Handler }

// RoundTrip serves req with the handler and returns the recorded response.
func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	in := req.Clone(req.Context())
	if in.Body == nil {
		in.Body = http.NoBody
	}
	in.RequestURI = req.URL.RequestURI()
	if in.Host == "" {
		in.Host = req.URL.Host
	}
	if in.RemoteAddr == "" {
		in.RemoteAddr = "127.0.0.1:0"
	}
	if in.Proto == "" {
		in.Proto, in.ProtoMajor, in.ProtoMinor = "HTTP/1.1", 1, 1
	}
	rec := &recorder{header: http.Header{}}
	if aborted := serveRecovering(rt.h, rec, in); aborted {
		// The handler closed the connection (a fault): the client sees it broken.
		return nil, errConnectionClosed
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	body := rec.body.Bytes()
	if req.Method == http.MethodHead {
		body = nil
	}
	return &http.Response{
		Status:        strconv.Itoa(rec.status) + " " + http.StatusText(rec.status),
		StatusCode:    rec.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        rec.header,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}

// errConnectionClosed is what the in-process transport returns when the handler aborts, as a
// network transport fails when the server closes the connection before the answer is complete.
var errConnectionClosed = fmt.Errorf("sandbox: the connection was closed before the answer was complete: %w", io.ErrUnexpectedEOF)

// serveRecovering serves in with h and reports whether the handler aborted (http.ErrAbortHandler).
func serveRecovering(h http.Handler, w http.ResponseWriter, in *http.Request) (aborted bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			aborted = true
		}
	}()
	h.ServeHTTP(w, in)
	return false
}

// recorder is a minimal http.ResponseWriter that keeps the response in memory.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}
