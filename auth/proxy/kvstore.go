package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

const (
	// usedCodeKept is how long a code is remembered past its expiry, so that presenting it
	// again revokes what it produced (RFC 6749 section 4.1.2).
	usedCodeKept = 10 * time.Minute
	// keptPastExpiry is how long other records outlive their expiry (lookups see them as
	// expired rather than unknown).
	keptPastExpiry = time.Minute
	// sweepGrace spares grants younger than this from the sweep: a grant is stored a moment
	// before the code that keeps it alive.
	sweepGrace = 2 * time.Minute
)

// SessionOwnerPrefix and RevokedPrefix start the keys of the records the server's store seals
// (package sealed) beside the ones that carry their own MAC.
const (
	SessionOwnerPrefix = keySession
	RevokedPrefix      = keyRevoked
)

// Key prefixes of the proxy's records in the KV.
const (
	keyClient       = "proxy:client:"
	keyConsent      = "proxy:consent:"
	keyRequest      = "proxy:request:"
	keyGrant        = "proxy:grant:"
	keyGrantSecrets = "proxy:grant-secrets:" // a list of the digests issued from a grant
	keySecret       = "proxy:secret:"
	keyUpstream     = "proxy:upstream:"
	keySession      = "proxy:session-owner:"
	keyLease        = "proxy:lease:"
	keyRevoked      = "proxy:revoked:" // + a secret's digest or "grant:" + a grant id: a revocation
	// What each source address made the server keep (admission lists, Admit).
	keySourceRequests = "proxy:source-requests:"
	keySourceClients  = "proxy:source-clients:"
)

// KVStore is the Store on a store.KV: each record one JSON value, requests and secrets with
// the lifetime of their expiry (plus a margin), codes consumed and refresh tokens rotated by
// atomic updates, grants deleted by an atomic take so that one replica revokes each. It holds
// no secret in the clear: codes and tokens are known by their digests, the card service's
// tokens are sealed.
type KVStore struct {
	kv       store.KV
	now      func() time.Time
	keys     *keys                        // authenticates the records that grant access; nil: none (a store read without the key)
	onForged func(key string, noMAC bool) // told of a record that failed its authentication
}

var _ Store = (*KVStore)(nil)

// NewKVStore returns the proxy's state on kv.
func NewKVStore(kv store.KV) *KVStore { return &KVStore{kv: kv, now: time.Now} }

// KV returns the store's KV.
func (s *KVStore) KV() store.KV { return s.kv }

// Close does nothing: the KV belongs to the caller.
func (s *KVStore) Close() error { return nil }

// recordKind names the kind of record at key (its prefix), for logs.
func recordKind(key string) string {
	for _, p := range []string{keyGrant, keySecret, keyConsent, keyRequest} {
		if strings.HasPrefix(key, p) {
			return strings.TrimSuffix(strings.TrimPrefix(p, "proxy:"), ":")
		}
	}
	return "other"
}

func hashKey(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// until is the lifetime of a record that expires at exp and is kept past it for margin; at
// least a second, so that a record already expired is still written (and read as expired).
func (s *KVStore) until(exp time.Time, margin time.Duration) time.Duration {
	return max(exp.Add(margin).Sub(s.now()), time.Second)
}

// authenticated is a record that carries a MAC under the state key (keys.recordMAC), bound
// to its key in the store: what grants access (grants, the records of codes, tokens and
// states, consents, authorization requests). One written by someone who can write to the
// store but lacks the state key, or copied under another key, is refused as absent.
type authenticated interface{ macField() *string }

func (g *Grant) macField() *string       { return &g.MAC }
func (s *Secret) macField() *string      { return &s.MAC }
func (c *Consent) macField() *string     { return &c.MAC }
func (r *AuthRequest) macField() *string { return &r.MAC }

// errForged is the error of a record whose MAC does not check out; it reads as ErrNotFound.
var errForged = fmt.Errorf("%w: a record failed its authentication under the state key", ErrNotFound)

// encode returns v's JSON, with its MAC for key when it is an authenticated record.
func (s *KVStore) encode(key string, v any) ([]byte, error) {
	a, ok := v.(authenticated)
	if !ok || s.keys == nil {
		return json.Marshal(v)
	}
	m := a.macField()
	*m = ""
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	*m = s.keys.recordMAC(key, raw)
	return json.Marshal(v)
}

// decode reads the record at key into v and, when it is an authenticated one, checks its MAC:
// errForged when it does not check out (told to onForged, with no secret).
func (s *KVStore) decode(key string, raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("proxy: a damaged record at %s: %w", key, err)
	}
	a, ok := v.(authenticated)
	if !ok || s.keys == nil {
		return nil
	}
	m := a.macField()
	got := *m
	*m = ""
	plain, err := json.Marshal(v)
	*m = got
	if err != nil || !s.keys.verifyRecord(got, key, plain) {
		if s.onForged != nil {
			s.onForged(key, got == "")
		}
		return errForged
	}
	return nil
}

