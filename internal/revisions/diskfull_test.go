package revisions

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestDiskFull: on a full disk (a 1 MiB tmpfs), Keep fails with the system's reason
// (ENOSPC) and Fault says so (for /readyz); once room is made, both work again. It needs to mount a tmpfs
// (root, and a system that allows it): it skips with a message where it cannot.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); TestDirFault covers a failing folder", err, strings.TrimSpace(string(out)))
	}
	s := NewDir(filepath.Join(dir, "revisions"), DefaultRetention())
	t.Cleanup(func() {
		_ = s.Close()
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount: %v: %s", err, out)
		}
	})
	ctx := context.Background()
	keep(t, s, alice, KindCard, "r_1", `"before"`)
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write(make([]byte, 2<<20)) // fills it: fails at the end
	_ = f.Close()
	_, err = s.Keep(ctx, alice, &Revision{Kind: KindCard, ObjectID: "r_1", State: json.RawMessage(`"` + strings.Repeat("x", 8192) + `"`)})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("keep on a full disk: %v, want ENOSPC", err)
	}
	if err := s.Fault(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("the store's fault on a full disk: %v, want ENOSPC", err)
	}
	if list, err := s.List(ctx, alice, KindCard, "r_1"); err != nil || len(list) != 1 {
		t.Errorf("after the failure: %d listed, %v; want the one kept before", len(list), err)
	}
	_ = os.Remove(filler)
	keep(t, s, alice, KindCard, "r_1", `"after"`)
	if err := s.Fault(); err != nil {
		t.Errorf("the store's fault once a revision is saved again: %v", err)
	}
}

// TestDirFault: a folder that cannot be written (its path is a file) fails Keep, and Fault says,
// the system's reason, whatever the machine allows.
func TestDirFault(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "revisions")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := NewDir(path, DefaultRetention())
	_, err := s.Keep(context.Background(), alice, &Revision{Kind: KindCard, ObjectID: "r_1", State: json.RawMessage(`1`)})
	if !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("keep: %v, want ENOTDIR", err)
	}
	if err := s.Fault(); !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("the store's fault: %v, want ENOTDIR", err)
	}
}
