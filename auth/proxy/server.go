package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cardwriter/cardwriter-mcp/auth"
	"github.com/cardwriter/cardwriter-mcp/internal/oauthserver"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// Scope is the one scope of the MCP server: the card service's authoring scope.
const Scope = auth.Scope

// Defaults of Options.
const (
	DefaultAccessTokenTTL  = time.Hour
	DefaultRefreshTokenTTL = 30 * 24 * time.Hour
	DefaultCodeTTL         = time.Minute
	DefaultRequestTTL      = 10 * time.Minute
	DefaultSessionIdleTTL  = 30 * time.Minute
)

// Paths the proxy serves.
const (
	MCPPath          = "/mcp"
	prmPath          = "/.well-known/oauth-protected-resource"
	asMetadataPath   = "/.well-known/oauth-authorization-server"
	authorizePath    = "/authorize"
	consentPath      = "/consent"
	CallbackPath     = "/oauth/callback"
	registerPath     = "/register"
	tokenPath        = "/token"
	revokePath       = "/revoke"
	sweepInterval    = time.Minute
	upstreamLeeway   = 30 * time.Second // the card service's access token is refreshed this long before it expires
	userCookieTTL    = 30 * 24 * time.Hour
	browserCookieTTL = 30 * 24 * time.Hour
)

// Token prefixes: they make the proxy's secrets recognisable to secret scanners.
const (
	accessPrefix  = "cwm_at_"
	refreshPrefix = "cwm_rt_"
	codePrefix    = "cwm_ac_"
)

// Options configures the proxy.
type Options struct {
	// PublicURL is the origin MCP clients reach the server at (scheme://host[:port], no path):
	// the issuer, and with /mcp the resource. https, or http on a loopback host.
	PublicURL string
	// APIHost is the card service (scheme://host[:port]); its API is {APIHost}/open/v1.
	APIHost string
	// KV keeps the proxy's state (clients, consents, requests, grants with sealed card service
	// tokens, digests of codes and tokens, session owners); required. Replicas share one.
	KV  store.KV
	Key []byte // the state key (KeySize bytes): seals the card service's tokens, signs cookies, authenticates records
	// PreviousKeys are state keys of before a rotation: what they sealed or signed is still
	// read (and re-sealed under Key when next written); nothing new is made with them.
	PreviousKeys [][]byte

	AccessTokenTTL  time.Duration // of the proxy's access tokens; default 1h, capped by the card service's grant
	RefreshTokenTTL time.Duration // of a refresh token, renewed at every rotation; default 30 days
	CodeTTL         time.Duration // of an authorization code; default 1 minute
	RequestTTL      time.Duration // an authorization (consent, sign-in) must finish within it; default 10 minutes
	SessionIdleTTL  time.Duration // how long an idle MCP session stays bound to its user; default 30 minutes

	// HTTPClient makes the OAuth requests to the card service; default auth.NewHTTPClient()
	// (no redirects followed).
	HTTPClient *http.Client
	// APIOptions configure the client of the card service's API (GET /me).
	APIOptions []upstream.Option
	Logger     *slog.Logger     // default discard; no token, code, verifier or cookie is ever logged
	Now        func() time.Time // default time.Now
	// MetadataHTTPClient fetches client ID metadata documents (https client_ids); default one
	// that refuses loopback and private addresses and follows no redirect. AllowPrivateMetadata
	// lets it reach them (tests only).
	MetadataHTTPClient   *http.Client
	AllowPrivateMetadata bool
	// The bounds of what callers who have not signed in can make the server keep: authorization
	// requests in progress and registered clients, server-wide and per source address (a
	// source's oldest entries are evicted by its newer ones), and how long a registration not
	// used to sign in lives. Defaults: DefaultMaxPending and the other Default* constants.
	MaxPending, MaxPendingPerSource int
	MaxClients, MaxClientsPerSource int
	UnusedClientTTL                 time.Duration
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names a request's source
	// address; without them (the default) the source is the remote address.
	TrustedProxies []netip.Prefix
	// OnSignIn, when set, is told how each return from the card service's sign-in ended:
	// "ok", "denied" or "failed" (for metrics).
	OnSignIn func(outcome string)
}

