package proxy

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is the error of a Store lookup that found nothing.
var ErrNotFound = errors.New("proxy: not found")

// Store keeps the proxy's state: the MCP clients it registered, the consents users gave them,
// authorization requests in progress, grants (with the card service's tokens, sealed) and the
// digests of the codes and tokens it issued. Every method is atomic on its own; the methods
// that consume something (TakeRequest, UseSecret) must be, so that a code, a state or a
// refresh token is honoured once even with several server instances sharing one store.
//
// Lookups return records until Sweep drops them, expired ones included: the caller checks
// Expires (a used code is kept a while past its expiry, so that its reuse is noticed).
//
// FileStore is the embedded implementation (one file in the state directory). A shared store
// (a database) can replace it behind this interface; the per-grant lock that serialises
// upstream refreshes is then per process, which a shared store should extend with a lease.
type Store interface {
	// CreateClient registers an MCP client; GetClient returns it.
	CreateClient(ctx context.Context, c *Client) error
	GetClient(ctx context.Context, id string) (*Client, error)

	// PutConsent records that a user allowed a client at a redirect URI; GetConsent finds it.
	PutConsent(ctx context.Context, c *Consent) error
	GetConsent(ctx context.Context, userID, clientID, redirectURI string) (*Consent, error)

	// PutRequest stores an authorization request in progress; GetRequest returns it;
	// TakeRequest returns it and deletes it, so that a request is finished once.
	PutRequest(ctx context.Context, r *AuthRequest) error
	GetRequest(ctx context.Context, id string) (*AuthRequest, error)
	TakeRequest(ctx context.Context, id string) (*AuthRequest, error)

	// PutGrant stores a grant; GetGrant returns it; UpdateGrant changes it under the store's
	// lock; DeleteGrant removes it with every code and token issued from it, and returns it.
	PutGrant(ctx context.Context, g *Grant) error
	GetGrant(ctx context.Context, id string) (*Grant, error)
	UpdateGrant(ctx context.Context, id string, change func(g *Grant) error) (*Grant, error)
	DeleteGrant(ctx context.Context, id string) (*Grant, error)

	// PutSecret stores the record of a code, token or state by the SHA-256 (hex) of its value.
	// GetSecret returns it. UseSecret marks it used and returns it as it was before, so the
	// first caller sees Used == false and every later one true. DeleteSecret drops it.
	PutSecret(ctx context.Context, digest string, s *Secret) error
	GetSecret(ctx context.Context, digest string) (*Secret, error)
	UseSecret(ctx context.Context, digest string) (*Secret, error)
	DeleteSecret(ctx context.Context, digest string) error

	// GetUpstreamClient and PutUpstreamClient keep the proxy's own registration at the card
	// service's authorization server, so that it registers once.
	GetUpstreamClient(ctx context.Context, issuer, redirectURI string) (*UpstreamClient, error)
	PutUpstreamClient(ctx context.Context, c *UpstreamClient) error
	DeleteUpstreamClient(ctx context.Context, issuer, redirectURI string) error

	// Sweep drops what expired at now: requests, secrets, and grants no live token refers to
	// any more (returned, so that their upstream tokens can be revoked).
	Sweep(ctx context.Context, now time.Time) ([]*Grant, error)

	Close() error
}

// Client is an MCP client registered with the proxy (RFC 7591): always a public client.
type Client struct {
	ID           string    `json:"id"`
	Name         string    `json:"name,omitempty"`
	RedirectURIs []string  `json:"redirectUris"`
	GrantTypes   []string  `json:"grantTypes"`
	Scope        string    `json:"scope,omitempty"` // registered scope; "" = any supported scope
	IssuedAt     time.Time `json:"issuedAt"`
	// Unused is true from the registration until a sign-in with the client completes; an
	// unused client expires at Expires.
	Unused  bool      `json:"unused,omitempty"`
	Expires time.Time `json:"expires,omitzero"`
}

