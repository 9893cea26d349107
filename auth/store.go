package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/atomicfile"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// EnvConfigDir names the environment variable that overrides the store's directory.
const EnvConfigDir = "CARDWRITER_CONFIG_DIR"

const (
	storeFile     = "grants.json"
	lockFile      = "grants.lock"
	storeVersion  = 1
	dirPerm       = 0o700
	filePerm      = 0o600
	maxStoreBytes = 4 << 20
)

// Dir returns the directory of the store: $CARDWRITER_CONFIG_DIR when set, else
// os.UserConfigDir()/cardwriter-mcp (~/.config/cardwriter-mcp on Linux,
// ~/Library/Application Support/cardwriter-mcp on macOS, %AppData%\cardwriter-mcp on Windows).
func Dir() (string, error) {
	if d := os.Getenv(EnvConfigDir); d != "" {
		return filepath.Abs(d)
	}
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("auth: no user config directory (set %s): %w", EnvConfigDir, err)
	}
	return filepath.Join(base, "cardwriter-mcp"), nil
}

// Store keeps grants and client registrations in one JSON file. Reads need no lock (the file
// is replaced atomically); every change happens under the store's exclusive lock, which is
// shared with other processes using the same directory.
type Store struct {
	dir string
}

// NewStore returns the store in dir ("" = Dir()). Nothing is created until the first change.
func NewStore(dir string) (*Store, error) {
	if dir == "" {
		d, err := Dir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("auth: store directory: %w", err)
	}
	return &Store{dir: abs}, nil
}

// Path returns the file holding the grants.
func (s *Store) Path() string { return filepath.Join(s.dir, storeFile) }

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// String describes the store by its path.
func (s *Store) String() string { return "auth.Store(" + s.Path() + ")" }

// Data is the content of the store.
type Data struct {
	Version int            `json:"version"`
	Clients []Registration `json:"clients"` // one per issuer
	Grants  []Grant        `json:"grants"`  // one per (issuer, resource, client_id)
}

// Grant is one sign-in: the tokens a client holds for a resource at an issuer.
type Grant struct {
	Issuer             string         `json:"issuer"`
	Resource           string         `json:"resource"` // {api_host}/open/v1
	ClientID           string         `json:"client_id"`
	TokenEndpoint      string         `json:"token_endpoint"`
	RevocationEndpoint string         `json:"revocation_endpoint,omitempty"`
	Scope              string         `json:"scope,omitempty"`
	TokenType          string         `json:"token_type"`
	AccessToken        upstream.Token `json:"access_token"`
	RefreshToken       upstream.Token `json:"refresh_token,omitempty"`
	Expiry             time.Time      `json:"expiry,omitzero"` // of the access token; zero = not known
	ObtainedAt         time.Time      `json:"obtained_at"`     // sign-in
	RefreshedAt        time.Time      `json:"refreshed_at,omitzero"`
}

// GrantKey identifies a grant.
type GrantKey struct{ Issuer, Resource, ClientID string }

// Key returns the grant's key.
func (g *Grant) Key() GrantKey { return GrantKey{g.Issuer, g.Resource, g.ClientID} }

// LogValue describes the grant without its tokens.
func (g Grant) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("issuer", g.Issuer), slog.String("resource", g.Resource), slog.String("client_id", g.ClientID),
		slog.String("scope", g.Scope), slog.Time("expiry", g.Expiry), slog.Bool("refreshable", g.RefreshToken != ""),
	)
}

// Grant returns the grant with key k, or nil.
func (d *Data) Grant(k GrantKey) *Grant {
	for i := range d.Grants {
		if d.Grants[i].Key() == k {
			return &d.Grants[i]
		}
	}
	return nil
}

// Latest returns the grant for resource obtained last (a later sign-in wins), or nil.
func (d *Data) Latest(resource string) *Grant {
	var best *Grant
	for i := range d.Grants {
		g := &d.Grants[i]
		if g.Resource == resource && (best == nil || g.ObtainedAt.After(best.ObtainedAt)) {
			best = g
		}
	}
	return best
}

// PutGrant adds g, replacing the grant with the same key.
func (d *Data) PutGrant(g Grant) {
	if old := d.Grant(g.Key()); old != nil {
		*old = g
		return
	}
	d.Grants = append(d.Grants, g)
}

// DeleteGrants removes the grants for resource and returns them.
func (d *Data) DeleteGrants(resource string) []Grant {
	var gone []Grant
	d.Grants = slices.DeleteFunc(d.Grants, func(g Grant) bool {
		if g.Resource == resource {
			gone = append(gone, g)
			return true
		}
		return false
	})
	return gone
}

// Client returns the registration kept for issuer, or nil.
func (d *Data) Client(issuer string) *Registration {
	for i := range d.Clients {
		if d.Clients[i].Issuer == issuer {
			return &d.Clients[i]
		}
	}
	return nil
}

