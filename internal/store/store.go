// Package store is the storage seam of the HTTP server: one small key-value interface (values
// that expire, single-use reads, atomic updates, append-only lists) on which everything the
// server must keep is written once: the OAuth proxy's state, the kept-aside tavern data, the
// revisions of what writes replaced, the MCP sessions and their event streams.
//
// Three backends: Bolt, the embedded default (one bbolt file in the state directory: crash-safe
// transactions, one process per file); Redis, for several replicas sharing one server, a
// Sentinel-managed primary or a Cluster (keys under a namespace, TTLs on everything that expires,
// atomic updates with WATCH/MULTI, what must not be lost confirmed by a replica); and Memory,
// for a server that keeps nothing (an in-memory sandbox) and for tests. (What several stdio
// servers of one user keep together, their revisions, is not here: internal/revisions.NewDir.)
package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"
)

// ErrNotFound is the error of a read that found nothing (or only an expired value).
var ErrNotFound = errors.New("store: not found")

// ErrStop ends a Scan early without an error.
var ErrStop = errors.New("store: stop")

// KeepTTL, as the ttl of Update, keeps the key's current expiry.
const KeepTTL time.Duration = -1

// UnavailableError is a failure of the backend itself (Redis down or slow, a disk error): the
// operation may be tried again later. Errors of the caller's change functions are returned as
// they are.
type UnavailableError struct {
	Backend string
	Err     error
}

func (e *UnavailableError) Error() string {
	return "the store (" + e.Backend + ") is unavailable: " + e.Err.Error()
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// IsUnavailable reports whether err is (or wraps) an UnavailableError.
func IsUnavailable(err error) bool {
	var u *UnavailableError
	return errors.As(err, &u)
}

// KV is the interface every backend implements. A ttl of 0 means the key never expires; an
// expired key reads as absent. Keys are plain strings (the Redis backend prefixes its
// namespace); values are opaque bytes.
type KV interface {
	// Get returns a key's value, or ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Set writes a key's value.
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// Create writes a key's value only if the key is absent, and reports whether it did.
	Create(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	// Take returns a key's value and deletes it, atomically: of several callers, one gets the
	// value and the others ErrNotFound.
	Take(ctx context.Context, key string) ([]byte, error)
	// Update replaces a key's value with what change returns for the current one (nil when
	// absent), atomically; an error of change is returned and nothing is written. ttl is the
	// key's new lifetime, or KeepTTL. It returns the value written.
	Update(ctx context.Context, key string, ttl time.Duration, change func(old []byte) ([]byte, error)) ([]byte, error)
	// Touch sets a key's lifetime anew; ErrNotFound when it is absent.
	Touch(ctx context.Context, key string, ttl time.Duration) error
	// Delete removes keys (absent ones are no error), values and lists alike.
	Delete(ctx context.Context, keys ...string) error
	// Scan calls fn with every live key (values, not lists) that starts with prefix, in no
	// particular order; fn returning ErrStop ends the scan without an error.
	Scan(ctx context.Context, prefix string, fn func(key string) error) error
	// Append adds an item at the end of the list at key (creating it), sets the list's
	// lifetime to ttl, and returns the item's index (0 for the first).
	Append(ctx context.Context, key string, item []byte, ttl time.Duration) (int64, error)
	// Range returns the items of the list at key from index from on; ErrNotFound when the
	// list does not exist.
	Range(ctx context.Context, key string, from int64) ([][]byte, error)
	// Ping checks that the backend answers.
	Ping(ctx context.Context) error
	// Name describes the backend for logs and /readyz, without credentials.
	Name() string
	Close() error
}

// Open opens the backend a --store value names: "" for the embedded default (Bolt in
// stateDir), "memory:" for memory, a Redis URL (one server, Sentinel or Cluster; redisurl.go)
// for Redis.
func Open(spec, stateDir string) (KV, error) {
	switch {
	case spec == "":
		if stateDir == "" {
			return nil, errors.New("store: no state directory for the embedded store")
		}
		return OpenBolt(filepath.Join(stateDir, BoltFile))
	case spec == "memory:":
		return NewMemory(), nil
	case isRedisURL(spec):
		return OpenRedis(spec)
	}
	u, err := url.Parse(spec)
	scheme := ""
	if err == nil {
		scheme = u.Scheme
	}
	return nil, fmt.Errorf("store %q: want redis://host:port/db, redis-sentinel://host:port,.../MASTER, redis-cluster://host:port,... (rediss... for TLS), memory: or nothing (the embedded store in the state directory); scheme %q is not one", redactURL(spec), scheme)
}

// redactURL drops the user info of a URL (and a sentinel_password), for messages. It reads
// the URL as text: a list of addresses is no host url.Parse accepts.
func redactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return "(an unreadable URL)"
	}
	rest, query, hasQuery := strings.Cut(rest, "?")
	hosts, path, hasPath := strings.Cut(rest, "/")
	if at := strings.LastIndex(hosts, "@"); at >= 0 {
		hosts = "REDACTED@" + hosts[at+1:]
	}
	out := scheme + "://" + hosts
	if hasPath {
		out += "/" + path
	}
	if hasQuery {
		parts := strings.Split(query, "&")
		for i, p := range parts {
			if k, _, ok := strings.Cut(p, "="); ok && strings.Contains(strings.ToLower(k), "password") {
				parts[i] = k + "=REDACTED"
			}
		}
		out += "?" + strings.Join(parts, "&")
	}
	return out
}

// expiry returns when a key written now with ttl expires; zero for never.
func expiry(now time.Time, ttl time.Duration) time.Time {
	if ttl <= 0 {
		return time.Time{}
	}
	return now.Add(ttl)
}

// Broadcaster is implemented by backends that several processes share (Redis): a message
// published on a channel reaches every subscriber of it, in every process.
type Broadcaster interface {
	// Publish sends msg to the channel's subscribers.
	Publish(ctx context.Context, channel string, msg []byte) error
	// Subscribe calls fn with every message of the channel, in order, from when it returns until
	// ctx ends.
	Subscribe(ctx context.Context, channel string, fn func(msg []byte)) error
}
