package store

import (
	"context"
	"sync"
	"time"
)

// Shared is a KV on a bbolt file that several processes use in turn (the stdio servers a user's
// desktop hosts start): each operation opens the file, does its work in one transaction and
// closes it, so that the file's lock is held only for that long (another process waits for it
// up to a second). The first operation of a process also deletes what has expired. Slower than
// Bolt, which holds the file for the life of one server.
type Shared struct {
	path  string
	mu    sync.Mutex // one open at a time in this process: a file lock is per open file
	swept bool
}

var _ KV = (*Shared)(nil)

// OpenShared returns the shared store of the bbolt file at path, created (0600, its directory
// 0700) at the first operation.
func OpenShared(path string) *Shared { return &Shared{path: path} }

// with runs fn on the file, open for the call.
func (s *Shared) with(fn func(b *Bolt) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := OpenBolt(s.path)
	if err != nil {
		return &UnavailableError{Backend: "bolt", Err: err}
	}
	defer b.Close()
	if !s.swept {
		s.swept = true
		_ = b.sweep()
	}
	return fn(b)
}

// Get returns a key's value, or ErrNotFound.
func (s *Shared) Get(ctx context.Context, key string) (v []byte, err error) {
	err = s.with(func(b *Bolt) error { v, err = b.Get(ctx, key); return err })
	return v, err
}

// Set writes a key's value.
func (s *Shared) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return s.with(func(b *Bolt) error { return b.Set(ctx, key, value, ttl) })
}

// Create writes a key's value only if the key is absent.
func (s *Shared) Create(ctx context.Context, key string, value []byte, ttl time.Duration) (ok bool, err error) {
	err = s.with(func(b *Bolt) error { ok, err = b.Create(ctx, key, value, ttl); return err })
	return ok, err
}

// Take returns a key's value and deletes it.
func (s *Shared) Take(ctx context.Context, key string) (v []byte, err error) {
	err = s.with(func(b *Bolt) error { v, err = b.Take(ctx, key); return err })
	return v, err
}

// Update replaces a key's value with what change returns, atomically (across processes too).
func (s *Shared) Update(ctx context.Context, key string, ttl time.Duration, change func(old []byte) ([]byte, error)) (v []byte, err error) {
	err = s.with(func(b *Bolt) error { v, err = b.Update(ctx, key, ttl, change); return err })
	return v, err
}

// Touch sets a key's lifetime anew.
func (s *Shared) Touch(ctx context.Context, key string, ttl time.Duration) error {
	return s.with(func(b *Bolt) error { return b.Touch(ctx, key, ttl) })
}

// Delete removes keys.
func (s *Shared) Delete(ctx context.Context, keys ...string) error {
	return s.with(func(b *Bolt) error { return b.Delete(ctx, keys...) })
}

// Scan calls fn with every live key that starts with prefix, the file open meanwhile.
func (s *Shared) Scan(ctx context.Context, prefix string, fn func(key string) error) error {
	return s.with(func(b *Bolt) error { return b.Scan(ctx, prefix, fn) })
}

// Append adds an item at the end of the list at key.
func (s *Shared) Append(ctx context.Context, key string, item []byte, ttl time.Duration) (n int64, err error) {
	err = s.with(func(b *Bolt) error { n, err = b.Append(ctx, key, item, ttl); return err })
	return n, err
}

// Range returns the items of the list at key from index from on.
func (s *Shared) Range(ctx context.Context, key string, from int64) (items [][]byte, err error) {
	err = s.with(func(b *Bolt) error { items, err = b.Range(ctx, key, from); return err })
	return items, err
}

// Ping checks that the file opens.
func (s *Shared) Ping(ctx context.Context) error {
	return s.with(func(b *Bolt) error { return b.Ping(ctx) })
}

// Name describes the store.
func (s *Shared) Name() string { return "bolt (shared) " + s.path }

// Close does nothing: the file is closed after each operation.
func (s *Shared) Close() error { return nil }
