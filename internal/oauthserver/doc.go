// Package oauthserver is the OAuth 2 authorization server mechanics that the MCP server's proxy
// (auth/proxy) and the card service emulator (sandbox) share: PKCE S256, opaque secrets and their
// SHA-256 digests, RFC 8707 resource indicators, redirect URI rules, RFC 7591 client metadata,
// the reading and checking of token requests, RFC 6749 error answers, the RFC 8414 and RFC 9728
// documents, and the consent pages' common parts.
//
// It holds no state and knows nothing of the card service's API: each server keeps its own
// storage (the proxy its store.KV, where a code or refresh token is spent in one atomic update
// and a pending request taken with GETDEL, and the sealed card service grant; the sandbox its in-memory state and data file), its own rotation and revocation
// flow over that storage, and its own choices (the proxy drops unknown grant types at
// registration and accepts Client ID Metadata Documents; the sandbox refuses them and knows only
// its own scope). It imports nothing of this module, so the sandbox still shares no assumption of
// the upstream client.
//
// # Why not a library
//
// Evaluated (issue 16) against what both servers must do, at github.com/ory/fosite a5f0b09
// (2025-07-03) and github.com/zitadel/oidc/v3 81322d9 (2026-08-17), package op:
//
//   - RFC 8707 resource indicators, which MCP authorization requires (the resource parameter
//     bound into the grant and checked at the token endpoint): neither. fosite has only its own
//     audience parameter (pull request 879, adding RFC 8707, was closed unmerged); op reads
//     resource only in RFC 8693 token exchange.
//   - RFC 7591 dynamic registration, RFC 8414 metadata at /.well-known/oauth-authorization-server,
//     Client ID Metadata Documents: neither (fosite leaves registration and discovery to Hydra; op
//     serves OpenID discovery at /.well-known/openid-configuration only).
//   - PKCE S256 with plain refused: fosite yes (plain off by default); op verifies plain
//     challenges (oidc.VerifyCodeChallenge) and does not refuse code_challenge_method=plain.
//   - Refresh rotation with reuse detection that revokes the grant, RFC 7009 revocation: fosite
//     yes (handleRefreshTokenReuse); op leaves rotation and reuse to the Storage implementation.
//   - Storage: fosite stores whole Requesters (client, session, form) through per-token
//     interfaces, and spends a code with GetAuthorizeCodeSession then a separate
//     InvalidateAuthorizeCodeSession, single use only inside a storage.Transactional transaction,
//     where our store.KV spends a code in one atomic update (Redis WATCH/MULTI/EXEC); its HMAC token strategy stores an HMAC
//     signature under a global secret, not our SHA-256 digests, so every issued token and stored
//     grant would be invalidated. op's Storage interface wants ID-token signing keys (SigningKey,
//     KeySet) and an OpenID user model the MCP server does not have.
//   - The sealed card service grant and its refresh: ours either way.
//
// Adopting either would mean writing resource indicators, registration, metadata and CIMD
// ourselves anyway, plus an adapter of its storage to store.KV that loses atomic single use
// (fosite), or an OpenID provider with keys it does not need and weaker PKCE (op), and dozens
// of transitive modules (fosite's go.mod requires ory/x, go-jose, gorilla/mux, OpenTelemetry).
// What both servers really repeat is the mechanics in this package.
package oauthserver
