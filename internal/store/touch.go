package store

import (
	"context"
	"sync"
	"time"
)

// Toucher keeps keys alive without writing on every use: it touches a key at most once per
// every in this process (a key whose lifetime is an idle time stays alive as long as it is
// used within the idle time minus every). With the embedded store a touch is a synced write;
// with Redis, a round trip.
type Toucher struct {
	KV    KV
	Every time.Duration

	mu    sync.Mutex
	last  map[string]time.Time
	calls int
}

// Touch sets the key's lifetime to ttl, unless this process did within Every.
func (t *Toucher) Touch(ctx context.Context, key string, ttl time.Duration) error {
	now := time.Now()
	t.mu.Lock()
	if t.last == nil {
		t.last = map[string]time.Time{}
	}
	if at, ok := t.last[key]; ok && now.Sub(at) < t.Every {
		t.mu.Unlock()
		return nil
	}
	t.calls++
	if t.calls%1024 == 0 {
		for k, at := range t.last {
			if now.Sub(at) >= t.Every {
				delete(t.last, k)
			}
		}
	}
	t.mu.Unlock()
	if err := t.KV.Touch(ctx, key, ttl); err != nil {
		return err
	}
	t.mu.Lock()
	t.last[key] = now
	t.mu.Unlock()
	return nil
}

// Forget drops what the toucher knows of key (after the key was deleted).
func (t *Toucher) Forget(key string) {
	t.mu.Lock()
	delete(t.last, key)
	t.mu.Unlock()
}
