package proxy

// Passthrough mode: for a deployment inside the card service's own domain, where the MCP
// server is part of the card service's API. The protected-resource metadata names the card
// service ({api_host}) as the authorization server and its API ({base_url}) as the resource,
// so MCP clients get tokens for the card service itself, and the server forwards each
// request's bearer token upstream unchanged. It checks a token by asking the card service
// who it belongs to (GET /me, remembered for a minute by the token's digest); a token the
// card service refuses, up front or during a call, is answered 401 with the challenge.

import (
	"context"
	"errors"
	"fmt"
	"golang.org/x/time/rate"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/oauthserver"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

const (
	passthroughCacheTTL = time.Minute
	passthroughCacheMax = 10000
)

// Defaults of the bounds on checking unknown tokens (PassthroughOptions).
const (
	DefaultRefusedTTL     = 30 * time.Second // a token the card service refused is refused here this long, unasked
	DefaultCheckRate      = 2.0              // unknown tokens checked per second per source, in bursts of ten times that
	passthroughCheckBurst = 10               // times CheckRate
	maxCheckSources       = 10000            // sources whose check rate is remembered
)

// PassthroughOptions configures Passthrough.
type PassthroughOptions struct {
	PublicURL      string            // the origin MCP clients reach the server at (for the metadata's address)
	APIHost        string            // the card service; its origin is the authorization server
	APIOptions     []upstream.Option // the client of GET /me
	SessionIdleTTL time.Duration     // default 30 minutes
	// Sessions keeps which user opened each MCP session, shared by every replica; default a
	// store.Memory of this process.
	Sessions store.KV
	Logger   *slog.Logger
	Now      func() time.Time
	// RefusedTTL is how long a token the card service refused is refused unasked (default
	// DefaultRefusedTTL); CheckRate bounds the unknown tokens one source may have checked per
	// second (GET /me), in bursts of ten times that (default DefaultCheckRate; negative: none).
	RefusedTTL time.Duration
	CheckRate  float64
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names a request's source.
	TrustedProxies []netip.Prefix
}

// Passthrough serves the protected-resource metadata and guards the MCP endpoint in
// passthrough mode.
type Passthrough struct {
	public   string
	issuer   string // {api_host}
	resource string // {base_url}
	api      *upstream.Client
	sessions *sessionOwners
	log      *slog.Logger
	now      func() time.Time

	refusedTTL time.Duration
	checkRate  float64
	trusted    []netip.Prefix

	mu      sync.Mutex
	known   map[string]knownToken    // digest of a token -> its user, until
	refused map[string]time.Time     // digest of a token the card service refused -> until
	checks  map[string]*rate.Limiter // source -> its checks of unknown tokens
}

type knownToken struct {
	user  string
	until time.Time
}

// NewPassthrough returns the passthrough mode's resource server.
func NewPassthrough(opts PassthroughOptions) (*Passthrough, error) {
	pub, err := CanonicalOrigin(opts.PublicURL)
	if err != nil {
		return nil, fmt.Errorf("proxy: the public URL: %w", err)
	}
	resource, api, err := cardService(opts.APIHost, opts.APIOptions)
	if err != nil {
		return nil, err
	}
	if opts.SessionIdleTTL <= 0 {
		opts.SessionIdleTTL = DefaultSessionIdleTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Sessions == nil {
		opts.Sessions = store.NewMemory()
	}
	if opts.RefusedTTL <= 0 {
		opts.RefusedTTL = DefaultRefusedTTL
	}
	if opts.CheckRate == 0 {
		opts.CheckRate = DefaultCheckRate
	}
	u, err := url.Parse(api.BaseURL())
	if err != nil {
		return nil, fmt.Errorf("proxy: the card service: %w", err)
	}
	issuer, _ := oauthserver.CanonicalResource(u.Scheme + "://" + u.Host)
	return &Passthrough{public: pub, issuer: issuer, resource: resource, api: api,
		sessions: newSessionOwners(opts.Sessions, opts.SessionIdleTTL), log: opts.Logger, now: opts.Now, known: map[string]knownToken{},
		refusedTTL: opts.RefusedTTL, checkRate: opts.CheckRate, trusted: opts.TrustedProxies,
		refused: map[string]time.Time{}, checks: map[string]*rate.Limiter{}}, nil
}

// ResourceMetadataURL is where the protected-resource metadata is.
func (p *Passthrough) ResourceMetadataURL() string { return p.public + prmPath + MCPPath }

// Handler serves the protected-resource metadata at both well-known addresses.
func (p *Passthrough) Handler() http.Handler {
	mux := http.NewServeMux()
	meta := func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Expose-Headers", "WWW-Authenticate")
		switch r.Method {
		case http.MethodOptions:
			h.Set("Access-Control-Allow-Methods", "GET, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, MCP-Protocol-Version")
			w.WriteHeader(http.StatusNoContent)
			return
		case http.MethodGet, http.MethodHead:
		default:
			h.Set("Allow", "GET, OPTIONS")
			writeOAuthError(w, http.StatusMethodNotAllowed, "invalid_request", "Use GET.")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"resource":                 p.resource,
			"authorization_servers":    []string{p.issuer},
			"scopes_supported":         []string{Scope},
			"bearer_methods_supported": []string{"header"},
			"resource_name":            "cardwriter-mcp: author role-play cards on the card service",
		})
	}
	mux.HandleFunc(prmPath, meta)
	mux.HandleFunc(prmPath+MCPPath, meta)
	return mux
}

