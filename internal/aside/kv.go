package aside

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// KV is a Store on the HTTP server's store.KV (the embedded file, or Redis shared by replicas):
// one value per key, with the key beside the data, as the File store writes them. Records do
// not expire: they last as long as the card they belong to.
type KV struct {
	kv store.KV
}

// NewKV returns a Store on kv.
func NewKV(kv store.KV) *KV { return &KV{kv: kv} }

func kvKey(key Key) string {
	return "aside:" + strings.TrimSuffix(filepath.Base((&File{}).path(key)), ".json")
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
	if err := s.kv.Set(ctx, kvKey(key), out, 0); err != nil {
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
