// Package atomicfile replaces a file's content atomically: a reader, or the file after a crash,
// sees the old content or the new, never a part of either.
package atomicfile

import (
	"os"
	"path/filepath"
	"runtime"
)

// Write replaces the content of the file at path with data, atomically: it writes a temporary
// file in the same directory (".<name>.*.tmp", with mode perm), fsyncs it, renames it over path
// and fsyncs the directory, where the system allows it, so that the rename survives a crash.
// When Write fails the file at path is as it was, and the temporary file is removed.
//
// A symbolic link at path is replaced by the file, not followed. On Windows a failure to set perm
// is ignored, as Windows has no such permission bits.
func Write(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Chmod(perm); err != nil && runtime.GOOS != "windows" {
		return err
	}
	if _, err := write(f, data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	_ = syncDir(dir) // best effort: the new content is in place either way
	return nil
}

// write writes data to the temporary file; a test makes it fail midway.
var write = (*os.File).Write

// syncDir fsyncs the directory dir, so that a rename in it is durable. Windows cannot fsync a
// directory: there it does nothing.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	if err := d.Close(); serr == nil {
		serr = err
	}
	return serr
}
