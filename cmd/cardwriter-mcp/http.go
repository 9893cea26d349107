package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// defaultMaxBody caps MCP request bodies (4 MiB).
const defaultMaxBody = 4 << 20

func runHTTP(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := newFlagSet("http", "http [--addr 127.0.0.1:8080] [--sandbox] [--api-host URL] [flags]", stderr)
	var f serverFlags
	f.register(fs)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on; the MCP endpoint is /mcp")
	origins := fs.String("allowed-origins", "", "comma-separated extra Origins allowed to call /mcp (loopback origins always are)")
	hosts := fs.String("allowed-hosts", "", "comma-separated Host header values accepted besides loopback names (needed behind a proxy)")
	maxBody := fs.Int64("max-body-bytes", defaultMaxBody, "largest MCP request body accepted, in bytes")
	idle := fs.Duration("session-idle-ttl", 30*time.Minute, "end MCP sessions idle this long")
	if err := parseFlags(fs, args, nil); err != nil {
		return helpOK(err)
	}
	if *maxBody <= 0 {
		return fmt.Errorf("--max-body-bytes must be positive, got %d", *maxBody)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	base := "http://" + ln.Addr().String()
	b, err := f.newBackend(stderr, base)
	if err != nil {
		ln.Close()
		return err
	}
	streamable := server.NewStreamableHTTPServer(b.mcp,
		server.WithEndpointPath("/mcp"),
		server.WithStateful(true),
		server.WithSessionIdleTTL(*idle),
		server.WithStreamableHTTPLogger(b.logger),
	)
	loopback := false
	if ap, err := netip.ParseAddrPort(ln.Addr().String()); err == nil {
		loopback = ap.Addr().IsLoopback()
	}
	if !loopback && *hosts == "" {
		b.logger.Warn("listening on a non-loopback address without --allowed-hosts: any Host header is accepted; Origin is still checked")
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", &guard{
		allowedOrigins: splitList(*origins), allowedHosts: splitList(*hosts),
		loopback: loopback, maxBody: *maxBody, logger: b.logger, next: streamable,
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	if b.sandbox != nil {
		sandboxRoutes(mux, b.sandbox)
		fmt.Fprintf(stderr, "card service sandbox (in-process): API at %s/open/v1 (demo token from CARDWRITER_SANDBOX_TOKEN)\n", base)
	}
	fmt.Fprintf(stderr, "MCP endpoint: %s/mcp\n", base)
	b.logger.Info("serving MCP over streamable HTTP", "addr", ln.Addr().String(), "sandbox", f.sandbox, "version", programVersion())
	err = serve(ctx, ln, mux, b.logger)
	closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if cerr := streamable.Shutdown(closeCtx); cerr != nil && !errors.Is(cerr, http.ErrServerClosed) {
		b.logger.Warn("closing MCP sessions", "err", cerr)
	}
	return err
}
