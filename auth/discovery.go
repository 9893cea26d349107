package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

// Scope is the scope cardwriter-mcp asks for.
const Scope = "mcp:card-writer"

// ClientName is the client_name of the registration.
const ClientName = "cardwriter-mcp"

// maxBodyBytes caps every OAuth response read.
const maxBodyBytes = 1 << 20

// Metadata is the authorization server's metadata (RFC 8414), the fields cardwriter-mcp uses.
type Metadata struct {
	Issuer                                     string   `json:"issuer"`
	AuthorizationEndpoint                      string   `json:"authorization_endpoint"`
	TokenEndpoint                              string   `json:"token_endpoint"`
	RegistrationEndpoint                       string   `json:"registration_endpoint,omitempty"`
	RevocationEndpoint                         string   `json:"revocation_endpoint,omitempty"`
	DeviceAuthorizationEndpoint                string   `json:"device_authorization_endpoint,omitempty"` // RFC 8628; a guess of the contract
	ScopesSupported                            []string `json:"scopes_supported,omitempty"`
	ResponseTypesSupported                     []string `json:"response_types_supported,omitempty"`
	GrantTypesSupported                        []string `json:"grant_types_supported,omitempty"`
	CodeChallengeMethodsSupported              []string `json:"code_challenge_methods_supported,omitempty"`
	TokenEndpointAuthMethodsSupported          []string `json:"token_endpoint_auth_methods_supported,omitempty"`
	AuthorizationResponseIssParameterSupported bool     `json:"authorization_response_iss_parameter_supported,omitempty"`

	// Discovered is false when the server published no metadata and the contract's
	// endpoints under the API host are used instead.
	Discovered bool `json:"-"`
}

// Resource returns the resource indicator (RFC 8707) of the open API at apiHost:
// {api_host}/open/v1, normalised exactly as upstream.Client addresses it.
func Resource(apiHost string) (string, error) {
	c, err := upstream.New(apiHost, upstream.StaticToken("-"))
	if err != nil {
		return "", err
	}
	return c.BaseURL(), nil
}

// originOf returns scheme://host[:port] of an absolute URL.
func originOf(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", fmt.Errorf("%q is not an absolute URL", raw)
	}
	return u.Scheme + "://" + u.Host, nil
}

// hostPath returns the path of a contract operation served at {api_host} (OAuth, discovery).
func hostPath(operationID string) string {
	op := schema.MustLookup(operationID)
	if op.Server != schema.ServerHost {
		panic("auth: operation " + operationID + " is not served at {api_host}")
	}
	return op.Path
}

// fallbackMetadata is what a server without RFC 8414 metadata is assumed to offer: the
// contract's OAuth endpoints under the API host.
func fallbackMetadata(origin string) *Metadata {
	return &Metadata{
		Issuer:                        origin,
		AuthorizationEndpoint:         origin + hostPath("authorize"),
		TokenEndpoint:                 origin + hostPath("exchangeToken"),
		RegistrationEndpoint:          origin + hostPath("registerClient"),
		RevocationEndpoint:            origin + hostPath("revokeToken"),
		ResponseTypesSupported:        []string{"code"},
		CodeChallengeMethodsSupported: []string{"S256"},
	}
}

