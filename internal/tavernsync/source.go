package tavernsync

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
)

// LocalFiles lets the import tools read files on the machine the server runs on, named by
// source.path: only a server speaking stdio to its user's own host should set it. A file is read
// when it lies (symlinks resolved) inside one of AllowDirs or inside a root the client declared
// (MCP roots, asked for with roots/list).
type LocalFiles struct {
	AllowDirs []string // folders opened to path whatever the client's roots (--allow-dir)
}

// Source is the source argument of the import tools: exactly one of its fields.
type Source struct {
	Path       *string         `json:"path"`
	DataBase64 *string         `json:"dataBase64"`
	JSON       json.RawMessage `json:"json"`
}

// readSource returns the bytes of a source argument, refusing anything but exactly one of
// path, dataBase64 and json, and files outside what LocalFiles and the client's roots allow.
func readSource(ctx context.Context, c Env, src Source) ([]byte, error) {
	var given []string
	if src.Path != nil {
		given = append(given, "source.path")
	}
	if src.DataBase64 != nil {
		given = append(given, "source.dataBase64")
	}
	if src.JSON != nil {
		given = append(given, "source.json")
	}
	if len(given) != 1 {
		msg := "Give exactly one of source.path, source.dataBase64 and source.json; none was given."
		if len(given) > 1 {
			msg = "Give exactly one of source.path, source.dataBase64 and source.json, not " + strings.Join(given, " and ") + "."
		}
		return nil, &Failure{Code: CodeInvalidArguments, Message: msg, Detail: map[string]any{"arguments": anyStrings(given)}}
	}
	switch {
	case src.DataBase64 != nil:
		s := strings.Map(func(r rune) rune {
			if r == ' ' || r == '\n' || r == '\r' || r == '\t' {
				return -1
			}
			return r
		}, *src.DataBase64)
		if base64.StdEncoding.DecodedLen(len(s)) > tavern.MaxInputSize+3 {
			return nil, tooLarge("source.dataBase64")
		}
		data, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			if data, err = base64.RawStdEncoding.DecodeString(s); err != nil {
				return nil, &Failure{Code: CodeInvalidArguments, Message: "source.dataBase64 is not valid standard base64.",
					Detail: map[string]any{"argument": "source.dataBase64"}}
			}
		}
		if len(data) > tavern.MaxInputSize {
			return nil, tooLarge("source.dataBase64")
		}
		return data, nil
	case src.JSON != nil:
		raw := bytes.TrimSpace(src.JSON)
		if len(raw) > 0 && raw[0] == '"' {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, fmt.Errorf("decode source.json: %w", err)
			}
			raw = []byte(s)
		}
		if len(raw) > tavern.MaxInputSize {
			return nil, tooLarge("source.json")
		}
		return raw, nil
	}
	return readLocalFile(ctx, c, *src.Path)
}

func tooLarge(arg string) *Failure {
	return &Failure{Code: CodeInvalidArguments,
		Message: fmt.Sprintf("%s is larger than %d MiB, the most a card or lorebook file may be.", arg, tavern.MaxInputSize>>20),
		Detail:  map[string]any{"argument": arg, "limit": tavern.MaxInputSize}}
}

