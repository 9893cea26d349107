package unread

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// pair returns the writer's and the reader's ends of a pipe or a Unix stream socket pair.
func pair(t *testing.T, kind string) (w, r *os.File) {
	t.Helper()
	switch kind {
	case "pipe":
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close(); w.Close() })
		return w, r
	case "socket":
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		w, r := os.NewFile(uintptr(fds[0]), "w"), os.NewFile(uintptr(fds[1]), "r")
		t.Cleanup(func() { r.Close(); w.Close() })
		return w, r
	}
	t.Fatalf("no such kind %q", kind)
	return nil, nil
}

func TestBytesAndWait(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"pipe", "socket"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			w, r := pair(t, kind)
			if n, err := Bytes(w); n != 0 || err != nil {
				t.Fatalf("Bytes before any write = %d, %v; want 0, nil", n, err)
			}
			if _, err := w.Write([]byte("line one\nline two\n")); err != nil {
				t.Fatal(err)
			}
			if n, err := Bytes(w); n == 0 || err != nil {
				t.Fatalf("Bytes after a write = %d, %v; want more than 0", n, err)
			}
			if err := Wait(context.Background(), w, 20*time.Millisecond); !errors.Is(err, ErrTimeout) {
				t.Fatalf("Wait with nothing read = %v, want ErrTimeout", err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := Wait(ctx, w, time.Second); !errors.Is(err, context.Canceled) {
				t.Fatalf("Wait with its context ended = %v, want context.Canceled", err)
			}
			go func() {
				time.Sleep(30 * time.Millisecond)
				_, _ = r.Read(make([]byte, 4096))
			}()
			start := time.Now()
			if err := Wait(context.Background(), w, 5*time.Second); err != nil {
				t.Fatalf("Wait while the reader reads = %v", err)
			}
			if took := time.Since(start); took < 25*time.Millisecond {
				t.Errorf("Wait returned after %v, before the read", took)
			}
		})
	}
}

func TestBytesUnsupported(t *testing.T) {
	t.Parallel()
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("written"); err != nil {
		t.Fatal(err)
	}
	if _, err := Bytes(f); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Bytes of a regular file: %v, want ErrUnsupported", err)
	}
	if err := Wait(context.Background(), f, time.Second); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Wait on a regular file: %v, want ErrUnsupported", err)
	}
}
