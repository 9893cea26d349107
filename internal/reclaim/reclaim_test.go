package reclaim

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestReleasesOnceQuiet: no release while requests come, one once they stop for the quiet
// time, none again until the next request.
func TestReleasesOnceQuiet(t *testing.T) {
	t.Parallel()
	var released atomic.Int32
	h := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), 80*time.Millisecond)
	h.release = func() { released.Add(1) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)

	time.Sleep(200 * time.Millisecond)
	if n := released.Load(); n != 0 {
		t.Fatalf("released %d times before any request", n)
	}
	// Requests every 20 ms for 300 ms: never quiet for 80 ms.
	for range 15 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mcp", nil))
		time.Sleep(20 * time.Millisecond)
	}
	if n := released.Load(); n != 0 {
		t.Fatalf("released %d times while requests kept coming", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for released.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := released.Load(); n != 1 {
		t.Fatalf("released %d times after the requests stopped, want 1", n)
	}
	time.Sleep(300 * time.Millisecond)
	if n := released.Load(); n != 1 {
		t.Fatalf("released %d times while idle, want 1 (once per quiet spell)", n)
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/mcp", nil))
	deadline = time.Now().Add(5 * time.Second)
	for released.Load() == 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := released.Load(); n != 2 {
		t.Fatalf("released %d times after the next quiet spell, want 2", n)
	}
}

// TestOpenStreamIsNotTraffic: a request held open (an SSE stream) does not keep the server
// from counting as quiet.
func TestOpenStreamIsNotTraffic(t *testing.T) {
	t.Parallel()
	var released atomic.Int32
	hold := make(chan struct{})
	h := New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hold }), 50*time.Millisecond)
	h.release = func() { released.Add(1) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx)
	go h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/mcp", nil))
	deadline := time.Now().Add(5 * time.Second)
	for released.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(hold)
	if released.Load() == 0 {
		t.Fatal("an open stream kept the server from being quiet")
	}
}
