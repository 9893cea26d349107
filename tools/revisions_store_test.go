package tools

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// countingKV counts the operations of a store.
type countingKV struct {
	store.KV
	n atomic.Int64
}

func (c *countingKV) Get(ctx context.Context, k string) ([]byte, error) {
	c.n.Add(1)
	return c.KV.Get(ctx, k)
}

func (c *countingKV) Set(ctx context.Context, k string, v []byte, ttl time.Duration) error {
	c.n.Add(1)
	return c.KV.Set(ctx, k, v, ttl)
}

func (c *countingKV) Update(ctx context.Context, k string, ttl time.Duration, f func([]byte) ([]byte, error)) ([]byte, error) {
	c.n.Add(1)
	return c.KV.Update(ctx, k, ttl, f)
}

func (c *countingKV) Delete(ctx context.Context, keys ...string) error {
	c.n.Add(1)
	return c.KV.Delete(ctx, keys...)
}

// batchingKV is a countingKV over a store that batches (as the embedded store does): a batch
// counts as one operation.
type batchingKV struct {
	*countingKV
	b store.Batcher
}

func (c batchingKV) Batch(ctx context.Context, fn func(tx store.Tx) error) error {
	c.n.Add(1)
	return c.b.Batch(ctx, fn)
}

// TestRevisionWriteCost guards what a write with a revision costs, deterministically: one
// read of the card before the write and no other card service request (no identity
// operation: the owner asks nobody), and one store transaction where the store batches (the
// embedded store: one sync), else two store operations (the revision, the index).
// internal/revisions' TestKeepAllocs and TestKeepKVAllocs guard the allocations.
func TestRevisionWriteCost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		kv      func() (store.KV, *atomic.Int64)
		wantOps int64
	}{
		{"store that batches", func() (store.KV, *atomic.Int64) {
			mem := store.NewMemory()
			c := &countingKV{KV: mem}
			return batchingKV{c, mem}, &c.n
		}, 1},
		{"store that does not batch", func() (store.KV, *atomic.Int64) {
			c := &countingKV{KV: store.NewMemory()}
			return c, &c.n
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			kv, n := tc.kv()
			e := newEnv(t, Options{Revisions: revisions.New(kv, revisions.DefaultRetention())})
			roleID := e.ok("create_card", `{"roleName":"Costly"}`)["roleId"].(string)
			for i := range 3 {
				before, ops := e.requests.n.Load(), n.Load()
				write(t, e, "set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": strings.Repeat("w", i+1)}))
				if got := e.requests.n.Load() - before; got != 2 {
					t.Errorf("write %d: %d card service requests, want 2 (the read before it, the write)", i, got)
				}
				if got := n.Load() - ops; got != tc.wantOps {
					t.Errorf("write %d: %d store operations, want %d", i, got, tc.wantOps)
				}
			}
		})
	}
}

// TestRevisionStoreFault: a write whose revision cannot be saved (this server's folder is
// unusable) is not sent, and the model reads that this server, not the card service, failed,
// and why.
func TestRevisionStoreFault(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "revisions")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, Options{Revisions: revisions.NewDir(path, revisions.DefaultRetention())})
	roleID := e.ok("create_card", `{"roleName":"Unsaved"}`)["roleId"].(string)
	env, msg := e.fail("set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "new"}))
	if env["error"] != codeRevisionNotKept || !strings.Contains(msg, "this server (cardwriter-mcp, not the card service) could not save") ||
		!strings.Contains(msg, "not a directory") || strings.Contains(msg, "could not be reached") {
		t.Errorf("got %v: %s", env["error"], msg)
	}
	if card := e.ok("get_card", jsonArg(t, map[string]any{"roleId": roleID})); card["roleWelcome"] == "new" {
		t.Error("the write was sent though its revision was not kept")
	}
}

