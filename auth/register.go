package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
)

// RedirectURI is the redirect URI registered for the client: the loopback callback. At sign-in
// the same URI with the port the listener got is used, which RFC 8252 section 7.3 requires the
// authorization server to accept.
const RedirectURI = "http://127.0.0.1/callback"

// Registration is a client registered at an authorization server (RFC 7591), kept per issuer
// so that registration happens once per origin.
type Registration struct {
	Issuer                  string    `json:"issuer"`
	ClientID                string    `json:"client_id"`
	ClientIDIssuedAt        int64     `json:"client_id_issued_at,omitempty"`
	RedirectURIs            []string  `json:"redirect_uris"`
	TokenEndpointAuthMethod string    `json:"token_endpoint_auth_method,omitempty"`
	GrantTypes              []string  `json:"grant_types,omitempty"`
	RegisteredAt            time.Time `json:"registered_at"`
}

// usable reports whether a kept registration still fits this client.
func (r *Registration) usable() bool {
	return r.ClientID != "" && slices.Contains(r.RedirectURIs, RedirectURI) &&
		(r.TokenEndpointAuthMethod == "" || r.TokenEndpointAuthMethod == "none")
}

// DeviceGrantType is the RFC 8628 device authorization grant.
const DeviceGrantType = "urn:ietf:params:oauth:grant-type:device_code"

// offersDevice reports whether the server offers the device grant: its metadata names the
// device authorization endpoint (and, when it lists grant types, the grant).
func offersDevice(md *Metadata) bool {
	return md.DeviceAuthorizationEndpoint != "" &&
		(len(md.GrantTypesSupported) == 0 || slices.Contains(md.GrantTypesSupported, DeviceGrantType))
}

// grantTypes are the grant types to register: the code and refresh grants, and the device
// grant where the server offers it.
func grantTypes(md *Metadata) []string {
	g := []string{"authorization_code", "refresh_token"}
	if offersDevice(md) {
		g = append(g, DeviceGrantType)
	}
	return g
}

// Register registers cardwriter-mcp as a public client (token_endpoint_auth_method none) with
// the loopback redirect URI at the server's registration endpoint.
func Register(ctx context.Context, hc *http.Client, md *Metadata, now time.Time) (*Registration, error) {
	if md.RegistrationEndpoint == "" {
		return nil, errors.New("auth: the authorization server offers no client registration (registration_endpoint)")
	}
	if hc == nil {
		hc = NewHTTPClient()
	}
	reqBody, _ := json.Marshal(map[string]any{
		"client_name":                ClientName,
		"redirect_uris":              []string{RedirectURI},
		"token_endpoint_auth_method": "none",
		"grant_types":                grantTypes(md),
		"response_types":             []string{"code"},
		"scope":                      Scope,
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, md.RegistrationEndpoint, bytes.NewReader(reqBody))
	if err != nil {
		return nil, fmt.Errorf("auth: registration: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("auth: registration at %s: %w", md.Issuer, stripURL(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	if err != nil {
		return nil, fmt.Errorf("auth: registration at %s: read the answer: %w", md.Issuer, err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("auth: registration at %s: %w", md.Issuer, DecodeOAuthError("registration", resp.StatusCode, resp.Header.Get("Content-Type"), body))
	}
	var reg Registration
	if err := json.Unmarshal(body, &reg); err != nil {
		return nil, fmt.Errorf("auth: registration at %s: the answer is not a client registration: %w", md.Issuer, err)
	}
	switch {
	case reg.ClientID == "":
		return nil, fmt.Errorf("auth: registration at %s: the answer has no client_id", md.Issuer)
	case !slices.Contains(reg.RedirectURIs, RedirectURI):
		return nil, fmt.Errorf("auth: registration at %s: the server did not register the redirect URI %s", md.Issuer, RedirectURI)
	case reg.TokenEndpointAuthMethod != "" && reg.TokenEndpointAuthMethod != "none":
		return nil, fmt.Errorf("auth: registration at %s: the server made a confidential client (%s); cardwriter-mcp needs a public one", md.Issuer, reg.TokenEndpointAuthMethod)
	}
	reg.Issuer = md.Issuer
	reg.RegisteredAt = now.UTC()
	return &reg, nil
}