// PutClient keeps r as the registration for its issuer.
func (d *Data) PutClient(r Registration) {
	if old := d.Client(r.Issuer); old != nil {
		*old = r
		return
	}
	d.Clients = append(d.Clients, r)
}

// DeleteClient forgets the registration for issuer.
func (d *Data) DeleteClient(issuer string) {
	d.Clients = slices.DeleteFunc(d.Clients, func(r Registration) bool { return r.Issuer == issuer })
}

// Load reads the store; a store never written reads as empty.
func (s *Store) Load() (*Data, error) {
	f, err := os.Open(s.Path())
	if errors.Is(err, fs.ErrNotExist) {
		return &Data{Version: storeVersion}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("auth: read the sign-in store: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && runtime.GOOS != "windows" && fi.Mode().Perm()&^filePerm != 0 {
		// Someone loosened it: tighten it again before anything else reads it.
		_ = f.Chmod(filePerm)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxStoreBytes+1)); err != nil {
		return nil, fmt.Errorf("auth: read the sign-in store: %w", err)
	}
	if buf.Len() > maxStoreBytes {
		return nil, s.corrupt("larger than " + fmt.Sprint(maxStoreBytes) + " bytes")
	}
	dec := json.NewDecoder(&buf)
	var d Data
	if err := dec.Decode(&d); err != nil {
		// The reason names a position or a field, never the text (which holds tokens).
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return nil, s.corrupt(fmt.Sprintf("not valid JSON at byte %d", syn.Offset))
		case errors.As(err, &typ):
			return nil, s.corrupt(fmt.Sprintf("field %q has the wrong type", typ.Field))
		}
		return nil, s.corrupt("not a sign-in store")
	}
	if dec.More() {
		return nil, s.corrupt("trailing data after the JSON object")
	}
	switch {
	case d.Version == 0:
		return nil, s.corrupt("no version")
	case d.Version > storeVersion:
		return nil, fmt.Errorf("auth: the sign-in store %s was written by a newer cardwriter-mcp (version %d)", s.Path(), d.Version)
	}
	return &d, nil
}

// corrupt is the error of a store that cannot be read.
func (s *Store) corrupt(reason string) error {
	return fmt.Errorf("auth: the sign-in store %s is damaged (%s); delete it and run `cardwriter-mcp login` again", s.Path(), reason)
}

// Update runs fn on the current data under the store's lock and writes the result when fn
// returns nil. Another process's changes made before the lock was taken are seen by fn.
func (s *Store) Update(ctx context.Context, fn func(*Data) error) error {
	unlock, err := s.Lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	d, err := s.Load()
	if err != nil {
		return err
	}
	if err := fn(d); err != nil {
		return err
	}
	return s.Write(d)
}

// Lock takes the store's exclusive lock, waiting for it until ctx is done. The caller must
// call the returned function to release it.
func (s *Store) Lock(ctx context.Context) (unlock func(), err error) {
	if err := s.ensureDir(); err != nil {
		return nil, err
	}
	unlock, err = lockPath(ctx, filepath.Join(s.dir, lockFile))
	if err != nil {
		return nil, fmt.Errorf("auth: lock the sign-in store: %w", err)
	}
	return unlock, nil
}

// Write replaces the store's file with d, atomically: a temporary file in the same directory
// (mode 0600), synced, renamed over the old one; then the directory is synced. The caller
// holds the lock.
func (s *Store) Write(d *Data) error {
	if err := s.ensureDir(); err != nil {
		return err
	}
	d.Version = storeVersion
	if d.Clients == nil {
		d.Clients = []Registration{}
	}
	if d.Grants == nil {
		d.Grants = []Grant{}
	}
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("auth: encode the sign-in store: %w", err)
	}
	data = append(data, '\n')
	if err := atomicfile.Write(s.Path(), data, filePerm); err != nil {
		return fmt.Errorf("auth: write the sign-in store: %w", err)
	}
	return nil
}

// ensureDir makes the store's directory, 0700; an existing one that others can read is tightened.
func (s *Store) ensureDir() error {
	if err := os.MkdirAll(s.dir, dirPerm); err != nil {
		return fmt.Errorf("auth: make the sign-in store's directory: %w", err)
	}
	if runtime.GOOS == "windows" {
		return nil
	}
	fi, err := os.Stat(s.dir)
	if err != nil {
		return fmt.Errorf("auth: the sign-in store's directory: %w", err)
	}
	if fi.Mode().Perm() != dirPerm {
		if err := os.Chmod(s.dir, dirPerm); err != nil {
			return fmt.Errorf("auth: make the sign-in store's directory private: %w", err)
		}
	}
	return nil
}
