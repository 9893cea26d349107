package tools

import (
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
	for _, tool := range []string{"get_card", "review_card"} {
		start := cpuTime(t)
		res := e.call(tool, `{"roleId":"`+roleID+`"}`)
		used := cpuTime(t) - start
		t.Logf("%s on a 4 MB section: %.2f CPU-s (isError %v)", tool, used.Seconds(), res.IsError)
		if used > 600*time.Millisecond {
			t.Errorf("%s on a 4 MB section cost %.2f CPU-s, want under 0.6", tool, used.Seconds())
		}
	}
}
