//go:build !unix

package tavernsync

import (
	"io/fs"
	"os"
)

// openRegular opens the file at path for reading after checking, by its name, that it is a
// regular file (where there are no named pipes to block on); errNotRegular otherwise. The
// caller compares the opened file with the path afterwards.
func openRegular(path string) (*os.File, fs.FileInfo, error) {
	if st, err := os.Lstat(path); err != nil {
		return nil, nil, err
	} else if !st.Mode().IsRegular() {
		return nil, nil, errNotRegular
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	return regular(f, path)
}