// Consent is a user's permission for a client to be sent authorizations at a redirect URI.
type Consent struct {
	UserID      string    `json:"userId"`
	ClientID    string    `json:"clientId"`
	RedirectURI string    `json:"redirectUri"`
	Scope       string    `json:"scope"`
	Granted     time.Time `json:"granted"`
	MAC         string    `json:"mac,omitempty"` // under the state key, bound to the record's key
}

// AuthRequest is an authorization request of an MCP client, validated at /authorize, from the
// consent page to the card service's answer at the callback.
type AuthRequest struct {
	ID          string    `json:"id"`
	ClientID    string    `json:"clientId"`
	RedirectURI string    `json:"redirectUri"`
	Scope       string    `json:"scope"`
	Resource    string    `json:"resource"`
	State       string    `json:"state"`     // the MCP client's state, returned to it unchanged
	Challenge   string    `json:"challenge"` // the MCP client's PKCE S256 challenge
	Expires     time.Time `json:"expires"`

	// Browser is the SHA-256 (hex) of the value of the cookie that binds the request to the
	// browser that was shown the consent page (or, when consent was remembered, that was
	// sent to the card service); only that browser can answer or finish it.
	Browser string `json:"browser,omitempty"`
	// RememberedFor is the user whose stored consent let the request skip the consent page;
	// "" when the person at the browser allowed it on the page.
	RememberedFor string `json:"rememberedFor,omitempty"`
	// Upstream is the sealed PKCE verifier of the card service leg, once it started.
	Upstream string `json:"upstream,omitempty"`
	MAC      string `json:"mac,omitempty"` // under the state key, bound to the record's key
}

// Grant is what one authorization gave one MCP client: the user, the scope, the resource,
// and the card service's tokens (sealed; never sent to the client). Its codes and tokens
// refer to it; deleting it revokes them all.
type Grant struct {
	ID       string    `json:"id"`
	ClientID string    `json:"clientId"`
	UserID   string    `json:"userId"`
	Nickname string    `json:"nickname,omitempty"`
	Scope    string    `json:"scope"`
	Resource string    `json:"resource"`
	Created  time.Time `json:"created"`
	Active   bool      `json:"active"` // false until its authorization code was exchanged

	Upstream            string    `json:"upstream"`                // sealed upstreamTokens
	UpstreamExpiry      time.Time `json:"upstreamExpiry,omitzero"` // of the card service's access token; zero = not known
	UpstreamRefreshable bool      `json:"upstreamRefreshable"`     // the card service issued a refresh token
	UpstreamRefreshed   time.Time `json:"upstreamRefreshed,omitzero"`
	MAC                 string    `json:"mac,omitempty"` // under the state key, bound to the record's key
}

// Secret kinds.
const (
	KindCode    = "code"
	KindAccess  = "access"
	KindRefresh = "refresh"
	KindState   = "state" // the state of the card service leg
)

// Secret is the record of a code, token or state the proxy issued, stored by the digest of
// its value only.
type Secret struct {
	Kind        string    `json:"kind"`
	GrantID     string    `json:"grantId,omitempty"`   // code, access, refresh
	RequestID   string    `json:"requestId,omitempty"` // state
	ClientID    string    `json:"clientId,omitempty"`
	Scope       string    `json:"scope,omitempty"`
	Resource    string    `json:"resource,omitempty"`
	RedirectURI string    `json:"redirectUri,omitempty"` // code
	Challenge   string    `json:"challenge,omitempty"`   // code
	Expires     time.Time `json:"expires"`
	Used        bool      `json:"used,omitempty"` // code and state: presented; refresh: rotated
	MAC         string    `json:"mac,omitempty"`  // under the state key, bound to the record's key
}

// UpstreamClient is the proxy's registration at the card service's authorization server.
type UpstreamClient struct {
	Issuer      string    `json:"issuer"`
	RedirectURI string    `json:"redirectUri"`
	ClientID    string    `json:"clientId"`
	Registered  time.Time `json:"registered"`
}
