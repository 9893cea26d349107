// Package auth is the OAuth client of the card service for the stdio transport: discovery
// (RFC 8414, with the contract's endpoints as the fallback), dynamic registration of a public
// client once per origin (RFC 7591), sign-in in the browser with PKCE S256 and a loopback
// redirect (RFC 7636, RFC 8252), a token store in the user's config directory, refresh of the
// access token (once at a time, even across processes) and revocation (RFC 7009).
//
// Tokens are held as upstream.Token, which prints and logs as "[redacted]"; no token,
// authorization code, PKCE verifier or Authorization header is ever logged or put in an error.
//
// The store is one JSON file, grants.json, in Dir(): the directory named by the environment
// variable CARDWRITER_CONFIG_DIR, else os.UserConfigDir()/cardwriter-mcp. The directory is
// made 0700 and the file 0600; every change is written to a temporary file, synced and
// renamed over it. Changes (sign-in, refresh, sign-out, registration) happen under an
// exclusive lock on grants.lock beside it: flock(2) on Linux, macOS and the BSDs; elsewhere
// (Windows among others) a lock file created exclusively, which is taken over when it is older
// than two minutes, so a crashed process cannot block sign-in for good.
package auth
