package atomicfile

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for i, content := range []string{"first", "second, longer than the first", "3"} {
		if err := Write(path, []byte(content), 0o600); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("write %d: read %q, %v; want %q", i, got, err, content)
		}
		if names := dirNames(t, dir); len(names) != 1 {
			t.Errorf("write %d: files %q, want the one file and no temporary file", i, names)
		}
	}
	if runtime.GOOS != "windows" {
		for _, perm := range []os.FileMode{0o600, 0o644, 0o400} {
			if err := Write(path, []byte("x"), perm); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != perm {
				t.Errorf("mode %v, %v; want %v", fi.Mode().Perm(), err, perm)
			}
		}
	}
}

func TestWriteNoDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := Write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o600); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Write into a missing directory: %v, want not exist", err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("files %q left behind", names)
	}
}

// TestWriteFailsMidway: when writing the new content fails partway, or the rename does, the old
// content is intact, with its mode, and no temporary file is left.
func TestWriteFailsMidway(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	old := []byte(`{"old":true}`)
	if err := Write(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	full := write
	t.Cleanup(func() { write = full })
	diskFull := errors.New("no space left on device")
	write = func(f *os.File, b []byte) (int, error) {
		n, err := full(f, b[:len(b)/2])
		if err != nil {
			return n, err
		}
		return n, diskFull
	}
	if err := Write(path, bytes.Repeat([]byte("new "), 4096), 0o644); !errors.Is(err, diskFull) {
		t.Fatalf("Write = %v, want the write's error", err)
	}
	write = full
	// The rename fails: path is now a non-empty directory.
	blocked := filepath.Join(dir, "blocked")
	if err := os.MkdirAll(filepath.Join(blocked, "inside"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Write(blocked, []byte("new"), 0o600); err == nil {
		t.Fatal("Write over a non-empty directory succeeded")
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, old) {
		t.Errorf("after the failed write: %q, %v; want the old content %q", got, err, old)
	}
	if fi, _ := os.Stat(path); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want the old 0600", fi.Mode().Perm())
	}
	if names := dirNames(t, dir); len(names) != 2 {
		t.Errorf("files %q, want state.json and blocked, no temporary file", names)
	}
}

// TestWriteKilled: a process killed at any moment while it replaces a file again and again leaves
// the whole of one content or the whole of the other, never a mix or a truncated file.
func TestWriteKilled(t *testing.T) {
	if os.Getenv("ATOMICFILE_CHILD") != "" {
		writeForever(os.Getenv("ATOMICFILE_CHILD"))
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	rounds := 20
	if testing.Short() {
		rounds = 3
	}
	path := filepath.Join(t.TempDir(), "state")
	a, b := bytes.Repeat([]byte("a"), 1<<20), bytes.Repeat([]byte("b"), 1<<20)
	if err := Write(path, a, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range rounds {
		cmd := exec.Command(exe, "-test.run=^TestWriteKilled$")
		cmd.Env = append(os.Environ(), "ATOMICFILE_CHILD="+path)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(20+rand.IntN(80)) * time.Millisecond)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
			t.Fatalf("round %d: the file holds %d bytes, neither content whole (starts %q, ends %q)", i, len(got), got[:min(len(got), 8)], got[max(0, len(got)-8):])
		}
	}
	// Killed writers may leave temporary files; they are hidden and never the file itself.
	for _, name := range dirNames(t, filepath.Dir(path)) {
		if name != "state" && !(strings.HasPrefix(name, ".state.") && strings.HasSuffix(name, ".tmp")) {
			t.Errorf("unexpected file %s", name)
		}
	}
}

// writeForever replaces the file at path with 1 MiB of "a" and of "b" in turn until killed.
func writeForever(path string) {
	contents := [][]byte{bytes.Repeat([]byte("a"), 1<<20), bytes.Repeat([]byte("b"), 1<<20)}
	for i := 0; ; i++ {
		if err := Write(path, contents[i%2], 0o600); err != nil {
			os.Exit(2)
		}
	}
}

func TestSyncDir(t *testing.T) {
	if err := syncDir(t.TempDir()); err != nil {
		t.Errorf("syncDir of a directory: %v", err)
	}
	if runtime.GOOS != "windows" {
		if err := syncDir(filepath.Join(t.TempDir(), "missing")); err == nil {
			t.Error("syncDir of a missing directory: no error")
		}
	}
}
