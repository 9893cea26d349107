package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
)

// Identity is who a call acts for: the card service's user, and in proxy mode the grant and
// the MCP client it was given to. The HTTP server's authorization puts it in each request's
// context (WithIdentity); over stdio the Client learns the user from GET /me.
type Identity struct {
	UserID   string // the card service's user id (GET /me's userId)
	GrantID  string // the proxy's grant; "" outside proxy mode
	ClientID string // the MCP client the grant was given to; "" outside proxy mode
}

type identityKey struct{}

// WithIdentity returns a copy of ctx that carries id.
func WithIdentity(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity ctx carries, or nil.
func IdentityFrom(ctx context.Context) *Identity {
	id, _ := ctx.Value(identityKey{}).(*Identity)
	return id
}

// maxKnownUsers bounds the tokens whose user a Client remembers.
const maxKnownUsers = 1000

// knownUsers remembers the user of each token (by a digest of it) that GET /me named.
type knownUsers struct {
	mu sync.Mutex
	m  map[[16]byte]string
}

func tokenKey(t Token) [16]byte {
	sum := sha256.Sum256([]byte(t))
	var k [16]byte
	copy(k[:], sum[:])
	return k
}

func (k *knownUsers) get(t Token) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.m[tokenKey(t)]
}

func (k *knownUsers) put(t Token, user string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil || len(k.m) >= maxKnownUsers {
		k.m = map[[16]byte]string{}
	}
	k.m[tokenKey(t)] = user
}

// Identity returns who the call in ctx acts for: the identity ctx carries (the HTTP server's
// authorization sets it), or else the user GET /me names for the call's token, asked once
// per token and remembered (over stdio, a refreshed token is asked once more and names the
// same user). Its UserID is "" when no token is signed in or the card service could not say.
func (c *Client) Identity(ctx context.Context) Identity {
	if id := IdentityFrom(ctx); id != nil {
		return *id
	}
	token, err := c.tokenOf(ctx)
	if err != nil || token == "" {
		return Identity{}
	}
	if u := c.users.get(token); u != "" {
		return Identity{UserID: u}
	}
	me, err := c.GetMe(ctx)
	if err != nil || me.UserID == "" {
		return Identity{}
	}
	c.users.put(token, me.UserID)
	return Identity{UserID: me.UserID}
}

// Principal returns the card service's user id of the call in ctx ("" when unknown): the
// one name of a user across tokens, refreshes and MCP clients, for audit lines, per-user
// limits and whatever a user owns on this server.
func (c *Client) Principal(ctx context.Context) string { return c.Identity(ctx).UserID }

// LimitKey names the user of the call in ctx for per-user limits without asking anyone (see
// limitKey); "" when no token is signed in.
func (c *Client) LimitKey(ctx context.Context) string {
	token, err := c.tokenOf(ctx)
	if err != nil || token == "" {
		return ""
	}
	return c.limitKey(ctx, token)
}

// limitKey names the user of a call for the per-user limits without asking anyone: the
// identity's user, the user remembered for the token, or else the token's digest.
func (c *Client) limitKey(ctx context.Context, token Token) string {
	if id := IdentityFrom(ctx); id != nil && id.UserID != "" {
		return "user:" + id.UserID
	}
	if u := c.users.get(token); u != "" {
		return "user:" + u
	}
	k := tokenKey(token)
	return "token:" + string(k[:])
}

// TokenDigest returns a digest (hex) of the token the call in ctx sends, "" when there is none:
// a name of the token's holder that asks nobody (the owner of revisions where the card service
// names no user).
func (c *Client) TokenDigest(ctx context.Context) string {
	token, err := c.tokenOf(ctx)
	if err != nil || token == "" {
		return ""
	}
	k := tokenKey(token)
	return hex.EncodeToString(k[:])
}
