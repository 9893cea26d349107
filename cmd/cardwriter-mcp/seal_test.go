package main

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// TestSealStore: the HTTP server's store seals every record a user's data or authority rests on
// (revisions, sessions and their owners, exports, kept-aside data, quotas, revocations): one
// written without the key reads as absent; replicas sharing Redis must be given the state key.
func TestSealStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw := store.NewMemory()
	af := &httpAuthFlags{stateKey: base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))}
	kv, err := sealStore(raw, af, authPassthrough, "http://127.0.0.1:1", t.TempDir(), false, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"rev:rec:{u}:1", "rev:idx:{u}", "rev:trial:{u}:k", "mcp:session:s1", "proxy:session-owner:s1",
		"export:e1", "aside:a1", "quota:exports:u", "proxy:revoked:grant:g"} {
		if err := raw.Set(ctx, key, []byte(`{"planted":true}`), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Get(ctx, key); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s written without the key: read %v, want absent", key, err)
		}
		if err := kv.Set(ctx, key, []byte(`{"mine":true}`), 0); err != nil {
			t.Fatal(err)
		}
		if v, err := kv.Get(ctx, key); err != nil || string(v) != `{"mine":true}` {
			t.Errorf("%s: %q %v", key, v, err)
		}
	}
	if _, err := sealStore(raw, &httpAuthFlags{}, authPassthrough, "http://127.0.0.1:1", "", false, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "--state-key") {
		t.Errorf("Redis without a state key: %v, want an error naming --state-key", err)
	}
}
