package proxy

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/oauthserver"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// ---- Registration (RFC 7591) ----

// register registers a public client. A client asking for another token endpoint
// authentication method is registered as a public one all the same, and told so (RFC 7591
// section 3.2.1 lets the server replace requested values): PKCE protects its codes.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	in, e := oauthserver.ReadClientMetadata(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	if e := in.CheckRedirectURIs(isLoopbackHost); e != nil {
		writeError(w, e)
		return
	}
	kept, e := in.Grants(false)
	if e == nil {
		e = in.CheckResponseTypes()
	}
	if e != nil {
		writeError(w, e)
		return
	}
	scope := ""
	if in.Scope != nil && strings.TrimSpace(*in.Scope) != "" {
		if !oauthserver.CoversScope(*in.Scope, Scope) {
			writeOAuthError(w, http.StatusBadRequest, "invalid_client_metadata", "scope must contain "+Scope+", the only scope of this server.")
			return
		}
		scope = Scope
	}
	name, e := in.Name()
	if e != nil {
		writeError(w, e)
		return
	}
	if s.clientCount(r.Context()) >= s.opts.MaxClients {
		writeOAuthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "This server holds as many clients as it can.")
		return
	}
	now := s.now()
	c := &Client{ID: newID("mcpc_"), Name: name, RedirectURIs: slices.Clone(in.RedirectURIs), GrantTypes: kept, Scope: scope, IssuedAt: now.UTC(),
		Unused: true, Expires: now.Add(s.opts.UnusedClientTTL).UTC()}
	if err := s.store.CreateClient(ctx, c); err != nil {
		s.log.Error("proxy: store a client", "err", err)
		if store.IsUnavailable(err) {
			writeOAuthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "The registration could not be stored; try again in a moment.")
			return
		}
		writeOAuthError(w, http.StatusInternalServerError, "server_error", "The registration could not be stored.")
		return
	}
	// The source's registrations not used to sign in are bounded: its oldest ones make room.
	evicted, err := s.store.Admit(ctx, keySourceClients, s.source(r), c.ID, c.Expires, s.opts.MaxClientsPerSource)
	if err != nil {
		s.log.Warn("proxy: count a source's registrations", "err", err)
	}
	for _, id := range evicted {
		if err := s.store.DropUnusedClient(ctx, id); err != nil {
			s.log.Warn("proxy: drop an unused registration", "err", err)
		}
	}
	if len(evicted) > 0 {
		s.log.Info("unused registrations of the same source dropped", "count", len(evicted))
	}
	s.log.Info("client registered", "client_id", c.ID, "client_name", c.Name)
	writeJSON(w, http.StatusCreated, oauthserver.RegisteredClient{ID: c.ID, IssuedAt: c.IssuedAt.Unix(), Name: c.Name,
		RedirectURIs: c.RedirectURIs, GrantTypes: c.GrantTypes, Scope: c.Scope}.Response())
}

// clientCount is the number of registered clients, counted up to Options.MaxClients.
func (s *Server) clientCount(ctx context.Context) int {
	n, _ := s.store.CountClients(ctx, s.opts.MaxClients)
	return n
}

// requestCount is the number of authorization requests in progress, counted up to
// Options.MaxPending.
func (s *Server) requestCount(ctx context.Context) int {
	n, _ := s.store.CountRequests(ctx, s.opts.MaxPending)
	return n
}

// ---- Token endpoint (RFC 6749) ----

// clientRequest reads a token or revocation request and identifies its client (nil when the
// request names none and none is required); when it fails, it has answered.
func (s *Server) clientRequest(w http.ResponseWriter, r *http.Request, required bool) (url.Values, *Client, bool) {
	f, e := oauthserver.ReadForm(w, r)
	if e != nil {
		writeError(w, e)
		return nil, nil, false
	}
	c, ok := s.publicClient(r.Context(), w, r, f, required)
	return f, c, ok
}

