package proxy

// What a caller who has not signed in can make the server keep (authorization requests in
// progress, registered clients that never completed a sign-in) is bounded per source address
// and expires, so that a flood from one source evicts that source's own oldest entries instead
// of filling the server-wide caps that every other user's sign-in needs.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Defaults of the unauthenticated state's bounds (Options).
const (
	DefaultMaxPending          = 10000     // authorization requests in progress, server-wide
	DefaultMaxPendingPerSource = 20        // authorization requests in progress per source
	DefaultMaxClients          = 10000     // registered clients, server-wide
	DefaultMaxClientsPerSource = 20        // registrations per source not yet used to sign in
	DefaultUnusedClientTTL     = time.Hour // a registration not used to sign in within it expires
)

// source names where a request comes from: its remote address, or behind a trusted reverse
// proxy the address X-Forwarded-For names (the rightmost one that is not itself a trusted
// proxy); IPv6 addresses by their /64, what one subscriber usually holds.
func (s *Server) source(r *http.Request) string { return requestSource(r, s.opts.TrustedProxies) }

// requestSource is Server.source with the trusted reverse proxies given.
func requestSource(r *http.Request, trusted []netip.Prefix) string {
	isTrusted := func(a netip.Addr) bool {
		return slices.ContainsFunc(trusted, func(p netip.Prefix) bool { return p.Contains(a) })
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return "unknown"
	}
	addr := ap.Addr().Unmap()
	if isTrusted(addr) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for _, h := range slices.Backward(hops) {
			a, err := netip.ParseAddr(strings.TrimSpace(h))
			if err != nil {
				break
			}
			addr = a.Unmap()
			if !isTrusted(addr) {
				break
			}
		}
	}
	if addr.Is6() {
		p, _ := addr.WithZone("").Prefix(64)
		return p.String()
	}
	return addr.String()
}

// admission is the list of what one source made the server keep, oldest first.
type admission struct {
	Entries []admitted `json:"entries"`
}

type admitted struct {
	ID      string    `json:"id"`
	Expires time.Time `json:"expires"`
}

// Admit records that source made the server keep id until expires, under the per-source list
// named prefix + a digest of the source; the list lives as long as its newest entry. Beyond
// limit live entries, the source's oldest ones are evicted: their ids are returned for the
// caller to drop.
func (s *KVStore) Admit(ctx context.Context, prefix, source, id string, expires time.Time, limit int) (evicted []string, err error) {
	now := s.now()
	_, err = s.kv.Update(ctx, prefix+hashKey(source), s.until(expires, keptPastExpiry), func(old []byte) ([]byte, error) {
		evicted = nil
		var a admission
		if old != nil {
			_ = json.Unmarshal(old, &a) // a damaged list starts over
		}
		a.Entries = slices.DeleteFunc(a.Entries, func(e admitted) bool { return !now.Before(e.Expires) })
		a.Entries = append(a.Entries, admitted{ID: id, Expires: expires})
		if over := len(a.Entries) - max(limit, 1); over > 0 {
			for _, e := range a.Entries[:over] {
				evicted = append(evicted, e.ID)
			}
			a.Entries = slices.Delete(a.Entries, 0, over)
		}
		return json.Marshal(a)
	})
	if err != nil {
		return nil, err
	}
	return evicted, nil
}

// DropRequest deletes an authorization request (evicted by its source's newer ones).
func (s *KVStore) DropRequest(ctx context.Context, id string) error {
	return s.kv.Delete(ctx, keyRequest+id)
}

// DropUnusedClient deletes a registered client that was never used to sign in; one that was is
// kept.
func (s *KVStore) DropUnusedClient(ctx context.Context, id string) error {
	c, err := s.GetClient(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && !c.Unused) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.kv.Delete(ctx, keyClient+id)
}

// UseClient marks a registered client as used to sign in: it no longer expires.
func (s *KVStore) UseClient(ctx context.Context, id string) error {
	_, err := s.kv.Update(ctx, keyClient+id, 0, func(old []byte) ([]byte, error) {
		if old == nil {
			return nil, ErrNotFound
		}
		var c Client
		if err := json.Unmarshal(old, &c); err != nil {
			return nil, err
		}
		if !c.Unused {
			return old, nil
		}
		c.Unused, c.Expires = false, time.Time{}
		return json.Marshal(&c)
	})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}