func get[T any](ctx context.Context, s *KVStore, key string) (*T, error) {
	raw, err := s.kv.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("proxy: read the state: %w", err)
	}
	v := new(T)
	if err := s.decode(key, raw, v); err != nil {
		return nil, err
	}
	return v, nil
}

func put(ctx context.Context, s *KVStore, key string, v any, ttl time.Duration) error {
	raw, err := s.encode(key, v)
	if err != nil {
		return fmt.Errorf("proxy: encode the state: %w", err)
	}
	if err := s.kv.Set(ctx, key, raw, ttl); err != nil {
		return fmt.Errorf("proxy: write the state: %w", err)
	}
	return nil
}

// update changes the record at key atomically; ErrNotFound when it is absent (or fails its
// authentication). It returns the record as it was before the change and after it.
func update[T any](ctx context.Context, s *KVStore, key string, change func(v *T) error) (before, after *T, err error) {
	_, err = s.kv.Update(ctx, key, store.KeepTTL, func(old []byte) ([]byte, error) {
		if old == nil {
			return nil, ErrNotFound
		}
		before, after = new(T), new(T)
		if err := s.decode(key, old, before); err != nil {
			return nil, err
		}
		_ = json.Unmarshal(old, after)
		if err := change(after); err != nil {
			return nil, err
		}
		return s.encode(key, after)
	})
	if err != nil && !errors.Is(err, ErrNotFound) && store.IsUnavailable(err) {
		err = fmt.Errorf("proxy: write the state: %w", err)
	}
	return before, after, err
}

// CountClients returns the number of registered clients, counted up to limit.
func (s *KVStore) CountClients(ctx context.Context, limit int) (int, error) {
	return s.count(ctx, keyClient, limit)
}

// CountRequests returns the number of authorization requests in progress, counted up to limit.
func (s *KVStore) CountRequests(ctx context.Context, limit int) (int, error) {
	return s.count(ctx, keyRequest, limit)
}

func (s *KVStore) count(ctx context.Context, prefix string, limit int) (int, error) {
	n := 0
	err := s.kv.Scan(ctx, prefix, func(string) error {
		n++
		if n >= limit {
			return store.ErrStop
		}
		return nil
	})
	return n, err
}

// Lease takes the lease named key for ttl unless another holder has it, and reports whether
// it did; release gives it back. Replicas serialise a grant's refreshes with it.
func (s *KVStore) Lease(ctx context.Context, key string, ttl time.Duration) (ok bool, release func(), err error) {
	k := keyLease + key
	ok, err = s.kv.Create(ctx, k, []byte("1"), ttl)
	if err != nil || !ok {
		return false, func() {}, err
	}
	return true, func() { _ = s.kv.Delete(context.WithoutCancel(ctx), k) }, nil
}

func (s *KVStore) CreateClient(ctx context.Context, c *Client) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	var ttl time.Duration // an unused registration lives until it expires
	if c.Unused {
		ttl = s.until(c.Expires, 0)
	}
	created, err := s.kv.Create(ctx, keyClient+c.ID, raw, ttl)
	if err != nil {
		return fmt.Errorf("proxy: write the state: %w", err)
	}
	if !created {
		return fmt.Errorf("proxy: client %s exists", c.ID)
	}
	return nil
}

func (s *KVStore) GetClient(ctx context.Context, id string) (*Client, error) {
	c, err := get[Client](ctx, s, keyClient+id)
	if err == nil && c.Unused && !s.now().Before(c.Expires) {
		return nil, ErrNotFound // expired, not yet dropped by the store
	}
	return c, err
}

func (s *KVStore) PutConsent(ctx context.Context, c *Consent) error {
	return put(ctx, s, keyConsent+hashKey(c.UserID, c.ClientID, c.RedirectURI), c, 0)
}

func (s *KVStore) GetConsent(ctx context.Context, userID, clientID, redirectURI string) (*Consent, error) {
	return get[Consent](ctx, s, keyConsent+hashKey(userID, clientID, redirectURI))
}

func (s *KVStore) PutRequest(ctx context.Context, r *AuthRequest) error {
	return put(ctx, s, keyRequest+r.ID, r, s.until(r.Expires, keptPastExpiry))
}

