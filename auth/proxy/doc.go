// Package proxy is the HTTP authorization of cardwriter-mcp's streamable HTTP server.
//
// Proxy mode (Server): the server is the OAuth 2.1 authorization server its MCP clients see
// (RFC 9728 protected-resource metadata, RFC 8414 metadata, RFC 7591 registration of public
// clients, PKCE S256, RFC 8707 resource indicators, a consent page per client, RFC 7009
// revocation) and, towards the card service, an OAuth client of its own (discovery and
// registration once per issuer, its own PKCE and state, the callback /oauth/callback). It
// issues opaque access and refresh tokens of its own, stored as SHA-256 digests, and keeps
// the card service's tokens sealed (AES-256-GCM under the state key) per grant; they never
// leave the server, as the MCP authorization spec asks of a server that calls another API
// (no token passthrough). The records that grant access carry an HMAC under the state key, so
// that a write to the store alone cannot mint a token. What callers who have not signed in can
// make it keep (sign-ins in progress, registrations) is bounded per source address and expires.
//
// The resource identifier is the MCP endpoint's URL, {public_url}/mcp (the canonical server
// URI of the MCP spec); the origin {public_url} is accepted too, since the root metadata
// document (/.well-known/oauth-protected-resource) names it as RFC 9728 section 3.3 requires.
//
// Passthrough mode (Passthrough): for deployments inside the card service's own domain; the
// metadata names the card service as the authorization server and {base_url} as the
// resource, and each request's bearer token is forwarded upstream.
//
// In both modes every request to /mcp is authenticated (a session is never a credential); a
// missing or bad token gets 401 with WWW-Authenticate: Bearer resource_metadata="...",
// scope="mcp:card-writer"; an MCP session belongs to the grant (proxy mode) or the user
// (passthrough mode) that opened it; the request's principal (upstream.Identity: the card
// service's user id, the grant, the client) and credentials reach the card service client
// through the request's context (upstream.WithIdentity, upstream.WithTokenSource), for an
// upstream.Client built with upstream.ContextTokenSource.
//
// No token, code, PKCE verifier, state, cookie or Authorization header is ever logged.
package proxy
