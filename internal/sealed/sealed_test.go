package sealed

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// TestSealed: values under the prefixes are read back only as this key sealed them under this
// store key: a plain write, a copy under another key or a value sealed with another key reads
// as absent (and is reported); other keys pass through untouched.
func TestSealed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw := store.NewMemory()
	var forged []string
	kv := New(raw, bytes.Repeat([]byte{1}, KeySize), func(k string) { forged = append(forged, k) }, "rev:", "export:")
	other := New(raw, bytes.Repeat([]byte{2}, KeySize), nil, "rev:")
	if err := kv.Set(ctx, "rev:a", []byte("mine"), 0); err != nil {
		t.Fatal(err)
	}
	if v, err := kv.Get(ctx, "rev:a"); err != nil || string(v) != "mine" {
		t.Fatalf("a sealed value: %q %v", v, err)
	}
	if v, _ := raw.Get(ctx, "rev:a"); bytes.Contains(v, []byte("mine")) == false || string(v) == "mine" {
		t.Fatalf("stored as %q, want the value with its MAC", v)
	}
	sealedA, _ := raw.Get(ctx, "rev:a")
	for name, write := range map[string]func() error{
		"a plain write":          func() error { return raw.Set(ctx, "rev:b", []byte("planted"), 0) },
		"a copy under a new key": func() error { return raw.Set(ctx, "rev:b", sealedA, 0) },
		"another key's seal":     func() error { return other.Set(ctx, "rev:b", []byte("planted"), 0) },
	} {
		if err := write(); err != nil {
			t.Fatal(err)
		}
		forged = nil
		if _, err := kv.Get(ctx, "rev:b"); !errors.Is(err, store.ErrNotFound) || len(forged) != 1 {
			t.Errorf("%s: read %v (forged %v), want absent and reported", name, err, forged)
		}
		got, err := kv.Update(ctx, "rev:b", 0, func(old []byte) ([]byte, error) {
			if old != nil {
				t.Errorf("%s: Update saw %q, want absent", name, old)
			}
			return []byte("fresh"), nil
		})
		if err != nil || string(got) != "fresh" {
			t.Fatalf("%s: update: %q %v", name, got, err)
		}
		if v, err := kv.Take(ctx, "rev:b"); err != nil || string(v) != "fresh" {
			t.Fatalf("%s: take: %q %v", name, v, err)
		}
	}
	if err := kv.Set(ctx, "mcp:x", []byte("plain"), 0); err != nil {
		t.Fatal(err)
	}
	if v, _ := raw.Get(ctx, "mcp:x"); string(v) != "plain" {
		t.Errorf("a key under no prefix stored as %q", v)
	}
}

// TestSealedBatch: over a store that batches, a batch's values are sealed as Set's and read
// as Get's; a forged value reads as absent within the batch too.
func TestSealedBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw := store.NewMemory()
	kv := New(raw, bytes.Repeat([]byte{1}, KeySize), nil, "rev:")
	b, ok := kv.(store.Batcher)
	if !ok {
		t.Fatal("sealed over a store that batches does not batch")
	}
	if err := raw.Set(ctx, "rev:planted", []byte("planted"), 0); err != nil {
		t.Fatal(err)
	}
	err := b.Batch(ctx, func(tx store.Tx) error {
		if _, err := tx.Get("rev:planted"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a forged value within a batch: %v, want absent", err)
		}
		return tx.Set("rev:a", []byte("mine"), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := kv.Get(ctx, "rev:a"); err != nil || string(v) != "mine" {
		t.Fatalf("a value written in a batch: %q %v", v, err)
	}
	if v, _ := raw.Get(ctx, "rev:a"); string(v) == "mine" {
		t.Error("a batch stored its value unsealed")
	}
}
