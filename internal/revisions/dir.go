package revisions

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// NewDir returns a store of revisions in the directory dir (created 0700 at the first write),
// which any number of processes may share (the stdio servers a user's hosts start).
//
// Layout: dir/OWNER/KIND-OBJECT/ID, one file per revision (OWNER and OBJECT are digests;
// ID the revision id, so names sort by time), holding two JSON lines: the Entry, then the
// Revision. dir/OWNER/trial/KEY holds a trial card's shadow. A file is written under a
// temporary name (".tmp-...") and renamed to its own, new name: readers see all of it or
// nothing, and no rename lands on a file another process has open.
//
// Retention: a write drops, in its object's folder, what is over the count per object; the age and the owner's size over all objects are applied by a sweep of the
// owner's folders at the first write of a process, then once every sweepEvery, and at once when
// the size the process knows of passes the allowance (its dropped revisions are counted in the
// write that ran it). Two processes dropping the same
// file is no error; a process never deletes a revision the retention keeps.
//
// Files are not fsynced (as SQLite's WAL with synchronous=NORMAL): a revision outlives the
// process that kept it, not a crash of the machine in the next seconds.
func NewDir(dir string, keep Retention) *Store {
	return &Store{b: &dirBackend{root: dir, owners: map[string]*ownerState{}, counts: map[string]int{}}, keep: keep, now: time.Now}
}

// sweepEvery is how often a process sweeps an owner's folders (age, size, temporary files).
const sweepEvery = time.Minute

// tmpPrefix starts the names of files being written; sweeps delete those older than tmpAge.
const (
	tmpPrefix = ".tmp-"
	tmpAge    = time.Hour
)

type dirBackend struct {
	root   string
	mu     sync.Mutex
	made   sync.Map               // folders known to exist
	owners map[string]*ownerState // by owner tag, under mu
	counts map[string]int         // revisions in an object's folder, as far as this process knows; under mu
}

// ownerState is what a process knows of an owner's folders: when it last swept them, and their
// size then plus what it wrote since (other processes' writes show at the next sweep).
type ownerState struct {
	swept time.Time
	bytes int64
}

func (b *dirBackend) name() string { return "files in " + b.root }

// objectDir names the folder of an object's revisions.
func objectDir(kind, objectID string) string {
	return kind + "-" + clientKeyHash(kind+"\x00"+objectID)
}

