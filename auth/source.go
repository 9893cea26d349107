package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// DefaultRefreshMargin is how long before its expiry an access token is refreshed.
const DefaultRefreshMargin = 60 * time.Second

// ErrNotSignedIn is wrapped by the error of NewSource when the store has no grant for the API.
var ErrNotSignedIn = errors.New("not signed in")

// SourceOptions configures a Source; the zero value is usable.
type SourceOptions struct {
	HTTPClient    *http.Client     // of token requests; default NewHTTPClient()
	Logger        *slog.Logger     // default discard
	Now           func() time.Time // default time.Now
	RefreshMargin time.Duration    // default DefaultRefreshMargin
}

// Source supplies the access token of the saved grant for one API (an upstream.TokenSource
// and upstream.Refresher). It refreshes the token when it is within the refresh margin of its
// expiry and when the service refuses it. One refresh runs at a time in the process, and,
// through the store's lock, across processes: after taking the lock it reads the store again
// and uses a token another process got meanwhile instead of spending the refresh token (which
// the server may have rotated) a second time. A rotated refresh token is saved before the lock
// is released.
type Source struct {
	store    *Store
	resource string
	apiHost  string
	hc       *http.Client
	log      *slog.Logger
	now      func() time.Time
	margin   time.Duration

	sem   chan struct{} // held while the grant is read or refreshed: single flight in the process
	grant Grant         // the grant in use; guarded by sem
}

var (
	_ upstream.TokenSource = (*Source)(nil)
	_ upstream.Refresher   = (*Source)(nil)
)

