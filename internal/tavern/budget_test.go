package tavern

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/cpubudget"
)

// TestSimulateStopsWithItsCall: a simulation of catastrophic /regex/ keys stops when its call
// ends, and at its budget, reporting why in Err; a match's time is bounded by what is left.
func TestSimulateStopsWithItsCall(t *testing.T) {
	t.Parallel()
	var entries []Entry
	for i := range 50 {
		entries = append(entries, Entry{Name: fmt.Sprint(i), Keywords: []string{fmt.Sprintf(`/(a+)+b%d/`, i)}, MatchOptions: &MatchOptions{}, IsEnabled: true})
	}
	chat := []Message{{Text: strings.Repeat("a", 40) + "!"}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	sim := Simulate(entries, SimOptions{Settings: DefaultSettings(), Chat: chat, Budget: cpubudget.New(-1, -1).Call(ctx, "")})
	if !errors.Is(sim.Err, context.Canceled) || time.Since(start) > time.Second {
		t.Fatalf("an ended call: Err %v after %s", sim.Err, time.Since(start))
	}
	budget := cpubudget.New(100*time.Millisecond, -1).Call(context.Background(), "")
	sim = Simulate(entries, SimOptions{Settings: DefaultSettings(), Chat: chat, Budget: budget})
	var ex *cpubudget.ExceededError
	if !errors.As(sim.Err, &ex) || budget.Used() > time.Second {
		t.Fatalf("over the budget: Err %v, used %s", sim.Err, budget.Used())
	}
}
