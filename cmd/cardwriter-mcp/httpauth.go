package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
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
	keyFile    string
	previous   string
	accessTTL  time.Duration
	refreshTTL time.Duration
	bounds     proxy.Options // the bounds of unauthenticated state (Max*, UnusedClientTTL)
	trusted    string        // --trusted-proxies
	// passthrough mode: how long a refused token is refused unasked, and the unknown tokens
	// one source may have checked per second
	refusedTTL time.Duration
	checkRate  float64
}

func (a *httpAuthFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.mode, "auth", "", "authorization of /mcp: proxy (this server is the MCP clients' OAuth server and the card service's OAuth client), passthrough (clients bring card service tokens; for deployments inside the card service's domain) or none (default: proxy; none with --sandbox)")
	a.registerKeys(fs)
	fs.DurationVar(&a.accessTTL, "access-token-ttl", proxy.DefaultAccessTokenTTL, "proxy mode: lifetime of the access tokens this server issues (never past the card service's grant)")
	fs.DurationVar(&a.refreshTTL, "refresh-token-ttl", proxy.DefaultRefreshTokenTTL, "proxy mode: lifetime of a refresh token this server issues, renewed at every rotation")
	fs.IntVar(&a.bounds.MaxPending, "max-pending-signins", proxy.DefaultMaxPending, "proxy mode: sign-ins in progress at once, server-wide")
	fs.IntVar(&a.bounds.MaxPendingPerSource, "max-pending-signins-per-source", proxy.DefaultMaxPendingPerSource, "proxy mode: sign-ins in progress at once per source address (its oldest make room for its newest)")
	fs.IntVar(&a.bounds.MaxClients, "max-clients", proxy.DefaultMaxClients, "proxy mode: registered MCP clients kept, server-wide")
	fs.IntVar(&a.bounds.MaxClientsPerSource, "max-unused-clients-per-source", proxy.DefaultMaxClientsPerSource, "proxy mode: registrations not yet used to sign in, per source address (its oldest make room for its newest)")
	fs.DurationVar(&a.bounds.UnusedClientTTL, "unused-client-ttl", proxy.DefaultUnusedClientTTL, "proxy mode: a registered client not used to sign in within this long expires")
	fs.StringVar(&a.trusted, "trusted-proxies", "", "comma-separated addresses or CIDR prefixes of reverse proxies whose X-Forwarded-For names a request's source address (sign-ins, token checks), and whose connections --source-connections does not limit (default none: the remote address)")
	fs.DurationVar(&a.refusedTTL, "refused-token-ttl", proxy.DefaultRefusedTTL, "passthrough mode: a token the card service refused is refused this long without asking it again")
	fs.Float64Var(&a.checkRate, "token-check-rate", proxy.DefaultCheckRate, "passthrough mode: unknown tokens one source address may have the card service check per second, in bursts of ten times that (more: 429)")
}

