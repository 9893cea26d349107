// Package revisions keeps what a write replaced, so that it can be put back: a revision is an
// object (a card, a worldbook, a trial card) as it was before a tool changed it, kept under its
// owner (User).
//
// Two forms of store, behind one Store:
//
//   - In a store.KV (the HTTP server's embedded file, or Redis shared by replicas; memory for
//     tests and the sandbox): each owner has one index (a single key: the revisions' metadata,
//     oldest first) and one key per revision. Keeping a revision writes the content, then
//     updates the index in one atomic step that inserts it in time order and applies the
//     retention; the dropped revisions' keys are deleted after. An owner's keys share a Redis
//     Cluster hash tag.
//   - In a directory (NewDir: the stdio servers of one user, several processes at once): per
//     owner, segments that each process appends its revisions to (one write per revision) and
//     never rewrites; every process reads the others' segments from where it last read, and
//     applies the retention when reading, so all agree. No file is renamed over another and
//     no lock is held; a segment is deleted only once all its revisions are dropped and no
//     process appends to it (dir.go).
//
// Nothing here reads one owner's records for another.
package revisions

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// Kinds of objects a revision holds.
const (
	KindCard      = "card"      // a card, by roleId
	KindWorldbook = "worldbook" // a worldbook, by worldbookId
	KindTrial     = "trial"     // a trial card, by clientKey
)

// The key prefixes of the store, in one place: a user's index, a revision's content, and the
// last trial card the server wrote under a clientKey (the card service does not show a trial's
// text; see Shadow). {user} is a Redis Cluster hash tag.
const (
	prefixIndex    = "rev:idx:"
	prefixRevision = "rev:rec:"
	prefixShadow   = "rev:trial:"
)

// Prefixes returns the store key prefixes this package writes under.
func Prefixes() []string { return []string{prefixIndex, prefixRevision, prefixShadow} }

// ErrNotFound is the error of a revision that does not exist for the user (never kept, dropped,
// or another user's).
var ErrNotFound = errors.New("revisions: no such revision")

// Retention says how long revisions are kept; the oldest go first.
type Retention struct {
	PerObject int           // revisions kept per object; 0 keeps none (revisions off)
	MaxAge    time.Duration // revisions older than this are dropped; 0 keeps them without a limit of age
	UserBytes int64         // the size of one user's revisions together; 0 is no limit
}

// Defaults of Retention.
const (
	DefaultPerObject = 50
	DefaultMaxAge    = 30 * 24 * time.Hour
	DefaultUserBytes = 64 << 20
	// maxIndexEntries bounds one user's index whatever the retention (its key is rewritten at
	// each revision): the oldest go first.
	maxIndexEntries = 5000
)

// DefaultRetention is the retention the servers use unless told otherwise.
func DefaultRetention() Retention {
	return Retention{PerObject: DefaultPerObject, MaxAge: DefaultMaxAge, UserBytes: DefaultUserBytes}
}

// Enabled reports whether revisions are kept at all.
func (r Retention) Enabled() bool { return r.PerObject > 0 }

// User names whose revisions these are (their owner): the card service (its API base URL) and
// an id of the owner there: the local profile over stdio, the service's user or the grant over
// HTTP (see docs/revisions.md, "Whose").
type User struct {
	BaseURL string
	ID      string
}

// LocalUser is the owner of the revisions of a server run for one person: the local profile
// (its config directory, or another name of it) on the card service at baseURL.
func LocalUser(baseURL, profile string) User { return User{BaseURL: baseURL, ID: "profile:" + profile} }

// tag is the user's part of every key and folder name: a digest, so that ids never shape keys
// or paths.
func (u User) tag() string {
	sum := sha256.Sum256([]byte(u.BaseURL + "\x00" + u.ID))
	return hex.EncodeToString(sum[:12])
}

