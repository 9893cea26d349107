package proxy

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// ---- Registration (RFC 7591) ----

var supportedGrantTypes = []string{"authorization_code", "refresh_token"}

// register registers a public client. A client asking for another token endpoint
// authentication method is registered as a public one all the same, and told so (RFC 7591
// section 3.2.1 lets the server replace requested values): PKCE protects its codes.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	fail := func(code, desc string) { writeOAuthError(w, http.StatusBadRequest, code, desc) }
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		fail("invalid_client_metadata", "Send the client metadata as JSON with Content-Type: application/json.")
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFormBytes))
	if err != nil {
		fail("invalid_client_metadata", "The client metadata could not be read or is larger than 64 KiB.")
		return
	}
	var in struct {
		RedirectURIs  []string `json:"redirect_uris"`
		ClientName    *string  `json:"client_name"`
		GrantTypes    []string `json:"grant_types"`
		ResponseTypes []string `json:"response_types"`
		Scope         *string  `json:"scope"`
	}
	if err := json.Unmarshal(data, &in); err != nil {
		fail("invalid_client_metadata", "The client metadata is not a JSON object of the RFC 7591 fields.")
		return
	}
	switch {
	case len(in.RedirectURIs) == 0:
		fail("invalid_redirect_uri", "redirect_uris is required: https URIs, or http URIs on a loopback host.")
		return
	case len(in.RedirectURIs) > maxRedirectURIs:
		fail("invalid_redirect_uri", fmt.Sprintf("At most %d redirect URIs may be registered.", maxRedirectURIs))
		return
	}
	for _, u := range in.RedirectURIs {
		if err := checkRedirectURI(u); err != nil {
			fail("invalid_redirect_uri", err.Error())
			return
		}
	}
	grants := in.GrantTypes
	if grants == nil {
		grants = supportedGrantTypes
	}
	var kept []string
	for _, g := range grants {
		if slices.Contains(supportedGrantTypes, g) && !slices.Contains(kept, g) {
			kept = append(kept, g)
		}
	}
	if !slices.Contains(kept, "authorization_code") {
		fail("invalid_client_metadata", "grant_types must contain authorization_code.")
		return
	}
	for _, rt := range in.ResponseTypes {
		if rt != "code" {
			fail("invalid_client_metadata", "response_types may contain only code.")
			return
		}
	}
	scope := ""
	if in.Scope != nil && strings.TrimSpace(*in.Scope) != "" {
		if !coversScope(*in.Scope, Scope) {
			fail("invalid_client_metadata", "scope must contain "+Scope+", the only scope of this server.")
			return
		}
		scope = Scope
	}
	name := ""
	if in.ClientName != nil {
		name = strings.TrimSpace(*in.ClientName)
		if len(name) > maxClientName || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			fail("invalid_client_metadata", fmt.Sprintf("client_name must be at most %d bytes of printable text.", maxClientName))
			return
		}
	}
	if s.clientCount(r.Context()) >= maxClients {
		writeOAuthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "This server holds as many clients as it can.")
		return
	}
	c := &Client{ID: newID("mcpc_"), Name: name, RedirectURIs: slices.Clone(in.RedirectURIs), GrantTypes: kept, Scope: scope, IssuedAt: s.now().UTC()}
	if err := s.store.CreateClient(ctx, c); err != nil {
		s.log.Error("proxy: store a client", "err", err)
		writeOAuthError(w, http.StatusInternalServerError, "server_error", "The registration could not be stored.")
		return
	}
	s.log.Info("client registered", "client_id", c.ID, "client_name", c.Name)
	out := map[string]any{
		"client_id":                  c.ID,
		"client_id_issued_at":        c.IssuedAt.Unix(),
		"redirect_uris":              c.RedirectURIs,
		"token_endpoint_auth_method": "none",
		"grant_types":                c.GrantTypes,
		"response_types":             []string{"code"},
	}
	if c.Name != "" {
		out["client_name"] = c.Name
	}
	if c.Scope != "" {
		out["scope"] = c.Scope
	}
	writeJSON(w, http.StatusCreated, out)
}

// clientCount is the number of registered clients, counted up to maxClients.
func (s *Server) clientCount(ctx context.Context) int {
	n, _ := s.store.CountClients(ctx, maxClients)
	return n
}

// requestCount is the number of authorization requests in progress, counted up to maxRequests.
func (s *Server) requestCount(ctx context.Context) int {
	n, _ := s.store.CountRequests(ctx, maxRequests)
	return n
}