func (s *KVStore) GetRequest(ctx context.Context, id string) (*AuthRequest, error) {
	return get[AuthRequest](ctx, s, keyRequest+id)
}

func (s *KVStore) TakeRequest(ctx context.Context, id string) (*AuthRequest, error) {
	raw, err := s.kv.Take(ctx, keyRequest+id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("proxy: write the state: %w", err)
	}
	r := &AuthRequest{}
	if err := s.decode(keyRequest+id, raw, r); err != nil {
		return nil, err
	}
	return r, nil
}

func (s *KVStore) PutGrant(ctx context.Context, g *Grant) error {
	return put(ctx, s, keyGrant+g.ID, g, 0)
}

func (s *KVStore) GetGrant(ctx context.Context, id string) (*Grant, error) {
	return get[Grant](ctx, s, keyGrant+id)
}

func (s *KVStore) UpdateGrant(ctx context.Context, id string, change func(g *Grant) error) (*Grant, error) {
	_, g, err := update(ctx, s, keyGrant+id, func(g *Grant) error {
		if err := change(g); err != nil {
			return err
		}
		g.ID = id
		return nil
	})
	return g, err
}

// DeleteGrant takes the grant (of concurrent deleters, one gets it), then drops every secret
// issued from it.
func (s *KVStore) DeleteGrant(ctx context.Context, id string) (*Grant, error) {
	raw, err := s.kv.Take(ctx, keyGrant+id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("proxy: write the state: %w", err)
	}
	g := &Grant{}
	if err := json.Unmarshal(raw, g); err != nil {
		return nil, fmt.Errorf("proxy: a damaged grant: %w", err)
	}
	if err := s.revoke(ctx, id, "", time.Time{}); err != nil {
		return g, err
	}
	digests, err := s.kv.Range(ctx, keyGrantSecrets+id, 0)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return g, fmt.Errorf("proxy: revoke the tokens of a grant: %w", err)
	}
	keys := []string{keyGrantSecrets + id}
	for _, d := range digests {
		keys = append(keys, keySecret+string(d))
	}
	if err := s.kv.Delete(ctx, keys...); err != nil {
		return g, fmt.Errorf("proxy: revoke the tokens of a grant: %w", err)
	}
	return g, nil
}

func (s *KVStore) PutSecret(ctx context.Context, digest string, sec *Secret) error {
	margin := keptPastExpiry
	if sec.Kind == KindCode {
		margin = usedCodeKept
	}
	if sec.GrantID != "" {
		// Indexed first: a secret is never stored without the grant knowing it.
		if _, err := s.kv.Append(ctx, keyGrantSecrets+sec.GrantID, []byte(digest), 0); err != nil {
			return fmt.Errorf("proxy: write the state: %w", err)
		}
	}
	return put(ctx, s, keySecret+digest, sec, s.until(sec.Expires, margin))
}

// GetSecret returns the record of a secret, unless a revocation names it or its grant: a
// revoked token's record put back in the store (a copy taken before) stays revoked.
func (s *KVStore) GetSecret(ctx context.Context, digest string) (*Secret, error) {
	sec, err := get[Secret](ctx, s, keySecret+digest)
	if err != nil || sec.GrantID == "" {
		return sec, err
	}
	rv, err := s.revocation(ctx, sec.GrantID)
	if err != nil {
		return nil, err
	}
	if _, revoked := rv.Secrets[digest]; revoked || rv.Grant {
		return nil, ErrNotFound
	}
	return sec, nil
}

// revocation is what was revoked of a grant: the grant itself, or some of its secrets (by
// digest, each until it would have expired). It outlives what it revokes, so that putting an
// old record back does not undo it.
type revocation struct {
	Grant   bool                 `json:"grant,omitempty"`
	Secrets map[string]time.Time `json:"secrets,omitempty"`
}

// revokedGrantKept is how long a grant's revocation is kept: as long as its longest-lived
// token (a refresh token, renewed at each rotation) could have lived on.
const revokedGrantKept = DefaultRefreshTokenTTL + 24*time.Hour

func (s *KVStore) revocation(ctx context.Context, grantID string) (revocation, error) {
	var rv revocation
	raw, err := s.kv.Get(ctx, keyRevoked+"grant:"+grantID)
	if errors.Is(err, store.ErrNotFound) {
		return rv, nil
	}
	if err != nil {
		return rv, fmt.Errorf("proxy: read the state: %w", err)
	}
	_ = json.Unmarshal(raw, &rv) // a damaged record revokes nothing more than the grant below
	return rv, nil
}

