// Package revisions keeps what a write replaced, so that it can be put back: a revision is an
// object (a card, a worldbook, a trial card) as it was before a tool changed it, kept in the
// server's store (store.KV: the embedded file, or Redis shared by replicas) under its user.
//
// Each user has one index (a single key: the revisions' metadata, oldest first) and one key per
// revision (its content). Keeping a revision writes the content, then updates the index in one
// atomic step that also applies the retention (per object a number, an age, per user a size),
// oldest first out; the dropped revisions' keys are deleted after. Both keys of a user share a
// Redis Cluster hash tag. Nothing here reads one user's keys for another.
package revisions

import (
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

// User names whose revisions these are: the card service (its API base URL) and the user's id
// there.
type User struct {
	BaseURL string
	ID      string
}

// tag is the user's part of every key: a digest, so that ids never shape keys, in braces (a
// Redis Cluster hash tag: a user's keys share a slot).
func (u User) tag() string {
	sum := sha256.Sum256([]byte(u.BaseURL + "\x00" + u.ID))
	return "{" + hex.EncodeToString(sum[:12]) + "}"
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

// Store keeps revisions in a store.KV.
type Store struct {
	kv   store.KV
	keep Retention
	now  func() time.Time
}

// New returns a store of revisions in kv, kept as keep says.
func New(kv store.KV, keep Retention) *Store { return &Store{kv: kv, keep: keep, now: time.Now} }

// Retention returns how long the store keeps revisions.
func (s *Store) Retention() Retention { return s.keep }

// newID returns a revision id: "rv_", then the time in milliseconds and ten random bytes, in
// lowercase base32hex (so that ids sort by time).
func newID(at time.Time) string {
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(at.UnixMilli()))
	var b [16]byte
	copy(b[:6], ms[2:]) // 48 bits of milliseconds: until the year 10889
	_, _ = rand.Read(b[6:])
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
	rev.ID, rev.Time, rev.User, rev.BaseURL = newID(now), now, user.ID, user.BaseURL
	if rev.Changes == nil {
		rev.Changes = []string{}
	}
	data, err := json.Marshal(rev)
	if err != nil {
		return nil, fmt.Errorf("revisions: encode: %w", err)
	}
	if s.keep.UserBytes > 0 && int64(len(data)) > s.keep.UserBytes {
		return nil, fmt.Errorf("revisions: the revision (%d bytes) is larger than a user's whole allowance (%d bytes)", len(data), s.keep.UserBytes)
	}
	tag := user.tag()
	if err := s.kv.Set(ctx, prefixRevision+tag+":"+rev.ID, data, s.keep.MaxAge); err != nil {
		return nil, fmt.Errorf("revisions: keep %s: %w", rev.ID, err)
	}
	entry := Entry{ID: rev.ID, Kind: rev.Kind, ObjectID: rev.ObjectID, Tool: rev.Tool, Time: now, Changes: rev.Changes,
		RestoreOf: rev.RestoreOf, Size: int64(len(data))}
	_, err = s.kv.Update(ctx, prefixIndex+tag, 0, func(old []byte) ([]byte, error) {
		list, err := decodeIndex(old)
		if err != nil {
			return nil, err
		}
		list = append(list, entry)
		list, dropped = s.keep.apply(list, now)
		return json.Marshal(list)
	})
	if err != nil {
		_ = s.kv.Delete(ctx, prefixRevision+tag+":"+rev.ID)
		return nil, fmt.Errorf("revisions: index %s: %w", rev.ID, err)
	}
	if len(dropped) > 0 {
		keys := make([]string, len(dropped))
		for i, d := range dropped {
			keys[i] = prefixRevision + tag + ":" + d.ID
		}
		// Unlisted already; a key left behind by a failure here expires with MaxAge.
		_ = s.kv.Delete(ctx, keys...)
	}
	return dropped, nil
}

// apply returns list (oldest first, its last entry the new one) without what the retention
// drops, and the dropped entries. The newest entry is never dropped.
func (r Retention) apply(list []Entry, now time.Time) (kept, dropped []Entry) {
	drop := make([]bool, len(list))
	last := len(list) - 1
	perObject := map[string]int{}
	var total int64
	for i := last; i >= 0; i-- { // newest first
		e := list[i]
		obj := e.Kind + "\x00" + e.ObjectID
		perObject[obj]++
		total += e.Size
		switch {
		case i == last:
		case r.MaxAge > 0 && now.Sub(e.Time) > r.MaxAge,
			perObject[obj] > r.PerObject,
			r.UserBytes > 0 && total > r.UserBytes,
			last-i >= maxIndexEntries:
			drop[i] = true
			perObject[obj]--
			total -= e.Size
		}
	}
	for i, e := range list {
		if drop[i] {
			dropped = append(dropped, e)
		} else {
			kept = append(kept, e)
		}
	}
	return kept, dropped
}

func decodeIndex(data []byte) ([]Entry, error) {
	if len(data) == 0 {
		return nil, nil
	}
	var list []Entry
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("revisions: the index is damaged: %w", err)
	}
	return list, nil
}

// List returns user's revisions of one object (kind and id; both "" for every object), newest
// first, without those past the retention's age.
func (s *Store) List(ctx context.Context, user User, kind, objectID string) ([]Entry, error) {
	data, err := s.kv.Get(ctx, prefixIndex+user.tag())
	if errors.Is(err, store.ErrNotFound) {
		return []Entry{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("revisions: list: %w", err)
	}
	list, err := decodeIndex(data)
	if err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]Entry, 0, len(list))
	for _, e := range slices.Backward(list) {
		if (kind != "" && (e.Kind != kind || e.ObjectID != objectID)) || (s.keep.MaxAge > 0 && now.Sub(e.Time) > s.keep.MaxAge) {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

// Get returns user's revision id; ErrNotFound when the user has none of that id.
func (s *Store) Get(ctx context.Context, user User, id string) (*Revision, error) {
	if !validID(id) {
		return nil, ErrNotFound
	}
	data, err := s.kv.Get(ctx, prefixRevision+user.tag()+":"+id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("revisions: get %s: %w", id, err)
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
	data, err = s.kv.Get(ctx, shadowKey(user, clientKey))
	if errors.Is(err, store.ErrNotFound) {
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
	var err error
	if data == nil {
		err = s.kv.Delete(ctx, shadowKey(user, clientKey))
	} else {
		err = s.kv.Set(ctx, shadowKey(user, clientKey), data, s.keep.MaxAge)
	}
	if err != nil {
		return fmt.Errorf("revisions: trial card %q: %w", clientKey, err)
	}
	return nil
}

func shadowKey(user User, clientKey string) string {
	sum := sha256.Sum256([]byte(clientKey))
	return prefixShadow + user.tag() + ":" + hex.EncodeToString(sum[:12])
}
