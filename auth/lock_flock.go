//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package auth

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// lockPath takes an exclusive flock(2) on the file at path (created 0600 when missing). The
// lock belongs to the open file, so it excludes other processes and other callers in this
// one alike, and the system releases it if the process dies. Waiting polls, so that ctx can
// end it.
func lockPath(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	wait := time.Millisecond
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 50*time.Millisecond)
	}
	return func() {
		_ = syscall.Flock(fd, syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}
