package tools

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// signingKeyName is the store key of the server's signing key when Options.SigningKey is not
// set: made once by whichever replica needs it first, read by the others.
const signingKeyName = "signing:key"

// signer holds the key the server signs its one-time tokens and download URLs with.
type signer struct {
	kv store.KV

	mu  sync.Mutex
	key []byte // nil until first needed
}

// newSigner returns a signer of key, or of the key kept in kv when key is empty.
func newSigner(key []byte, kv store.KV) *signer {
	s := &signer{kv: kv}
	if len(key) > 0 {
		s.key = key
	}
	return s
}

// secret returns the signing key: the one given, else the one the store keeps for every
// replica (created by the first that needs it).
func (s *signer) secret(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key != nil {
		return s.key, nil
	}
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	if _, err := s.kv.Create(ctx, signingKeyName, fresh, 0); err != nil {
		return nil, fmt.Errorf("keep the signing key: %w", err)
	}
	key, err := s.kv.Get(ctx, signingKeyName)
	if err != nil {
		return nil, fmt.Errorf("read the signing key: %w", err)
	}
	s.key = key
	return key, nil
}
