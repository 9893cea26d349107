// Command stub is the second floor of the benchmark harness (cmd/cardwriter-bench), not a
// product: the cheapest card service there can be. It answers each request whose method and path
// it was given with the fixed status and body recorded for it (the harness records them from a
// seeded sandbox), reading the request body and checking nothing: no token, no contract, no
// state. Measured against it, a server's own cost is not hidden behind the sandbox's.
//
// Usage: stub --addr 127.0.0.1:0 --answers FILE; it prints "API at http://HOST:PORT/open/v1".
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Answer is one fixed answer: to Method on Path (under /open/v1, without the query).
type Answer struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "stub:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("stub", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	file := fs.String("answers", "", "JSON file of the answers: [{method, path, status, body}]")
	if err := fs.Parse(args); err != nil {
		return err
	}
	data, err := os.ReadFile(*file)
	if err != nil {
		return fmt.Errorf("read the answers: %w", err)
	}
	var answers []Answer
	if err := json.Unmarshal(data, &answers); err != nil {
		return fmt.Errorf("read the answers: %w", err)
	}
	byRoute := make(map[string]Answer, len(answers))
	for _, a := range answers {
		byRoute[a.Method+" /open/v1"+a.Path] = a
	}
	notFound := []byte(`{"error":"not_found","message":"The stub has no answer for this request.","retryable":false}`)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		a, ok := byRoute[r.Method+" "+r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write(notFound)
			return
		}
		w.WriteHeader(a.Status)
		_, _ = w.Write(a.Body)
	})
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(os.Stderr, "API at http://%s/open/v1\n", ln.Addr())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
