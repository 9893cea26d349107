package oauthserver

import "slices"

// Endpoints are the absolute URLs an authorization server's metadata names.
type Endpoints struct {
	Issuer        string
	Authorization string
	Token         string
	Registration  string
	Revocation    string
	// DeviceAuthorization is the RFC 8628 endpoint; "" for a server without the device grant.
	DeviceAuthorization string
}

// AuthorizationServerMetadata is the RFC 8414 document of a server with public clients only,
// the authorization code grant with PKCE S256, refresh tokens, RFC 7009 revocation and RFC 9207
// iss; cimd adds client_id_metadata_document_supported.
func AuthorizationServerMetadata(e Endpoints, scopes []string, cimd bool) map[string]any {
	md := map[string]any{
		"issuer":                                         e.Issuer,
		"authorization_endpoint":                         e.Authorization,
		"token_endpoint":                                 e.Token,
		"registration_endpoint":                          e.Registration,
		"revocation_endpoint":                            e.Revocation,
		"scopes_supported":                               scopes,
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          GrantTypes,
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"revocation_endpoint_auth_methods_supported":     []string{"none"},
		"authorization_response_iss_parameter_supported": true,
	}
	if e.DeviceAuthorization != "" {
		md["device_authorization_endpoint"] = e.DeviceAuthorization
		md["grant_types_supported"] = append(slices.Clone(GrantTypes), DeviceGrantType)
	}
	if cimd {
		md["client_id_metadata_document_supported"] = true
	}
	return md
}

// ProtectedResourceMetadata is the RFC 9728 document of a resource that takes bearer tokens in
// the Authorization header.
func ProtectedResourceMetadata(resource, issuer string, scopes []string, name string) map[string]any {
	return map[string]any{
		"resource":                 resource,
		"authorization_servers":    []string{issuer},
		"scopes_supported":         scopes,
		"bearer_methods_supported": []string{"header"},
		"resource_name":            name,
	}
}
