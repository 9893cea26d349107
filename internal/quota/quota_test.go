package quota

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// TestLedger: a user's items hold at most the limit; reserving an id again replaces it; an
// expired or released item frees its room; another user is not touched; the observer sees
// each change and refusal.
func TestLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Unix(1000, 0)
	l := New(store.NewMemory(), "exports", 100, "bytes", "--x", "Free some.")
	l.SetClock(func() time.Time { return now })
	var seen []int64
	refusals := 0
	l.SetObserver(func(_ string, used int64, refused bool) {
		if refused {
			refusals++
		} else {
			seen = append(seen, used)
		}
	})
	if _, err := l.Reserve(ctx, "u", "a", 60, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reserve(ctx, "u", "a", 70, now.Add(time.Minute)); err != nil {
		t.Fatalf("reserving an id again replaces it: %v", err)
	}
	var ex *ExceededError
	if _, err := l.Reserve(ctx, "u", "b", 40, time.Time{}); !errors.As(err, &ex) || ex.Used != 70 || ex.FreesAt.IsZero() {
		t.Fatalf("past the limit: %v", err)
	}
	if err := l.Check(ctx, "v", 100); err != nil {
		t.Fatalf("another user: %v", err)
	}
	now = now.Add(time.Minute)
	if used, err := l.Reserve(ctx, "u", "b", 40, time.Time{}); err != nil || used != 40 {
		t.Fatalf("once a expired: %d %v", used, err)
	}
	if err := l.Release(ctx, "u", "b"); err != nil {
		t.Fatal(err)
	}
	if used, _, _ := l.Usage(ctx, "u"); used != 0 {
		t.Fatalf("after release: %d", used)
	}
	if len(seen) != 3 || refusals != 1 {
		t.Errorf("observed %v and %d refusals", seen, refusals)
	}
}