// Discover reads the authorization server metadata of the card service at apiHost from
// {api_host}/.well-known/oauth-authorization-server. A 4xx answer means the server publishes
// none: the contract's endpoints under apiHost are used. Metadata that names another issuer,
// lacks PKCE S256 or points to non-HTTPS endpoints of an HTTPS issuer is refused.
func Discover(ctx context.Context, hc *http.Client, apiHost string) (*Metadata, error) {
	resource, err := Resource(apiHost)
	if err != nil {
		return nil, err
	}
	origin, _ := originOf(resource)
	if hc == nil {
		hc = NewHTTPClient()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, origin+hostPath("getAuthorizationServerMetadata"), nil)
	if err != nil {
		return nil, fmt.Errorf("auth: discovery: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("auth: discovery at %s: %w", origin, stripURL(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	if err != nil {
		return nil, fmt.Errorf("auth: discovery at %s: read the answer: %w", origin, err)
	}
	switch {
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return fallbackMetadata(origin), nil
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("auth: discovery at %s: the server answered %s", origin, resp.Status)
	}
	var md Metadata
	if err := json.Unmarshal(body, &md); err != nil {
		return nil, fmt.Errorf("auth: discovery at %s: the metadata is not a JSON object: %w", origin, err)
	}
	md.Discovered = true
	if err := md.check(origin); err != nil {
		return nil, fmt.Errorf("auth: discovery at %s: %w", origin, err)
	}
	return &md, nil
}

// check applies RFC 8414 section 3.3 (the issuer is the origin the metadata was read from)
// and what this client needs: an authorization and a token endpoint, the code flow, PKCE S256.
func (md *Metadata) check(origin string) error {
	if strings.TrimSuffix(md.Issuer, "/") != origin {
		return fmt.Errorf("the metadata names the issuer %q, not %q (RFC 8414 section 3.3): refused", md.Issuer, origin)
	}
	md.Issuer = origin
	secure := strings.HasPrefix(origin, "https://")
	for _, ep := range []struct {
		name, value string
		required    bool
	}{
		{"authorization_endpoint", md.AuthorizationEndpoint, true},
		{"token_endpoint", md.TokenEndpoint, true},
		{"registration_endpoint", md.RegistrationEndpoint, false},
		{"revocation_endpoint", md.RevocationEndpoint, false},
	} {
		if ep.value == "" {
			if ep.required {
				return fmt.Errorf("the metadata has no %s", ep.name)
			}
			continue
		}
		u, err := url.Parse(ep.value)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.Fragment != "" {
			return fmt.Errorf("the metadata's %s is not an http(s) URL", ep.name)
		}
		if secure && u.Scheme != "https" {
			return fmt.Errorf("the metadata's %s is not HTTPS, while the issuer is", ep.name)
		}
	}
	if len(md.ResponseTypesSupported) > 0 && !slices.Contains(md.ResponseTypesSupported, "code") {
		return errors.New("the server does not support the authorization code flow")
	}
	// MCP authorization (2025-11-25): a server whose metadata does not list S256 is not
	// known to support PKCE, and the client must not proceed.
	if !slices.Contains(md.CodeChallengeMethodsSupported, "S256") {
		return errors.New("the server does not advertise PKCE with S256 (code_challenge_methods_supported): refused")
	}
	return nil
}

// NewHTTPClient returns the HTTP client of OAuth requests: a 30s deadline per request and no
// redirects followed (a redirected token request could carry a code or a token elsewhere).
func NewHTTPClient() *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// stripURL removes the request URL that *url.Error prints (it may carry a query).
func stripURL(err error) error {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err
	}
	return err
}

// OAuthError is an error answer of an OAuth endpoint (RFC 6749 section 5.2, RFC 7591
// section 3.2.2, RFC 7009 section 2.2.1).
type OAuthError struct {
	Endpoint    string // "token", "registration" or "revocation"
	Status      int    // the HTTP status
	Code        string // the "error" field; "" when the body had none
	Description string // the "error_description" field, at most 200 bytes of it
}

// Error renders "the token endpoint answered 400: invalid_grant: description".
func (e *OAuthError) Error() string {
	s := fmt.Sprintf("the %s endpoint answered %d", e.Endpoint, e.Status)
	if e.Code != "" {
		s += ": " + e.Code
	}
	if e.Description != "" {
		s += ": " + e.Description
	}
	return s
}

// DecodeOAuthError reads the error answer of an OAuth endpoint (the stdio sign-in's and the HTTP
// proxy's, as OAuth clients of the card service); it never keeps anything but the code and the
// description, made Printable (a body is not echoed: it could hold anything).
func DecodeOAuthError(endpoint string, status int, contentType string, body []byte) *OAuthError {
	e := &OAuthError{Endpoint: endpoint, Status: status}
	var env struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "" {
		if json.Unmarshal(body, &env) == nil {
			e.Code = Printable(env.Error, 64)
			e.Description = Printable(env.Description, 200)
		}
	}
	return e
}

// Printable keeps at most n bytes of s, with control characters dropped: how a value from an
// OAuth answer (an error code or description, a token type) is shown in errors and logs.
func Printable(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}
