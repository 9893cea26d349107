package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
)

func runSandbox(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sandbox", "sandbox [--addr 127.0.0.1:8090] [--data FILE] [--demo-token TOKEN] [--access-token-ttl 1h] [--refresh-token-ttl 720h]", stdout, stderr,
		"CARDWRITER_SANDBOX_TOKEN     the same as --demo-token (read when CARDWRITER_DEMO_TOKEN is not set)")
	addr := fs.String("addr", "127.0.0.1:8090", "address to listen on")
	data := fs.String("data", "", "file that keeps the sandbox's state across restarts (default: memory only)")
	demoToken := fs.String("demo-token", "", "bearer token of the signed-in demo user (default: a random one, printed at start)")
	accessTTL := fs.Duration("access-token-ttl", sandbox.DefaultAccessTokenTTL, "lifetime of the access tokens the sandbox's OAuth server issues (a short one lets you test refresh)")
	refreshTTL := fs.Duration("refresh-token-ttl", sandbox.DefaultRefreshTokenTTL, "lifetime of a refresh token (each refresh rotates it and starts a new one)")
	codeTTL := fs.Duration("auth-code-ttl", sandbox.DefaultAuthCodeTTL, "lifetime of an authorization code")
	faultSpec := fs.String("faults", "", "make the API slow and unreliable on purpose, e.g. seed=7,latency=5ms-40ms,429=0.1,reset-after=0.05 (see docs/sandbox.md)")
	var lf logFlags
	lf.register(fs)
	if err := parseFlags(fs, args, map[string][]string{"demo-token": {"CARDWRITER_SANDBOX_TOKEN"}}); err != nil {
		return helpOK(err)
	}
	logger, err := lf.logger(stderr)
	if err != nil {
		return err
	}
	var faults *sandbox.Faults
	if *faultSpec != "" {
		if faults, err = sandbox.ParseFaults(*faultSpec); err != nil {
			return fmt.Errorf("--faults: %w", err)
		}
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	base := "http://" + ln.Addr().String()
	svc, err := sandbox.New(sandbox.Options{DataFile: *data, DemoToken: *demoToken, BaseURL: base, Logger: logger,
		AccessTokenTTL: *accessTTL, RefreshTokenTTL: *refreshTTL, AuthCodeTTL: *codeTTL, Faults: faults})
	if err != nil {
		ln.Close()
		return fmt.Errorf("sandbox: %w", err)
	}
	fmt.Fprintf(stderr, "card service sandbox: API at %s/open/v1\n", base)
	if faults != nil {
		fmt.Fprintf(stderr, "faults on: %s\n", *faultSpec)
	}
	fmt.Fprintf(stderr, "OAuth server: %s/.well-known/oauth-authorization-server (sign in as the demo user in the browser)\n", base)
	if *demoToken == "" {
		// The demo token is random and exists only in this process: print it so a person can use it.
		fmt.Fprintf(stderr, "demo user's bearer token: %s\n", svc.DemoToken())
	}
	if *data != "" {
		fmt.Fprintf(stderr, "state kept in %s\n", *data)
	}
	return serve(ctx, ln, svc.Handler(), logger)
}

// serve runs handler on ln until ctx ends, then shuts down gracefully, letting running requests finish.
func serve(ctx context.Context, ln net.Listener, handler http.Handler, logger interface {
	Info(string, ...any)
}) error {
	return serveDraining(ctx, ln, handler, logger, defaultDrain, nil)
}

// listenerClosed is the log line of a draining server once it takes no new connection.
const listenerClosed = "listener closed: no new connection is taken"

// defaultDrain is how long a server lets running requests finish after SIGTERM.
const defaultDrain = 30 * time.Second

// serveDraining serves handler on ln until ctx ends, then drains: it stops accepting
// connections, calls onDrain (which ends long-lived streams), lets the requests under way
// finish for at most drain, and returns.
func serveDraining(ctx context.Context, ln net.Listener, handler http.Handler, logger interface {
	Info(string, ...any)
}, drain time.Duration, onDrain func()) error {
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	if cs, ok := ln.(interface {
		ConnState(net.Conn, http.ConnState)
	}); ok {
		srv.ConnState = cs.ConnState // idle keep-alive connections give way (connlimit)
		srv.IdleTimeout = 0          // and the listener's idle time, which shortens as it fills, ends them
	}
	if onDrain != nil {
		srv.RegisterOnShutdown(onDrain)
	}
	// Shutdown runs this once its listeners are closed: the line says no new connection is
	// taken (a test waits for it).
	srv.RegisterOnShutdown(func() { logger.Info(listenerClosed) })
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down: finishing the requests under way", "grace", drain)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