// trustedProxies parses --trusted-proxies.
func (a *httpAuthFlags) trustedProxies() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range splitList(a.trusted) {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			addr, aerr := netip.ParseAddr(v)
			if aerr != nil {
				return nil, fmt.Errorf("--trusted-proxies: %q is not an address or a CIDR prefix", v)
			}
			p = netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// registerKeys registers the flags that say where the server is and where its state key
// comes from (http, and doctor, which checks them).
func (a *httpAuthFlags) registerKeys(fs *flag.FlagSet) {
	fs.StringVar(&a.publicURL, "public-url", "", "the origin clients reach this server at, e.g. https://mcp.example.com (the OAuth issuer; the MCP resource is it + /mcp); default http://<listen address> on loopback")
	fs.StringVar(&a.stateDir, "state-dir", "", "directory of the embedded store, state.db, when --store is not given (the authorization state in proxy mode, kept-aside tavern data, revisions, large exports, MCP sessions), and of the state key generated on a loopback --public-url (default <user config dir>/cardwriter-mcp/http-state)")
	fs.StringVar(&a.stateKey, "state-key", "", "proxy mode: base64 of 32 random bytes that seal the card service's tokens, sign cookies and authenticate the stored grants; prefer the environment variable (default on a loopback URL only: generated into <state-dir>/state.key)")
	fs.StringVar(&a.keyFile, "state-key-file", "", "proxy mode: a file holding the state key (base64), outside the state directory (a secret mount); instead of --state-key")
	fs.StringVar(&a.previous, "state-key-previous", "", "proxy mode: comma-separated state keys of before a rotation: still accepted for reading, never used to seal")
}

// keyCheck is doctor's check of the proxy's state key for the server --public-url names
// (nothing without one): on a public URL it must come from outside the state directory.
func (a *httpAuthFlags) keyCheck() (doctorCheck, bool) {
	if a.publicURL == "" {
		return doctorCheck{}, false
	}
	c := doctorCheck{name: "state key"}
	pub, err := proxy.CanonicalOrigin(a.publicURL)
	if err != nil {
		c.result, c.fix = "--public-url: "+err.Error(), "give the https origin clients reach the server at"
		return c, true
	}
	dir, err := a.stateDirectory()
	if err != nil {
		c.result, c.fix = err.Error(), "set --state-dir"
		return c, true
	}
	if !deployedPublic(pub) {
		c.result, c.ok = "loopback URL: the key generated into "+filepath.Join(dir, proxy.KeyFile)+" will do", true
		return c, true
	}
	if _, _, err := a.stateKeys(pub, dir, slog.New(slog.DiscardHandler)); err != nil {
		c.result, c.fix = err.Error(), "docs/sign-in.md, \"The state key\""
		return c, true
	}
	from := "CARDWRITER_STATE_KEY (--state-key)"
	if a.keyFile != "" {
		from = a.keyFile
	}
	c.result, c.ok = "from "+from+", outside the state directory", true
	return c, true
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
		trusted, err := a.trustedProxies()
		if err != nil {
			return nil, err
		}
		if a.refusedTTL <= 0 || a.checkRate <= 0 {
			return nil, errors.New("--refused-token-ttl and --token-check-rate must be positive")
		}
		p, err := proxy.NewPassthrough(proxy.PassthroughOptions{PublicURL: pub, APIHost: apiHost, APIOptions: apiOpts,
			SessionIdleTTL: idle, Sessions: kv, Logger: logger.With("component", "auth"),
			RefusedTTL: a.refusedTTL, CheckRate: a.checkRate, TrustedProxies: trusted})
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
		key, previous, err := a.stateKeys(pub, dir, logger)
		if err != nil {
			return nil, err
		}
		trusted, err := a.trustedProxies()
		if err != nil {
			return nil, err
		}
		b := a.bounds
		if b.MaxPending <= 0 || b.MaxPendingPerSource <= 0 || b.MaxClients <= 0 || b.MaxClientsPerSource <= 0 || b.UnusedClientTTL <= 0 {
			return nil, errors.New("--max-pending-signins, --max-pending-signins-per-source, --max-clients, --max-unused-clients-per-source and --unused-client-ttl must be positive")
		}
		srv, err := proxy.New(proxy.Options{
			PublicURL: pub, APIHost: apiHost, KV: kv, Key: key, PreviousKeys: previous,
			AccessTokenTTL: a.accessTTL, RefreshTokenTTL: a.refreshTTL, SessionIdleTTL: idle,
			MaxPending: b.MaxPending, MaxPendingPerSource: b.MaxPendingPerSource, MaxClients: b.MaxClients,
			MaxClientsPerSource: b.MaxClientsPerSource, UnusedClientTTL: b.UnusedClientTTL, TrustedProxies: trusted,
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

// errKeyInStateDir is why a server on a public URL does not start with the state key kept
// in its state directory.
const errKeyInStateDir = "proxy mode on the public URL %s needs a state key kept outside the state directory (%s), " +
	"or a copy of that directory is a copy of every user's card service tokens: set CARDWRITER_STATE_KEY " +
	"(base64 of 32 random bytes: openssl rand -base64 32), or --state-key-file with a file elsewhere (a secret mount); " +
	"to keep the key generated so far, move %s there"

// stateKeys returns the proxy's state key and the previous ones: --state-key, or the key in
// --state-key-file (which must not be inside the state directory), or on a loopback public
// URL only the key generated into the state directory.
func (a *httpAuthFlags) stateKeys(pub, dir string, logger *slog.Logger) (key []byte, previous [][]byte, err error) {
	for _, v := range splitList(a.previous) {
		k, _, err := proxy.LoadKey(v, "")
		if err != nil {
			return nil, nil, fmt.Errorf("--state-key-previous: %w", err)
		}
		previous = append(previous, k)
	}
	switch {
	case a.stateKey != "" && a.keyFile != "":
		return nil, nil, errors.New("give the state key once: --state-key (CARDWRITER_STATE_KEY) or --state-key-file, not both")
	case a.stateKey != "":
		key, _, err = proxy.LoadKey(a.stateKey, "")
		if err != nil {
			return nil, nil, fmt.Errorf("--state-key: %w", err)
		}
		return key, previous, nil
	case a.keyFile != "":
		if inside(a.keyFile, dir) {
			return nil, nil, fmt.Errorf("--state-key-file %s is inside the state directory %s: keep the key elsewhere (a secret mount), so that a copy of the directory does not carry it", a.keyFile, dir)
		}
		raw, err := os.ReadFile(a.keyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--state-key-file: %w", err)
		}
		if key, _, err = proxy.LoadKey(string(raw), ""); err != nil {
			return nil, nil, fmt.Errorf("--state-key-file %s: %w", a.keyFile, err)
		}
		return key, previous, nil
	case !isLoopbackName(hostname(pub)):
		return nil, nil, fmt.Errorf(errKeyInStateDir, pub, dir, filepath.Join(dir, proxy.KeyFile))
	}
	key, generated, err := proxy.LoadKey("", dir)
	if err != nil {
		return nil, nil, fmt.Errorf("--state-key: %w", err)
	}
	if generated {
		logger.Info("generated the state key (loopback use; on a public URL the key must come from outside the state directory)", "file", filepath.Join(dir, proxy.KeyFile))
	}
	return key, previous, nil
}

// inside reports whether path is dir or under it, symbolic links resolved as far as they exist.
func inside(path, dir string) bool {
	resolve := func(p string) string {
		abs, err := filepath.Abs(p)
		if err != nil {
			return filepath.Clean(p)
		}
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			return r
		}
		if r, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
			return filepath.Join(r, filepath.Base(abs))
		}
		return abs
	}
	rel, err := filepath.Rel(resolve(dir), resolve(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// hostname returns the host name of a URL, without its port.
func hostname(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// hostOf returns the host[:port] of an origin.
func hostOf(origin string) string {
	u, err := url.Parse(origin)
	if err != nil {
		return ""
	}
	return u.Host
}
