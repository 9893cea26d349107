package proxy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// refreshLease bounds how long one replica may hold a grant's refresh (the card service call
// has a shorter deadline); leasePoll is how often a waiting replica looks again.
const (
	refreshLease = 30 * time.Second
	leasePoll    = 50 * time.Millisecond
)

// errGrantEnded marks the end of a grant: revoked, expired, dropped by the card service, or
// sealed under another key. The MCP client must authorize again.
var errGrantEnded = errors.New("the authorization has ended")

func grantEnded() error {
	return &upstream.AuthError{
		Message: "The authorization of this MCP client has ended (expired or revoked at the card service); authorize the client again.",
		Err:     errGrantEnded,
	}
}

// grantSource is the upstream.TokenSource of the requests made with one of the proxy's access
// tokens: the card service's access token of its grant, refreshed when it is about to expire
// or the card service refused it.
type grantSource struct {
	s       *Server
	grantID string
	state   *requestState
}

var (
	_ upstream.TokenSource = (*grantSource)(nil)
	_ upstream.Refresher   = (*grantSource)(nil)
)

func (g *grantSource) Token(ctx context.Context) (upstream.Token, error) {
	t, err := g.s.upstreamAccess(ctx, g.grantID, "")
	g.note(err)
	return t, err
}

func (g *grantSource) Refresh(ctx context.Context, rejected upstream.Token) (upstream.Token, error) {
	if rejected == "" {
		rejected = "-" // a refusal of a token that was not recorded still asks for a new one
	}
	t, err := g.s.upstreamAccess(ctx, g.grantID, rejected)
	g.note(err)
	return t, err
}

// note records on the request that its authorization ended, so that the answer becomes a 401.
func (g *grantSource) note(err error) {
	if errors.Is(err, errGrantEnded) && g.state != nil {
		g.state.ended.Store(true)
	}
}

// upstreamAccess returns the card service's access token of a grant. It refreshes the grant
// at the card service when the token expires within upstreamLeeway, or when rejected is not ""
// and is the token the grant still holds (the card service refused it). Refreshes of one grant
// happen one at a time; a refresh that finds another one already replaced the token uses the
// new token. A grant the card service no longer honours is revoked: errGrantEnded.
func (s *Server) upstreamAccess(ctx context.Context, grantID string, rejected upstream.Token) (upstream.Token, error) {
	t, g, err := s.grantTokens(ctx, grantID)
	if err != nil {
		return "", err
	}
	if !s.needsRefresh(t, rejected) {
		return t.Access, nil
	}
	unlock := s.locks.lock(grantID)
	defer unlock()
	// One refresh of a grant at a time across replicas too: the card service rotates its
	// refresh token, so a second concurrent refresh would end the grant.
	for {
		t, g, err = s.grantTokens(ctx, grantID) // another request may have refreshed meanwhile
		if err != nil {
			return "", err
		}
		if !s.needsRefresh(t, rejected) {
			return t.Access, nil
		}
		ok, release, err := s.store.Lease(ctx, "refresh:"+grantID, refreshLease)
		if err != nil {
			return "", fmt.Errorf("proxy: refresh a grant: %w", err)
		}
		if ok {
			defer release()
			break
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(leasePoll):
		}
	}
	if !g.UpstreamRefreshable {
		s.revokeGrant(ctx, grantID, "the card service's access token expired and cannot be refreshed")
		return "", grantEnded()
	}
	nt, err := s.up.refresh(ctx, t)
	if err != nil {
		if isPermanent(err) {
			s.log.Warn("the card service refused to refresh a grant", "grant", grantID, "err", err)
			s.revokeGrant(ctx, grantID, "the card service's refresh failed")
			return "", grantEnded()
		}
		return "", err
	}
	if _, err := s.store.UpdateGrant(ctx, grantID, func(g *Grant) error {
		s.sealTokens(g, nt)
		g.UpstreamRefreshed = s.now().UTC()
		return nil
	}); err != nil {
		if errors.Is(err, ErrNotFound) {
			s.up.revoke(context.WithoutCancel(ctx), nt) // revoked while refreshing
			return "", grantEnded()
		}
		return "", err
	}
	s.log.Info("the card service's token of a grant was refreshed", "grant", grantID)
	return nt.Access, nil
}

func (s *Server) needsRefresh(t *upstreamTokens, rejected upstream.Token) bool {
	if rejected != "" {
		return rejected == "-" || rejected == t.Access
	}
	return !t.Expiry.IsZero() && !s.now().Add(upstreamLeeway).Before(t.Expiry)
}

// grantTokens loads a live grant and unseals its card service tokens; a grant whose tokens
// cannot be unsealed (the state key changed) is revoked.
func (s *Server) grantTokens(ctx context.Context, grantID string) (*upstreamTokens, *Grant, error) {
	g, err := s.store.GetGrant(ctx, grantID)
	if errors.Is(err, ErrNotFound) || (err == nil && !g.Active) {
		return nil, nil, grantEnded()
	}
	if err != nil {
		return nil, nil, err
	}
	t, err := s.openGrant(g)
	if err != nil {
		s.log.Error("a grant's card service tokens cannot be unsealed (was the state key changed?)", "grant", grantID)
		if _, derr := s.store.DeleteGrant(ctx, grantID); derr != nil && !errors.Is(derr, ErrNotFound) {
			s.log.Error("proxy: revoke a grant", "grant", grantID, "err", derr)
		}
		return nil, nil, grantEnded()
	}
	return t, g, nil
}

// grantLocks serialises the refreshes of each grant.
type grantLocks struct {
	mu sync.Mutex
	m  map[string]*grantLock
}

type grantLock struct {
	mu   sync.Mutex
	refs int
}

func (l *grantLocks) lock(id string) func() {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*grantLock{}
	}
	gl := l.m[id]
	if gl == nil {
		gl = &grantLock{}
		l.m[id] = gl
	}
	gl.refs++
	l.mu.Unlock()
	gl.mu.Lock()
	return func() {
		gl.mu.Unlock()
		l.mu.Lock()
		gl.refs--
		if gl.refs == 0 {
			delete(l.m, id)
		}
		l.mu.Unlock()
	}
}
