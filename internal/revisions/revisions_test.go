package revisions

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

var (
	alice = User{BaseURL: "https://api.example/open/v1", ID: "u_alice"}
	bob   = User{BaseURL: "https://api.example/open/v1", ID: "u_bob"}
)

func keep(t *testing.T, s *Store, u User, kind, id string, state string) (*Revision, []Entry) {
	t.Helper()
	rev := &Revision{Kind: kind, ObjectID: id, Tool: "write_card_document", State: json.RawMessage(state)}
	dropped, err := s.Keep(context.Background(), u, rev)
	if err != nil {
		t.Fatalf("keep: %v", err)
	}
	return rev, dropped
}

// TestKeepListGet: revisions come back newest first, by object, whole; another user sees none.
func TestKeepListGet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := New(store.NewMemory(), DefaultRetention())
	clock := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	s.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	r1, _ := keep(t, s, alice, KindCard, "r_1", `{"fields":{"roleWelcome":"one"}}`)
	r2, _ := keep(t, s, alice, KindCard, "r_1", `{"fields":{"roleWelcome":"two"}}`)
	r3, _ := keep(t, s, alice, KindWorldbook, "wb_1", `{"entries":[]}`)
	list, err := s.List(ctx, alice, KindCard, "r_1")
	if err != nil || len(list) != 2 || list[0].ID != r2.ID || list[1].ID != r1.ID {
		t.Fatalf("list r_1 = %+v, %v; want r2, r1", list, err)
	}
	if all, _ := s.List(ctx, alice, "", ""); len(all) != 3 || all[0].ID != r3.ID {
		t.Errorf("list all = %+v", all)
	}
	got, err := s.Get(ctx, alice, r1.ID)
	if err != nil || string(got.State) != `{"fields":{"roleWelcome":"one"}}` || got.Tool != "write_card_document" {
		t.Errorf("get = %+v, %v", got, err)
	}
	if l, _ := s.List(ctx, bob, "", ""); len(l) != 0 {
		t.Errorf("bob lists alice's revisions: %+v", l)
	}
	if _, err := s.Get(ctx, bob, r1.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("bob gets alice's revision: %v", err)
	}
	for _, id := range []string{"", "rv_", "../x", r1.ID + "x", strings.ToUpper(r1.ID)} {
		if _, err := s.Get(ctx, alice, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("get %q: %v", id, err)
		}
	}
	if !validID(r1.ID) || r1.ID >= r2.ID {
		t.Errorf("ids %s, %s: not valid or not in time order", r1.ID, r2.ID)
	}
}

// TestRetention: the oldest go first, by count per object, by age and by a user's size; the
// newest revision is always kept.
func TestRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("per object", func(t *testing.T) {
		t.Parallel()
		s := New(store.NewMemory(), Retention{PerObject: 2})
		r1, _ := keep(t, s, alice, KindCard, "r_1", `1`)
		keep(t, s, alice, KindCard, "r_2", `1`)
		keep(t, s, alice, KindCard, "r_1", `2`)
		_, dropped := keep(t, s, alice, KindCard, "r_1", `3`)
		if len(dropped) != 1 || dropped[0].ID != r1.ID {
			t.Fatalf("dropped %+v, want %s", dropped, r1.ID)
		}
		if _, err := s.Get(ctx, alice, r1.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("a dropped revision is still readable: %v", err)
		}
		if l, _ := s.List(ctx, alice, KindCard, "r_2"); len(l) != 1 {
			t.Errorf("another object's revision was dropped: %+v", l)
		}
	})
	t.Run("age", func(t *testing.T) {
		t.Parallel()
		s := New(store.NewMemory(), Retention{PerObject: 10, MaxAge: time.Hour})
		clock := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
		s.now = func() time.Time { return clock }
		old, _ := keep(t, s, alice, KindCard, "r_1", `1`)
		clock = clock.Add(2 * time.Hour)
		if l, _ := s.List(ctx, alice, KindCard, "r_1"); len(l) != 0 {
			t.Errorf("an expired revision is listed: %+v", l)
		}
		_, dropped := keep(t, s, alice, KindCard, "r_9", `2`)
		if len(dropped) != 1 || dropped[0].ID != old.ID {
			t.Errorf("dropped %+v, want the old one", dropped)
		}
	})
	t.Run("user size", func(t *testing.T) {
		t.Parallel()
		s := New(store.NewMemory(), Retention{PerObject: 10, UserBytes: 1000})
		big := `"` + strings.Repeat("x", 250) + `"`
		r1, _ := keep(t, s, alice, KindCard, "r_1", big)
		keep(t, s, alice, KindCard, "r_2", big)
		_, dropped := keep(t, s, alice, KindCard, "r_3", big)
		if len(dropped) != 1 || dropped[0].ID != r1.ID {
			t.Fatalf("dropped %+v, want the oldest", dropped)
		}
		if _, dropped := keep(t, s, bob, KindCard, "r_1", big); len(dropped) != 0 {
			t.Errorf("bob's revision dropped for alice's size: %+v", dropped)
		}
		huge := &Revision{Kind: KindCard, ObjectID: "r_1", State: json.RawMessage(`"` + strings.Repeat("y", 1100) + `"`)}
		if _, err := s.Keep(ctx, alice, huge); err == nil {
			t.Error("a revision larger than the allowance was kept")
		}
	})
	t.Run("off", func(t *testing.T) {
		t.Parallel()
		s := New(store.NewMemory(), Retention{})
		if _, err := s.Keep(ctx, alice, &Revision{Kind: KindCard, ObjectID: "r", State: json.RawMessage(`1`)}); err == nil {
			t.Error("kept with a retention of none")
		}
	})
}

