package revisions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// kvBackend keeps revisions in a store.KV: per owner, an index key and a key per revision.
// {tag} is a Redis Cluster hash tag, so that an owner's keys share a slot.
type kvBackend struct {
	kv    store.KV
	index *indexCache
}

func indexKey(tag string) string      { return prefixIndex + "{" + tag + "}" }
func recordKey(tag, id string) string { return prefixRevision + "{" + tag + "}:" + id }
func shadowKey(tag, clientKey string) string {
	return prefixShadow + "{" + tag + "}:" + clientKeyHash(clientKey)
}

// put keeps the record and updates the index: in one transaction of the store when it
// batches (store.Batcher: one sync), else in three steps (the record, the index, the dropped
// records' keys).
func (b kvBackend) put(ctx context.Context, tag string, e Entry, data []byte, keep Retention, now time.Time) (dropped []Entry, err error) {
	if bt, ok := b.kv.(store.Batcher); ok {
		err := bt.Batch(ctx, func(tx store.Tx) error {
			if err := tx.Set(recordKey(tag, e.ID), data, keep.MaxAge); err != nil {
				return fmt.Errorf("revisions: keep %s: %w", e.ID, err)
			}
			old, err := tx.Get(indexKey(tag))
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("revisions: index %s: %w", e.ID, err)
			}
			next, drop, err := b.insert(tag, old, e, keep, now)
			if err != nil {
				return fmt.Errorf("revisions: index %s: %w", e.ID, err)
			}
			if err := tx.Set(indexKey(tag), next, 0); err != nil {
				return fmt.Errorf("revisions: index %s: %w", e.ID, err)
			}
			dropped = drop
			return tx.Delete(droppedKeys(tag, drop)...)
		})
		if err != nil {
			return nil, err
		}
		return dropped, nil
	}
	if err := b.kv.Set(ctx, recordKey(tag, e.ID), data, keep.MaxAge); err != nil {
		return nil, fmt.Errorf("revisions: keep %s: %w", e.ID, err)
	}
	_, err = b.kv.Update(ctx, indexKey(tag), 0, func(old []byte) ([]byte, error) {
		var next []byte
		next, dropped, err = b.insert(tag, old, e, keep, now)
		return next, err
	})
	if err != nil {
		_ = b.kv.Delete(ctx, recordKey(tag, e.ID))
		return nil, fmt.Errorf("revisions: index %s: %w", e.ID, err)
	}
	if len(dropped) > 0 {
		// Unlisted already; a key left behind by a failure here expires with MaxAge.
		_ = b.kv.Delete(ctx, droppedKeys(tag, dropped)...)
	}
	return dropped, nil
}

func droppedKeys(tag string, dropped []Entry) []string {
	keys := make([]string, len(dropped))
	for i, d := range dropped {
		keys[i] = recordKey(tag, d.ID)
	}
	return keys
}

// insert returns the index old (nil: none) with e inserted in time order and the retention
// applied, and what the retention dropped.
func (b kvBackend) insert(tag string, old []byte, e Entry, keep Retention, now time.Time) ([]byte, []Entry, error) {
	list, enc, err := b.index.decode(tag, old)
	if err != nil {
		return nil, nil, err
	}
	// In time order: a Keep that took its time reaches the index after a later one.
	at, _ := slices.BinarySearchFunc(list, e, func(a, b Entry) int {
		if newer(a, b) {
			return 1
		}
		return -1
	})
	one, err := json.Marshal(e)
	if err != nil {
		return nil, nil, err
	}
	list, enc = slices.Insert(list, at, e), slices.Insert(enc, at, one)
	kept, dropped := keep.apply(list, e.ID, now)
	if len(dropped) > 0 {
		keptEnc := make([][]byte, 0, len(kept))
		j := 0
		for i := range list {
			if j < len(kept) && list[i].ID == kept[j].ID {
				keptEnc = append(keptEnc, enc[i])
				j++
			}
		}
		enc = keptEnc
	}
	next := joinIndex(enc)
	b.index.put(tag, next, kept, enc)
	return next, dropped, nil
}

// joinIndex is the index's JSON from its entries' (json.Marshal of the []Entry).
func joinIndex(enc [][]byte) []byte {
	n := 2
	for _, e := range enc {
		n += len(e) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, e := range enc {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	return append(out, ']')
}

func decodeIndex(data []byte) ([]Entry, error) {
	if len(data) == 0 {
		return nil, nil
	}
	var list []Entry
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("revisions: the index is damaged: %w", err)
	}
	return list, nil
}

// indexCache holds the owners' indexes last written or read, decoded and each entry encoded,
// so that keeping a revision neither decodes the whole index nor encodes it again: a cached
// index is used only when the stored bytes are exactly those it was made from (another
// replica's write, or a failed commit, makes it miss).
type indexCache struct {
	mu    sync.Mutex
	m     map[string]cachedIndex
	bytes int
}

type cachedIndex struct {
	raw  []byte
	list []Entry
	enc  [][]byte
}

// indexCacheBytes bounds the indexes cached together; past it the cache starts anew.
const indexCacheBytes = 8 << 20

func newIndexCache() *indexCache { return &indexCache{m: map[string]cachedIndex{}} }

// decode returns the index data (nil: none), its entries and each one's JSON; the slices are
// the caller's.
func (c *indexCache) decode(tag string, data []byte) ([]Entry, [][]byte, error) {
	c.mu.Lock()
	hit, ok := c.m[tag]
	c.mu.Unlock()
	if ok && bytes.Equal(hit.raw, data) {
		return slices.Clone(hit.list), slices.Clone(hit.enc), nil
	}
	list, err := decodeIndex(data)
	if err != nil {
		return nil, nil, err
	}
	enc := make([][]byte, len(list))
	for i := range list {
		if enc[i], err = json.Marshal(list[i]); err != nil {
			return nil, nil, err
		}
	}
	return list, enc, nil
}

// put caches tag's index, written as raw.
func (c *indexCache) put(tag string, raw []byte, list []Entry, enc [][]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[tag]; ok {
		c.bytes -= len(old.raw)
	}
	if c.bytes+len(raw) > indexCacheBytes {
		clear(c.m)
		c.bytes = 0
	}
	c.m[tag] = cachedIndex{raw: raw, list: list, enc: enc}
	c.bytes += len(raw)
}

func (b kvBackend) list(ctx context.Context, tag, _, _ string, _ Retention, _ time.Time) ([]Entry, error) {
	data, err := b.kv.Get(ctx, indexKey(tag))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("revisions: list: %w", err)
	}
	return decodeIndex(data)
}

func (b kvBackend) get(ctx context.Context, tag, id string, _ Retention, _ time.Time) ([]byte, error) {
	data, err := b.kv.Get(ctx, recordKey(tag, id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("revisions: get %s: %w", id, err)
	}
	return data, nil
}

func (b kvBackend) shadow(ctx context.Context, tag, clientKey string) ([]byte, error) {
	data, err := b.kv.Get(ctx, shadowKey(tag, clientKey))
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	return data, err
}

func (b kvBackend) saveShadow(ctx context.Context, tag, clientKey string, data []byte, ttl time.Duration) error {
	if data == nil {
		return b.kv.Delete(ctx, shadowKey(tag, clientKey))
	}
	return b.kv.Set(ctx, shadowKey(tag, clientKey), data, ttl)
}

func (b kvBackend) name() string { return b.kv.Name() }
