package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/globaladdr"
	"github.com/cardwriter/cardwriter-mcp/internal/oauthserver"
)

// Client ID Metadata Documents (the MCP authorization spec's preferred client registration
// since 2025-11-25): a client_id that is an https URL names a JSON document, served there, that
// describes the client. The server fetches it (bounded in size and time, no redirect, never from
// an address that is not a global one unless told to), checks it and caches it.

const (
	cimdMaxBytes = 5 << 10 // the largest metadata document read
	cimdTimeout  = 5 * time.Second
	cimdCacheFor = 10 * time.Minute
)

// cimdClients fetches and caches client metadata documents.
type cimdClients struct {
	http *http.Client
	now  func() time.Time

	mu    sync.Mutex
	cache map[string]cimdEntry
}

type cimdEntry struct {
	client  *Client
	err     error
	expires time.Time
}

// isMetadataURL reports whether a client_id names a metadata document: an https URL with a path.
func isMetadataURL(id string) bool {
	u, err := url.Parse(id)
	return err == nil && u.Scheme == "https" && u.Host != "" && u.Path != "" && u.Path != "/" && u.Fragment == "" && u.User == nil
}

// newCIMDClients returns the fetcher; allowPrivate lets it reach loopback and private addresses
// (tests); client, when set, replaces the HTTP client (it must keep the redirect and address
// rules, or be a test's).
func newCIMDClients(client *http.Client, allowPrivate bool, now func() time.Time) *cimdClients {
	if client == nil {
		control := func(_, address string, _ syscall.RawConn) error { return nil }
		if !allowPrivate {
			control = refuseNonGlobal
		}
		dialer := &net.Dialer{Timeout: cimdTimeout, Control: control}
		client = &http.Client{
			Timeout:   cimdTimeout,
			Transport: &http.Transport{DialContext: dialer.DialContext, TLSHandshakeTimeout: cimdTimeout, ResponseHeaderTimeout: cimdTimeout},
		}
	}
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cimdClients{http: &c, now: now, cache: map[string]cimdEntry{}}
}

// refuseNonGlobal is the dialer's check of the address it is about to connect to, after name
// resolution: only an address of the public internet (globaladdr) is dialled, so that a name
// that resolves (or later re-resolves, DNS rebinding) to an internal one reaches nothing.
func refuseNonGlobal(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return err
	}
	if why := globaladdr.Why(ap.Addr()); why != "" {
		return fmt.Errorf("the address %s is not a public one (%s)", ap.Addr(), why)
	}
	return nil
}

// get returns the client a metadata URL describes, from the cache or fetched now.
func (m *cimdClients) get(ctx context.Context, id string) (*Client, error) {
	m.mu.Lock()
	if e, ok := m.cache[id]; ok && m.now().Before(e.expires) {
		m.mu.Unlock()
		return e.client, e.err
	}
	m.mu.Unlock()
	c, err := m.fetch(ctx, id)
	ttl := cimdCacheFor
	if err != nil {
		ttl = time.Minute // a failure is not asked again at once, nor kept long
	}
	m.mu.Lock()
	if len(m.cache) > 10000 {
		clear(m.cache)
	}
	m.cache[id] = cimdEntry{client: c, err: err, expires: m.now().Add(ttl)}
	m.mu.Unlock()
	return c, err
}

// fetch reads and checks the metadata document at id.
func (m *cimdClients) fetch(ctx context.Context, id string) (*Client, error) {
	ctx, cancel := context.WithTimeout(ctx, cimdTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := m.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the client metadata document: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the client metadata document answered %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, cimdMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read the client metadata document: %w", err)
	}
	if len(data) > cimdMaxBytes {
		return nil, fmt.Errorf("the client metadata document is larger than %d bytes", cimdMaxBytes)
	}
	var doc struct {
		ClientID                string   `json:"client_id"`
		ClientName              string   `json:"client_name"`
		RedirectURIs            []string `json:"redirect_uris"`
		GrantTypes              []string `json:"grant_types"`
		TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
		Scope                   string   `json:"scope"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("the client metadata document is not a JSON object of client metadata: %w", err)
	}
	switch {
	case doc.ClientID != id:
		return nil, errors.New("the client metadata document's client_id is not its own URL")
	case len(doc.RedirectURIs) == 0:
		return nil, errors.New("the client metadata document lists no redirect_uris")
	case doc.TokenEndpointAuthMethod != "" && doc.TokenEndpointAuthMethod != "none":
		return nil, errors.New("the client metadata document asks for a token endpoint authentication this server does not offer (only none)")
	}
	for _, r := range doc.RedirectURIs {
		if err := oauthserver.CheckRedirectURI(r, isLoopbackHost); err != nil {
			return nil, fmt.Errorf("the client metadata document's redirect URI %q: %w", r, err)
		}
	}
	grants := doc.GrantTypes
	if len(grants) == 0 {
		grants = []string{"authorization_code", "refresh_token"}
	}
	if !slices.Contains(grants, "authorization_code") {
		return nil, errors.New("the client metadata document does not allow authorization_code")
	}
	return &Client{ID: id, Name: doc.ClientName, RedirectURIs: doc.RedirectURIs, GrantTypes: grants, Scope: doc.Scope, IssuedAt: m.now()}, nil
}
