package revisions

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// NewDir returns a store of revisions in the directory dir (created 0700 at the first write),
// which any number of processes may share (the stdio servers a user's hosts start).
//
// Layout: dir/OWNER/ (OWNER a digest) holds segments, "seg-TIME-RANDOM.rev": append-only
// files, each written by one process only (the one that made it), one line per revision: its
// Entry, a tab, the Revision (both JSON, on one line), a newline. A process appends to its
// own segment (one write; a reader takes only whole lines), and makes a new one at its first
// write, when its segment is segmentMaxBytes large or segmentMaxAge old. dir/OWNER/trial/KEY
// holds a trial card's shadow. Nothing is ever rewritten in place or renamed over a file
// another process may hold open. A write costs one append, not a file made and renamed.
//
// The index is the segments: each process reads them (the tails it has not read yet), and
// the retention is applied when reading, so every process sees the same revisions kept and
// dropped (with the same retention). A segment is deleted only once every revision in it is
// dropped and it is older than segmentDeleteAge (no process appends to a segment that old), so
// a deletion never loses a revision another process kept or is keeping.
//
// Segments are not fsynced (as SQLite's WAL with synchronous=NORMAL): a revision outlives the
// process that kept it, not a crash of the machine in the next seconds.
func NewDir(dir string, keep Retention) *Store {
	return &Store{b: &dirBackend{root: dir, owners: map[string]*ownerIndex{}}, keep: keep, now: time.Now}
}

// Segment limits and the sweep's pace.
const (
	segmentMaxBytes  = 4 << 20
	segmentMaxAge    = time.Hour
	segmentDeleteAge = 2 * segmentMaxAge
	sweepEvery       = time.Minute
	ownerIdle        = 10 * time.Minute // an owner's index not used for this long is forgotten (memory)
	segmentSuffix    = ".rev"
	tmpPrefix        = ".tmp-"
)

type dirBackend struct {
	root   string
	mu     sync.Mutex
	owners map[string]*ownerIndex
}

// ownerIndex is what a process knows of an owner's segments.
type ownerIndex struct {
	mu      sync.Mutex
	dir     string
	segs    map[string]int64 // segment: bytes read of it (whole lines)
	entries map[string]located
	current string   // this process's segment ("" before its first write)
	size    int64    // of current
	file    *os.File // current, open for appending (nil: make a new one)
	sorted  []Entry  // the entries, oldest first (nil: to be sorted again)
	swept   time.Time
	used    time.Time
	loaded  bool
}

// located is an entry and where its revision is.
type located struct {
	Entry
	seg      string
	off, len int64
}

func (b *dirBackend) name() string { return "files in " + b.root }

// owner returns the index of tag, forgetting those idle for long.
func (b *dirBackend) owner(tag string, now time.Time) *ownerIndex {
	b.mu.Lock()
	defer b.mu.Unlock()
	o := b.owners[tag]
	if o == nil {
		o = &ownerIndex{dir: filepath.Join(b.root, tag), segs: map[string]int64{}, entries: map[string]located{}}
		b.owners[tag] = o
		for t, other := range b.owners {
			if other != o && other.mu.TryLock() {
				if now.Sub(other.used) > ownerIdle {
					other.close()
					delete(b.owners, t)
				}
				other.mu.Unlock()
			}
		}
	}
	return o
}

