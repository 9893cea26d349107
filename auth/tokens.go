package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// tokenResponse is a successful token endpoint answer (RFC 6749 section 5.1).
type tokenResponse struct {
	AccessToken  upstream.Token `json:"access_token"`
	TokenType    string         `json:"token_type"`
	ExpiresIn    json.Number    `json:"expires_in"`
	RefreshToken upstream.Token `json:"refresh_token"`
	Scope        string         `json:"scope"`
}

// oauthConfig is the golang.org/x/oauth2 configuration of a public client: client_id in the
// form body, no secret.
func oauthConfig(md *Metadata, clientID, redirectURI string) *oauth2.Config {
	return &oauth2.Config{
		ClientID:    clientID,
		RedirectURL: redirectURI,
		Scopes:      []string{Scope},
		Endpoint: oauth2.Endpoint{
			AuthURL:   md.AuthorizationEndpoint,
			TokenURL:  md.TokenEndpoint,
			AuthStyle: oauth2.AuthStyleInParams,
		},
	}
}

// exchange trades the authorization code for tokens (RFC 6749 section 4.1.3) with the PKCE
// verifier and the resource indicator, through golang.org/x/oauth2.
func exchange(ctx context.Context, hc *http.Client, cfg *oauth2.Config, code, verifier, resource string) (*oauth2.Token, error) {
	ctx = context.WithValue(ctx, oauth2.HTTPClient, hc)
	tok, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", resource))
	if err != nil {
		return nil, oauth2Error(err)
	}
	if tok.AccessToken == "" {
		return nil, errors.New("the token endpoint answered without an access_token")
	}
	if !strings.EqualFold(tok.Type(), "Bearer") {
		return nil, fmt.Errorf("the token endpoint issued a %q token; cardwriter-mcp needs a bearer token", Printable(tok.Type(), 32))
	}
	return tok, nil
}

// oauth2Error turns an error of golang.org/x/oauth2 into one that shows the OAuth error code
// and description, never the response body (*oauth2.RetrieveError prints it when there is no
// code).
func oauth2Error(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return &OAuthError{Endpoint: "token", Status: status, Code: Printable(re.ErrorCode, 64), Description: Printable(re.ErrorDescription, 200)}
	}
	return stripURL(err)
}

// refresh uses the grant's refresh token (RFC 6749 section 6). The request also carries the
// resource indicator, as the MCP authorization spec asks of every token request; x/oauth2's
// refresh cannot add it, so the request is made here. A server that rotates refresh tokens
// answers with a new one, which replaces the old in the returned grant.
func refresh(ctx context.Context, hc *http.Client, g Grant, now time.Time) (Grant, error) {
	form := url.Values{
		"grant_type":    {"refresh_token"},
		"refresh_token": {g.RefreshToken.Reveal()},
		"client_id":     {g.ClientID},
		"resource":      {g.Resource},
	}
	tr, err := postTokenForm(ctx, hc, g.TokenEndpoint, form)
	if err != nil {
		return g, err
	}
	g.AccessToken = tr.AccessToken
	if tr.TokenType != "" {
		g.TokenType = tr.TokenType
	}
	if tr.RefreshToken != "" {
		g.RefreshToken = tr.RefreshToken
	}
	if tr.Scope != "" {
		g.Scope = tr.Scope
	}
	g.Expiry = expiryOf(tr.ExpiresIn, now)
	g.RefreshedAt = now.UTC()
	return g, nil
}

// expiryOf turns expires_in (seconds) into a time; zero when absent or not a positive number.
func expiryOf(expiresIn json.Number, now time.Time) time.Time {
	secs, err := expiresIn.Int64()
	if err != nil || secs <= 0 {
		return time.Time{}
	}
	return now.Add(time.Duration(secs) * time.Second).UTC()
}

// postTokenForm posts form to the token endpoint and reads a token response.
func postTokenForm(ctx context.Context, hc *http.Client, endpoint string, form url.Values) (*tokenResponse, error) {
	status, ctype, body, err := postForm(ctx, hc, endpoint, form)
	if err != nil {
		return nil, fmt.Errorf("the token endpoint: %w", err)
	}
	if status != http.StatusOK {
		return nil, DecodeOAuthError("token", status, ctype, body)
	}
	var tr tokenResponse
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	if err := dec.Decode(&tr); err != nil {
		return nil, errors.New("the token endpoint's answer is not a JSON token response")
	}
	if tr.AccessToken == "" {
		return nil, errors.New("the token endpoint answered without an access_token")
	}
	if !strings.EqualFold(tr.TokenType, "Bearer") {
		return nil, fmt.Errorf("the token endpoint issued a %q token; cardwriter-mcp needs a bearer token", Printable(tr.TokenType, 32))
	}
	return &tr, nil
}

// revoke asks the revocation endpoint (RFC 7009) to revoke token; hint is "refresh_token" or
// "access_token".
func revoke(ctx context.Context, hc *http.Client, endpoint, clientID string, token upstream.Token, hint string) error {
	if endpoint == "" {
		return errors.New("the authorization server has no revocation endpoint")
	}
	status, ctype, body, err := postForm(ctx, hc, endpoint, url.Values{
		"token":           {token.Reveal()},
		"token_type_hint": {hint},
		"client_id":       {clientID},
	})
	if err != nil {
		return fmt.Errorf("the revocation endpoint: %w", err)
	}
	if status != http.StatusOK {
		return DecodeOAuthError("revocation", status, ctype, body)
	}
	return nil
}

// postForm posts an application/x-www-form-urlencoded body and returns the answer.
func postForm(ctx context.Context, hc *http.Client, endpoint string, form url.Values) (status int, contentType string, body []byte, err error) {
	if hc == nil {
		hc = NewHTTPClient()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, "", nil, errors.New("invalid endpoint URL")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", nil, stripURL(err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	if err != nil {
		return 0, "", nil, fmt.Errorf("read the answer: %w", err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body, nil
}
