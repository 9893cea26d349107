// Package aside keeps what the card service cannot hold of an imported file (a character card's
// extension data, a lorebook's extra fields), so that an export can put it back. Records are
// opaque bytes, keyed by the card service, the user and the card or worldbook they belong to;
// the caller decides what is in them.
//
// Three stores: Memory (tests), File (one JSON file per key in a directory of the user's config
// dir, for the stdio server and the command line) and KV (the HTTP server's store: the embedded
// file, or Redis shared by replicas).
package aside

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/cardwriter/cardwriter-mcp/internal/atomicfile"
)

// Kinds of records.
const (
	KindCard      = "card"      // a card's leftovers, keyed by roleId
	KindWorldbook = "worldbook" // a worldbook's leftovers, keyed by worldbookId
	KindTrial     = "trial"     // a trial card's leftovers, keyed by clientKey
	KindImport    = "import"    // an import's progress and result, keyed by a digest of its idempotency key
)

// Key names one record: the card service (its API base URL), the user (userId from GET /me) and
// the thing the record belongs to.
type Key struct {
	BaseURL string `json:"baseUrl"`
	UserID  string `json:"userId"`
	Kind    string `json:"kind"`
	ID      string `json:"id"`
}

// String renders the key for messages.
func (k Key) String() string { return k.Kind + " " + k.ID + " of " + k.UserID + " at " + k.BaseURL }

// valid reports a key with every part set.
func (k Key) valid() error {
	if k.BaseURL == "" || k.UserID == "" || k.Kind == "" || k.ID == "" {
		return fmt.Errorf("aside: incomplete key %+v", k)
	}
	return nil
}

// Store keeps records. Get reports ok false for a key never put.
type Store interface {
	Get(ctx context.Context, key Key) (data []byte, ok bool, err error)
	Put(ctx context.Context, key Key, data []byte) error
}

// Memory is a Store in memory; the zero value is ready to use.
type Memory struct {
	mu sync.Mutex
	m  map[Key][]byte
}

// NewMemory returns an empty memory store.
func NewMemory() *Memory { return &Memory{} }

// Get returns a copy of the record.
func (s *Memory) Get(_ context.Context, key Key) ([]byte, bool, error) {
	if err := key.valid(); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.m[key]
	return bytes.Clone(d), ok, nil
}

// Put stores a copy of the record.
func (s *Memory) Put(_ context.Context, key Key, data []byte) error {
	if err := key.valid(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[Key][]byte{}
	}
	s.m[key] = bytes.Clone(data)
	return nil
}

const (
	dirPerm  = 0o700
	filePerm = 0o600
	// MaxRecordBytes caps one record (a card's leftovers are far smaller than the 32 MiB a file
	// may be, but a lorebook's can be large).
	MaxRecordBytes = 64 << 20
)

// File is a Store keeping one JSON file per key in a directory (0700), each file 0600 and
// replaced atomically, named by a hash of the key.
type File struct {
	dir string
	mu  sync.Mutex // serialises writers of this process; files are replaced atomically for others
}

// NewFile returns a file store in dir, which is created (0700) at the first Put.
func NewFile(dir string) (*File, error) {
	if dir == "" {
		return nil, errors.New("aside: no directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("aside: %w", err)
	}
	return &File{dir: abs}, nil
}

// Dir returns the store's directory.
func (s *File) Dir() string { return s.dir }

// fileRecord is a record on disk: the key beside the data, so that a file says what it is.
type fileRecord struct {
	Key  Key             `json:"key"`
	Data json.RawMessage `json:"data"`
}

func (s *File) path(key Key) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{key.BaseURL, key.UserID, key.Kind, key.ID}, "\x00")))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:20])+".json")
}

// Get reads the record of key; a file for another key (a hash collision) reads as absent.
func (s *File) Get(_ context.Context, key Key) ([]byte, bool, error) {
	if err := key.valid(); err != nil {
		return nil, false, err
	}
	p := s.path(key)
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("aside: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxRecordBytes+1))
	if err != nil {
		return nil, false, fmt.Errorf("aside: read %s: %w", p, err)
	}
	if len(data) > MaxRecordBytes {
		return nil, false, fmt.Errorf("aside: %s is larger than %d bytes", p, MaxRecordBytes)
	}
	var rec fileRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, false, fmt.Errorf("aside: %s is damaged (%v); delete it to start over", p, err)
	}
	if rec.Key != key {
		return nil, false, nil
	}
	return []byte(rec.Data), true, nil
}

// encodeRecord is a record as stored: the key beside the data (JSON), at most MaxRecordBytes.
func encodeRecord(key Key, data []byte) ([]byte, error) {
	if !json.Valid(data) {
		return nil, errors.New("aside: a record must be JSON")
	}
	out, err := json.Marshal(fileRecord{Key: key, Data: data})
	if err != nil {
		return nil, fmt.Errorf("aside: %w", err)
	}
	if len(out) > MaxRecordBytes {
		return nil, fmt.Errorf("aside: the record is larger than %d bytes", MaxRecordBytes)
	}
	return out, nil
}

// Put writes the record of key (data must be JSON) atomically: a temporary file in the same
// directory, synced, then renamed over the old one.
func (s *File) Put(_ context.Context, key Key, data []byte) error {
	if err := key.valid(); err != nil {
		return err
	}
	out, err := encodeRecord(key, data)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.MkdirAll(s.dir, dirPerm); err != nil {
		return fmt.Errorf("aside: %w", err)
	}
	if runtime.GOOS != "windows" {
		if fi, err := os.Stat(s.dir); err == nil && fi.Mode().Perm()&^dirPerm != 0 {
			_ = os.Chmod(s.dir, dirPerm)
		}
	}
	if err := atomicfile.Write(s.path(key), out, filePerm); err != nil {
		return fmt.Errorf("aside: %w", err)
	}
	return nil
}