// Revision is one object as it was before a write.
type Revision struct {
	ID       string    `json:"revisionId"`
	Kind     string    `json:"kind"`
	ObjectID string    `json:"objectId"`
	Tool     string    `json:"tool"`
	Time     time.Time `json:"time"`
	Client   string    `json:"client,omitempty"`
	// Changes says in brief what the write changed (fields, entries), for lists.
	Changes []string `json:"changes"`
	// State is the object, or the fields and entries the write touches, as they were.
	State json.RawMessage `json:"state"`
	// RestoreOf names the revision a restore_revision put back, when this one was kept by it.
	RestoreOf string `json:"restoreOf,omitempty"`
	// User and BaseURL are checked on every read.
	User    string `json:"user"`
	BaseURL string `json:"baseUrl"`
}

// Entry is a revision in a list: its metadata, without its state.
type Entry struct {
	ID        string    `json:"revisionId"`
	Kind      string    `json:"kind"`
	ObjectID  string    `json:"objectId"`
	Tool      string    `json:"tool"`
	Time      time.Time `json:"time"`
	Changes   []string  `json:"changes"`
	RestoreOf string    `json:"restoreOf,omitempty"`
	Size      int64     `json:"size"`
}

// Store keeps revisions in a store.KV or a directory.
type Store struct {
	b    backend
	keep Retention
	now  func() time.Time
	last lastID
	// fault is the error of the last Keep that the store failed, until one succeeds.
	faultMu sync.Mutex
	fault   error
}

// Fault returns why the last revision could not be saved (a full disk, a store down), or nil
// when the last one was, or none was tried: a readiness probe reports it.
func (s *Store) Fault() error {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	return s.fault
}

func (s *Store) setFault(err error) {
	s.faultMu.Lock()
	s.fault = err
	s.faultMu.Unlock()
}

// backend is where a Store keeps its records: kvBackend or dirBackend. tag names the owner.
type backend interface {
	// put keeps data (the revision e describes) and applies keep; it returns what keep dropped.
	put(ctx context.Context, tag string, e Entry, data []byte, keep Retention, now time.Time) (dropped []Entry, err error)
	// list returns the owner's entries of kind and objectID ("" for all) that keep keeps, in
	// any order.
	list(ctx context.Context, tag, kind, objectID string, keep Retention, now time.Time) ([]Entry, error)
	// get returns revision id's record; ErrNotFound when there is none, or keep dropped it.
	get(ctx context.Context, tag, id string, keep Retention, now time.Time) ([]byte, error)
	// shadow and saveShadow read and write (nil data: delete) a trial card's shadow.
	shadow(ctx context.Context, tag, clientKey string) ([]byte, error)
	saveShadow(ctx context.Context, tag, clientKey string, data []byte, ttl time.Duration) error
	name() string
}

// New returns a store of revisions in kv, kept as keep says.
func New(kv store.KV, keep Retention) *Store {
	return &Store{b: kvBackend{kv: kv, index: newIndexCache()}, keep: keep, now: time.Now}
}

// Name describes where the store keeps its records, for logs, doctor and /readyz.
func (s *Store) Name() string { return s.b.name() }

// Retention returns how long the store keeps revisions.
func (s *Store) Retention() Retention { return s.keep }

// lastID is the last id a Store made, so that ids made in one millisecond still sort in the
// order they were made.
type lastID struct {
	sync.Mutex
	b [16]byte
}