// checkRedirectURI accepts an absolute https URI, or an http URI on a loopback host, without
// fragment or user info (MCP authorization: redirect URIs are localhost or HTTPS).
func checkRedirectURI(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case len(raw) > maxURILength:
		return fmt.Errorf("a redirect URI is longer than %d bytes", maxURILength)
	case err != nil || !u.IsAbs() || u.Opaque != "" || u.Host == "":
		return fmt.Errorf("redirect URI %q is not an absolute URI", raw)
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return fmt.Errorf("redirect URI %q must not have a fragment", raw)
	case u.User != nil:
		return fmt.Errorf("redirect URI %q must not carry user info", raw)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopbackHost(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("redirect URI %q: http is allowed only on a loopback host; use https", raw)
	}
	return fmt.Errorf("redirect URI %q: the scheme must be https, or http on a loopback host", raw)
}

// ---- Token endpoint (RFC 6749) ----

// tokenForm reads an application/x-www-form-urlencoded body; a repeated parameter is refused.
func tokenForm(w http.ResponseWriter, r *http.Request) (url.Values, string) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		return nil, "Send the parameters as application/x-www-form-urlencoded."
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFormBytes))
	if err != nil {
		return nil, "The request body could not be read or is larger than 64 KiB."
	}
	f, err := url.ParseQuery(string(data))
	if err != nil {
		return nil, "The request body is not valid form encoding."
	}
	for k, v := range f {
		if len(v) > 1 {
			return nil, "The parameter " + k + " is given more than once."
		}
	}
	return f, ""
}

// publicClient identifies the calling client by client_id; clients of this server are public
// and send no credentials.
func (s *Server) publicClient(ctx context.Context, w http.ResponseWriter, r *http.Request, f url.Values, required bool) (*Client, bool) {
	if r.Header.Get("Authorization") != "" || f.Get("client_secret") != "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="cardwriter-mcp"`)
		writeOAuthError(w, http.StatusUnauthorized, "invalid_client",
			"Clients of this server are public (token_endpoint_auth_method none): send client_id in the form body, without credentials.")
		return nil, false
	}
	id := f.Get("client_id")
	if id == "" {
		if required {
			writeOAuthError(w, http.StatusBadRequest, "invalid_request", "client_id is required.")
			return nil, false
		}
		return nil, true
	}
	c, err := s.client(ctx, id)
	if store.IsUnavailable(err) {
		writeOAuthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", storeDown(err).desc)
		return nil, false
	}
	if err != nil {
		writeOAuthError(w, http.StatusUnauthorized, "invalid_client", "No client is registered with this client_id.")
		return nil, false
	}
	return c, true
}

type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token,omitempty"`
	Scope        string `json:"scope"`
}

// grantError is a token endpoint error (400 unless said otherwise).
type grantError struct {
	status int
	code   string
	desc   string
}

func grantErr(code, desc string) *grantError { return &grantError{http.StatusBadRequest, code, desc} }

