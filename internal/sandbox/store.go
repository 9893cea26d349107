package sandbox

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/atomicfile"
)

const (
	stateVersion = 1
	demoUserID   = "u_demo"
	demoNickname = "Demo Author"
	cardScope    = "mcp:card-writer"
)

// state is everything the sandbox keeps; it is what the data file holds. Pre-issued tokens (demo,
// AddUser) are not part of it; OAuth tokens are, as SHA-256 digests only.
type state struct {
	Version     int                               `json:"version"`
	Seq         int64                             `json:"seq"`
	Users       map[string]*user                  `json:"users"`
	Cards       map[string]*card                  `json:"cards"`
	Images      map[string]*storedImage           `json:"images"`
	Worldbooks  map[string]*worldbook             `json:"worldbooks"`
	Trials      map[string]map[string]*trial      `json:"trials"`      // userId -> clientKey -> trial
	Idempotency map[string]map[string]*idemRecord `json:"idempotency"` // userId -> key -> record
	OAuth       oauthState                        `json:"oauth"`       // clients, grants, hashed tokens (oauth.go)
}

type user struct {
	ID       string   `json:"id"`
	Nickname string   `json:"nickname"`
	Scopes   []string `json:"scopes"`
}

type idemRecord struct {
	RoleID     string `json:"roleId"`
	BodyDigest string `json:"bodyDigest"`
}

func newState() *state {
	st := &state{Version: stateVersion}
	st.init()
	return st
}

// init fills the maps a decoded state may lack and makes sure the demo user exists.
func (st *state) init() {
	if st.Users == nil {
		st.Users = map[string]*user{}
	}
	if st.Cards == nil {
		st.Cards = map[string]*card{}
	}
	if st.Images == nil {
		st.Images = map[string]*storedImage{}
	}
	if st.Worldbooks == nil {
		st.Worldbooks = map[string]*worldbook{}
	}
	if st.Trials == nil {
		st.Trials = map[string]map[string]*trial{}
	}
	if st.Idempotency == nil {
		st.Idempotency = map[string]map[string]*idemRecord{}
	}
	if st.Users[demoUserID] == nil {
		st.Users[demoUserID] = &user{ID: demoUserID, Nickname: demoNickname, Scopes: []string{cardScope}}
	}
	st.OAuth.init()
}

// check reports a decoded state that the handlers could not use safely.
func (st *state) check() error {
	if st.Version != stateVersion {
		return fmt.Errorf("unsupported version %d (want %d)", st.Version, stateVersion)
	}
	for id, u := range st.Users {
		if u == nil || u.ID != id {
			return fmt.Errorf("user %q is malformed", id)
		}
	}
	for id, c := range st.Cards {
		if c == nil || c.ID != id {
			return fmt.Errorf("card %q is malformed", id)
		}
	}
	for id, im := range st.Images {
		if im == nil || im.ID != id {
			return fmt.Errorf("image %q is malformed", id)
		}
	}
	for id, wb := range st.Worldbooks {
		if wb == nil || wb.ID != id || hasNil(wb.Entries) {
			return fmt.Errorf("worldbook %q is malformed", id)
		}
	}
	for uid, m := range st.Trials {
		for key, tr := range m {
			if tr == nil || tr.ClientKey != key || hasNil(tr.Entries) {
				return fmt.Errorf("trial %q of user %q is malformed", key, uid)
			}
		}
	}
	for uid, m := range st.Idempotency {
		for key, rec := range m {
			if rec == nil {
				return fmt.Errorf("idempotency key %q of user %q is malformed", key, uid)
			}
		}
	}
	return st.OAuth.check()
}

func hasNil(entries []*entry) bool {
	for _, e := range entries {
		if e == nil {
			return true
		}
	}
	return false
}

// nextSeq returns a counter value that orders resources by creation.
func (st *state) nextSeq() int64 {
	st.Seq++
	return st.Seq
}

// newID returns a fresh random id with the given prefix, such as "r_".
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return prefix + hex.EncodeToString(b[:])
}

// loadState reads the data file; a missing or empty file is an empty state, anything unreadable is an error.
func loadState(path string) (*state, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return newState(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: read data file %s: %w", path, err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return newState(), nil
	}
	st := &state{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(st); err != nil {
		return nil, fmt.Errorf("sandbox: data file %s is corrupt (left untouched): %w", path, err)
	}
	if err := st.check(); err != nil {
		return nil, fmt.Errorf("sandbox: data file %s is corrupt (left untouched): %w", path, err)
	}
	st.init()
	return st, nil
}

// saveState writes the state atomically: a temporary file in the same directory, fsync, rename.
func saveState(path string, st *state) error {
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("sandbox: encode state: %w", err)
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("sandbox: write data file: %w", err)
	}
	return nil
}

// rfc3339 renders a time as RFC 3339 in UTC.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// sortedBySeq returns the values of m for which keep is true, ordered by their creation counter.
func sortedBySeq[T any](m map[string]*T, keep func(*T) bool, seq func(*T) int64) []*T {
	var out []*T
	for _, v := range m {
		if keep(v) {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b *T) int {
		sa, sb := seq(a), seq(b)
		switch {
		case sa < sb:
			return -1
		case sa > sb:
			return 1
		}
		return 0
	})
	return out
}