// Server is the OAuth authorization server MCP clients see, and the card service's OAuth
// client: it issues its own opaque tokens (stored as digests) and keeps the card service's
// tokens sealed per grant, never handing them out.
type Server struct {
	opts     Options
	issuer   string // = PublicURL
	resource string // canonical resource: PublicURL + /mcp
	keys     *keys
	store    *KVStore
	up       *upstreamAuth
	log      *slog.Logger
	now      func() time.Time
	secure   bool // https: cookies are Secure and __Host- prefixed

	locks    grantLocks
	sessions *sessionOwners
	cimd     *cimdClients
	bg       sync.WaitGroup // background revocations
	stop     chan struct{}
	stopOnce sync.Once
}

// New returns the proxy. It does not contact the card service: discovery and registration
// happen at the first authorization.
func New(opts Options) (*Server, error) {
	pub, err := CanonicalOrigin(opts.PublicURL)
	if err != nil {
		return nil, fmt.Errorf("proxy: the public URL: %w", err)
	}
	if opts.KV == nil {
		return nil, errors.New("proxy: a store is required")
	}
	k, err := deriveKeys(opts.Key, opts.PreviousKeys...)
	if err != nil {
		return nil, err
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&opts.AccessTokenTTL, DefaultAccessTokenTTL}, {&opts.RefreshTokenTTL, DefaultRefreshTokenTTL},
		{&opts.CodeTTL, DefaultCodeTTL}, {&opts.RequestTTL, DefaultRequestTTL}, {&opts.SessionIdleTTL, DefaultSessionIdleTTL},
		{&opts.UnusedClientTTL, DefaultUnusedClientTTL},
	} {
		if *d.v < 0 {
			return nil, errors.New("proxy: lifetimes must not be negative")
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	for _, b := range []struct {
		v   *int
		def int
	}{
		{&opts.MaxPending, DefaultMaxPending}, {&opts.MaxPendingPerSource, DefaultMaxPendingPerSource},
		{&opts.MaxClients, DefaultMaxClients}, {&opts.MaxClientsPerSource, DefaultMaxClientsPerSource},
	} {
		if *b.v < 0 {
			return nil, errors.New("proxy: bounds must not be negative")
		}
		if *b.v == 0 {
			*b.v = b.def
		}
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = auth.NewHTTPClient()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	resource, api, err := cardService(opts.APIHost, opts.APIOptions)
	if err != nil {
		return nil, err
	}
	st := NewKVStore(opts.KV)
	st.now = opts.Now
	st.keys = k
	st.onForged = func(key string, noMAC bool) {
		why := "its MAC does not match: written without the state key, moved, or damaged"
		if noMAC {
			why = "it has no MAC: written by an earlier version, or not by this server"
		}
		opts.Logger.Error("proxy: a record of the store failed its authentication under the state key and was refused",
			"record", recordKind(key), "tag", sessionTag(key), "why", why)
	}
	s := &Server{
		opts: opts, issuer: pub, resource: pub + MCPPath, keys: k, store: st,
		log: opts.Logger, now: opts.Now, secure: strings.HasPrefix(pub, "https://"),
		sessions: newSessionOwners(opts.KV, opts.SessionIdleTTL), stop: make(chan struct{}),
		cimd: newCIMDClients(opts.MetadataHTTPClient, opts.AllowPrivateMetadata, opts.Now),
	}
	s.up = &upstreamAuth{apiHost: opts.APIHost, resource: resource, callback: pub + CallbackPath, hc: opts.HTTPClient,
		api: api, store: st, log: opts.Logger, now: opts.Now}
	go s.sweeper()
	return s, nil
}

// cardService returns the card service's resource identifier ({base_url}/open/v1) and a client
// of its API that calls it with each request's token (upstream.ContextTokenSource).
func cardService(apiHost string, apiOpts []upstream.Option) (string, *upstream.Client, error) {
	resource, err := auth.Resource(apiHost)
	if err != nil {
		return "", nil, fmt.Errorf("proxy: the card service: %w", err)
	}
	api, err := upstream.New(apiHost, upstream.ContextTokenSource{}, apiOpts...)
	if err != nil {
		return "", nil, fmt.Errorf("proxy: the card service: %w", err)
	}
	return resource, api, nil
}

// Close stops the background work and waits for pending revocations at the card service.
func (s *Server) Close() {
	s.stopOnce.Do(func() { close(s.stop) })
	s.bg.Wait()
}

// Issuer returns the authorization server's issuer, the public URL.
func (s *Server) Issuer() string { return s.issuer }

// Resource returns the canonical resource identifier: the MCP endpoint's URL.
func (s *Server) Resource() string { return s.resource }

// ResourceMetadataURL is where the protected-resource metadata of the MCP endpoint is.
func (s *Server) ResourceMetadataURL() string { return s.issuer + prmPath + MCPPath }

// acceptedResource reports whether a resource indicator names this server: its MCP endpoint
// (the canonical one) or its origin (what clients that read the root metadata send).
func (s *Server) acceptedResource(raw string) (string, bool) {
	r, ok := oauthserver.CanonicalResource(raw)
	if !ok {
		return "", false
	}
	return r, r == s.resource || r == s.issuer
}

// Handler serves the authorization server and the protected-resource metadata; it answers
// 404 for any other path (the MCP endpoint is Protect's).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(prmPath, s.cors(s.protectedResourceMetadata, http.MethodGet))
	mux.HandleFunc(prmPath+MCPPath, s.cors(s.protectedResourceMetadata, http.MethodGet))
	mux.HandleFunc(asMetadataPath, s.cors(s.authorizationServerMetadata, http.MethodGet))
	mux.HandleFunc(registerPath, s.cors(s.register, http.MethodPost))
	mux.HandleFunc(tokenPath, s.cors(s.token, http.MethodPost))
	mux.HandleFunc(revokePath, s.cors(s.revoke, http.MethodPost))
	mux.HandleFunc(authorizePath, s.authorize)
	mux.HandleFunc(consentPath, s.consent)
	mux.HandleFunc(CallbackPath, s.callback)
	return mux
}

// cors answers preflights and lets browser-based clients read the answers (and the
// WWW-Authenticate challenge) of the endpoints that carry no cookie.
func (s *Server) cors(h http.HandlerFunc, method string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Access-Control-Allow-Origin", "*")
		hd.Set("Access-Control-Expose-Headers", "WWW-Authenticate")
		if r.Method == http.MethodOptions {
			hd.Set("Access-Control-Allow-Methods", method+", OPTIONS")
			hd.Set("Access-Control-Allow-Headers", "Content-Type, Authorization, MCP-Protocol-Version")
			hd.Set("Access-Control-Max-Age", "86400")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			hd.Set("Allow", method+", OPTIONS")
			writeOAuthError(w, http.StatusMethodNotAllowed, "invalid_request", "Use "+method+".")
			return
		}
		h(w, r)
	}
}

