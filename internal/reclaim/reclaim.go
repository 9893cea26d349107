// Package reclaim gives the memory the Go runtime keeps for reuse back to the operating system
// once an HTTP server has gone quiet.
//
// The runtime lets the heap grow to twice what is live before it collects (GOGC=100) and keeps
// the freed pages for the next burst, returning them only slowly. A server that opened many
// sessions and then went idle therefore holds about twice its live heap: with 1,000 idle MCP
// sessions, about 24 MB of heap for 13.6 MB live (BENCH.md). Once no request has started or
// ended for a while, one forced collection hands the free pages back; under steady traffic it
// never runs, so it costs the calls nothing.
package reclaim

import (
	"context"
	"net/http"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// Quiet is how long a server must have seen no request start or end before its free memory is
// returned: longer than the gaps within a burst of calls, short enough that an idle server
// shrinks soon after its last request.
const Quiet = time.Second

// Handler passes requests to Next and notes when the last one started or ended.
type Handler struct {
	next    http.Handler
	quiet   time.Duration
	release func()

	last   atomic.Int64 // when a request last started or ended (UnixNano)
	active atomic.Bool  // a request started or ended since the last release
}

// New returns a Handler serving next that, once Run runs, returns free memory after quiet
// without requests.
func New(next http.Handler, quiet time.Duration) *Handler {
	return &Handler{next: next, quiet: quiet, release: debug.FreeOSMemory}
}

// ServeHTTP serves r with the next handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.touch()
	defer h.touch()
	h.next.ServeHTTP(w, r)
}

func (h *Handler) touch() {
	h.last.Store(time.Now().UnixNano())
	h.active.Store(true)
}

// Run returns free memory to the operating system each time the server goes quiet, until ctx
// ends. A long-lived request (an SSE stream held open) is not traffic while it stays open.
func (h *Handler) Run(ctx context.Context) {
	t := time.NewTicker(h.quiet / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if h.active.Load() && now.UnixNano()-h.last.Load() >= int64(h.quiet) && h.active.CompareAndSwap(true, false) {
				h.release()
			}
		}
	}
}