// revoke records, before what it revokes is deleted, that the grant (digest "") or one of its
// secrets (until its expiry) is revoked.
func (s *KVStore) revoke(ctx context.Context, grantID, digest string, until time.Time) error {
	now := s.now()
	_, err := s.kv.Update(ctx, keyRevoked+"grant:"+grantID, revokedGrantKept, func(old []byte) ([]byte, error) {
		var rv revocation
		if old != nil {
			_ = json.Unmarshal(old, &rv)
		}
		for d, t := range rv.Secrets {
			if !now.Before(t) {
				delete(rv.Secrets, d)
			}
		}
		if digest == "" {
			rv.Grant = true
		} else {
			if rv.Secrets == nil {
				rv.Secrets = map[string]time.Time{}
			}
			rv.Secrets[digest] = until.Add(keptPastExpiry)
		}
		return json.Marshal(rv)
	})
	if err != nil {
		return fmt.Errorf("proxy: record a revocation: %w", err)
	}
	return nil
}

// UseSecret marks the secret used in one atomic update; the first caller sees Used false.
func (s *KVStore) UseSecret(ctx context.Context, digest string) (*Secret, error) {
	before, _, err := update(ctx, s, keySecret+digest, func(sec *Secret) error {
		sec.Used = true
		return nil
	})
	return before, err
}

// DeleteSecret drops a secret; one of a grant is recorded revoked first (see GetSecret).
func (s *KVStore) DeleteSecret(ctx context.Context, digest string) error {
	if sec, err := get[Secret](ctx, s, keySecret+digest); err == nil && sec.GrantID != "" {
		if err := s.revoke(ctx, sec.GrantID, digest, sec.Expires); err != nil {
			return err
		}
	}
	if err := s.kv.Delete(ctx, keySecret+digest); err != nil {
		return fmt.Errorf("proxy: write the state: %w", err)
	}
	return nil
}

func (s *KVStore) GetUpstreamClient(ctx context.Context, issuer, redirectURI string) (*UpstreamClient, error) {
	return get[UpstreamClient](ctx, s, keyUpstream+hashKey(issuer, redirectURI))
}

func (s *KVStore) PutUpstreamClient(ctx context.Context, c *UpstreamClient) error {
	return put(ctx, s, keyUpstream+hashKey(c.Issuer, c.RedirectURI), c, 0)
}

func (s *KVStore) DeleteUpstreamClient(ctx context.Context, issuer, redirectURI string) error {
	if err := s.kv.Delete(ctx, keyUpstream+hashKey(issuer, redirectURI)); err != nil {
		return fmt.Errorf("proxy: write the state: %w", err)
	}
	return nil
}

// Sweep drops the grants that nothing live refers to: an active grant without a live access
// or refresh token, an inactive one without a live, unused code; and those that fail their
// authentication. Requests and secrets expire
// by themselves. Grants younger than sweepGrace are spared.
func (s *KVStore) Sweep(ctx context.Context, now time.Time) ([]*Grant, error) {
	var ids []string
	if err := s.kv.Scan(ctx, keyGrant, func(k string) error {
		ids = append(ids, k[len(keyGrant):])
		return nil
	}); err != nil {
		return nil, fmt.Errorf("proxy: sweep: %w", err)
	}
	slices.Sort(ids)
	var dropped []*Grant
	for _, id := range ids {
		g, err := s.GetGrant(ctx, id)
		if errors.Is(err, errForged) {
			// Not this server's (or an earlier version's, without a MAC): dropped, and its card
			// service tokens revoked when they open under the state key.
			if g, err := s.DeleteGrant(ctx, id); err == nil {
				dropped = append(dropped, g)
			}
			continue
		}
		if err != nil {
			continue
		}
		if now.Sub(g.Created) < sweepGrace {
			continue
		}
		alive, err := s.grantAlive(ctx, id, now)
		if err != nil {
			return dropped, err
		}
		if alive {
			continue
		}
		if g, err := s.DeleteGrant(ctx, id); err == nil {
			dropped = append(dropped, g)
		} else if !errors.Is(err, ErrNotFound) {
			return dropped, err
		}
	}
	return dropped, nil
}

func (s *KVStore) grantAlive(ctx context.Context, id string, now time.Time) (bool, error) {
	digests, err := s.kv.Range(ctx, keyGrantSecrets+id, 0)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("proxy: sweep: %w", err)
	}
	for _, d := range digests {
		sec, err := s.GetSecret(ctx, string(d))
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		if sec.GrantID != id || !now.Before(sec.Expires) {
			continue
		}
		switch sec.Kind {
		case KindAccess:
			return true, nil
		case KindRefresh, KindCode:
			if !sec.Used {
				return true, nil
			}
		}
	}
	return false, nil
}
