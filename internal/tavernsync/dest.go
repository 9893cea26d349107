package tavernsync

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/cardwriter/cardwriter-mcp/internal/atomicfile"
)

// Written is where an export's path argument put the file.
type Written struct {
	Path string `json:"path"`
	Size int    `json:"size"`
}

// WriteLocalFile writes an exported file at p when the server may: over stdio, into a folder
// that lies (symlinks resolved) inside an allowed folder or a root of the client. The file is
// replaced atomically when overwrite is true; otherwise an existing file is refused and left as
// it is. A path outside those folders is refused with the same message whether or not anything
// is there.
func WriteLocalFile(ctx context.Context, c Env, p string, data []byte, overwrite bool) (Written, error) {
	refuse := func(msg string, detail map[string]any) error { return pathRefused("path", msg, detail) }
	p, err := localPath(c, "path", p, "write files on the machine it runs on (it runs over HTTP, for clients elsewhere). "+
		"Leave path out: the file comes back in the result, or as a resource_link to read.")
	if err != nil {
		return Written{}, err
	}
	clean := filepath.Clean(p)
	dir, name := filepath.Dir(clean), filepath.Base(clean)
	allowed := openDirs(c.LocalFiles.AllowDirs)
	realDir, dirErr := filepath.EvalSymlinks(dir)
	// Where the folder does not exist, it is judged by its nearest existing ancestor (symlinks
	// resolved) and the rest of its name: the answer for a folder outside the roots is the same
	// whether it exists or not.
	judged := realDir
	if dirErr != nil {
		judged = resolveExisting(dir)
	}
	if !insideOrAt(judged, allowed) {
		roots, err := clientRootDirs(ctx, c)
		if err != nil {
			return Written{}, err
		}
		allowed = append(allowed, roots...)
	}
	if len(allowed) == 0 {
		return Written{}, refuse("path is refused: no folder is open to this server. The client declared no roots, and the server "+
			"was started without --allow-dir. Add the folder as a root in the client (or start the server with --allow-dir FOLDER), "+
			"or leave path out.", nil)
	}
	if !insideOrAt(judged, allowed) {
		return Written{}, refuse(fmt.Sprintf("path %s is outside the folders open to this server (%s).", p, strings.Join(allowed, ", ")),
			map[string]any{"allowed": anyStrings(allowed)})
	}
	if dirErr != nil {
		return Written{}, &Failure{Code: CodeInvalidArguments, Message: fmt.Sprintf("path: there is no folder %s; create it first or pick another.", dir),
			Detail: map[string]any{"argument": "path"}}
	}
	target := filepath.Join(realDir, name)
	if fi, err := os.Lstat(target); err == nil {
		if fi.IsDir() {
			return Written{}, &Failure{Code: CodeInvalidArguments, Message: fmt.Sprintf("path %s is a folder; name the file to write.", p),
				Detail: map[string]any{"argument": "path"}}
		}
		if !overwrite {
			return Written{}, &Failure{Code: CodeFileExists, Message: fmt.Sprintf("path %s already exists; set overwrite to true to replace it, or pick another name.", p),
				Detail: map[string]any{"argument": "path"}}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Written{}, &Failure{Code: CodeInvalidArguments, Message: fmt.Sprintf("path: %s cannot be written (%v).", p, unwrapPathError(err)),
			Detail: map[string]any{"argument": "path"}}
	}
	if err := writeNew(target, data, overwrite); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return Written{}, &Failure{Code: CodeFileExists, Message: fmt.Sprintf("path %s already exists; set overwrite to true to replace it, or pick another name.", p),
				Detail: map[string]any{"argument": "path"}}
		}
		return Written{}, &Failure{Code: CodeInvalidArguments, Message: fmt.Sprintf("path: %s cannot be written (%v).", p, unwrapPathError(err)),
			Detail: map[string]any{"argument": "path"}}
	}
	return Written{Path: target, Size: len(data)}, nil
}

// writeNew writes data at path atomically (atomicfile.Write); without overwrite the file is put
// in place with a hard link, which fails with fs.ErrExist when a file appeared there meanwhile,
// so that nothing is ever replaced unasked.
func writeNew(path string, data []byte, overwrite bool) (err error) {
	if overwrite {
		return atomicfile.Write(path, data, 0o644)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o644); err != nil && runtime.GOOS != "windows" {
		return err
	}
	return os.Link(tmp, path)
}

// resolveExisting returns dir with the symlinks of its longest existing ancestor resolved.
func resolveExisting(dir string) string {
	rest := ""
	for d := dir; ; d = filepath.Dir(d) {
		if real, err := filepath.EvalSymlinks(d); err == nil {
			return filepath.Join(real, rest)
		}
		if filepath.Dir(d) == d {
			return dir
		}
		rest = filepath.Join(filepath.Base(d), rest)
	}
}

// insideOrAt reports whether dir is one of dirs or lies inside one.
func insideOrAt(dir string, dirs []string) bool {
	for _, d := range dirs {
		if dir == d {
			return true
		}
	}
	return insideAny(dir, dirs)
}

// maxNameTries bounds the names WriteDefaultFile tries (name, name-2, ...) before giving up.
const maxNameTries = 100

// WriteDefaultFile writes data as a new file named after name in the first folder open to the
// server (the client's first root, where its host works, else an --allow-dir folder), never over an existing file
// (name-2, name-3, ... when taken). ok is false, with nothing written, when no folder is open
// (over HTTP, or a client with no roots and no --allow-dir).
func WriteDefaultFile(ctx context.Context, c Env, name string, data []byte) (w Written, ok bool, err error) {
	if c.LocalFiles == nil {
		return Written{}, false, nil
	}
	dirs, err := clientRootDirs(ctx, c)
	if err != nil {
		return Written{}, false, err
	}
	dirs = append(dirs, openDirs(c.LocalFiles.AllowDirs)...)
	if len(dirs) == 0 {
		return Written{}, false, nil
	}
	name = filepath.Base(filepath.Clean(name))
	if name == "." || name == string(filepath.Separator) || name == "" {
		name = "export"
	}
	ext := filepath.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	for i := 1; i <= maxNameTries; i++ {
		candidate := name
		if i > 1 {
			candidate = fmt.Sprintf("%s-%d%s", stem, i, ext)
		}
		w, err := WriteLocalFile(ctx, c, filepath.Join(dirs[0], candidate), data, false)
		var f *Failure
		if errors.As(err, &f) && f.Code == CodeFileExists {
			continue
		}
		return w, err == nil, err
	}
	return Written{}, false, &Failure{Code: CodeFileExists, Message: fmt.Sprintf("%s and %d more names are taken in %s; give path.", name, maxNameTries-1, dirs[0])}
}
