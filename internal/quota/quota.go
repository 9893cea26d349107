// Package quota keeps, per user, what the server keeps for them of one kind (exports, kept-aside
// data, trial shadows), in the shared store: a ledger of items with their sizes and expiries, so
// that a user's next item is refused before it is made when it would pass the user's quota.
package quota

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// KeyPrefix starts the ledgers' keys: "quota:" + kind + ":" + a digest of the user.
const KeyPrefix = "quota:"

// Ledger is one kind's per-user ledgers.
type Ledger struct {
	kv    store.KV
	kind  string
	limit int64 // 0: no limit
	unit  string
	flag  string
	free  string
	now   func() time.Time
	obs   Observer
}

// Observer is told of each change of a user's usage (refused false) and each refusal.
type Observer func(kind string, used int64, refused bool)

// SetObserver sets who is told of usage changes and refusals (nil: nobody).
func (l *Ledger) SetObserver(o Observer) { l.obs = o }

func (l *Ledger) observe(used int64, refused bool) {
	if l.obs != nil {
		l.obs(l.kind, used, refused)
	}
}

// New returns the ledger of kind in kv: a user's items together may hold at most limit (in
// unit: "bytes" or "items"; 0: no limit), set by flag; free says how the user frees space.
func New(kv store.KV, kind string, limit int64, unit, flag, free string) *Ledger {
	return &Ledger{kv: kv, kind: kind, limit: limit, unit: unit, flag: flag, free: free, now: time.Now}
}

// SetClock sets the clock items expire by (default time.Now).
func (l *Ledger) SetClock(now func() time.Time) { l.now = now }

// ExceededError is the refusal of an item that would pass a user's quota.
type ExceededError struct {
	Kind       string // what is kept: "exports", "kept-aside data", "trial shadows"
	Limit      int64
	Used, Want int64
	Unit       string
	Flag       string    // the flag that sets the quota
	Free       string    // how to free space
	FreesAt    time.Time // when the oldest item expires (zero: never)
}

func (e *ExceededError) Error() string {
	msg := fmt.Sprintf("Your %s quota on this server is %d %s (%s); you use %d and this needs %d more. %s",
		e.Kind, e.Limit, e.Unit, e.Flag, e.Used, e.Want, e.Free)
	if !e.FreesAt.IsZero() {
		msg += fmt.Sprintf(" Your oldest expires at %s.", e.FreesAt.UTC().Format(time.RFC3339))
	}
	return msg
}

type item struct {
	ID      string    `json:"id"`
	Size    int64     `json:"size"`
	Expires time.Time `json:"expires,omitzero"` // zero: until released
}

type ledger struct {
	Items []item `json:"items"`
}

func (l *Ledger) key(user string) string {
	sum := sha256.Sum256([]byte(user))
	return KeyPrefix + l.kind + ":" + hex.EncodeToString(sum[:16])
}

// live returns led's items not expired at now.
func live(led ledger, now time.Time) []item {
	return slices.DeleteFunc(led.Items, func(it item) bool { return !it.Expires.IsZero() && !now.Before(it.Expires) })
}

// Reserve records that user keeps id, of size, until expires (zero: until Release), or returns
// an *ExceededError when that would pass the quota. Reserving an id again replaces it. It
// returns the user's usage after it.
func (l *Ledger) Reserve(ctx context.Context, user, id string, size int64, expires time.Time) (int64, error) {
	now := l.now()
	var used int64
	_, err := l.kv.Update(ctx, l.key(user), 0, func(old []byte) ([]byte, error) {
		var led ledger
		if old != nil {
			_ = json.Unmarshal(old, &led) // a damaged ledger starts over
		}
		led.Items = slices.DeleteFunc(live(led, now), func(it item) bool { return it.ID == id })
		var freesAt time.Time
		used, freesAt = total(led.Items)
		if l.limit > 0 && used+size > l.limit {
			return nil, &ExceededError{Kind: l.kind, Limit: l.limit, Used: used, Want: size, Unit: l.unit, Flag: l.flag, Free: l.free, FreesAt: freesAt}
		}
		led.Items = append(led.Items, item{ID: id, Size: size, Expires: expires})
		used += size
		return json.Marshal(led)
	})
	var ex *ExceededError
	if errors.As(err, &ex) {
		l.observe(ex.Used, true)
	}
	if err != nil {
		return 0, err
	}
	l.observe(used, false)
	return used, nil
}

// Check returns the *ExceededError Reserve would for size more, without recording anything.
func (l *Ledger) Check(ctx context.Context, user string, size int64) error {
	if l.limit <= 0 {
		return nil
	}
	used, freesAt, err := l.Usage(ctx, user)
	if err != nil {
		return err
	}
	if used+size > l.limit {
		l.observe(used, true)
		return &ExceededError{Kind: l.kind, Limit: l.limit, Used: used, Want: size, Unit: l.unit, Flag: l.flag, Free: l.free, FreesAt: freesAt}
	}
	return nil
}

// Usage returns what user keeps now, and when the oldest expiring item expires.
func (l *Ledger) Usage(ctx context.Context, user string) (used int64, freesAt time.Time, err error) {
	raw, err := l.kv.Get(ctx, l.key(user))
	if errors.Is(err, store.ErrNotFound) {
		return 0, time.Time{}, nil
	}
	if err != nil {
		return 0, time.Time{}, err
	}
	var led ledger
	_ = json.Unmarshal(raw, &led)
	used, freesAt = total(live(led, l.now()))
	return used, freesAt, nil
}

// total returns the size of items together and when the first of them to expire does (zero:
// none expires).
func total(items []item) (used int64, freesAt time.Time) {
	for _, it := range items {
		used += it.Size
		if !it.Expires.IsZero() && (freesAt.IsZero() || it.Expires.Before(freesAt)) {
			freesAt = it.Expires
		}
	}
	return used, freesAt
}

// Release forgets id of user's items (its space is free again).
func (l *Ledger) Release(ctx context.Context, user, id string) error {
	now := l.now()
	_, err := l.kv.Update(ctx, l.key(user), 0, func(old []byte) ([]byte, error) {
		var led ledger
		if old != nil {
			_ = json.Unmarshal(old, &led)
		}
		led.Items = slices.DeleteFunc(live(led, now), func(it item) bool { return it.ID == id })
		return json.Marshal(led)
	})
	return err
}