// mkdir makes folder dir (and its parents, 0700) unless this process knows it exists.
func (b *dirBackend) mkdir(dir string) error {
	if _, ok := b.made.Load(dir); ok {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b.made.Store(dir, true)
	return nil
}

// writeNew writes data to path through a temporary file renamed into place (a revision's path
// is new; a shadow's may be replaced).
func (b *dirBackend) writeNew(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := b.mkdir(dir); err != nil {
		return err
	}
	var r [8]byte
	_, _ = rand.Read(r[:])
	tmp := filepath.Join(dir, tmpPrefix+hex.EncodeToString(r[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		b.made.Delete(dir) // removed by someone since: make it again
		if err = b.mkdir(dir); err == nil {
			f, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		}
	}
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

func (b *dirBackend) put(_ context.Context, tag string, e Entry, data []byte, keep Retention, now time.Time) ([]Entry, error) {
	// The entry's Size is the file's: its own line, the revision's, two newlines.
	var head []byte
	for size := int64(-1); e.Size != size; {
		size = e.Size
		h, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("revisions: encode: %w", err)
		}
		head, e.Size = h, int64(len(h)+len(data)+2)
	}
	rec := make([]byte, 0, len(head)+len(data)+2)
	rec = append(append(append(append(rec, head...), '\n'), data...), '\n')
	owner := filepath.Join(b.root, tag)
	dir := filepath.Join(owner, objectDir(e.Kind, e.ObjectID))
	if err := b.writeNew(filepath.Join(dir, e.ID), rec); err != nil {
		return nil, fmt.Errorf("revisions: keep %s: %w", e.ID, err)
	}
	dropped := b.trimObject(dir, e.ID, e.Kind, e.ObjectID, keep)
	if b.sweepDue(tag, int64(len(rec)), keep, now) {
		more, total := b.sweep(owner, e.ID, keep, now)
		dropped = append(dropped, more...)
		b.mu.Lock()
		b.owners[tag].bytes = total
		clear(b.counts) // read the folders again: other processes wrote meanwhile
		b.mu.Unlock()
	}
	return dropped, nil
}

// idTime returns the time an id was made (to the millisecond); ok is false for a name that is
// no revision id.
func idTime(id string) (time.Time, bool) {
	if !validID(id) {
		return time.Time{}, false
	}
	return idMillis(id), true
}

// revisionNames returns the revision ids in folder dir, oldest first.
func revisionNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir) // sorted by name: by time
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, de := range ents {
		if validID(de.Name()) {
			names = append(names, de.Name())
		}
	}
	return names, nil
}

// trimObject drops, in one object's folder, the oldest revisions over the count per object
// (never newest). It reads the folder only when this process's count of it says it may be
// over (other processes' writes show at the next read), and then trims it back to the count
// less a tenth, so that a busy object is read once every tenth of its count of writes. The
// entries it returns hold the id, the time and the object.
func (b *dirBackend) trimObject(dir, newest, kind, objectID string, keep Retention) []Entry {
	b.mu.Lock()
	n, known := b.counts[dir]
	b.counts[dir] = n + 1
	b.mu.Unlock()
	if known && n+1 <= keep.PerObject {
		return nil
	}
	names, err := revisionNames(dir)
	if err != nil {
		return nil
	}
	left := len(names)
	var dropped []Entry
	if left > keep.PerObject {
		for _, id := range names[:left-(keep.PerObject-keep.PerObject/10)] {
			if id != newest && os.Remove(filepath.Join(dir, id)) == nil {
				dropped = append(dropped, Entry{ID: id, Time: idMillis(id), Kind: kind, ObjectID: objectID})
				left--
			}
		}
	}
	b.mu.Lock()
	b.counts[dir] = left
	b.mu.Unlock()
	return dropped
}

// sweepDue counts size more bytes of the owner's and reports whether its folders are due a
// sweep, recording it as done.
func (b *dirBackend) sweepDue(tag string, size int64, keep Retention, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	o := b.owners[tag]
	if o == nil {
		o = &ownerState{}
		b.owners[tag] = o
	} else if o.bytes += size; now.Sub(o.swept) < sweepEvery && (keep.UserBytes <= 0 || o.bytes <= keep.UserBytes) {
		return false
	}
	o.swept = now
	return true
}

// sweep applies the whole retention to an owner's revisions (the age, the size of them all)
// and deletes temporary files left by a crash. It returns what it dropped, oldest first, and
// the size of what it kept.
func (b *dirBackend) sweep(owner, newest string, keep Retention, now time.Time) ([]Entry, int64) {
	objs, err := os.ReadDir(owner)
	if err != nil {
		return nil, 0
	}
	type file struct {
		path string
		id   string
		size int64
	}
	var files []file
	for _, o := range objs {
		if !o.IsDir() {
			continue
		}
		dir := filepath.Join(owner, o.Name())
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, de := range ents {
			info, err := de.Info()
			if err != nil {
				continue
			}
			if strings.HasPrefix(de.Name(), tmpPrefix) {
				if now.Sub(info.ModTime()) > tmpAge {
					_ = os.Remove(filepath.Join(dir, de.Name()))
				}
				continue
			}
			if o.Name() == shadowDir {
				if keep.MaxAge > 0 && now.Sub(info.ModTime()) > keep.MaxAge {
					_ = os.Remove(filepath.Join(dir, de.Name()))
				}
				continue
			}
			if validID(de.Name()) {
				files = append(files, file{filepath.Join(dir, de.Name()), de.Name(), info.Size()})
			}
		}
	}
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(b.id, a.id) }) // newest first
	var total int64
	var dropped []Entry
	for i, f := range files {
		at, _ := idTime(f.id)
		total += f.size
		if f.id == newest || ((keep.MaxAge <= 0 || now.Sub(at) <= keep.MaxAge) &&
			(keep.UserBytes <= 0 || total <= keep.UserBytes) && i < maxIndexEntries) {
			continue
		}
		total -= f.size
		if e, err := readEntry(f.path); err == nil && os.Remove(f.path) == nil {
			dropped = append(dropped, e)
		}
	}
	slices.Reverse(dropped) // oldest first
	return dropped, total
}

// readEntry reads the first line of a revision's file: its Entry.
func readEntry(path string) (Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return Entry{}, err
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 4096).ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		_, _ = f.Seek(0, 0)
		line, err = bufio.NewReaderSize(f, 1<<20).ReadSlice('\n')
	}
	if err != nil {
		return Entry{}, fmt.Errorf("revisions: %s is damaged: %w", filepath.Base(path), err)
	}
	var e Entry
	if err := json.Unmarshal(line, &e); err != nil {
		return Entry{}, fmt.Errorf("revisions: %s is damaged: %w", filepath.Base(path), err)
	}
	return e, nil
}