func (s *Server) protectedResourceMetadata(w http.ResponseWriter, r *http.Request) {
	resource := s.resource
	if r.URL.Path == prmPath {
		// RFC 9728 section 3.3: the root document describes the resource whose URL it was
		// derived from, the origin.
		resource = s.issuer
	}
	writeJSON(w, http.StatusOK, oauthserver.ProtectedResourceMetadata(resource, s.issuer, []string{Scope},
		"cardwriter-mcp: author role-play cards on the card service"))
}

func (s *Server) authorizationServerMetadata(w http.ResponseWriter, _ *http.Request) {
	iss := s.issuer
	writeJSON(w, http.StatusOK, oauthserver.AuthorizationServerMetadata(oauthserver.Endpoints{
		Issuer:        iss,
		Authorization: iss + authorizePath,
		Token:         iss + tokenPath,
		Registration:  iss + registerPath,
		Revocation:    iss + revokePath,
	}, []string{Scope}, true))
}

// sweeper drops expired state every minute, revoking at the card service the grants it drops.
func (s *Server) sweeper() {
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sweep()
		}
	}
}

func (s *Server) sweep() {
	dropped, err := s.store.Sweep(context.Background(), s.now())
	if err != nil {
		s.log.Warn("proxy: sweep the state", "err", err)
	}
	for _, g := range dropped {
		s.log.Info("grant expired", "grant", g.ID, "client_id", g.ClientID, "user", g.UserID)
		s.revokeUpstream(g)
	}
}

