package store

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// Memory is a KV in process memory: for a server that keeps nothing, and for tests. Expired
// keys are dropped when read and by a sweep at every thousandth write.
type Memory struct {
	mu     sync.Mutex
	vals   map[string]memEntry
	lists  map[string]*memList
	writes int
	now    func() time.Time
	subs   map[string][]func([]byte)
}

type memEntry struct {
	val []byte
	exp time.Time
}

type memList struct {
	items [][]byte
	exp   time.Time
}

var _ KV = (*Memory)(nil)

// NewMemory returns an empty memory store.
func NewMemory() *Memory {
	return &Memory{vals: map[string]memEntry{}, lists: map[string]*memList{}, now: time.Now}
}

func live(exp, now time.Time) bool { return exp.IsZero() || now.Before(exp) }

// get returns a live entry. The caller holds m.mu.
func (m *Memory) get(key string) (memEntry, bool) {
	e, ok := m.vals[key]
	if ok && !live(e.exp, m.now()) {
		delete(m.vals, key)
		return memEntry{}, false
	}
	return e, ok
}

// wrote counts a write and sweeps now and then. The caller holds m.mu.
func (m *Memory) wrote() {
	m.writes++
	if m.writes%1000 != 0 {
		return
	}
	now := m.now()
	for k, e := range m.vals {
		if !live(e.exp, now) {
			delete(m.vals, k)
		}
	}
	for k, l := range m.lists {
		if !live(l.exp, now) {
			delete(m.lists, k)
		}
	}
}

func (m *Memory) Get(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.get(key)
	if !ok {
		return nil, ErrNotFound
	}
	return bytes.Clone(e.val), nil
}

func (m *Memory) Set(_ context.Context, key string, value []byte, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.vals[key] = memEntry{val: bytes.Clone(value), exp: expiry(m.now(), ttl)}
	m.wrote()
	return nil
}

func (m *Memory) Create(_ context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.get(key); ok {
		return false, nil
	}
	m.vals[key] = memEntry{val: bytes.Clone(value), exp: expiry(m.now(), ttl)}
	m.wrote()
	return true, nil
}

func (m *Memory) Take(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.get(key)
	if !ok {
		return nil, ErrNotFound
	}
	delete(m.vals, key)
	return e.val, nil
}

func (m *Memory) Update(_ context.Context, key string, ttl time.Duration, change func(old []byte) ([]byte, error)) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.get(key)
	var old []byte
	if ok {
		old = bytes.Clone(e.val)
	}
	nv, err := change(old)
	if err != nil {
		return nil, err
	}
	exp := e.exp
	if ttl != KeepTTL {
		exp = expiry(m.now(), ttl)
	}
	m.vals[key] = memEntry{val: bytes.Clone(nv), exp: exp}
	m.wrote()
	return nv, nil
}

func (m *Memory) Touch(_ context.Context, key string, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.get(key); ok {
		e.exp = expiry(m.now(), ttl)
		m.vals[key] = e
		return nil
	}
	if l, ok := m.lists[key]; ok && live(l.exp, m.now()) {
		l.exp = expiry(m.now(), ttl)
		return nil
	}
	return ErrNotFound
}

func (m *Memory) Delete(_ context.Context, keys ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		delete(m.vals, k)
		delete(m.lists, k)
	}
	return nil
}

func (m *Memory) Scan(ctx context.Context, prefix string, fn func(key string) error) error {
	m.mu.Lock()
	now := m.now()
	var keys []string
	for k, e := range m.vals {
		if strings.HasPrefix(k, prefix) && live(e.exp, now) {
			keys = append(keys, k)
		}
	}
	m.mu.Unlock()
	slices.Sort(keys)
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(k); err == ErrStop {
			return nil
		} else if err != nil {
			return err
		}
	}
	return nil
}

func (m *Memory) Append(_ context.Context, key string, item []byte, ttl time.Duration) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.lists[key]
	if !ok || !live(l.exp, m.now()) {
		l = &memList{}
		m.lists[key] = l
	}
	l.items = append(l.items, bytes.Clone(item))
	l.exp = expiry(m.now(), ttl)
	m.wrote()
	return int64(len(l.items) - 1), nil
}

func (m *Memory) Range(_ context.Context, key string, from int64) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.lists[key]
	if !ok || !live(l.exp, m.now()) {
		return nil, ErrNotFound
	}
	if from < 0 {
		from = 0
	}
	var out [][]byte
	for i := from; i < int64(len(l.items)); i++ {
		out = append(out, bytes.Clone(l.items[i]))
	}
	return out, nil
}

func (m *Memory) Ping(context.Context) error { return nil }

func (m *Memory) Name() string { return "memory" }

func (m *Memory) Close() error { return nil }

var _ Broadcaster = (*Memory)(nil)

// Publish calls the channel's subscribers of this process.
func (m *Memory) Publish(_ context.Context, channel string, msg []byte) error {
	m.mu.Lock()
	subs := slices.Clone(m.subs[channel])
	m.mu.Unlock()
	for _, fn := range subs {
		fn(bytes.Clone(msg))
	}
	return nil
}

// Subscribe adds fn to the channel's subscribers until ctx ends.
func (m *Memory) Subscribe(ctx context.Context, channel string, fn func(msg []byte)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.subs == nil {
		m.subs = map[string][]func([]byte){}
	}
	m.subs[channel] = append(m.subs[channel], fn)
	n := len(m.subs[channel]) - 1
	context.AfterFunc(ctx, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.subs[channel][n] = func([]byte) {}
	})
	return nil
}
