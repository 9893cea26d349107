package proxy

// The proxy as the OAuth client of the card service: discovery (auth.Discover, shared with
// the stdio sign-in), registration of the proxy's callback once per issuer (RFC 7591), the
// authorization request with the proxy's own PKCE and state, the code exchange and refresh
// (RFC 6749, with the resource indicator {base_url}, RFC 8707), revocation (RFC 7009) and the
// identity of the signed-in user (GET /me).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/cardwriter/cardwriter-mcp/auth"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

const (
	maxOAuthBody  = 1 << 20
	metadataTTL   = time.Hour
	clientName    = "cardwriter-mcp (remote MCP server)"
	upstreamScope = auth.Scope
)

// upstreamTokens are the card service's tokens of one grant; they are only ever stored sealed.
type upstreamTokens struct {
	Access             upstream.Token `json:"access"`
	Refresh            upstream.Token `json:"refresh,omitempty"`
	Expiry             time.Time      `json:"expiry,omitzero"`
	Scope              string         `json:"scope,omitempty"`
	ClientID           string         `json:"clientId"`
	TokenEndpoint      string         `json:"tokenEndpoint"`
	RevocationEndpoint string         `json:"revocationEndpoint,omitempty"`
}

// permanent reports an error answer of the card service's OAuth endpoints that says the grant
// (or the client) is gone for good, not a passing fault: retrying later cannot help.
func permanent(e *auth.OAuthError) bool {
	switch e.Code {
	case "invalid_grant", "invalid_client", "unauthorized_client", "invalid_scope", "invalid_target":
		return true
	}
	return e.Status == http.StatusBadRequest || e.Status == http.StatusUnauthorized
}

// isPermanent reports an error after which the grant must be revoked.
func isPermanent(err error) bool {
	var f *auth.OAuthError
	return errors.As(err, &f) && permanent(f)
}

type upstreamAuth struct {
	apiHost  string
	resource string // {base_url}
	callback string // {public_url}/oauth/callback
	hc       *http.Client
	api      *upstream.Client // with upstream.ContextTokenSource
	store    Store
	log      *slog.Logger
	now      func() time.Time

	mu   sync.Mutex
	md   *auth.Metadata
	mdAt time.Time
}

// metadata returns the card service's authorization server metadata, discovered at first use
// and again every hour (so the server starts while the card service is down).
func (u *upstreamAuth) metadata(ctx context.Context) (*auth.Metadata, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.md != nil && u.now().Sub(u.mdAt) < metadataTTL {
		return u.md, nil
	}
	md, err := auth.Discover(ctx, u.hc, u.apiHost)
	if err != nil {
		return nil, err
	}
	u.md, u.mdAt = md, u.now()
	return md, nil
}

// clientID returns the proxy's client at the issuer, registering it when there is none.
func (u *upstreamAuth) clientID(ctx context.Context, md *auth.Metadata) (string, error) {
	c, err := u.store.GetUpstreamClient(ctx, md.Issuer, u.callback)
	if err == nil {
		return c.ClientID, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return "", err
	}
	if md.RegistrationEndpoint == "" {
		return "", errors.New("the card service offers no client registration (registration_endpoint)")
	}
	body, _ := json.Marshal(map[string]any{
		"client_name":                clientName,
		"redirect_uris":              []string{u.callback},
		"token_endpoint_auth_method": "none",
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"scope":                      upstreamScope,
	})
	status, ctype, resp, err := u.post(ctx, md.RegistrationEndpoint, "application/json", body)
	if err != nil {
		return "", fmt.Errorf("register with the card service: %w", err)
	}
	if status != http.StatusCreated && status != http.StatusOK {
		return "", decodeFailure("registration", status, ctype, resp)
	}
	var reg struct {
		ClientID     string   `json:"client_id"`
		RedirectURIs []string `json:"redirect_uris"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
	}
	if err := json.Unmarshal(resp, &reg); err != nil || reg.ClientID == "" {
		return "", errors.New("the card service's registration answer has no client_id")
	}
	if len(reg.RedirectURIs) > 0 && !slices.Contains(reg.RedirectURIs, u.callback) {
		return "", fmt.Errorf("the card service did not register the callback %s", u.callback)
	}
	if reg.AuthMethod != "" && reg.AuthMethod != "none" {
		return "", fmt.Errorf("the card service made a confidential client (%s); the proxy needs a public one", reg.AuthMethod)
	}
	uc := &UpstreamClient{Issuer: md.Issuer, RedirectURI: u.callback, ClientID: reg.ClientID, Registered: u.now().UTC()}
	if err := u.store.PutUpstreamClient(ctx, uc); err != nil {
		return "", err
	}
	u.log.Info("registered with the card service's authorization server", "issuer", md.Issuer, "client_id", reg.ClientID, "redirect_uri", u.callback)
	return reg.ClientID, nil
}

// forgetClient drops the registration after the card service said it does not know it, so
// that the next sign-in registers again.
func (u *upstreamAuth) forgetClient(ctx context.Context, md *auth.Metadata) {
	if err := u.store.DeleteUpstreamClient(ctx, md.Issuer, u.callback); err != nil {
		u.log.Warn("forget the card service registration", "err", err)
	}
}

// authURL is the card service's authorization request for the proxy's leg.
func (u *upstreamAuth) authURL(md *auth.Metadata, clientID, state, verifier string) string {
	cfg := &oauth2.Config{ClientID: clientID, RedirectURL: u.callback, Scopes: []string{upstreamScope},
		Endpoint: oauth2.Endpoint{AuthURL: md.AuthorizationEndpoint, TokenURL: md.TokenEndpoint}}
	return cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", u.resource))
}

// exchange trades the card service's code for its tokens.
func (u *upstreamAuth) exchange(ctx context.Context, md *auth.Metadata, clientID, code, verifier string) (*upstreamTokens, error) {
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {u.callback},
		"client_id":     {clientID},
		"code_verifier": {verifier},
		"resource":      {u.resource},
	}
	t, err := u.tokenRequest(ctx, md.TokenEndpoint, form, nil)
	if err != nil {
		return nil, err
	}
	t.ClientID, t.TokenEndpoint, t.RevocationEndpoint = clientID, md.TokenEndpoint, md.RevocationEndpoint
	return t, nil
}

// refresh uses the grant's refresh token; a rotated refresh token replaces the old one.
func (u *upstreamAuth) refresh(ctx context.Context, old *upstreamTokens) (*upstreamTokens, error) {
	if old.Refresh == "" {
		return nil, &auth.OAuthError{Endpoint: "card service's token", Status: http.StatusBadRequest, Code: "invalid_grant", Description: "no refresh token"}
	}
	form := url.Values{
		"grant_type":    {"refresh_token"},
		"refresh_token": {old.Refresh.Reveal()},
		"client_id":     {old.ClientID},
		"resource":      {u.resource},
	}
	return u.tokenRequest(ctx, old.TokenEndpoint, form, old)
}

func (u *upstreamAuth) tokenRequest(ctx context.Context, endpoint string, form url.Values, old *upstreamTokens) (*upstreamTokens, error) {
	status, ctype, body, err := u.post(ctx, endpoint, "application/x-www-form-urlencoded", []byte(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("the card service's token endpoint: %w", err)
	}
	if status != http.StatusOK {
		return nil, decodeFailure("token", status, ctype, body)
	}
	var tr struct {
		AccessToken  upstream.Token `json:"access_token"`
		TokenType    string         `json:"token_type"`
		ExpiresIn    json.Number    `json:"expires_in"`
		RefreshToken upstream.Token `json:"refresh_token"`
		Scope        string         `json:"scope"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&tr); err != nil || tr.AccessToken == "" {
		return nil, errors.New("the card service's token endpoint answered without an access token")
	}
	if !strings.EqualFold(tr.TokenType, "Bearer") {
		return nil, errors.New("the card service's token endpoint issued a token that is not a bearer token")
	}
	t := &upstreamTokens{Access: tr.AccessToken, Refresh: tr.RefreshToken, Scope: tr.Scope}
	if old != nil {
		t.ClientID, t.TokenEndpoint, t.RevocationEndpoint = old.ClientID, old.TokenEndpoint, old.RevocationEndpoint
		if t.Refresh == "" {
			t.Refresh = old.Refresh
		}
		if t.Scope == "" {
			t.Scope = old.Scope
		}
	}
	if secs, err := tr.ExpiresIn.Int64(); err == nil && secs > 0 {
		t.Expiry = u.now().Add(time.Duration(secs) * time.Second).UTC()
	}
	return t, nil
}

