package tools

import (
	"encoding/json"
	"fmt"
	"github.com/cardwriter/cardwriter-mcp/internal/cpubudget"
	"github.com/cardwriter/cardwriter-mcp/internal/tokens"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the CPU time the process has used so far, user and system.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestCPUBigSection: a card with one 4 MB section costs a read and a review a bounded amount of
// CPU: the result budget stops tokenizing once its cap has decided. Not parallel: it measures
// the process's CPU time. Run with -v to see the figures.
func TestCPUBigSection(t *testing.T) {
	e := newEnv(t, Options{})
	roleID := e.ok("create_card", `{"roleName":"Big"}`)["roleId"].(string)
	rng := rand.New(rand.NewPCG(1, 2))
	var b strings.Builder
	for b.Len() < 4<<20 {
		b.WriteByte(byte('a' + rng.IntN(26)))
		if rng.IntN(9) == 0 {
			b.WriteByte(' ')
		}
	}
	big := b.String()
	e.ok("write_card_document", jsonArg(t, map[string]any{"roleId": roleID, "sections": map[string]string{"description": big}}))
	// The guard counts the bytes tokenized (deterministic, whatever the machine's load or the
	// race detector); the CPU time is logged for the figures.
	for _, tool := range []string{"get_card", "review_card"} {
		start, bytes := cpuTime(t), tokens.Encoded()
		res := e.call(tool, `{"roleId":"`+roleID+`"}`)
		used, tokenized := cpuTime(t)-start, tokens.Encoded()-bytes
		t.Logf("%s on a 4 MB section: %.2f CPU-s, %d bytes tokenized (isError %v)", tool, used.Seconds(), tokenized, res.IsError)
		if tokenized > 1<<20 {
			t.Errorf("%s on a 4 MB section tokenized %d bytes, want at most 1 MiB (the budget decides long before)", tool, tokenized)
		}
	}
}

// catastrophicEntries are n inline entries whose key backtracks without end on text.
func catastrophicEntries(n int) (entries []any, text string) {
	mo := map[string]any{"caseSensitive": false, "matchWholeWords": false, "selectiveLogic": 0}
	for i := range n {
		entries = append(entries, map[string]any{"entryId": fmt.Sprintf("e%d", i), "name": fmt.Sprintf("Slow %d", i),
			"keywords": []string{fmt.Sprintf(`/(a+)+b%d/`, i)}, "matchOptions": mo})
	}
	return entries, strings.Repeat("a", 40) + "!"
}

// TestCPUTriggersBudget: test_worldbook_triggers with inline entries whose keys are catastrophic
// regular expressions stops at the per-call budget, then the per-user one, with a retryable
// error naming the budget and its flag; the CPU a call costs is bounded by its budget.
func TestCPUTriggersBudget(t *testing.T) {
	e := newEnv(t, Options{MatchBudget: cpubudget.New(300*time.Millisecond, 500*time.Millisecond)})
	entries, text := catastrophicEntries(16)
	args := jsonArg(t, map[string]any{"entries": entries, "text": text})
	start := cpuTime(t)
	env, _ := e.fail("test_worldbook_triggers", args)
	used := cpuTime(t) - start
	t.Logf("test_worldbook_triggers, 16 catastrophic keys, budget 0.3 s a call: %.2f CPU-s", used.Seconds())
	if env["error"] != "budget_exceeded" || env["retryable"] != true || !strings.Contains(env["message"].(string), "--match-budget") {
		t.Fatalf("over the per-call budget: %v", env)
	}
	if used > 1200*time.Millisecond {
		t.Errorf("a call over its 0.3 s budget cost %.2f CPU-s", used.Seconds())
	}
	env, _ = e.fail("test_worldbook_triggers", args)
	if env["error"] != "budget_exceeded" || !strings.Contains(env["message"].(string), "--match-user-budget") || env["detail"].(map[string]any)["retryAfterSeconds"] == nil {
		t.Fatalf("the user's second call is over the per-user budget: %v", env)
	}
	// A cheap call of the same user is refused too (the budget refills over a minute), but only
	// once it has a regular expression to match.
	e.ok("test_worldbook_triggers", jsonArg(t, map[string]any{"entries": []any{map[string]any{"name": "Plain", "keywords": []string{"gate"}}}, "text": "the gate"}))
}

// TestCPUTriggersDefaultBudget measures the worst case of one call under the default budgets.
func TestCPUTriggersDefaultBudget(t *testing.T) {
	e := newEnv(t, Options{})
	entries, text := catastrophicEntries(64)
	start := cpuTime(t)
	env, _ := e.fail("test_worldbook_triggers", jsonArg(t, map[string]any{"entries": entries, "text": text}))
	used := cpuTime(t) - start
	t.Logf("test_worldbook_triggers, 64 catastrophic keys, default budgets: %.2f CPU-s (%v)", used.Seconds(), env["error"])
	if used > cpubudget.DefaultPerCall+time.Second {
		t.Errorf("one call cost %.2f CPU-s, over its budget of %s", used.Seconds(), cpubudget.DefaultPerCall)
	}
}

// TestCPUReviewBudget: review_card of a card whose imported lorebook has catastrophic /regex/
// keys (matched against its first message by the review and the preview) stops at the matching
// budget with a retryable error naming it.
func TestCPUReviewBudget(t *testing.T) {
	e := newEnv(t, Options{MatchBudget: cpubudget.New(300*time.Millisecond, -1)})
	entries := make([]any, 16)
	for i := range entries {
		entries[i] = map[string]any{"keys": []any{fmt.Sprintf(`/(a+)+b%d/`, i)}, "content": "x", "name": fmt.Sprintf("S%d", i),
			"insertion_order": i, "enabled": true, "extensions": map[string]any{}}
	}
	book, _ := json.Marshal(map[string]any{"spec": "chara_card_v3", "spec_version": "3.0", "data": map[string]any{
		"name": "Slow", "first_mes": strings.Repeat("a", 40) + "!", "character_book": map[string]any{"name": "Slow book", "entries": entries}}})
	roleID := importCard(t, e, book, nil)["roleId"].(string)
	start := cpuTime(t)
	env, _ := e.fail("review_card", `{"roleId":"`+roleID+`"}`)
	used := cpuTime(t) - start
	t.Logf("review_card, 16 catastrophic keys, budget 0.3 s a call: %.2f CPU-s", used.Seconds())
	if env["error"] != "budget_exceeded" || !strings.Contains(env["message"].(string), "--match-budget") {
		t.Fatalf("review over the matching budget: %v", env)
	}
	if used > 1200*time.Millisecond {
		t.Errorf("a review over its 0.3 s budget cost %.2f CPU-s", used.Seconds())
	}
}
