//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package auth

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"
)

// staleLock is the age after which a lock file left by a crashed process is taken over.
const staleLock = 2 * time.Minute

// lockPath is the fallback where flock(2) is missing (Windows, Solaris, Plan 9, ...): the lock
// is the existence of the file at path, created exclusively. A lock file older than
// staleLock was left by a process that died holding it, and is removed. A refresh holds the
// lock for one token request (30s at most), well under that age.
func lockPath(ctx context.Context, path string) (func(), error) {
	wait := time.Millisecond
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, filePerm)
		if err == nil {
			_ = f.Close()
			return func() { _ = os.Remove(path) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if fi, err := os.Stat(path); err == nil && time.Since(fi.ModTime()) > staleLock {
			_ = os.Remove(path)
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 50*time.Millisecond)
	}
}
