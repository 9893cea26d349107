package revisions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// kvBackend keeps revisions in a store.KV: per owner, an index key and a key per revision.
// {tag} is a Redis Cluster hash tag, so that an owner's keys share a slot.
type kvBackend struct{ kv store.KV }

func indexKey(tag string) string      { return prefixIndex + "{" + tag + "}" }
func recordKey(tag, id string) string { return prefixRevision + "{" + tag + "}:" + id }
func shadowKey(tag, clientKey string) string {
	return prefixShadow + "{" + tag + "}:" + clientKeyHash(clientKey)
}

func (b kvBackend) put(ctx context.Context, tag string, e Entry, data []byte, keep Retention, now time.Time) (dropped []Entry, err error) {
	if err := b.kv.Set(ctx, recordKey(tag, e.ID), data, keep.MaxAge); err != nil {
		return nil, fmt.Errorf("revisions: keep %s: %w", e.ID, err)
	}
	_, err = b.kv.Update(ctx, indexKey(tag), 0, func(old []byte) ([]byte, error) {
		list, err := decodeIndex(old)
		if err != nil {
			return nil, err
		}
		// In time order: a Keep that took its time reaches the index after a later one.
		at, _ := slices.BinarySearchFunc(list, e, func(a, b Entry) int {
			if newer(a, b) {
				return 1
			}
			return -1
		})
		list = slices.Insert(list, at, e)
		list, dropped = keep.apply(list, e.ID, now)
		return json.Marshal(list)
	})
	if err != nil {
		_ = b.kv.Delete(ctx, recordKey(tag, e.ID))
		return nil, fmt.Errorf("revisions: index %s: %w", e.ID, err)
	}
	if len(dropped) > 0 {
		keys := make([]string, len(dropped))
		for i, d := range dropped {
			keys[i] = recordKey(tag, d.ID)
		}
		// Unlisted already; a key left behind by a failure here expires with MaxAge.
		_ = b.kv.Delete(ctx, keys...)
	}
	return dropped, nil
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