// Protect returns the MCP endpoint behind the card service's own tokens.
func (p *Passthrough) Protect(next http.Handler) http.Handler {
	return &resourceServer{metadataURL: p.ResourceMetadataURL(), authenticate: p.authenticate, sessions: p.sessions, log: p.log, next: next}
}

// Sweep drops idle session bindings and remembered tokens; call it now and then.
func (p *Passthrough) Sweep() {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, v := range p.known {
		if !now.Before(v.until) {
			delete(p.known, k)
		}
	}
	for k, until := range p.refused {
		if !now.Before(until) {
			delete(p.refused, k)
		}
	}
	for src, l := range p.checks {
		if l.TokensAt(now) >= float64(l.Burst()) {
			delete(p.checks, src) // full again: what a new source starts with
		}
	}
}

// mayCheck reports whether the source of r may have one more unknown token checked by the card
// service now, and if not, in how many seconds it may.
func (p *Passthrough) mayCheck(r *http.Request, now time.Time) (bool, int) {
	if p.checkRate < 0 {
		return true, 0
	}
	src := requestSource(r, p.trusted)
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.checks[src]
	if !ok {
		if len(p.checks) >= maxCheckSources {
			clear(p.checks)
		}
		l = rate.NewLimiter(rate.Limit(p.checkRate), max(1, int(p.checkRate*passthroughCheckBurst)))
		p.checks[src] = l
	}
	if l.AllowN(now, 1) {
		return true, 0
	}
	return false, max(1, int(math.Ceil(1/p.checkRate)))
}

func (p *Passthrough) authenticate(r *http.Request, token string) (*Principal, upstream.TokenSource, *authFailure) {
	d := oauthserver.Digest(token)
	now := p.now()
	p.mu.Lock()
	k, ok := p.known[d]
	until, refused := p.refused[d]
	p.mu.Unlock()
	if !ok || !now.Before(k.until) {
		if refused && now.Before(until) {
			// Refused a moment ago: refused again without asking the card service.
			return nil, nil, &authFailure{status: http.StatusUnauthorized, token: true, reason: "The card service does not accept the access token."}
		}
		if allowed, retry := p.mayCheck(r, now); !allowed {
			return nil, nil, &authFailure{status: http.StatusTooManyRequests, token: true, retry: retry,
				reason: "Too many unknown access tokens from this address; try again in a moment."}
		}
		ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
		me, err := p.api.GetMe(upstream.WithTokenSource(ctx, upstream.StaticToken(token)))
		cancel()
		var apiErr *upstream.Error
		switch {
		case errors.As(err, &apiErr) && (apiErr.Status == http.StatusUnauthorized || apiErr.Status == http.StatusForbidden):
			p.mu.Lock()
			if len(p.refused) >= passthroughCacheMax {
				clear(p.refused)
			}
			p.refused[d] = now.Add(p.refusedTTL)
			p.mu.Unlock()
			return nil, nil, &authFailure{status: http.StatusUnauthorized, token: true, reason: "The card service does not accept the access token."}
		case identityMissing(err):
			// The service names nobody: the token is forwarded as it came (the service
			// refuses it at the first call if it must), and its digest stands for the user.
			me = &upstream.Me{}
		case err != nil || me.UserID == "":
			p.log.Warn("passthrough: the card service could not check a token", "err", err)
			return nil, nil, &authFailure{status: http.StatusServiceUnavailable, token: true, reason: "The card service could not check the access token; try again in a moment."}
		}
		k = knownToken{user: me.UserID, until: now.Add(passthroughCacheTTL)}
		p.mu.Lock()
		if len(p.known) >= passthroughCacheMax {
			clear(p.known)
		}
		p.known[d] = k
		p.mu.Unlock()
	}
	p0 := &Principal{UserID: k.user}
	if k.user == "" {
		// Nobody named: the token's digest tells its holder apart (sessions, revisions,
		// exports, limits), as a grant would.
		p0.GrantID = "token-" + d[:32]
	}
	return p0, &passthroughSource{token: upstream.Token(token), forget: func() {
		p.mu.Lock()
		delete(p.known, d)
		p.mu.Unlock()
	}}, nil
}

// passthroughSource forwards the request's bearer token. It cannot refresh it: a refusal by
// the card service ends the request's authorization (the answer becomes a 401).
type passthroughSource struct {
	token  upstream.Token
	state  *requestState
	forget func()
}

func (s *passthroughSource) Token(context.Context) (upstream.Token, error) { return s.token, nil }

func (s *passthroughSource) Refresh(context.Context, upstream.Token) (upstream.Token, error) {
	if s.state != nil {
		s.state.ended.Store(true)
	}
	if s.forget != nil {
		s.forget()
	}
	return "", &upstream.AuthError{Message: "The card service refused the access token; authorize the MCP client again.", Err: errGrantEnded}
}