// readLocalFile reads the file at p when the server may: over stdio, inside an allowed folder or
// a root of the client, symlinks resolved (a link out of them is refused), a regular file of at
// most tavern.MaxInputSize bytes. Whether a path outside the open folders exists is never told
// (nothing outside them is even looked at), nor where a link leads. The file is opened without
// blocking (a named pipe or a device is refused, not waited on), and its reading ends with ctx.
func readLocalFile(ctx context.Context, c Env, p string) ([]byte, error) {
	refuse := func(msg string, detail map[string]any) error { return pathRefused("source.path", msg, detail) }
	p, err := localPath(c, "source.path", p, "read files on the machine it runs on (it runs over HTTP, for clients elsewhere). "+
		"Send the file's bytes as source.dataBase64, or its JSON as source.json.")
	if err != nil {
		return nil, err
	}
	clean := filepath.Clean(p)
	// The --allow-dir folders first: a file inside one needs no question to the client.
	allowed := openDirs(c.LocalFiles.AllowDirs)
	if !insideAny(clean, allowed) {
		roots, err := clientRootDirs(ctx, c)
		if err != nil {
			return nil, err
		}
		allowed = append(allowed, roots...)
	}
	if len(allowed) == 0 {
		return nil, refuse("source.path is refused: no folder is open to this server. The client declared no roots, and the "+
			"server was started without --allow-dir. Add the folder as a root in the client (or start the server with "+
			"--allow-dir FOLDER), or send the file's bytes as source.dataBase64.", nil)
	}
	// One answer for a path outside the open folders, a path that leads out of them through a
	// link, and a path that names nothing: which of them it is would tell what exists outside.
	notOpen := func() error {
		return refuse(fmt.Sprintf("source.path %s is not a file inside the folders open to this server (%s): there is no such file "+
			"there, or it lies outside them (a symbolic link may lead out). Give the path of a file inside one of them.",
			p, strings.Join(allowed, ", ")), map[string]any{"allowed": anyStrings(allowed)})
	}
	if !insideAny(clean, allowed) {
		return nil, notOpen()
	}
	real, err := filepath.EvalSymlinks(clean)
	if err != nil || !insideAny(real, allowed) {
		return nil, notOpen()
	}
	f, fi, err := openRegular(real)
	switch {
	case errors.Is(err, errNotRegular):
		return nil, &Failure{Code: CodeInvalidArguments, Message: fmt.Sprintf("source.path: %s is not a regular file (a folder, a named pipe or a device); give a card or lorebook file.", p),
			Detail: map[string]any{"argument": "source.path"}}
	case err != nil:
		return nil, &Failure{Code: CodeInvalidArguments, Message: fmt.Sprintf("source.path: %s cannot be read (%v).", p, unwrapPathError(err)),
			Detail: map[string]any{"argument": "source.path"}}
	}
	defer f.Close()
	// The checked path must still be the opened file (no link swapped in since the check).
	if again, err := filepath.EvalSymlinks(real); err != nil || again != real {
		return nil, refuse(fmt.Sprintf("source.path %s changed while it was being opened; try again.", p), nil)
	}
	if st, err := os.Stat(real); err != nil || !os.SameFile(st, fi) {
		return nil, refuse(fmt.Sprintf("source.path %s changed while it was being opened; try again.", p), nil)
	}
	if fi.Size() > tavern.MaxInputSize {
		return nil, tooLarge("source.path")
	}
	data, err := io.ReadAll(io.LimitReader(ctxReader{ctx, f}, tavern.MaxInputSize+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("read source.path: %w", ctx.Err())
		}
		return nil, err
	}
	if len(data) > tavern.MaxInputSize {
		return nil, tooLarge("source.path")
	}
	return data, nil
}

// pathRefused is the failure of a path argument arg the server may not use.
func pathRefused(arg, msg string, detail map[string]any) error {
	if detail == nil {
		detail = map[string]any{}
	}
	detail["argument"] = arg
	return &Failure{Code: CodePathNotAllowed, Message: msg, Detail: detail}
}

// localPath returns the absolute path a path argument arg names (a path or a file: URL), or its
// refusal: not over HTTP (LocalFiles nil, where the server may not do what else says), not a
// relative path.
func localPath(c Env, arg, p, elseSays string) (string, error) {
	if c.LocalFiles == nil {
		return "", pathRefused(arg, arg+" is refused: this server does not "+elseSays, nil)
	}
	if u, err := url.Parse(p); err == nil && u.Scheme == "file" {
		p = u.Path
	}
	if !filepath.IsAbs(p) {
		return "", pathRefused(arg, fmt.Sprintf("%s %q is not an absolute path; give the file's full path.", arg, p), nil)
	}
	return p, nil
}

// errNotRegular is openRegular's error for anything but a regular file.
var errNotRegular = errors.New("not a regular file")

// regular returns f opened at path with what fstat says of it, or errNotRegular (f closed)
// when it is anything but a regular file.
func regular(f *os.File, path string) (*os.File, fs.FileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("stat %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, errNotRegular
	}
	return f, fi, nil
}

// readChunk is how much of a file is read between two looks at the call's context.
const readChunk = 256 << 10

// ctxReader reads r until ctx ends, in chunks of at most readChunk.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p[:min(len(p), readChunk)])
}

// openDirs returns the folders dirs, each as given (cleaned) and with its symlinks resolved,
// leaving out those that are not absolute or do not exist: a path is inside an open folder when
// it is inside either form (/tmp/x inside --allow-dir /tmp, which is /private/tmp on macOS).
func openDirs(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			continue
		}
		real, err := filepath.EvalSymlinks(filepath.Clean(d))
		if err != nil {
			continue
		}
		out = append(out, real)
		if c := filepath.Clean(d); c != real {
			out = append(out, c)
		}
	}
	return out
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// insideAny reports whether path lies strictly inside one of dirs (all absolute, symlinks resolved).
func insideAny(path string, dirs []string) bool {
	for _, d := range dirs {
		rel, err := filepath.Rel(d, path)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
			continue
		}
		return true
	}
	return false
}

// clientRootDirs returns the client's file roots as folders (see resolveDirs).
func clientRootDirs(ctx context.Context, c Env) ([]string, error) {
	if c.Roots == nil {
		return nil, nil
	}
	roots, err := c.Roots(ctx)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, r := range roots {
		u, err := url.Parse(r)
		if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") {
			continue
		}
		p := u.Path
		if runtime.GOOS == "windows" {
			p = strings.TrimPrefix(p, "/")
		}
		dirs = append(dirs, filepath.FromSlash(p))
	}
	return openDirs(dirs), nil
}

// anyStrings converts a string slice to []any for an envelope's detail.
func anyStrings(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