func (b *dirBackend) list(_ context.Context, tag, kind, objectID string) ([]Entry, error) {
	owner := filepath.Join(b.root, tag)
	var dirs []string
	if kind != "" {
		dirs = []string{objectDir(kind, objectID)}
	} else {
		objs, err := os.ReadDir(owner)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("revisions: list: %w", err)
		}
		for _, o := range objs {
			if o.IsDir() && o.Name() != shadowDir {
				dirs = append(dirs, o.Name())
			}
		}
	}
	var out []Entry
	for _, d := range dirs {
		names, err := revisionNames(filepath.Join(owner, d))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("revisions: list: %w", err)
		}
		for _, id := range names {
			e, err := readEntry(filepath.Join(owner, d, id))
			if errors.Is(err, fs.ErrNotExist) {
				continue // dropped meanwhile
			}
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
	}
	return out, nil
}

func (b *dirBackend) get(_ context.Context, tag, id string) ([]byte, error) {
	owner := filepath.Join(b.root, tag)
	objs, err := os.ReadDir(owner)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("revisions: get %s: %w", id, err)
	}
	for _, o := range objs {
		if !o.IsDir() || o.Name() == shadowDir {
			continue
		}
		data, err := os.ReadFile(filepath.Join(owner, o.Name(), id))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("revisions: get %s: %w", id, err)
		}
		_, rec, ok := bytes.Cut(data, []byte("\n"))
		if !ok {
			return nil, fmt.Errorf("revisions: %s is damaged", id)
		}
		return bytes.TrimSuffix(rec, []byte("\n")), nil
	}
	return nil, ErrNotFound
}

// shadowDir is the folder of an owner's trial card shadows.
const shadowDir = "trial"

func (b *dirBackend) shadow(_ context.Context, tag, clientKey string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(b.root, tag, shadowDir, clientKeyHash(clientKey)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	return data, err
}

// saveShadow replaces a shadow by renaming a new file over it: a reader that has the old one
// open reads it whole, and the next reads the new one.
func (b *dirBackend) saveShadow(_ context.Context, tag, clientKey string, data []byte, _ time.Duration) error {
	path := filepath.Join(b.root, tag, shadowDir, clientKeyHash(clientKey))
	if data == nil {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return b.writeNew(path, data)
}

// ping writes and removes a file in the root folder: a full disk or a read-only folder fails.
func (b *dirBackend) ping(context.Context) error {
	if err := b.mkdir(b.root); err != nil {
		return err
	}
	var r [8]byte
	_, _ = rand.Read(r[:])
	path := filepath.Join(b.root, tmpPrefix+"ping-"+hex.EncodeToString(r[:]))
	err := os.WriteFile(path, make([]byte, 4096), 0o600)
	_ = os.Remove(path)
	return err
}

// ImportKV moves the revisions and trial shadows an earlier version kept in kv (the embedded
// store) into s, a directory store, and deletes them from kv; it returns how many it moved.
// A record that cannot be read is left where it is.
func ImportKV(ctx context.Context, kv store.KV, s *Store) (int, error) {
	d, ok := s.b.(*dirBackend)
	if !ok {
		return 0, errors.New("revisions: ImportKV needs a directory store")
	}
	var keys []string
	if err := kv.Scan(ctx, prefixRevision, func(k string) error { keys = append(keys, k); return nil }); err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		data, err := kv.Get(ctx, k)
		if err != nil {
			continue
		}
		var rev Revision
		if json.Unmarshal(data, &rev) != nil || !validID(rev.ID) {
			continue
		}
		e := Entry{ID: rev.ID, Kind: rev.Kind, ObjectID: rev.ObjectID, Tool: rev.Tool, Time: rev.Time, Changes: rev.Changes,
			RestoreOf: rev.RestoreOf, Size: int64(len(data))}
		tag := User{BaseURL: rev.BaseURL, ID: rev.User}.tag()
		if _, err := d.put(ctx, tag, e, data, Retention{PerObject: maxIndexEntries}, s.now()); err != nil {
			return n, err
		}
		_ = kv.Delete(ctx, k)
		n++
	}
	var rest []string
	for _, p := range []string{prefixIndex, prefixShadow} {
		_ = kv.Scan(ctx, p, func(k string) error { rest = append(rest, k); return nil })
	}
	if len(rest) > 0 {
		_ = kv.Delete(ctx, rest...) // indexes are the folders now; a shadow is only a hint
	}
	return n, nil
}
