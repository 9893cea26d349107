package main

import (
	"os"
	"os/exec"
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

func TestMCPGoPatchRefusals(t *testing.T) {
	for _, args := range [][]string{
		{"-mcp-go-patch", "x.patch", "-readme", "README.md"},
		{"-mcp-go-patch", "x.patch", "-bin", "/bin/true"},
	} {
		err := run(t.Context(), args)
		if err == nil || !strings.Contains(err.Error(), "-mcp-go-patch") {
			t.Errorf("run(%q) = %v, want a refusal naming -mcp-go-patch", args, err)
		}
	}
}

func TestMarkdownLabelsMCPGoPatch(t *testing.T) {
	r := results{Config: resultConfig{}, MCPGoPatch: "github.com/mark3labs/mcp-go@v1.2.1 patched with p.patch"}
	if md := r.markdown(); !strings.HasPrefix(md, "**Not the product's figures**") || !strings.Contains(md, r.MCPGoPatch) {
		t.Errorf("markdown does not start with the label:\n%s", md)
	}
	r.MCPGoPatch = ""
	if md := r.markdown(); strings.Contains(md, "Not the product's figures") {
		t.Errorf("markdown without a patch carries the label:\n%s", md)
	}
}

func TestPreparePatchedMCPGo(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	patch := filepath.Join(dir, "add.patch")
	diff := "diff --git a/BENCH_PATCHED b/BENCH_PATCHED\nnew file mode 100644\n--- /dev/null\n+++ b/BENCH_PATCHED\n@@ -0,0 +1 @@\n+patched\n"
	if err := os.WriteFile(patch, []byte(diff), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := preparePatchedMCPGo(t.Context(), root, filepath.Join(dir, "out"), patch)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(p.modfile)
	if err != nil {
		t.Fatal(err)
	}
	_, target, ok := strings.Cut(string(mod), "\nreplace "+mcpGoModule+" => ")
	if !ok {
		t.Fatalf("no replace directive in %s:\n%s", p.modfile, mod)
	}
	if got, err := os.ReadFile(filepath.Join(strings.TrimSpace(target), "BENCH_PATCHED")); err != nil || string(got) != "patched\n" {
		t.Errorf("patched copy: %q, %v", got, err)
	}
	if !strings.Contains(p.label, "add.patch") || len(p.buildFlags()) != 2 {
		t.Errorf("label %q, build flags %q", p.label, p.buildFlags())
	}
	if (*mcpGoPatch)(nil).buildFlags() != nil {
		t.Error("no patch: build flags are not empty")
	}
}

// TestFailedCells: -strict fails on any failed cell of ours or the peer over stdio, and names
// it; the peer over streamable HTTP (which the go-sdk client cannot drive) is excepted.
func TestFailedCells(t *testing.T) {
	ok := cellResult{Upstream: "stub", Mode: modeStdio, Concurrency: 1}
	for _, c := range []struct {
		name  string
		cells []cellResult
		want  string
	}{
		{"none failed", []cellResult{ok}, ""},
		{"ours failed", []cellResult{ok, {Upstream: "stub", Mode: modeHTTP, Concurrency: 8, Error: "preflight: GET /me 404\nmore"}}, "stub http c=8: preflight: GET /me 404"},
		{"the peer over HTTP", []cellResult{ok, {Upstream: "sandbox", Mode: modePeerHTTP, Concurrency: 1, Error: "no session"}}, ""},
		{"the peer over stdio", []cellResult{{Upstream: "sandbox", Mode: modePeerStdio, Concurrency: 1, Error: "exit 1"}}, "sandbox peer-stdio c=1: exit 1"},
	} {
		err := failedCells(c.cells)
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestHTTPAuthArgs: `--auth none` and no per-user limits are given to whichever help format the
// server prints (its flags alone on their lines, or followed by their type), and nothing to a
// server without those flags.
func TestHTTPAuthArgs(t *testing.T) {
	for _, c := range []struct{ help, want string }{
		{"Flags:\n  --auth\n      authorization\n  --user-rate\n      calls", "--auth none --user-rate 0 --user-concurrency 0 --upstream-concurrency 0"},
		{"Flags:\n  --auth string\n      authorization\n  --user-rate float\n      calls", "--auth none --user-rate 0 --user-concurrency 0 --upstream-concurrency 0"},
		{"Flags:\n  --addr string\n      where\n  --authority string\n      no", ""},
	} {
		if got := strings.Join(httpAuthArgsOf([]byte(c.help)), " "); got != c.want {
			t.Errorf("help %q: %q, want %q", c.help, got, c.want)
		}
	}
}
