// Package sealed authenticates store records: a store.KV decorator that writes the values of
// chosen key prefixes with a MAC over their key and content (HMAC-SHA256 under a key of the
// server's), and reads a value whose MAC does not check out, or that has none, as absent. A
// record written by someone who can write to the store but lacks the key, or copied under
// another key, is never used.
package sealed

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"strings"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// magic starts a sealed value, then the MAC, then the value.
const magic = "\x00seal1"

// KeySize is the size of a sealing key.
const KeySize = 32

// Derive returns the sealing key for purpose from a server key (HMAC-SHA256), so that one key
// serves several uses without a MAC of one passing for another's.
func Derive(key []byte, purpose string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(purpose))
	return h.Sum(nil)
}

// KV is a store.KV whose values under its prefixes are sealed.
type KV struct {
	store.KV
	key      []byte
	prefixes []string
	onForged func(key string) // told of a record that failed its MAC; may be nil
}

// broadcastKV is a KV over a backend several processes share (store.Broadcaster).
type broadcastKV struct {
	*KV
	store.Broadcaster
}

// batchKV is a KV over a backend that batches writes (store.Batcher).
type batchKV struct {
	*KV
	b store.Batcher
}

// New returns kv with the values of keys under prefixes sealed with key (at least KeySize
// bytes); onForged, when not nil, is told the store key of each record refused. The result is a
// store.Broadcaster when kv is, and a store.Batcher when kv is.
func New(kv store.KV, key []byte, onForged func(key string), prefixes ...string) store.KV {
	s := &KV{KV: kv, key: key, prefixes: prefixes, onForged: onForged}
	bc, broadcasts := kv.(store.Broadcaster)
	bt, batches := kv.(store.Batcher)
	switch {
	case broadcasts && batches:
		return broadcastBatchKV{batchKV{s, bt}, bc}
	case broadcasts:
		return broadcastKV{s, bc}
	case batches:
		return batchKV{s, bt}
	}
	return s
}

// broadcastBatchKV is a KV over a backend that both broadcasts and batches (Memory).
type broadcastBatchKV struct {
	batchKV
	store.Broadcaster
}

// Batch runs fn in one transaction of the backend, its values sealed and opened as KV's are.
func (s batchKV) Batch(ctx context.Context, fn func(tx store.Tx) error) error {
	return s.b.Batch(ctx, func(tx store.Tx) error { return fn(sealedTx{s.KV, tx}) })
}

// sealedTx is a store.Tx whose values under the prefixes are sealed.
type sealedTx struct {
	s  *KV
	tx store.Tx
}

func (t sealedTx) Get(key string) ([]byte, error) {
	raw, err := t.tx.Get(key)
	return t.s.read(key, raw, err)
}

func (t sealedTx) Set(key string, value []byte, ttl time.Duration) error {
	return t.tx.Set(key, t.s.seal(key, value), ttl)
}

func (t sealedTx) Delete(keys ...string) error { return t.tx.Delete(keys...) }

// covers reports whether key's values are sealed.
func (s *KV) covers(key string) bool {
	for _, p := range s.prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// mac is the MAC of value under key.
func (s *KV) mac(key string, value []byte) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(magic))
	h.Write([]byte(key))
	h.Write([]byte{0})
	h.Write(value)
	return h.Sum(nil)
}

// seal returns value as stored at key.
func (s *KV) seal(key string, value []byte) []byte {
	if !s.covers(key) || value == nil {
		return value
	}
	out := make([]byte, 0, len(magic)+sha256.Size+len(value))
	out = append(out, magic...)
	out = append(out, s.mac(key, value)...)
	return append(out, value...)
}

// open returns the value stored at key as raw, or ok false when it is not sealed by this key.
func (s *KV) open(key string, raw []byte) (value []byte, ok bool) {
	if !s.covers(key) || raw == nil {
		return raw, true
	}
	if len(raw) < len(magic)+sha256.Size || string(raw[:len(magic)]) != magic {
		s.forged(key)
		return nil, false
	}
	sum, value := raw[len(magic):len(magic)+sha256.Size], raw[len(magic)+sha256.Size:]
	if !hmac.Equal(sum, s.mac(key, value)) {
		s.forged(key)
		return nil, false
	}
	return value, true
}

func (s *KV) forged(key string) {
	if s.onForged != nil {
		s.onForged(key)
	}
}

// Get returns a key's value; a sealed one that fails its MAC reads as store.ErrNotFound.
func (s *KV) Get(ctx context.Context, key string) ([]byte, error) {
	raw, err := s.KV.Get(ctx, key)
	return s.read(key, raw, err)
}

// read is what a read of key that returned raw, err gives: the value opened, store.ErrNotFound
// for one that fails its MAC.
func (s *KV) read(key string, raw []byte, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	v, ok := s.open(key, raw)
	if !ok {
		return nil, store.ErrNotFound
	}
	return v, nil
}

// Set writes a key's value, sealed when its key is under a prefix.
func (s *KV) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return s.KV.Set(ctx, key, s.seal(key, value), ttl)
}

// Create writes a key's value when absent, sealed when its key is under a prefix. A forged
// value present counts as present (nothing is overwritten).
func (s *KV) Create(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	return s.KV.Create(ctx, key, s.seal(key, value), ttl)
}

// Take returns a key's value and deletes it; a forged one is deleted and reads as absent.
func (s *KV) Take(ctx context.Context, key string) ([]byte, error) {
	raw, err := s.KV.Take(ctx, key)
	return s.read(key, raw, err)
}

// Update replaces a key's value with what change returns for the current one; a forged current
// value is given to change as absent (nil).
func (s *KV) Update(ctx context.Context, key string, ttl time.Duration, change func(old []byte) ([]byte, error)) ([]byte, error) {
	raw, err := s.KV.Update(ctx, key, ttl, func(old []byte) ([]byte, error) {
		v, ok := s.open(key, old)
		if !ok {
			v = nil
		}
		next, err := change(v)
		if err != nil {
			return nil, err
		}
		return s.seal(key, next), nil
	})
	if err != nil {
		return nil, err
	}
	v, _ := s.open(key, raw)
	return v, nil
}
