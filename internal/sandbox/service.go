// Package sandbox is an emulator of the card service's open API, derived from the contract in
// package schema: it runs in-process for tests (Handler, RoundTripper) and as a server for people.
package sandbox

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Options configures a Service; the zero value is a usable in-memory sandbox.
type Options struct {
	Clock          func() time.Time // default time.Now; trial expiry uses it
	DataFile       string           // "" = memory only; else state is loaded at New and written atomically after every mutation
	DemoToken      string           // bearer token of the signed-in demo user; "" = random
	BaseURL        string           // public origin used to build image URLs; default "http://sandbox.localhost"
	Logger         *slog.Logger     // default discard; tokens, Authorization headers and card text are never logged
	CheckResponses bool             // validate every response against the contract; a mismatch becomes 500 internal
	TrialSlots     int              // default 5
	TrialTTL       time.Duration    // default 24h
	Faults         *Faults          // nil: none; latency and failures on purpose (faults.go)

	// The OAuth server (oauth.go). Each is 0 for its default; short values let clients test refresh.
	AccessTokenTTL  time.Duration // lifetime of an issued access token; default DefaultAccessTokenTTL (1h)
	RefreshTokenTTL time.Duration // lifetime of a refresh token, renewed on every rotation; default DefaultRefreshTokenTTL (30 days)
	AuthCodeTTL     time.Duration // lifetime of an authorization code; default DefaultAuthCodeTTL (60s)
}

// DefaultBaseURL is the origin image URLs use when Options.BaseURL is empty.
const DefaultBaseURL = "http://sandbox.localhost"

// Service is one emulated card service with its state; it is safe for concurrent use.
type Service struct {
	opts    Options
	log     *slog.Logger
	routes  []route
	handler http.Handler

	mu     sync.Mutex
	st     *state
	tokens map[string]string // pre-issued bearer token (demo, AddUser) -> userId; never persisted
	dirty  bool              // the current handler changed st
	oauth  *oauthRuntime     // the OAuth server's short-lived, memory-only state
}

// New returns a Service, loading its state from opts.DataFile when one is set.
func New(opts Options) (*Service, error) {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.TrialSlots == 0 {
		opts.TrialSlots = 5
	}
	if opts.TrialSlots < 0 {
		return nil, errors.New("sandbox: TrialSlots must not be negative")
	}
	if opts.TrialTTL == 0 {
		opts.TrialTTL = 24 * time.Hour
	}
	if opts.TrialTTL < 0 {
		return nil, errors.New("sandbox: TrialTTL must not be negative")
	}
	if err := opts.oauthDefaults(); err != nil {
		return nil, err
	}
	if opts.BaseURL == "" {
		opts.BaseURL = DefaultBaseURL
	}
	opts.BaseURL = strings.TrimRight(opts.BaseURL, "/")
	if u, err := url.Parse(opts.BaseURL); err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("sandbox: BaseURL %q is not an absolute URL", opts.BaseURL)
	}
	if opts.DemoToken == "" {
		var b [32]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		opts.DemoToken = base64.RawURLEncoding.EncodeToString(b[:])
	}
	s := &Service{opts: opts, log: opts.Logger, tokens: map[string]string{opts.DemoToken: demoUserID}, oauth: newOAuthRuntime()}
	routes, err := buildRoutes()
	if err != nil {
		return nil, err
	}
	s.routes = routes
	if opts.DataFile != "" {
		st, err := loadState(opts.DataFile)
		if err != nil {
			return nil, err
		}
		s.st = st
		if err := saveState(opts.DataFile, st); err != nil { // fail now, not at the first write
			return nil, err
		}
	} else {
		s.st = newState()
	}
	s.handler = http.HandlerFunc(s.serveHTTP)
	return s, nil
}

// Handler returns the HTTP handler serving /open/v1/..., GET /images/{imageId} and the OAuth server
// (/.well-known/oauth-authorization-server, /.well-known/oauth-protected-resource/open/v1, /oauth/...).
func (s *Service) Handler() http.Handler { return s.handler }

// DemoToken returns the bearer token of the signed-in demo user.
func (s *Service) DemoToken() string { return s.opts.DemoToken }

// AddUser adds a signed-in user reached with token (or returns the user the token already names) and returns its userId.
func (s *Service) AddUser(token, nickname string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.tokens[token]; ok {
		return id
	}
	id := newID("u_")
	for s.st.Users[id] != nil {
		id = newID("u_")
	}
	s.st.Users[id] = &user{ID: id, Nickname: nickname, Scopes: []string{cardScope}}
	s.tokens[token] = id
	if err := s.persist(); err != nil {
		s.log.Error("sandbox: persist state", "err", err)
	}
	return id
}

// now returns the current time of the configured clock in UTC.
func (s *Service) now() time.Time { return s.opts.Clock().UTC() }

// persist writes the state to the data file, when there is one. The caller holds s.mu.
func (s *Service) persist() error {
	if s.opts.DataFile == "" {
		return nil
	}
	return saveState(s.opts.DataFile, s.st)
}

// changed marks the state as modified by the running handler. The caller holds s.mu.
func (s *Service) changed() { s.dirty = true }