// revoke asks the card service to revoke the grant's tokens (the refresh token revokes the
// whole grant there); best effort.
func (u *upstreamAuth) revoke(ctx context.Context, t *upstreamTokens) {
	if t.RevocationEndpoint == "" {
		return
	}
	for _, tok := range []struct {
		v    upstream.Token
		hint string
	}{{t.Refresh, "refresh_token"}, {t.Access, "access_token"}} {
		if tok.v == "" {
			continue
		}
		form := url.Values{"token": {tok.v.Reveal()}, "token_type_hint": {tok.hint}, "client_id": {t.ClientID}}
		status, ctype, body, err := u.post(ctx, t.RevocationEndpoint, "application/x-www-form-urlencoded", []byte(form.Encode()))
		switch {
		case err != nil:
			u.log.Warn("revoke the card service's token", "hint", tok.hint, "err", err)
		case status != http.StatusOK:
			u.log.Warn("revoke the card service's token", "hint", tok.hint, "err", decodeFailure("revocation", status, ctype, body))
		}
	}
}

// me returns the user the card service's access token acts for.
func (u *upstreamAuth) me(ctx context.Context, access upstream.Token) (*upstream.Me, error) {
	return u.api.GetMe(upstream.WithTokenSource(ctx, upstream.StaticToken(access)))
}

// identityMissing reports whether err says the card service has no identity operation where
// the contract guesses it (404, 405, 501): then it names nobody, and the grant (or, in
// passthrough, the token) stands for the user; it is no failure of the sign-in.
func identityMissing(err error) bool {
	var apiErr *upstream.Error
	return errors.As(err, &apiErr) && (apiErr.Status == http.StatusNotFound || apiErr.Status == http.StatusMethodNotAllowed ||
		apiErr.Status == http.StatusNotImplemented)
}

// post sends body to endpoint and reads the answer (1 MiB at most); redirects are not
// followed (u.hc refuses them).
func (u *upstreamAuth) post(ctx context.Context, endpoint, contentType string, body []byte) (status int, ctype string, resp []byte, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, "", nil, errors.New("invalid endpoint URL")
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json")
	r, err := u.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // *url.Error prints the URL; keep the cause only
		}
		return 0, "", nil, err
	}
	defer r.Body.Close()
	resp, err = io.ReadAll(io.LimitReader(r.Body, maxOAuthBody))
	if err != nil {
		return 0, "", nil, fmt.Errorf("read the answer: %w", err)
	}
	return r.StatusCode, r.Header.Get("Content-Type"), resp, nil
}

// decodeFailure keeps the error code and description of an error answer of the card service's
// OAuth endpoint (token, registration or revocation), nothing else.
func decodeFailure(endpoint string, status int, ctype string, body []byte) *auth.OAuthError {
	return auth.DecodeOAuthError("card service's "+endpoint, status, ctype, body)
}
