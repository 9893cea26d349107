package cpubudget

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestBudgets: a call stops at its own budget, a user's calls at the user's, which refills over
// a minute; another user is not touched; an ended context ends the call.
func TestBudgets(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	l := New(time.Second, 3*time.Second)
	l.now = func() time.Time { return now }
	ctx := context.Background()
	spend := func(c *Call) error {
		for {
			d, err := c.Allow()
			if err != nil {
				return err
			}
			c.Spend(min(d, 400*time.Millisecond))
		}
	}
	var ex *ExceededError
	for i := range 3 {
		if err := spend(l.Call(ctx, "a")); !errors.As(err, &ex) || ex.Flag != FlagPerCall {
			t.Fatalf("call %d: %v, want the per-call budget", i, err)
		}
	}
	if err := spend(l.Call(ctx, "a")); !errors.As(err, &ex) || ex.Flag != FlagPerUser || ex.RetryAfter <= 0 {
		t.Fatalf("fourth call: %v, want the per-user budget with a retry time", err)
	}
	if _, err := l.Call(ctx, "b").Allow(); err != nil {
		t.Fatalf("another user: %v", err)
	}
	now = now.Add(ex.RetryAfter)
	if d, err := l.Call(ctx, "a").Allow(); err != nil || d <= 0 {
		t.Fatalf("after %s: %v %v", ex.RetryAfter, d, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Call(cancelled, "b").Allow(); !errors.Is(err, context.Canceled) {
		t.Fatalf("an ended call: %v", err)
	}
	if _, err := New(-1, -1).Call(ctx, "c").Allow(); err != nil {
		t.Fatalf("no limits: %v", err)
	}
}