// storeDown is the answer when the store failed (Redis down or slow): try again later; the
// code or refresh token presented is as it was, unless the message says otherwise.
func storeDown(error) *grantError {
	return &grantError{http.StatusServiceUnavailable, "temporarily_unavailable", "The server's store is unavailable; try again in a moment."}
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f, problem := tokenForm(w, r)
	if problem != "" {
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", problem)
		return
	}
	c, ok := s.publicClient(ctx, w, r, f, true)
	if !ok {
		return
	}
	gt := f.Get("grant_type")
	switch {
	case gt == "":
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", "grant_type is required.")
		return
	case !slices.Contains(supportedGrantTypes, gt):
		writeOAuthError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token.")
		return
	case !slices.Contains(c.GrantTypes, gt):
		writeOAuthError(w, http.StatusBadRequest, "unauthorized_client", "The client did not register the grant type "+gt+".")
		return
	}
	var resp *tokenResponse
	var e *grantError
	if gt == "authorization_code" {
		resp, e = s.exchangeCode(ctx, c, f)
	} else {
		resp, e = s.refreshTokens(ctx, c, f)
	}
	if e != nil {
		writeOAuthError(w, e.status, e.code, e.desc)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// exchangeCode redeems an authorization code: single use (presenting it again revokes the
// grant it produced), not expired, this client's, the same redirect URI, the PKCE verifier
// of its challenge, the same resource.
func (s *Server) exchangeCode(ctx context.Context, c *Client, f url.Values) (*tokenResponse, *grantError) {
	code, redirectURI, verifier := f.Get("code"), f.Get("redirect_uri"), f.Get("code_verifier")
	switch {
	case code == "":
		return nil, grantErr("invalid_request", "code is required.")
	case redirectURI == "":
		return nil, grantErr("invalid_request", "redirect_uri is required: the one sent to the authorization endpoint.")
	case verifier == "":
		return nil, grantErr("invalid_request", "code_verifier is required (PKCE).")
	}
	sec, err := s.store.UseSecret(ctx, digest(code))
	if store.IsUnavailable(err) {
		return nil, storeDown(err)
	}
	if err != nil || sec.Kind != KindCode {
		return nil, grantErr("invalid_grant", "The authorization code is unknown or expired.")
	}
	if sec.Used {
		s.revokeGrant(ctx, sec.GrantID, "authorization code presented twice")
		return nil, grantErr("invalid_grant", "The authorization code was already used; the tokens issued for it are revoked.")
	}
	// From here the code is spent: any failure ends its grant too.
	refuse := func(reason, desc string) (*tokenResponse, *grantError) {
		s.revokeGrant(ctx, sec.GrantID, reason)
		return nil, grantErr("invalid_grant", desc)
	}
	switch {
	case !s.now().Before(sec.Expires):
		return refuse("authorization code expired", "The authorization code has expired.")
	case sec.ClientID != c.ID:
		return refuse("authorization code presented by another client", "The authorization code was issued to another client.")
	case sec.RedirectURI != redirectURI:
		return refuse("authorization code presented with another redirect URI", "redirect_uri does not match the one of the authorization request.")
	case !validVerifier(verifier) || subtle.ConstantTimeCompare([]byte(pkceS256(verifier)), []byte(sec.Challenge)) != 1:
		return refuse("PKCE verifier does not match", "code_verifier does not match the code_challenge.")
	}
	if res := f.Get("resource"); res != "" {
		if cr, ok := canonicalResource(res); !ok || cr != sec.Resource {
			return refuse("authorization code presented for another resource", "resource must be "+sec.Resource+", as in the authorization request.")
		}
	}
	g, err := s.store.UpdateGrant(ctx, sec.GrantID, func(g *Grant) error {
		if g.Active {
			return errors.New("grant already active")
		}
		g.Active = true
		return nil
	})
	if err != nil {
		return nil, grantErr("invalid_grant", "The authorization is gone; authorize again.")
	}
	resp, e := s.issueTokens(ctx, c, g, g.Scope)
	if e != nil {
		s.revokeGrant(ctx, g.ID, "tokens could not be issued")
		return nil, e
	}
	s.log.Info("tokens issued", "grant", g.ID, "client_id", c.ID, "user", g.UserID, "refreshable", resp.RefreshToken != "")
	return resp, nil
}

// refreshTokens rotates a refresh token; presenting a rotated one again revokes the grant. The
// card service's grant is refreshed first when its access token is about to expire, so that a
// grant the card service dropped ends here too.
func (s *Server) refreshTokens(ctx context.Context, c *Client, f url.Values) (*tokenResponse, *grantError) {
	rt := f.Get("refresh_token")
	if rt == "" {
		return nil, grantErr("invalid_request", "refresh_token is required.")
	}
	h := digest(rt)
	sec, err := s.store.GetSecret(ctx, h)
	if store.IsUnavailable(err) {
		return nil, storeDown(err)
	}
	if err != nil || sec.Kind != KindRefresh {
		return nil, grantErr("invalid_grant", "The refresh token is unknown, expired or revoked.")
	}
	if sec.Used {
		s.revokeGrant(ctx, sec.GrantID, "rotated refresh token presented again")
		return nil, grantErr("invalid_grant", "The refresh token was already used; every token of this authorization is revoked. Authorize again.")
	}
	switch {
	case !s.now().Before(sec.Expires):
		return nil, grantErr("invalid_grant", "The refresh token has expired.")
	case sec.ClientID != c.ID:
		return nil, grantErr("invalid_grant", "The refresh token was issued to another client.")
	}
	g, err := s.store.GetGrant(ctx, sec.GrantID)
	if store.IsUnavailable(err) {
		return nil, storeDown(err)
	}
	if err != nil || !g.Active {
		return nil, grantErr("invalid_grant", "The authorization is gone; authorize again.")
	}
	if _, ok := s.acceptedResource(g.Resource); !ok {
		return nil, grantErr("invalid_grant", "The refresh token was issued for another resource; authorize again.")
	}
	if res := f.Get("resource"); res != "" {
		if cr, ok := canonicalResource(res); !ok || cr != g.Resource {
			return nil, grantErr("invalid_target", "resource must be "+g.Resource+".")
		}
	}
	scope := g.Scope
	if sc := f.Get("scope"); sc != "" {
		if !coversScope(g.Scope, sc) {
			return nil, grantErr("invalid_scope", "Only the granted scope "+g.Scope+" can be asked for.")
		}
		scope = strings.Join(strings.Fields(sc), " ")
	}
	if g.UpstreamRefreshable && !g.UpstreamExpiry.IsZero() && !s.now().Add(time.Minute).Before(g.UpstreamExpiry) {
		if _, err := s.upstreamAccess(ctx, g.ID, ""); err != nil {
			if errors.Is(err, errGrantEnded) {
				return nil, grantErr("invalid_grant", "The card service no longer honours this authorization; authorize again.")
			}
			s.log.Warn("refresh: the card service's token could not be refreshed now", "grant", g.ID, "err", err)
			return nil, &grantError{http.StatusServiceUnavailable, "temporarily_unavailable", "The card service could not be reached; try again in a moment."}
		}
		if g, err = s.store.GetGrant(ctx, g.ID); err != nil {
			return nil, grantErr("invalid_grant", "The authorization is gone; authorize again.")
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
		return nil, grantErr("invalid_grant", "The refresh token is unknown, expired or revoked.")
	}
	if prev.Used {
		s.dropIssued(ctx, resp)
		s.revokeGrant(ctx, sec.GrantID, "rotated refresh token presented again")
		return nil, grantErr("invalid_grant", "The refresh token was already used; every token of this authorization is revoked. Authorize again.")
	}
	s.log.Info("tokens refreshed", "grant", g.ID, "client_id", c.ID, "user", g.UserID)
	return resp, nil
}

// issueTokens issues an access token, and a refresh token when the client may refresh and the
// card service's grant can be refreshed. The access token never outlives the card service's
// grant: without a refresh token there, it ends when the card service's access token does.
func (s *Server) issueTokens(ctx context.Context, c *Client, g *Grant, scope string) (*tokenResponse, *grantError) {
	now := s.now()
	exp := now.Add(s.opts.AccessTokenTTL)
	if !g.UpstreamRefreshable && !g.UpstreamExpiry.IsZero() && g.UpstreamExpiry.Before(exp) {
		exp = g.UpstreamExpiry
	}
	if !now.Before(exp) {
		return nil, grantErr("invalid_grant", "The card service's authorization has expired; authorize again.")
	}
	access := newSecret(accessPrefix)
	err := s.store.PutSecret(ctx, digest(access), &Secret{Kind: KindAccess, GrantID: g.ID, ClientID: c.ID, Scope: scope, Resource: g.Resource, Expires: exp})
	resp := &tokenResponse{AccessToken: access, TokenType: "Bearer", Scope: scope, ExpiresIn: max(int64(exp.Sub(now)/time.Second), 1)}
	if err == nil && g.UpstreamRefreshable && slices.Contains(c.GrantTypes, "refresh_token") {
		refresh := newSecret(refreshPrefix)
		err = s.store.PutSecret(ctx, digest(refresh), &Secret{Kind: KindRefresh, GrantID: g.ID, ClientID: c.ID, Scope: g.Scope,
			Resource: g.Resource, Expires: now.Add(s.opts.RefreshTokenTTL)})
		resp.RefreshToken = refresh
	}
	if err != nil {
		s.log.Error("proxy: store tokens", "err", err)
		s.dropIssued(ctx, resp)
		if store.IsUnavailable(err) {
			return nil, storeDown(err)
		}
		return nil, &grantError{http.StatusInternalServerError, "server_error", "The tokens could not be stored."}
	}
	return resp, nil
}

// dropIssued deletes tokens that were stored but will not be handed out (best effort: their
// values were never sent, so one left behind is of no use to anyone and expires).
func (s *Server) dropIssued(ctx context.Context, resp *tokenResponse) {
	for _, t := range []string{resp.AccessToken, resp.RefreshToken} {
		if t != "" {
			_ = s.store.DeleteSecret(context.WithoutCancel(ctx), digest(t))
		}
	}
}

// ---- Revocation (RFC 7009) ----

// revoke revokes an access token, or a refresh token with its whole grant (and the card
// service's tokens). Unknown tokens, and tokens of another client than the client_id given,
// are answered 200 and left alone.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f, problem := tokenForm(w, r)
	if problem != "" {
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", problem)
		return
	}
	c, ok := s.publicClient(ctx, w, r, f, false)
	if !ok {
		return
	}
	tok := f.Get("token")
	if tok == "" {
		writeOAuthError(w, http.StatusBadRequest, "invalid_request", "token is required.")
		return
	}
	h := digest(tok)
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
