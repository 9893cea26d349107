package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestToolMatches(t *testing.T) {
	for _, c := range []struct {
		name, op string
		want     bool
	}{
		{"get-card", "getCard", true},
		{"lst-trial-cards", "listTrialCards", true},
		{"write-worldbook-doc", "writeWorldbookDocument", true},
		{"set-opening-lines", "setOpeningLines", true},
		{"getCard", "getCard", true},
		{"get-trial-card", "getCard", false},
		{"lst-card-assets", "listTrialCards", false},
		{"upd-card-profile", "setOpeningLines", false},
	} {
		if got := toolMatches(c.name, c.op); got != c.want {
			t.Errorf("toolMatches(%q, %q) = %v, want %v", c.name, c.op, got, c.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i))
	}
	if p := percentile(ds, 50); p != 50 {
		t.Errorf("p50 = %d, want 50", p)
	}
	if p := percentile(ds, 99); p != 99 {
		t.Errorf("p99 = %d, want 99", p)
	}
	if p := percentile(ds[:1], 99); p != 1 {
		t.Errorf("p99 of one = %d, want 1", p)
	}
}

func TestReplaceBetweenMarkers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	doc := "# x\n\n<!-- bench:begin -->\nold\n<!-- bench:end -->\n\nrest\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := replaceBetweenMarkers(path, "| new |\n"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if want := "# x\n\n<!-- bench:begin -->\n| new |\n<!-- bench:end -->\n\nrest\n"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if err := os.WriteFile(path, []byte("no markers"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := replaceBetweenMarkers(path, "x"); err == nil || !strings.Contains(err.Error(), "markers") {
		t.Errorf("no markers: err = %v", err)
	}
}

func TestReadProc(t *testing.T) {
	u, err := readProc(os.Getpid())
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	if u.RSSKB <= 0 || u.PeakKB < u.RSSKB || u.Threads < 1 {
		t.Errorf("readProc(self) = %+v", u)
	}
}