// NewSource returns the source of the latest grant for apiHost's open API in store. Without
// one the error wraps ErrNotSignedIn.
func NewSource(store *Store, apiHost string, opts SourceOptions) (*Source, error) {
	resource, err := Resource(apiHost)
	if err != nil {
		return nil, err
	}
	d, err := store.Load()
	if err != nil {
		return nil, err
	}
	g := d.Latest(resource)
	if g == nil {
		return nil, fmt.Errorf("auth: no saved sign-in for %s in %s: %w", apiHostOf(resource), store.Path(), ErrNotSignedIn)
	}
	s := &Source{
		store: store, resource: resource, apiHost: apiHostOf(resource),
		hc: opts.HTTPClient, log: opts.Logger, now: opts.Now, margin: opts.RefreshMargin,
		sem: make(chan struct{}, 1), grant: *g,
	}
	if s.hc == nil {
		s.hc = NewHTTPClient()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.margin <= 0 {
		s.margin = DefaultRefreshMargin
	}
	return s, nil
}

// apiHostOf strips the API's base path from a resource, leaving {api_host}.
func apiHostOf(resource string) string {
	o, err := originOf(resource)
	if err != nil {
		return resource
	}
	return o
}

// String describes the source without any token.
func (s *Source) String() string { return "auth.Source(" + s.resource + ")" }

// Grant returns a copy of the grant in use (tokens included: print it only through its
// LogValue or fields that are not tokens).
func (s *Source) Grant(ctx context.Context) (Grant, error) {
	if err := s.acquire(ctx); err != nil {
		return Grant{}, err
	}
	defer s.release()
	return s.grant, nil
}

// Token returns an access token that is not about to expire, refreshing it when needed. When
// a refresh fails for another reason than a dead grant (the token endpoint is unreachable,
// say) and the current token has not expired yet, that token is returned.
func (s *Source) Token(ctx context.Context) (upstream.Token, error) {
	if err := s.acquire(ctx); err != nil {
		return "", err
	}
	defer s.release()
	if s.fresh(s.grant, "") {
		return s.grant.AccessToken, nil
	}
	tok, err := s.refreshLocked(ctx, "")
	if err != nil {
		var authErr *upstream.AuthError
		if !errors.As(err, &authErr) && ctx.Err() == nil && s.grant.AccessToken != "" &&
			(s.grant.Expiry.IsZero() || s.now().Before(s.grant.Expiry)) {
			s.log.Warn("access token refresh failed; using the current token until it expires", "err", err, "expiry", s.grant.Expiry)
			return s.grant.AccessToken, nil
		}
		return "", err
	}
	return tok, nil
}

// Refresh returns a token to use instead of rejected, the token the service refused: the
// token another caller got meanwhile, or a refreshed one.
func (s *Source) Refresh(ctx context.Context, rejected upstream.Token) (upstream.Token, error) {
	if err := s.acquire(ctx); err != nil {
		return "", err
	}
	defer s.release()
	if rejected == "" {
		rejected = s.grant.AccessToken
	}
	if s.fresh(s.grant, rejected) {
		return s.grant.AccessToken, nil
	}
	return s.refreshLocked(ctx, rejected)
}

func (s *Source) acquire(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Source) release() { <-s.sem }

// fresh reports whether g's access token can be sent: present, not the rejected one, and not
// within the margin of its expiry (a token of unknown expiry is used until it is refused).
func (s *Source) fresh(g Grant, rejected upstream.Token) bool {
	if g.AccessToken == "" || g.AccessToken == rejected {
		return false
	}
	return g.Expiry.IsZero() || s.now().Add(s.margin).Before(g.Expiry)
}

// refreshLocked refreshes under the store's lock. The caller holds sem.
func (s *Source) refreshLocked(ctx context.Context, rejected upstream.Token) (upstream.Token, error) {
	unlock, err := s.store.Lock(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	d, err := s.store.Load()
	if err != nil {
		return "", err
	}
	g := d.Latest(s.resource)
	if g == nil {
		return "", s.signInAgain("signed out", nil)
	}
	if g.Key() != s.grant.Key() {
		s.log.Info("using a newer sign-in from the store", "grant", *g)
	}
	if g.AccessToken != s.grant.AccessToken && s.fresh(*g, rejected) {
		// Another process (or a new sign-in) got a token meanwhile: use it, and leave the
		// refresh token alone, since the server may have rotated it.
		s.grant = *g
		s.log.Debug("access token taken from the store, refreshed elsewhere", "expiry", g.Expiry)
		return g.AccessToken, nil
	}
	if g.RefreshToken == "" {
		s.grant = *g
		return "", s.signInAgain("the access token expired and there is no refresh token", nil)
	}
	ng, err := refresh(ctx, s.hc, *g, s.now())
	if err != nil {
		var oe *OAuthError
		if errors.As(err, &oe) && oe.Code != "" && oe.Status >= 400 && oe.Status < 500 {
			// invalid_grant (expired, revoked, already used), invalid_client, ...: dead.
			s.grant = *g
			return "", s.signInAgain("the refresh was refused", err)
		}
		s.log.Warn("access token refresh failed", "issuer", g.Issuer, "err", err)
		return "", fmt.Errorf("auth: refresh the access token: %w", err)
	}
	s.grant = ng
	d.PutGrant(ng)
	if err := s.store.Write(d); err != nil {
		// The new tokens live in this process only; other processes will need a new sign-in.
		s.log.Error("the refreshed sign-in could not be saved", "err", err)
	}
	s.log.Info("access token refreshed", "issuer", ng.Issuer, "expiry", ng.Expiry, "rotated", ng.RefreshToken != g.RefreshToken)
	return ng.AccessToken, nil
}

// signInAgain is the error that asks the user to run login.
func (s *Source) signInAgain(why string, cause error) error {
	msg := fmt.Sprintf("Your card service sign-in has expired or was revoked; run `cardwriter-mcp login --api-host %s` to sign in again.", s.apiHost)
	err := &upstream.AuthError{Message: msg, Err: cause}
	if cause == nil {
		err.Err = errors.New(why)
	}
	s.log.Warn("card service sign-in is no longer valid", "reason", why, "err", cause)
	return err
}