// revokeGrant ends a grant: its codes and tokens stop working at once, and the card service
// is asked to revoke its tokens.
func (s *Server) revokeGrant(ctx context.Context, id, reason string) {
	g, err := s.store.DeleteGrant(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return
	}
	if err != nil {
		s.log.Error("proxy: revoke a grant", "grant", id, "err", err)
		return
	}
	s.log.Warn("grant revoked", "grant", id, "client_id", g.ClientID, "user", g.UserID, "reason", reason)
	s.revokeUpstream(g)
}

// revokeUpstream revokes a dropped grant's tokens at the card service, in the background.
func (s *Server) revokeUpstream(g *Grant) {
	t, err := s.openGrant(g)
	if err != nil {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		s.up.revoke(ctx, t)
	}()
}

// openGrant unseals the card service's tokens of a grant.
func (s *Server) openGrant(g *Grant) (*upstreamTokens, error) {
	raw, err := s.keys.open(g.Upstream, "grant:"+g.ID)
	if err != nil {
		return nil, err
	}
	var t upstreamTokens
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, errSealed
	}
	return &t, nil
}

// sealTokens seals the card service's tokens into a grant.
func (s *Server) sealTokens(g *Grant, t *upstreamTokens) {
	raw, _ := json.Marshal(t)
	g.Upstream = s.keys.seal(raw, "grant:"+g.ID)
	g.UpstreamExpiry = t.Expiry
	g.UpstreamRefreshable = t.Refresh != ""
}

// CanonicalOrigin checks a public URL and returns it as scheme://host[:port] in lower case,
// without a default port or trailing slash. It must be https, or http on a loopback host
// (the MCP authorization spec wants authorization endpoints on HTTPS).
func CanonicalOrigin(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("%q is not an http(s) URL", raw)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.Trim(u.Path, "/") != "" {
		return "", fmt.Errorf("%q must be an origin (scheme://host[:port]) without a path, query or fragment", raw)
	}
	c, _ := oauthserver.CanonicalResource(u.Scheme + "://" + u.Host)
	if u.Scheme == "http" && !isLoopbackHost(u.Hostname()) {
		return "", fmt.Errorf("%q: use https (http is allowed on a loopback host only)", raw)
	}
	return c, nil
}

func isLoopbackHost(h string) bool {
	h = strings.Trim(strings.ToLower(h), "[]")
	if h == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.IsLoopback()
}

// writeJSON writes a JSON answer that is never cached.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"error":"server_error"}`)
	}
	oauthserver.WriteJSON(w, status, data)
}

// writeOAuthError writes an RFC 6749 error answer.
func writeOAuthError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, &oauthserver.Error{Status: status, Code: code, Description: desc})
}

// writeError writes an OAuth error answer with its status.
func writeError(w http.ResponseWriter, e *oauthserver.Error) {
	writeJSON(w, e.Status, e)
}

// client returns the client a client_id names: the metadata document it points at when it is an
// https URL (Client ID Metadata Documents), else the client registered under it.
func (s *Server) client(ctx context.Context, id string) (*Client, error) {
	if isMetadataURL(id) {
		return s.cimd.get(ctx, id)
	}
	return s.store.GetClient(ctx, id)
}