// TestRevisionTooLarge: a revision larger than the whole allowance is refused for good: not
// retryable, and the message says why and that retrying will not help.
func TestRevisionTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{Revisions: revisions.New(store.NewMemory(), revisions.Retention{PerObject: 5, UserBytes: 700})})
	roleID := e.ok("create_card", `{"roleName":"Big"}`)["roleId"].(string)
	e.ok("set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": strings.Repeat("long ", 100)}))
	env, msg := e.fail("set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "short"}))
	if env["error"] != codeRevisionNotKept || env["retryable"] != false || !strings.Contains(msg, "Retrying will not help") {
		t.Errorf("got %v: %s", env, msg)
	}
}

// TestParallelWritesListed: 16 writes of one card at once, on every store form, each keep a
// revision that list_revisions lists (newest first: it pages without complaint) and that
// restores.
func TestParallelWritesListed(t *testing.T) {
	t.Parallel()
	forms := map[string]func(t *testing.T) *RevisionStore{
		"memory": func(*testing.T) *RevisionStore { return revisions.New(store.NewMemory(), revisions.DefaultRetention()) },
		"bolt": func(t *testing.T) *RevisionStore {
			kv, err := store.OpenBolt(filepath.Join(t.TempDir(), "state.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = kv.Close() })
			return revisions.New(kv, revisions.DefaultRetention())
		},
		"dir": func(t *testing.T) *RevisionStore {
			return revisions.NewDir(filepath.Join(t.TempDir(), "revisions"), revisions.DefaultRetention())
		},
	}
	for name, form := range forms {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, Options{Revisions: form(t)})
			roleID := e.ok("create_card", `{"roleName":"Busy"}`)["roleId"].(string)
			var mu sync.Mutex
			kept := map[string]bool{}
			var wg sync.WaitGroup
			for i := range 16 {
				wg.Go(func() {
					res := e.call("set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": strings.Repeat("v", i+1)}))
					if res.IsError {
						t.Errorf("write %d: %s", i, text(res))
						return
					}
					rev := structured(t, res).(map[string]any)["revision"].(map[string]any)["revisionId"].(string)
					mu.Lock()
					kept[rev] = true
					mu.Unlock()
				})
			}
			wg.Wait()
			listed := map[string]bool{}
			cursor := ""
			for {
				args := map[string]any{"roleId": roleID, "limit": 5}
				if cursor != "" {
					args["cursor"] = cursor
				}
				page := e.ok("list_revisions", jsonArg(t, args))
				for _, r := range page["revisions"].([]any) {
					listed[r.(map[string]any)["revisionId"].(string)] = true
				}
				next, _ := page["nextCursor"].(string)
				if next == "" {
					break
				}
				cursor = next
			}
			for id := range kept {
				if !listed[id] {
					t.Errorf("kept %s is not listed", id)
				}
			}
			for id := range kept {
				e.ok("restore_revision", jsonArg(t, map[string]any{"revisionId": id}))
			}
		})
	}
}

// TestServerFaultsNamed: a fault of this server's own files or store (a full disk while
// keeping kept-aside data, a store down) reaches the model as this server's, with its
// cause, never as the card service's.
func TestServerFaultsNamed(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		fmt.Errorf("aside: keep: %w", &fs.PathError{Op: "write", Path: "/state/aside", Err: syscall.ENOSPC}),
		&store.UnavailableError{Backend: "bolt", Err: fmt.Errorf("write: %w", syscall.ENOSPC)},
	} {
		env, code, internal := outcome(context.Background(), err)
		msg, _ := env["message"].(string)
		if internal || code != codeUnavailable || !strings.Contains(msg, "This server (cardwriter-mcp, not the card service)") ||
			!strings.Contains(msg, "no space left on device") || strings.Contains(msg, "could not be reached") {
			t.Errorf("%v: %s %v: %s", err, code, internal, msg)
		}
		if f := (&Tool{Name: "set_opening_lines", Operation: "setOpeningLines"}).lostAnswer(context.Background(), err, nil); f != nil {
			t.Errorf("%v read as a lost answer: %s", err, f.Message)
		}
	}
}