// TestRestart: revisions in a file outlive the store that wrote them.
func TestRestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "revisions.db")
	r1, _ := keep(t, New(store.OpenShared(path), DefaultRetention()), alice, KindTrial, "draft", `{"card":{}}`)
	s := New(store.OpenShared(path), DefaultRetention())
	got, err := s.Get(context.Background(), alice, r1.ID)
	if err != nil || got.ObjectID != "draft" {
		t.Fatalf("after a restart: %+v, %v", got, err)
	}
}

// failingKV fails every write of the index.
type failingKV struct{ store.KV }

func (failingKV) Update(context.Context, string, time.Duration, func([]byte) ([]byte, error)) ([]byte, error) {
	return nil, &store.UnavailableError{Backend: "test", Err: errors.New("down")}
}

// TestKeepFails: a revision whose index cannot be written is not kept, and its content is
// not left behind.
func TestKeepFails(t *testing.T) {
	t.Parallel()
	mem := store.NewMemory()
	s := New(failingKV{mem}, DefaultRetention())
	if _, err := s.Keep(context.Background(), alice, &Revision{Kind: KindCard, ObjectID: "r", State: json.RawMessage(`1`)}); err == nil {
		t.Fatal("kept without an index")
	}
	var keys []string
	_ = mem.Scan(context.Background(), "", func(k string) error { keys = append(keys, k); return nil })
	if len(keys) != 0 {
		t.Errorf("left behind: %v", keys)
	}
}

// TestKeyPrefixes: every key is under a named prefix, with the user's hash tag.
func TestKeyPrefixes(t *testing.T) {
	t.Parallel()
	mem := store.NewMemory()
	s := New(mem, DefaultRetention())
	keep(t, s, alice, KindCard, "r_1", `1`)
	if err := s.SaveShadow(context.Background(), alice, "draft", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	var keys []string
	_ = mem.Scan(context.Background(), "", func(k string) error { keys = append(keys, k); return nil })
	if len(keys) != 3 {
		t.Fatalf("keys %v", keys)
	}
	for _, k := range keys {
		if !slices.ContainsFunc(Prefixes(), func(p string) bool { return strings.HasPrefix(k, p+alice.tag()) }) {
			t.Errorf("key %s is under no prefix with the user's tag", k)
		}
	}
}

// TestPrefixesKeptByReplica: revisions are among what must not be lost, so a Redis deployment
// with replicas acknowledges them only once a replica holds them.
func TestPrefixesKeptByReplica(t *testing.T) {
	t.Parallel()
	for _, p := range Prefixes() {
		if !store.KeptByReplica(p + "u:1") {
			t.Errorf("%s is not kept by a replica", p)
		}
	}
}
