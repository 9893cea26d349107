//go:build unix

package tavernsync

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadLocalFileOutsideOneAnswer: a path outside the open folders gets the same answer
// whether the file exists or not, directly or through a link inside an open folder, and the
// answer never names where a link leads.
func TestReadLocalFileOutsideOneAnswer(t *testing.T) {
	t.Parallel()
	open, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret.json")
	if err := os.WriteFile(secret, []byte(`{"a":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(outside, "missing.json")
	for name, target := range map[string]string{"to-secret.json": secret, "to-missing.json": missing} {
		if err := os.Symlink(target, filepath.Join(open, name)); err != nil {
			t.Fatal(err)
		}
	}
	env := Env{LocalFiles: &LocalFiles{AllowDirs: []string{open}}}
	answers := map[string]string{}
	for _, p := range []string{secret, missing, filepath.Join(open, "to-secret.json"), filepath.Join(open, "to-missing.json"), filepath.Join(open, "nothing.json")} {
		_, err := readSource(context.Background(), env, Source{Path: ptr(p)})
		var f *Failure
		if !errors.As(err, &f) {
			t.Fatalf("%s: %v, want a Failure", p, err)
		}
		msg := strings.ReplaceAll(f.Code+": "+f.Message, p, "PATH")
		if strings.Contains(msg, outside) {
			t.Errorf("%s: the answer names what lies outside: %s", p, msg)
		}
		answers[msg] = p
	}
	if len(answers) != 1 {
		t.Fatalf("%d different answers, want one:\n%v", len(answers), answers)
	}
}

// TestReadLocalFileRefusesFIFO: a named pipe inside an open folder is refused at once (it was
// opened first, and the open waited for a writer that never came: the call hung for good).
func TestReadLocalFileRefusesFIFO(t *testing.T) {
	t.Parallel()
	open := t.TempDir()
	fifo := filepath.Join(open, "card.png")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	env := Env{LocalFiles: &LocalFiles{AllowDirs: []string{open}}}
	done := make(chan error, 1)
	go func() {
		_, err := readSource(context.Background(), env, Source{Path: ptr(fifo)})
		done <- err
	}()
	select {
	case err := <-done:
		var f *Failure
		if !errors.As(err, &f) || f.Code != CodeInvalidArguments || !strings.Contains(f.Message, "not a regular file") {
			t.Fatalf("a named pipe: %v, want invalid_arguments naming it not a regular file", err)
		}
	case <-time.After(30 * time.Second): // a bound on the test: without the fix the open never returns
		// Unblock the open so the goroutine ends.
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		t.Fatal("reading a named pipe hung")
	}
}

// TestReadLocalFileCancelled: a read whose call was cancelled stops and says so, rather than
// reading the file to its end.
func TestReadLocalFileCancelled(t *testing.T) {
	t.Parallel()
	open := t.TempDir()
	p := filepath.Join(open, "card.json")
	if err := os.WriteFile(p, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	env := Env{LocalFiles: &LocalFiles{AllowDirs: []string{open}}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	data, err := readSource(ctx, env, Source{Path: ptr(p)})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled read returned %d bytes, %v; want context.Canceled", len(data), err)
	}
}
