package oauthserver

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
)

// Limits of a registration (RFC 7591) that both servers keep.
const (
	MaxClientName   = 200
	MaxRedirectURIs = 20
)

// ClientMetadata is the part of an RFC 7591 registration request the servers read.
type ClientMetadata struct {
	RedirectURIs            []string `json:"redirect_uris"`
	ClientName              *string  `json:"client_name"`
	TokenEndpointAuthMethod *string  `json:"token_endpoint_auth_method"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	Scope                   *string  `json:"scope"`
}

// ReadClientMetadata reads a registration request: a JSON body of at most MaxBodyBytes.
func ReadClientMetadata(w http.ResponseWriter, r *http.Request) (*ClientMetadata, *Error) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return nil, BadRequest("invalid_client_metadata", "Send the client metadata as JSON with Content-Type: application/json.")
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		return nil, BadRequest("invalid_client_metadata", "The client metadata could not be read or is larger than 64 KiB.")
	}
	var m ClientMetadata
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, BadRequest("invalid_client_metadata", "The client metadata is not a JSON object of the RFC 7591 fields: "+err.Error())
	}
	return &m, nil
}

// CheckRedirectURIs checks the redirect URIs: at least one, at most MaxRedirectURIs, each
// accepted by CheckRedirectURI.
func (m *ClientMetadata) CheckRedirectURIs(isLoopback func(host string) bool) *Error {
	switch {
	case len(m.RedirectURIs) == 0:
		return BadRequest("invalid_redirect_uri", "redirect_uris is required: https URIs, or http URIs on a loopback host.")
	case len(m.RedirectURIs) > MaxRedirectURIs:
		return BadRequest("invalid_redirect_uri", fmt.Sprintf("At most %d redirect URIs may be registered.", MaxRedirectURIs))
	}
	for _, u := range m.RedirectURIs {
		if err := CheckRedirectURI(u, isLoopback); err != nil {
			return BadRequest("invalid_redirect_uri", err.Error())
		}
	}
	return nil
}

// Grants returns the grant types to register, without repeats: those asked for (both supported
// ones when none is), which must include authorization_code. With strict, an unsupported grant
// type is refused; without, it is dropped (RFC 7591 section 3.2.1 lets the server register
// less than was asked for).
func (m *ClientMetadata) Grants(strict bool, extra ...string) ([]string, *Error) {
	asked := m.GrantTypes
	if asked == nil {
		asked = GrantTypes
	}
	supported := append(slices.Clone(GrantTypes), extra...)
	var kept []string
	for _, g := range asked {
		if !slices.Contains(supported, g) {
			if strict {
				return nil, BadRequest("invalid_client_metadata", "grant_types may contain only "+strings.Join(supported, ", ")+".")
			}
			continue
		}
		if !slices.Contains(kept, g) {
			kept = append(kept, g)
		}
	}
	if !slices.Contains(kept, "authorization_code") {
		return nil, BadRequest("invalid_client_metadata", "grant_types must contain authorization_code.")
	}
	return kept, nil
}

// CheckResponseTypes refuses any response type but code.
func (m *ClientMetadata) CheckResponseTypes() *Error {
	for _, rt := range m.ResponseTypes {
		if rt != "code" {
			return BadRequest("invalid_client_metadata", "response_types may contain only code.")
		}
	}
	return nil
}

// Name returns the client name, trimmed: at most MaxClientName bytes, no control characters.
func (m *ClientMetadata) Name() (string, *Error) {
	if m.ClientName == nil {
		return "", nil
	}
	name := strings.TrimSpace(*m.ClientName)
	if len(name) > MaxClientName || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", BadRequest("invalid_client_metadata", fmt.Sprintf("client_name must be at most %d bytes of printable text.", MaxClientName))
	}
	return name, nil
}

// RegisteredClient is a public client as a registration answer describes it.
type RegisteredClient struct {
	ID           string
	IssuedAt     int64 // Unix seconds
	Name         string
	RedirectURIs []string
	GrantTypes   []string
	Scope        string
}

// Response is the registration answer (RFC 7591 section 3.2.1) of a public client.
func (c RegisteredClient) Response() map[string]any {
	out := map[string]any{
		"client_id":                  c.ID,
		"client_id_issued_at":        c.IssuedAt,
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
	return out
}