// refresh reads what the owner's segments gained since the last read (every process's), and
// forgets the segments deleted since. Under o.mu.
func (o *ownerIndex) refresh() error {
	ents, err := os.ReadDir(o.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	present := map[string]bool{}
	for _, de := range ents {
		name := de.Name()
		if !strings.HasSuffix(name, segmentSuffix) || strings.HasPrefix(name, tmpPrefix) {
			continue
		}
		present[name] = true
		info, err := de.Info()
		if err != nil || info.Size() == o.segs[name] {
			continue
		}
		if err := o.readTail(name); err != nil {
			return err
		}
	}
	for name := range o.segs {
		if !present[name] {
			delete(o.segs, name)
			for id, l := range o.entries {
				if l.seg == name {
					delete(o.entries, id)
					o.sorted = nil
				}
			}
		}
	}
	o.loaded = true
	return nil
}

// readTail reads the whole lines of segment name after those read before.
func (o *ownerIndex) readTail(name string) error {
	f, err := os.Open(filepath.Join(o.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // deleted meanwhile
	}
	if err != nil {
		return err
	}
	defer f.Close()
	from := o.segs[name]
	data, err := io.ReadAll(io.NewSectionReader(f, from, 1<<62))
	if err != nil {
		return err
	}
	off := from
	for {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			break // a line being written: read it next time
		}
		line := data[:nl]
		if head, rec, ok := bytes.Cut(line, []byte("\t")); ok {
			var e Entry
			if json.Unmarshal(head, &e) == nil && validID(e.ID) {
				hl := int64(len(head) + 1)
				o.entries[e.ID] = located{Entry: e, seg: name, off: off + hl, len: int64(len(rec))}
				o.sorted = nil
			}
		}
		off += int64(nl + 1)
		data = data[nl+1:]
	}
	o.segs[name] = off
	return nil
}

// view returns what the retention keeps of the owner's revisions (oldest first; newest is
// never dropped) and what it drops, which a write forgets (so that it reports each once): a
// revision dropped stays dropped (newer revisions and time only add to what the retention
// drops). Under o.mu.
func (o *ownerIndex) view(keep Retention, newest string, now time.Time, forget bool) (kept, dropped []Entry) {
	if o.sorted == nil || len(o.sorted) != len(o.entries) {
		o.sorted = make([]Entry, 0, len(o.entries))
		for _, l := range o.entries {
			o.sorted = append(o.sorted, l.Entry)
		}
		slices.SortFunc(o.sorted, func(a, b Entry) int {
			switch {
			case newer(a, b):
				return 1
			case newer(b, a):
				return -1
			}
			return 0
		})
	}
	kept, dropped = keep.apply(o.sorted, newest, now)
	if forget && len(dropped) > 0 {
		for _, d := range dropped {
			delete(o.entries, d.ID)
		}
		o.sorted = kept
	}
	return kept, dropped
}

// added records an entry just added to o.entries in the sorted view: kept sorted when it is
// the newest (a process's own writes), else rebuilt at the next view. Under o.mu.
func (o *ownerIndex) added(e Entry) {
	if o.sorted != nil && len(o.sorted) == len(o.entries)-1 && (len(o.sorted) == 0 || newer(e, o.sorted[len(o.sorted)-1])) {
		o.sorted = append(o.sorted, e)
		return
	}
	o.sorted = nil
}

// segmentTime returns when a segment was made, from its name.
func segmentTime(name string) time.Time {
	ms, _, _ := strings.Cut(strings.TrimPrefix(name, "seg-"), "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

func (b *dirBackend) put(_ context.Context, tag string, e Entry, data []byte, keep Retention, now time.Time) ([]Entry, error) {
	o := b.owner(tag, now)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.used = now
	head, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("revisions: encode: %w", err)
	}
	line := make([]byte, 0, len(head)+len(data)+2)
	line = append(append(append(append(line, head...), '\t'), data...), '\n')
	if err := o.append(line, now); err != nil {
		return nil, fmt.Errorf("revisions: keep %s: %w", e.ID, err)
	}
	o.entries[e.ID] = located{Entry: e, seg: o.current, off: o.size - int64(len(line)) + int64(len(head)+1), len: int64(len(data))}
	o.added(e)
	sweep := !o.loaded || now.Sub(o.swept) >= sweepEvery
	if sweep {
		o.swept = now
		_ = o.refresh()
	}
	_, dropped := o.view(keep, e.ID, now, true)
	if sweep {
		o.sweep(keep, now)
	}
	return dropped, nil
}

// append writes line at the end of this process's segment (kept open while the owner is in
// use), making a new one first when it has none, or its segment is full or old. Under o.mu.
func (o *ownerIndex) append(line []byte, now time.Time) error {
	if o.file == nil || o.size+int64(len(line)) > segmentMaxBytes || now.Sub(segmentTime(o.current)) > segmentMaxAge {
		o.close()
		if err := os.MkdirAll(o.dir, 0o700); err != nil {
			return err
		}
		var r [6]byte
		_, _ = rand.Read(r[:])
		name := "seg-" + strconv.FormatInt(now.UnixMilli(), 10) + "-" + hex.EncodeToString(r[:]) + segmentSuffix
		f, err := os.OpenFile(filepath.Join(o.dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		o.file, o.current, o.size = f, name, 0
		o.segs[name] = 0
	}
	n, err := o.file.Write(line)
	if err != nil {
		// A part of a line may be there: the segment is given up (a reader skips a line
		// without its end only at a segment's end), and the next write makes a new one.
		o.close()
		return err
	}
	read := o.segs[o.current] == o.size
	o.size += int64(n)
	if read {
		o.segs[o.current] = o.size // our own line: read already
	}
	return nil
}

// close closes this process's segment: the next write makes a new one. Under o.mu.
func (o *ownerIndex) close() {
	if o.file != nil {
		_ = o.file.Close()
		o.file = nil
	}
}

// sweep deletes the segments whose revisions the retention has all dropped, once no process
// appends to them, and temporary files left by a crash. Under o.mu, after a refresh.
func (o *ownerIndex) sweep(keep Retention, now time.Time) {
	kept, _ := o.view(keep, "", now, false)
	live := map[string]bool{o.current: true}
	_ = kept
	for _, e := range kept {
		live[o.entries[e.ID].seg] = true
	}
	for name := range o.segs {
		if live[name] || now.Sub(segmentTime(name)) < segmentDeleteAge {
			continue
		}
		if err := os.Remove(filepath.Join(o.dir, name)); err == nil || errors.Is(err, fs.ErrNotExist) {
			delete(o.segs, name)
			for id, l := range o.entries {
				if l.seg == name {
					delete(o.entries, id)
					o.sorted = nil
				}
			}
		}
	}
	if ents, err := os.ReadDir(filepath.Join(o.dir, shadowDir)); err == nil {
		for _, de := range ents {
			info, err := de.Info()
			if err == nil && ((strings.HasPrefix(de.Name(), tmpPrefix) && now.Sub(info.ModTime()) > time.Hour) ||
				(keep.MaxAge > 0 && now.Sub(info.ModTime()) > keep.MaxAge)) {
				_ = os.Remove(filepath.Join(o.dir, shadowDir, de.Name()))
			}
		}
	}
}

// read refreshes the owner's index and returns it locked; the caller unlocks o.mu.
func (b *dirBackend) read(tag string, now time.Time) (*ownerIndex, error) {
	o := b.owner(tag, now)
	o.mu.Lock()
	o.used = now
	if err := o.refresh(); err != nil {
		o.mu.Unlock()
		return nil, fmt.Errorf("revisions: list: %w", err)
	}
	return o, nil
}

func (b *dirBackend) list(_ context.Context, tag, _, _ string, keep Retention, now time.Time) ([]Entry, error) {
	o, err := b.read(tag, now)
	if err != nil {
		return nil, err
	}
	defer o.mu.Unlock()
	kept, _ := o.view(keep, "", now, false)
	return kept, nil
}

func (b *dirBackend) get(_ context.Context, tag, id string, keep Retention, now time.Time) ([]byte, error) {
	o, err := b.read(tag, now)
	if err != nil {
		return nil, err
	}
	kept, _ := o.view(keep, "", now, false)
	l, ok := o.entries[id]
	ok = ok && slices.ContainsFunc(kept, func(e Entry) bool { return e.ID == id })
	o.mu.Unlock()
	if !ok {
		return nil, ErrNotFound
	}
	f, err := os.Open(filepath.Join(o.dir, l.seg))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("revisions: get %s: %w", id, err)
	}
	defer f.Close()
	data := make([]byte, l.len)
	if _, err := f.ReadAt(data, l.off); err != nil {
		return nil, fmt.Errorf("revisions: get %s: %w", id, err)
	}
	return data, nil
}

// mkdir makes folder dir and its parents (0700).
func mkdir(dir string) error { return os.MkdirAll(dir, 0o700) }

// writeNew writes data to path through a temporary file renamed into place (a shadow's path
// may be replaced: a reader that has the old one open reads it whole).
func writeNew(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := mkdir(dir); err != nil {
		return err
	}
	var r [8]byte
	_, _ = rand.Read(r[:])
	tmp := filepath.Join(dir, tmpPrefix+hex.EncodeToString(r[:]))
	err := os.WriteFile(tmp, data, 0o600)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
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
	return writeNew(path, data)
}

// ImportKV moves the revisions and trial shadows an earlier version kept in kv (the embedded
// store) into s, a directory store, and deletes them from kv; it returns how many it moved.
// A record that cannot be read is left where it is. reown, when not nil, names the owner a
// revision has from now on (its owner before is its argument).
func ImportKV(ctx context.Context, kv store.KV, s *Store, reown func(User) User) (int, error) {
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
		if reown != nil {
			u := reown(User{BaseURL: rev.BaseURL, ID: rev.User})
			rev.BaseURL, rev.User = u.BaseURL, u.ID
			if data, err = json.Marshal(rev); err != nil {
				continue
			}
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

// Close closes the files a directory store holds open (the segments it appends to); a later
// write opens a new one. Other stores do nothing.
func (s *Store) Close() error {
	if d, ok := s.b.(*dirBackend); ok {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, o := range d.owners {
			o.mu.Lock()
			o.close()
			o.mu.Unlock()
		}
	}
	return nil
}