// newID returns a revision id: "rv_", then the time in milliseconds and ten random bytes, in
// lowercase base32hex (so that ids sort by time). Within a millisecond, a Store's ids follow
// one another: the last one's random bytes plus one.
func (lastID *lastID) newID(at time.Time) string {
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(at.UnixMilli()))
	var b [16]byte
	copy(b[:6], ms[2:]) // 48 bits of milliseconds: until the year 10889
	lastID.Lock()
	if bytes.Equal(b[:6], lastID.b[:6]) {
		b = lastID.b
		for i := 15; i >= 6; i-- { // plus one
			if b[i]++; b[i] != 0 {
				break
			}
		}
	} else {
		_, _ = rand.Read(b[6:])
	}
	lastID.b = b
	lastID.Unlock()
	return "rv_" + strings.ToLower(base32.HexEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// validID reports whether id could be a revision id, before it names a key.
func validID(id string) bool {
	rest, ok := strings.CutPrefix(id, "rv_")
	if !ok || len(rest) != 26 {
		return false
	}
	for _, c := range rest {
		if (c < '0' || c > '9') && (c < 'a' || c > 'v') {
			return false
		}
	}
	return true
}

// ErrTooLarge is the error of a revision larger than an owner's whole allowance
// (Retention.UserBytes): a permanent refusal, not a fault of the store.
var ErrTooLarge = errors.New("revisions: the revision is larger than an owner's whole allowance")

// Keep stores rev for user (its ID, Time, User and BaseURL are set here) and applies the
// retention: it returns the revisions dropped to make room, oldest first. An error means the
// revision was not kept.
func (s *Store) Keep(ctx context.Context, user User, rev *Revision) (dropped []Entry, err error) {
	if !s.keep.Enabled() {
		return nil, errors.New("revisions: keeping revisions is turned off")
	}
	if user.ID == "" || user.BaseURL == "" {
		return nil, errors.New("revisions: no user")
	}
	now := s.now().UTC()
	rev.ID, rev.Time, rev.User, rev.BaseURL = s.last.newID(now), now, user.ID, user.BaseURL
	if rev.Changes == nil {
		rev.Changes = []string{}
	}
	data, err := encodeRevision(rev)
	if err != nil {
		return nil, fmt.Errorf("revisions: encode: %w", err)
	}
	if s.keep.UserBytes > 0 && int64(len(data)) > s.keep.UserBytes {
		return nil, fmt.Errorf("%w: %d bytes, the allowance %d", ErrTooLarge, len(data), s.keep.UserBytes)
	}
	entry := Entry{ID: rev.ID, Kind: rev.Kind, ObjectID: rev.ObjectID, Tool: rev.Tool, Time: now, Changes: rev.Changes,
		RestoreOf: rev.RestoreOf, Size: int64(len(data))}
	dropped, err = s.b.put(ctx, user.tag(), entry, data, s.keep, now)
	if ctx.Err() == nil {
		s.setFault(err)
	}
	return dropped, err
}

// encodeRevision encodes rev as json.Marshal does, but for its State, which is copied as it is
// when it is valid compact JSON (json.Marshal would scan and compact it again: a worldbook's
// entries are most of a write's revision).
func encodeRevision(rev *Revision) ([]byte, error) {
	state := rev.State
	if len(state) == 0 || !json.Valid(state) || !compactJSON(state) {
		return json.Marshal(rev)
	}
	r := *rev
	r.State = json.RawMessage("null")
	data, err := json.Marshal(&r)
	if err != nil {
		return nil, err
	}
	at := bytes.Index(data, []byte(`,"state":null`))
	if at < 0 {
		return json.Marshal(rev)
	}
	at += len(`,"state":`)
	out := make([]byte, 0, len(data)+len(state))
	out = append(append(append(out, data[:at]...), state...), data[at+len("null"):]...)
	return out, nil
}

// compactJSON reports whether valid JSON data has no whitespace outside its strings.
func compactJSON(data []byte) bool {
	in := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\n' || c == '\t' || c == '\r'):
			return false
		}
	}
	return true
}

// apply returns list (oldest first; newest the entry never dropped) without what the
// retention drops, and the dropped entries.
func (r Retention) apply(list []Entry, newest string, now time.Time) (kept, dropped []Entry) {
	drop := make([]bool, len(list))
	last := len(list) - 1
	type object struct{ kind, id string }
	perObject := map[object]int{}
	var total int64
	for i := last; i >= 0; i-- { // newest first
		e := list[i]
		obj := object{e.Kind, e.ObjectID}
		perObject[obj]++
		total += e.Size
		switch {
		case e.ID == newest:
		case r.MaxAge > 0 && now.Sub(e.Time) > r.MaxAge,
			perObject[obj] > r.PerObject,
			r.UserBytes > 0 && total > r.UserBytes,
			last-i >= maxIndexEntries:
			drop[i] = true
			perObject[obj]--
			total -= e.Size
		}
	}
	kept = make([]Entry, 0, len(list))
	for i, e := range list {
		if drop[i] {
			dropped = append(dropped, e)
		} else {
			kept = append(kept, e)
		}
	}
	return kept, dropped
}

