package store

import (
	"bytes"
	"context"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Tx reads and writes values (not lists) within one Batch.
type Tx interface {
	// Get returns a key's value as the batch sees it, or ErrNotFound.
	Get(key string) ([]byte, error)
	// Set writes a key's value.
	Set(key string, value []byte, ttl time.Duration) error
	// Delete removes keys, values and lists alike.
	Delete(keys ...string) error
}

// Batcher is implemented by the backends that write several keys in one atomic step with a
// single sync (Bolt, Memory): made one KV call at a time, the same writes cost a synced
// transaction each.
type Batcher interface {
	// Batch runs fn in one transaction: all of its writes are kept, or none when fn or the
	// commit fails (fn's error is returned as it is).
	Batch(ctx context.Context, fn func(tx Tx) error) error
}

var (
	_ Batcher = (*Bolt)(nil)
	_ Batcher = (*Memory)(nil)
)

// boltTx is a Tx over a bbolt read-write transaction.
type boltTx struct {
	b  *Bolt
	tx *bolt.Tx
}

func (t boltTx) Get(key string) ([]byte, error) {
	_, v, ok := t.b.getTx(t.tx, key)
	if !ok {
		return nil, ErrNotFound
	}
	return v, nil
}

func (t boltTx) Set(key string, value []byte, ttl time.Duration) error {
	return t.tx.Bucket(bucketVals).Put([]byte(key), encode(expiry(t.b.now(), ttl), value))
}

func (t boltTx) Delete(keys ...string) error { return deleteTx(t.tx, keys) }

// deleteTx deletes keys, values and lists, in tx.
func deleteTx(tx *bolt.Tx, keys []string) error {
	for _, k := range keys {
		if err := tx.Bucket(bucketVals).Delete([]byte(k)); err != nil {
			return err
		}
		if err := tx.Bucket(bucketLists).DeleteBucket([]byte(k)); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
			return err
		}
	}
	return nil
}

// Batch runs fn in one bbolt transaction: one commit, one sync.
func (b *Bolt) Batch(_ context.Context, fn func(tx Tx) error) error {
	return b.fail(b.update(func(tx *bolt.Tx) error { return fn(boltTx{b, tx}) }))
}

// memTx is a Tx over Memory that stages its writes (nil: deleted) until the batch ends.
type memTx struct {
	m      *Memory
	staged map[string]*memEntry
	order  []string
}

func (t *memTx) Get(key string) ([]byte, error) {
	if e, ok := t.staged[key]; ok {
		if e == nil {
			return nil, ErrNotFound
		}
		return bytes.Clone(e.val), nil
	}
	e, ok := t.m.get(key)
	if !ok {
		return nil, ErrNotFound
	}
	return bytes.Clone(e.val), nil
}

func (t *memTx) stage(key string, e *memEntry) {
	if _, ok := t.staged[key]; !ok {
		t.order = append(t.order, key)
	}
	t.staged[key] = e
}

func (t *memTx) Set(key string, value []byte, ttl time.Duration) error {
	t.stage(key, &memEntry{val: bytes.Clone(value), exp: expiry(t.m.now(), ttl)})
	return nil
}

func (t *memTx) Delete(keys ...string) error {
	for _, k := range keys {
		t.stage(k, nil)
	}
	return nil
}

// Batch runs fn under the store's lock and applies its writes when it succeeds.
func (m *Memory) Batch(_ context.Context, fn func(tx Tx) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := &memTx{m: m, staged: map[string]*memEntry{}}
	if err := fn(t); err != nil {
		return err
	}
	for _, k := range t.order {
		if e := t.staged[k]; e != nil {
			m.vals[k] = *e
		} else {
			delete(m.vals, k)
			delete(m.lists, k)
		}
		m.wrote()
	}
	return nil
}
