package aside

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/quota"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// KV is a Store on the HTTP server's store.KV (the embedded file, or Redis shared by replicas):
// one value per key, with the key beside the data, as the File store writes them. A record
// expires TTL after it was last written (each import of the card writes it anew), and one user's
// records together hold at most UserBytes: a Put past it is refused (*quota.ExceededError), and
// Check says so before the import starts.
type KV struct {
	kv    store.KV
	ttl   time.Duration
	quota *quota.Ledger
	now   func() time.Time
}

// Defaults of KVOptions.
const (
	DefaultTTL       = 180 * 24 * time.Hour
	DefaultUserBytes = 128 << 20
)

// KVOptions bound what a KV store keeps.
type KVOptions struct {
	TTL       time.Duration // a record's life since its last write (0: DefaultTTL; negative: none)
	UserBytes int64         // one user's records together (0: DefaultUserBytes; negative: no limit)
	Now       func() time.Time
	Observer  quota.Observer // told of each user's usage; may be nil
}

// NewKV returns a Store on kv with the default bounds.
func NewKV(kv store.KV) *KV { return NewKVWith(kv, KVOptions{}) }

// NewKVWith returns a Store on kv bounded by opts.
func NewKVWith(kv store.KV, opts KVOptions) *KV {
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.UserBytes == 0 {
		opts.UserBytes = DefaultUserBytes
	}
	q := quota.New(kv, "kept-aside data", max(opts.UserBytes, 0), "bytes", "--aside-user-bytes",
		"Kept-aside data of imports expires "+opts.TTL.String()+" after its import; import fewer or smaller files (their extension data and assets), or ask the operator for more.")
	if opts.Now == nil {
		opts.Now = time.Now
	}
	q.SetClock(opts.Now)
	q.SetObserver(opts.Observer)
	return &KV{kv: kv, ttl: max(opts.TTL, 0), quota: q, now: opts.Now}
}

// Check returns the *quota.ExceededError a Put of size more bytes by user would meet, nil when
// it fits.
func (s *KV) Check(ctx context.Context, user string, size int64) error {
	return s.quota.Check(ctx, user, size)
}

// KeyPrefix starts the store keys of kept-aside records.
const KeyPrefix = "aside:"

func kvKey(key Key) string {
	return KeyPrefix + strings.TrimSuffix(filepath.Base((&File{}).path(key)), ".json")
}

// Get returns the record of key.
func (s *KV) Get(ctx context.Context, key Key) ([]byte, bool, error) {
	if err := key.valid(); err != nil {
		return nil, false, err
	}
	raw, err := s.kv.Get(ctx, kvKey(key))
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("aside: %w", err)
	}
	var rec fileRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, false, fmt.Errorf("aside: the record of %s is damaged: %w", key, err)
	}
	if rec.Key != key {
		return nil, false, nil
	}
	return []byte(rec.Data), true, nil
}

// Put writes the record of key (data must be JSON).
func (s *KV) Put(ctx context.Context, key Key, data []byte) error {
	if err := key.valid(); err != nil {
		return err
	}
	out, err := encodeRecord(key, data)
	if err != nil {
		return err
	}
	var expires time.Time
	if s.ttl > 0 {
		expires = s.now().Add(s.ttl)
	}
	if _, err := s.quota.Reserve(ctx, key.UserID, kvKey(key), int64(len(out)), expires); err != nil {
		return err
	}
	if err := s.kv.Set(ctx, kvKey(key), out, s.ttl); err != nil {
		return fmt.Errorf("aside: %w", err)
	}
	return nil
}

// ImportDir moves the records of a File store's directory into s (a server that kept them in
// files before it had a store), then renames the directory to dir + ".imported". It returns
// how many records it moved; a missing directory is no error.
func ImportDir(ctx context.Context, dir string, s Store) (int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("aside: import %s: %w", dir, err)
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return n, fmt.Errorf("aside: import %s: %w", e.Name(), err)
		}
		var rec fileRecord
		if err := json.Unmarshal(raw, &rec); err != nil || rec.Key.valid() != nil {
			return n, fmt.Errorf("aside: import %s: not a kept-aside record", filepath.Join(dir, e.Name()))
		}
		if err := s.Put(ctx, rec.Key, rec.Data); err != nil {
			return n, err
		}
		n++
	}
	if err := os.Rename(dir, dir+".imported"); err != nil {
		return n, fmt.Errorf("aside: imported %s but could not rename it: %w", dir, err)
	}
	return n, nil
}
