//go:build unix

package tavernsync

import (
	"io/fs"
	"os"
	"syscall"
)

// openRegular opens the file at path (symlinks already resolved) for reading, without
// blocking: a named pipe opens at once instead of waiting for a writer, and with its final
// name no link (a link swapped in since the path was resolved is refused). It returns
// errNotRegular, the file closed, for anything but a regular file.
func openRegular(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, nil, err
	}
	return regular(f, path)
}
