//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package proxy

import (
	"errors"
	"os"
	"syscall"
)

// lockDir takes an exclusive flock(2) on the file at path for as long as the store is open,
// so that two servers cannot write one state directory over each other. It does not wait.
func lockDir(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errors.New("another cardwriter-mcp server uses this state directory (give each its own --state-dir)")
		}
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}