// publicClient identifies the calling client by client_id; clients of this server are public
// and send no credentials.
func (s *Server) publicClient(ctx context.Context, w http.ResponseWriter, r *http.Request, f url.Values, required bool) (*Client, bool) {
	id, e := oauthserver.PublicClientID(w, r, f, "cardwriter-mcp", required)
	if e != nil {
		writeError(w, e)
		return nil, false
	}
	if id == "" {
		return nil, true
	}
	c, err := s.client(ctx, id)
	if store.IsUnavailable(err) {
		writeError(w, storeDown(err))
		return nil, false
	}
	if err != nil {
		writeError(w, oauthserver.UnknownClient())
		return nil, false
	}
	return c, true
}

// storeDown is the answer when the store failed (Redis down or slow): try again later; the
// code or refresh token presented is as it was, unless the message says otherwise.
func storeDown(error) *oauthserver.Error {
	return &oauthserver.Error{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable", Description: "The server's store is unavailable; try again in a moment."}
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f, c, ok := s.clientRequest(w, r, true)
	if !ok {
		return
	}
	gt := f.Get("grant_type")
	if e := oauthserver.CheckGrantType(gt, c.GrantTypes); e != nil {
		writeError(w, e)
		return
	}
	var resp *oauthserver.TokenResponse
	var ge *oauthserver.Error
	if gt == "authorization_code" {
		resp, ge = s.exchangeCode(ctx, c, f)
	} else {
		resp, ge = s.refreshTokens(ctx, c, f)
	}
	if ge != nil {
		writeError(w, ge)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// exchangeCode redeems an authorization code: single use (presenting it again revokes the
// grant it produced), not expired, this client's, the same redirect URI, the PKCE verifier
// of its challenge, the same resource.
func (s *Server) exchangeCode(ctx context.Context, c *Client, f url.Values) (*oauthserver.TokenResponse, *oauthserver.Error) {
	cr, e := oauthserver.ReadCodeRequest(f)
	if e != nil {
		return nil, e
	}
	sec, err := s.store.UseSecret(ctx, oauthserver.Digest(cr.Code))
	if store.IsUnavailable(err) {
		return nil, storeDown(err)
	}
	if err != nil || sec.Kind != KindCode {
		return nil, oauthserver.BadRequest("invalid_grant", "The authorization code is unknown or expired.")
	}
	if sec.Used {
		s.revokeGrant(ctx, sec.GrantID, "authorization code presented twice")
		return nil, oauthserver.BadRequest("invalid_grant", "The authorization code was already used; the tokens issued for it are revoked.")
	}
	// From here the code is spent: any failure ends its grant too.
	ic := oauthserver.IssuedCode{ClientID: sec.ClientID, RedirectURI: sec.RedirectURI, Challenge: sec.Challenge, Resource: sec.Resource, Expires: sec.Expires}
	if reason, e := ic.CheckRedemption(s.now(), c.ID, cr, f); e != nil {
		s.revokeGrant(ctx, sec.GrantID, reason)
		return nil, oauthserver.BadRequest("invalid_grant", e.Description)
	}
	g, err := s.store.UpdateGrant(ctx, sec.GrantID, func(g *Grant) error {
		if g.Active {
			return errors.New("grant already active")
		}
		g.Active = true
		return nil
	})
	if err != nil {
		return nil, oauthserver.BadRequest("invalid_grant", "The authorization is gone; authorize again.")
	}
	resp, ge := s.issueTokens(ctx, c, g, g.Scope)
	if ge != nil {
		s.revokeGrant(ctx, g.ID, "tokens could not be issued")
		return nil, ge
	}
	s.log.Info("tokens issued", "grant", g.ID, "client_id", c.ID, "user", g.UserID, "refreshable", resp.RefreshToken != "")
	return resp, nil
}

// refreshTokens rotates a refresh token; presenting a rotated one again revokes the grant. The
// card service's grant is refreshed first when its access token is about to expire, so that a
// grant the card service dropped ends here too.
func (s *Server) refreshTokens(ctx context.Context, c *Client, f url.Values) (*oauthserver.TokenResponse, *oauthserver.Error) {
	rt := f.Get("refresh_token")
	if rt == "" {
		return nil, oauthserver.BadRequest("invalid_request", "refresh_token is required.")
	}
	h := oauthserver.Digest(rt)
	sec, err := s.store.GetSecret(ctx, h)
	if store.IsUnavailable(err) {
		return nil, storeDown(err)
	}
	if err != nil || sec.Kind != KindRefresh {
		return nil, oauthserver.BadRequest("invalid_grant", "The refresh token is unknown, expired or revoked.")
	}
	if sec.Used {
		s.revokeGrant(ctx, sec.GrantID, "rotated refresh token presented again")
		return nil, oauthserver.BadRequest("invalid_grant", "The refresh token was already used; every token of this authorization is revoked. Authorize again.")
	}
	switch {
	case !s.now().Before(sec.Expires):
		return nil, oauthserver.BadRequest("invalid_grant", "The refresh token has expired.")
	case sec.ClientID != c.ID:
		return nil, oauthserver.BadRequest("invalid_grant", "The refresh token was issued to another client.")
	}
	g, err := s.store.GetGrant(ctx, sec.GrantID)
	if store.IsUnavailable(err) {
		return nil, storeDown(err)
	}
	if err != nil || !g.Active {
		return nil, oauthserver.BadRequest("invalid_grant", "The authorization is gone; authorize again.")
	}
	if _, ok := s.acceptedResource(g.Resource); !ok {
		return nil, oauthserver.BadRequest("invalid_grant", "The refresh token was issued for another resource; authorize again.")
	}
	if e := oauthserver.CheckResourceParam(f, g.Resource); e != nil {
		return nil, e
	}
	scope := g.Scope
	if sc := f.Get("scope"); sc != "" {
		if !oauthserver.CoversScope(g.Scope, sc) {
			return nil, oauthserver.BadRequest("invalid_scope", "Only the granted scope "+g.Scope+" can be asked for.")
		}
		scope = strings.Join(strings.Fields(sc), " ")
	}
	if g.UpstreamRefreshable && !g.UpstreamExpiry.IsZero() && !s.now().Add(time.Minute).Before(g.UpstreamExpiry) {
		if _, err := s.upstreamAccess(ctx, g.ID, ""); err != nil {
			if errors.Is(err, errGrantEnded) {
				return nil, oauthserver.BadRequest("invalid_grant", "The card service no longer honours this authorization; authorize again.")
			}
			s.log.Warn("refresh: the card service's token could not be refreshed now", "grant", g.ID, "err", err)
			return nil, &oauthserver.Error{Status: http.StatusServiceUnavailable, Code: "temporarily_unavailable", Description: "The card service could not be reached; try again in a moment."}
		}
		if g, err = s.store.GetGrant(ctx, g.ID); err != nil {
			return nil, oauthserver.BadRequest("invalid_grant", "The authorization is gone; authorize again.")
		}
	}
	// The new tokens are stored first, and the old refresh token is spent last: a store that
	// fails on the way leaves the old one valid (the client tries again), never a grant without
	// a usable refresh token.
	resp, e := s.issueTokens(ctx, c, g, scope)
	if e != nil {
		return nil, e
	}
	// Rotate: the first presentation wins; a concurrent second one is a reuse.
	prev, err := s.store.UseSecret(ctx, h)
	if err != nil {
		s.dropIssued(ctx, resp)
		if store.IsUnavailable(err) {
			return nil, storeDown(err)
		}
		return nil, oauthserver.BadRequest("invalid_grant", "The refresh token is unknown, expired or revoked.")
	}
	if prev.Used {
		s.dropIssued(ctx, resp)
		s.revokeGrant(ctx, sec.GrantID, "rotated refresh token presented again")
		return nil, oauthserver.BadRequest("invalid_grant", "The refresh token was already used; every token of this authorization is revoked. Authorize again.")
	}
	s.log.Info("tokens refreshed", "grant", g.ID, "client_id", c.ID, "user", g.UserID)
	return resp, nil
}

// issueTokens issues an access token, and a refresh token when the client may refresh and the
// card service's grant can be refreshed. The access token never outlives the card service's
// grant: without a refresh token there, it ends when the card service's access token does.
func (s *Server) issueTokens(ctx context.Context, c *Client, g *Grant, scope string) (*oauthserver.TokenResponse, *oauthserver.Error) {
	now := s.now()
	exp := now.Add(s.opts.AccessTokenTTL)
	if !g.UpstreamRefreshable && !g.UpstreamExpiry.IsZero() && g.UpstreamExpiry.Before(exp) {
		exp = g.UpstreamExpiry
	}
	if !now.Before(exp) {
		return nil, oauthserver.BadRequest("invalid_grant", "The card service's authorization has expired; authorize again.")
	}
	access := oauthserver.NewSecret(accessPrefix)
	err := s.store.PutSecret(ctx, oauthserver.Digest(access), &Secret{Kind: KindAccess, GrantID: g.ID, ClientID: c.ID, Scope: scope, Resource: g.Resource, Expires: exp})
	resp := &oauthserver.TokenResponse{AccessToken: access, TokenType: "Bearer", Scope: scope, ExpiresIn: max(int64(exp.Sub(now)/time.Second), 1)}
	if err == nil && g.UpstreamRefreshable && slices.Contains(c.GrantTypes, "refresh_token") {
		refresh := oauthserver.NewSecret(refreshPrefix)
		err = s.store.PutSecret(ctx, oauthserver.Digest(refresh), &Secret{Kind: KindRefresh, GrantID: g.ID, ClientID: c.ID, Scope: g.Scope,
			Resource: g.Resource, Expires: now.Add(s.opts.RefreshTokenTTL)})
		resp.RefreshToken = refresh
	}
	if err != nil {
		s.log.Error("proxy: store tokens", "err", err)
		s.dropIssued(ctx, resp)
		if store.IsUnavailable(err) {
			return nil, storeDown(err)
		}
		return nil, &oauthserver.Error{Status: http.StatusInternalServerError, Code: "server_error", Description: "The tokens could not be stored."}
	}
	return resp, nil
}

// dropIssued deletes tokens that were stored but will not be handed out (best effort: their
// values were never sent, so one left behind is of no use to anyone and expires).
func (s *Server) dropIssued(ctx context.Context, resp *oauthserver.TokenResponse) {
	for _, t := range []string{resp.AccessToken, resp.RefreshToken} {
		if t != "" {
			_ = s.store.DeleteSecret(context.WithoutCancel(ctx), oauthserver.Digest(t))
		}
	}
}

// ---- Revocation (RFC 7009) ----

// revoke revokes an access token, or a refresh token with its whole grant (and the card
// service's tokens). Unknown tokens, and tokens of another client than the client_id given,
// are answered 200 and left alone.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f, c, ok := s.clientRequest(w, r, false)
	if !ok {
		return
	}
	tok := f.Get("token")
	if tok == "" {
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", "token is required.")
		return
	}
	h := oauthserver.Digest(tok)
	if sec, err := s.store.GetSecret(ctx, h); err == nil && (c == nil || sec.ClientID == c.ID) {
		switch sec.Kind {
		case KindAccess:
			if err := s.store.DeleteSecret(ctx, h); err != nil {
				writeOAuthError(w, http.StatusInternalServerError, "server_error", "The revocation could not be stored.")
				return
			}
			s.log.Info("access token revoked", "grant", sec.GrantID, "client_id", sec.ClientID)
		case KindRefresh:
			s.revokeGrant(ctx, sec.GrantID, "revoked by the client")
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

// unavailableOr is the OAuth error of a failed store write: temporarily_unavailable (RFC 6749
// section 4.1.2.1: the client may try again) when the store was unavailable, code otherwise.
func unavailableOr(err error, code string) string {
	if store.IsUnavailable(err) {
		return "temporarily_unavailable"
	}
	return code
}