// newer reports whether a was kept after b: by time, then by id (ids sort by time, then at
// random within a millisecond).
func newer(a, b Entry) bool {
	if !a.Time.Equal(b.Time) {
		return a.Time.After(b.Time)
	}
	return a.ID > b.ID
}

// List returns user's revisions of one object (kind and id; both "" for every object), newest
// first, without those past the retention's age.
func (s *Store) List(ctx context.Context, user User, kind, objectID string) ([]Entry, error) {
	now := s.now()
	list, err := s.b.list(ctx, user.tag(), kind, objectID, s.keep, now)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(list))
	for _, e := range list {
		if (kind != "" && (e.Kind != kind || e.ObjectID != objectID)) || (s.keep.MaxAge > 0 && now.Sub(e.Time) > s.keep.MaxAge) {
			continue
		}
		out = append(out, e)
	}
	// Newest first whatever order the backend keeps: writes in parallel finish in any order.
	slices.SortFunc(out, func(a, b Entry) int {
		switch {
		case newer(a, b):
			return -1
		case newer(b, a):
			return 1
		}
		return 0
	})
	return out, nil
}

// Get returns user's revision id; ErrNotFound when the user has none of that id.
func (s *Store) Get(ctx context.Context, user User, id string) (*Revision, error) {
	if !validID(id) {
		return nil, ErrNotFound
	}
	data, err := s.b.get(ctx, user.tag(), id, s.keep, s.now())
	if err != nil {
		return nil, err
	}
	var rev Revision
	if err := json.Unmarshal(data, &rev); err != nil {
		return nil, fmt.Errorf("revisions: %s is damaged: %w", id, err)
	}
	if rev.User != user.ID || rev.BaseURL != user.BaseURL || rev.ID != id {
		return nil, ErrNotFound
	}
	return &rev, nil
}

// Shadow returns the last trial card the server wrote under clientKey for user (the body of
// its upsert, as SaveShadow was given it); ok is false when there is none.
func (s *Store) Shadow(ctx context.Context, user User, clientKey string) (data []byte, ok bool, err error) {
	data, err = s.b.shadow(ctx, user.tag(), clientKey)
	if errors.Is(err, ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("revisions: trial card %q: %w", clientKey, err)
	}
	return data, true, nil
}

// SaveShadow records data as the trial card about to be written under clientKey for user; nil
// data forgets it. It lasts as long as a revision.
func (s *Store) SaveShadow(ctx context.Context, user User, clientKey string, data []byte) error {
	if err := s.b.saveShadow(ctx, user.tag(), clientKey, data, s.keep.MaxAge); err != nil {
		return fmt.Errorf("revisions: trial card %q: %w", clientKey, err)
	}
	return nil
}

// clientKeyHash names a clientKey in keys and file names.
func clientKeyHash(clientKey string) string {
	sum := sha256.Sum256([]byte(clientKey))
	return hex.EncodeToString(sum[:12])
}

// idMillis returns the time a valid id was made, to the millisecond.
func idMillis(id string) time.Time {
	b, err := base32.HexEncoding.WithPadding(base32.NoPadding).DecodeString(strings.ToUpper(id[len("rv_"):]))
	if err != nil || len(b) < 6 {
		return time.Time{}
	}
	var ms [8]byte
	copy(ms[2:], b[:6])
	return time.UnixMilli(int64(binary.BigEndian.Uint64(ms[:]))).UTC()
}
