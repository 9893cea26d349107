package main

import (
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// TestDeferFirstGC: the collector is off until the first line is written, then the GOGC found
// is back; the deadline restores it when nothing is written.
func TestDeferFirstGC(t *testing.T) {
	old := debug.SetGCPercent(73)
	defer debug.SetGCPercent(old)

	restore := deferFirstGC()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("GOGC while deferred = %d, want off (-1)", got)
	}
	var out strings.Builder
	w := &lineWriter{w: &out, written: restore}
	if _, err := w.Write([]byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(73); got != 73 {
		t.Fatalf("GOGC after the first line = %d, want 73", got)
	}
	restore() // again: a no-op
	if got := debug.SetGCPercent(73); got != 73 {
		t.Fatalf("GOGC after a second restore = %d, want 73", got)
	}

	deferFirstGC() // never restored by hand
	deadline := time.Now().Add(firstGCDeadline + 5*time.Second)
	for debug.SetGCPercent(-1) != 73 {
		debug.SetGCPercent(-1)
		if time.Now().After(deadline) {
			t.Fatal("GOGC not restored after firstGCDeadline")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
