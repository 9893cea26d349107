package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	"github.com/cardwriter/cardwriter-mcp/auth"
	"github.com/cardwriter/cardwriter-mcp/auth/proxy"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// Authorization modes of the HTTP server.
const (
	authProxy       = "proxy"
	authPassthrough = "passthrough"
	authNone        = "none"
)

// httpAuthFlags are the authorization flags of `cardwriter-mcp http`.
type httpAuthFlags struct {
	mode       string
	publicURL  string
	stateDir   string
	stateKey   string
	accessTTL  time.Duration
	refreshTTL time.Duration
}

func (a *httpAuthFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.mode, "auth", "", "authorization of /mcp: proxy (this server is the MCP clients' OAuth server and the card service's OAuth client), passthrough (clients bring card service tokens; for deployments inside the card service's domain) or none (default: proxy; none with --sandbox)")
	fs.StringVar(&a.publicURL, "public-url", "", "the origin clients reach this server at, e.g. https://mcp.example.com (the OAuth issuer; the MCP resource is it + /mcp); default http://<listen address> on loopback")
	fs.StringVar(&a.stateDir, "state-dir", "", "directory of what the server keeps: the kept-aside data of imported tavern files (aside/) and, in proxy mode, the authorization state (clients, consents, grants, hashed tokens, sealed card service tokens) (default <user config dir>/cardwriter-mcp/http-state)")
	fs.StringVar(&a.stateKey, "state-key", "", "proxy mode: base64 of 32 random bytes that seal the card service's tokens and sign cookies; prefer the environment variable (default: generated into <state-dir>/state.key)")
	fs.DurationVar(&a.accessTTL, "access-token-ttl", proxy.DefaultAccessTokenTTL, "proxy mode: lifetime of the access tokens this server issues (never past the card service's grant)")
	fs.DurationVar(&a.refreshTTL, "refresh-token-ttl", proxy.DefaultRefreshTokenTTL, "proxy mode: lifetime of a refresh token this server issues, renewed at every rotation")
}

// resolveMode picks the mode: --auth when given, else proxy, or none with --sandbox.
func (a *httpAuthFlags) resolveMode(sandbox bool) (string, error) {
	switch a.mode {
	case "":
		if sandbox {
			return authNone, nil
		}
		return authProxy, nil
	case authProxy, authPassthrough, authNone:
		return a.mode, nil
	}
	return "", fmt.Errorf("--auth %q: want proxy, passthrough or none", a.mode)
}

// resolvePublicURL returns the public origin: --public-url, else the listen address when
// it is a loopback one.
func (a *httpAuthFlags) resolvePublicURL(base string, loopback bool) (string, error) {
	if a.publicURL == "" {
		if !loopback {
			return "", errors.New("set --public-url to the https origin clients reach this server at (needed when listening on a non-loopback address)")
		}
		return base, nil
	}
	pub, err := proxy.CanonicalOrigin(a.publicURL)
	if err != nil {
		return "", fmt.Errorf("--public-url: %w", err)
	}
	return pub, nil
}

// httpAuth is the authorization layer of the HTTP server.
type httpAuth struct {
	protect func(http.Handler) http.Handler // the /mcp guard
	handler http.Handler                    // metadata and OAuth endpoints, or nil
	close   func()
}

// stateDirectory returns --state-dir, or its default <config dir>/http-state.
func (a *httpAuthFlags) stateDirectory() (string, error) {
	if a.stateDir != "" {
		return a.stateDir, nil
	}
	d, err := auth.Dir()
	if err != nil {
		return "", fmt.Errorf("--state-dir: %w", err)
	}
	return filepath.Join(d, "http-state"), nil
}

// newHTTPAuth builds the authorization of mode for the card service at apiHost.
func newHTTPAuth(mode, pub, apiHost string, a *httpAuthFlags, kv store.KV, idle time.Duration, logger *slog.Logger, stderr io.Writer, onSignIn func(string)) (*httpAuth, error) {
	apiOpts := []upstream.Option{upstream.WithUserAgent(userAgent()), upstream.WithLogger(logger.With("component", "auth"))}
	switch mode {
	case authPassthrough:
		p, err := proxy.NewPassthrough(proxy.PassthroughOptions{PublicURL: pub, APIHost: apiHost, APIOptions: apiOpts,
			SessionIdleTTL: idle, Sessions: kv, Logger: logger.With("component", "auth")})
		if err != nil {
			return nil, err
		}
		stop := make(chan struct{})
		go func() {
			t := time.NewTicker(time.Minute)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					p.Sweep()
				}
			}
		}()
		fmt.Fprintf(stderr, "authorization: passthrough (clients sign in at %s; their tokens are forwarded)\n", apiHost)
		return &httpAuth{protect: p.Protect, handler: p.Handler(), close: func() { close(stop) }}, nil
	case authProxy:
		dir, err := a.stateDirectory()
		if err != nil {
			return nil, err
		}
		key, generated, err := proxy.LoadKey(a.stateKey, dir)
		if err != nil {
			return nil, fmt.Errorf("--state-key: %w", err)
		}
		if generated {
			logger.Info("generated the state key", "file", filepath.Join(dir, proxy.KeyFile))
		}
		srv, err := proxy.New(proxy.Options{
			PublicURL: pub, APIHost: apiHost, KV: kv, Key: key,
			AccessTokenTTL: a.accessTTL, RefreshTokenTTL: a.refreshTTL, SessionIdleTTL: idle,
			APIOptions: apiOpts, Logger: logger.With("component", "auth"), OnSignIn: onSignIn,
		})
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "authorization: OAuth proxy (issuer %s, callback %s%s, state in %s)\n", srv.Issuer(), srv.Issuer(), proxy.CallbackPath, kv.Name())
		return &httpAuth{protect: srv.Protect, handler: srv.Handler(), close: srv.Close}, nil
	}
	return &httpAuth{protect: func(h http.Handler) http.Handler { return h }, close: func() {}}, nil
}

// hostOf returns the host[:port] of an origin.
func hostOf(origin string) string {
	u, err := url.Parse(origin)
	if err != nil {
		return ""
	}
	return u.Host
}
