package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cardwriter/cardwriter-mcp/atomicfile"
)

const (
	stateFile    = "proxy-state.json"
	lockFileName = "proxy-state.lock"
	fileVersion  = 1
	dirPerm      = 0o700
	filePerm     = 0o600
	// usedCodeKept is how long a code is remembered past its expiry, so that presenting it
	// again revokes what it produced (RFC 6749 section 4.1.2).
	usedCodeKept = 10 * time.Minute
)

// fileData is the content of the state file.
type fileData struct {
	Version  int                        `json:"version"`
	Clients  map[string]*Client         `json:"clients"`
	Consents map[string]*Consent        `json:"consents"` // userId NUL clientId NUL redirectUri
	Requests map[string]*AuthRequest    `json:"requests"`
	Grants   map[string]*Grant          `json:"grants"`
	Secrets  map[string]*Secret         `json:"secrets"`  // SHA-256 (hex) of the value
	Upstream map[string]*UpstreamClient `json:"upstream"` // issuer NUL redirectUri
}

func (d *fileData) init() {
	if d.Clients == nil {
		d.Clients = map[string]*Client{}
	}
	if d.Consents == nil {
		d.Consents = map[string]*Consent{}
	}
	if d.Requests == nil {
		d.Requests = map[string]*AuthRequest{}
	}
	if d.Grants == nil {
		d.Grants = map[string]*Grant{}
	}
	if d.Secrets == nil {
		d.Secrets = map[string]*Secret{}
	}
	if d.Upstream == nil {
		d.Upstream = map[string]*UpstreamClient{}
	}
}

// FileStore is a Store kept in memory and written, after every change, to one JSON file in a
// directory (made 0700; the file 0600, replaced atomically). It holds no secret in the clear:
// codes and tokens are known by their digests, the card service's tokens are sealed. One
// process at a time may use a directory: OpenFileStore takes an exclusive lock on it.
type FileStore struct {
	dir    string
	unlock func()

	mu   sync.Mutex
	data *fileData
}

var _ Store = (*FileStore)(nil)

// OpenFileStore opens (creating it when needed) the store in dir.
func OpenFileStore(dir string) (*FileStore, error) {
	if dir == "" {
		return nil, errors.New("proxy: the state directory is not set")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("proxy: state directory: %w", err)
	}
	if err := os.MkdirAll(abs, dirPerm); err != nil {
		return nil, fmt.Errorf("proxy: state directory: %w", err)
	}
	if fi, err := os.Stat(abs); err == nil && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(abs, dirPerm); err != nil {
			return nil, fmt.Errorf("proxy: state directory %s is readable by others and cannot be made private: %w", abs, err)
		}
	}
	unlock, err := lockDir(filepath.Join(abs, lockFileName))
	if err != nil {
		return nil, fmt.Errorf("proxy: state directory %s: %w", abs, err)
	}
	s := &FileStore{dir: abs, unlock: unlock, data: &fileData{Version: fileVersion}}
	raw, err := os.ReadFile(s.path())
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		unlock()
		return nil, fmt.Errorf("proxy: read the state: %w", err)
	case len(bytes.TrimSpace(raw)) > 0:
		if err := json.Unmarshal(raw, s.data); err != nil {
			unlock()
			return nil, fmt.Errorf("proxy: the state file %s is not valid: %w", s.path(), err)
		}
		if s.data.Version != fileVersion {
			unlock()
			return nil, fmt.Errorf("proxy: the state file %s has version %d; this build reads version %d", s.path(), s.data.Version, fileVersion)
		}
	}
	s.data.init()
	return s, nil
}

func (s *FileStore) path() string { return filepath.Join(s.dir, stateFile) }

// Dir returns the store's directory.
func (s *FileStore) Dir() string { return s.dir }

// Close releases the directory's lock.
func (s *FileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unlock != nil {
		s.unlock()
		s.unlock = nil
	}
	return nil
}

// save writes the state atomically. The caller holds s.mu.
func (s *FileStore) save() error {
	data, err := json.Marshal(s.data)
	if err != nil {
		return fmt.Errorf("proxy: encode the state: %w", err)
	}
	if err := atomicfile.Write(s.path(), data, filePerm); err != nil {
		return fmt.Errorf("proxy: write the state: %w", err)
	}
	return nil
}

// change runs f under the lock and saves; when saving fails the change is undone.
func (s *FileStore) change(f func(d *fileData) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	backup, err := json.Marshal(s.data)
	if err != nil {
		return err
	}
	if err := f(s.data); err != nil {
		return err
	}
	if err := s.save(); err != nil {
		restored := &fileData{}
		if json.Unmarshal(backup, restored) == nil {
			restored.init()
			s.data = restored
		}
		return err
	}
	return nil
}

func cloneClient(c *Client) *Client {
	out := *c
	out.RedirectURIs = slices.Clone(c.RedirectURIs)
	out.GrantTypes = slices.Clone(c.GrantTypes)
	return &out
}

func clone[T any](v *T) *T {
	out := *v
	return &out
}

func consentKey(userID, clientID, redirectURI string) string {
	return userID + "\x00" + clientID + "\x00" + redirectURI
}

func upstreamKey(issuer, redirectURI string) string { return issuer + "\x00" + redirectURI }

// Counts returns the number of registered clients and of authorization requests in progress.
func (s *FileStore) Counts() (clients, requests int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.data.Clients), len(s.data.Requests)
}

func (s *FileStore) CreateClient(_ context.Context, c *Client) error {
	return s.change(func(d *fileData) error {
		if d.Clients[c.ID] != nil {
			return fmt.Errorf("proxy: client %s exists", c.ID)
		}
		d.Clients[c.ID] = cloneClient(c)
		return nil
	})
}

func (s *FileStore) GetClient(_ context.Context, id string) (*Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.data.Clients[id]
	if c == nil {
		return nil, ErrNotFound
	}
	return cloneClient(c), nil
}

func (s *FileStore) PutConsent(_ context.Context, c *Consent) error {
	return s.change(func(d *fileData) error {
		d.Consents[consentKey(c.UserID, c.ClientID, c.RedirectURI)] = clone(c)
		return nil
	})
}

func (s *FileStore) GetConsent(_ context.Context, userID, clientID, redirectURI string) (*Consent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.data.Consents[consentKey(userID, clientID, redirectURI)]
	if c == nil {
		return nil, ErrNotFound
	}
	return clone(c), nil
}

func (s *FileStore) PutRequest(_ context.Context, r *AuthRequest) error {
	return s.change(func(d *fileData) error {
		d.Requests[r.ID] = clone(r)
		return nil
	})
}

func (s *FileStore) GetRequest(_ context.Context, id string) (*AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.data.Requests[id]
	if r == nil {
		return nil, ErrNotFound
	}
	return clone(r), nil
}

func (s *FileStore) TakeRequest(_ context.Context, id string) (*AuthRequest, error) {
	var out *AuthRequest
	err := s.change(func(d *fileData) error {
		r := d.Requests[id]
		if r == nil {
			return ErrNotFound
		}
		delete(d.Requests, id)
		out = clone(r)
		return nil
	})
	return out, err
}

func (s *FileStore) PutGrant(_ context.Context, g *Grant) error {
	return s.change(func(d *fileData) error {
		d.Grants[g.ID] = clone(g)
		return nil
	})
}

func (s *FileStore) GetGrant(_ context.Context, id string) (*Grant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.data.Grants[id]
	if g == nil {
		return nil, ErrNotFound
	}
	return clone(g), nil
}

func (s *FileStore) UpdateGrant(_ context.Context, id string, f func(g *Grant) error) (*Grant, error) {
	var out *Grant
	err := s.change(func(d *fileData) error {
		g := d.Grants[id]
		if g == nil {
			return ErrNotFound
		}
		c := clone(g)
		if err := f(c); err != nil {
			return err
		}
		c.ID = id
		d.Grants[id] = c
		out = clone(c)
		return nil
	})
	return out, err
}

func (s *FileStore) DeleteGrant(_ context.Context, id string) (*Grant, error) {
	var out *Grant
	err := s.change(func(d *fileData) error {
		g := d.Grants[id]
		if g == nil {
			return ErrNotFound
		}
		out = clone(g)
		deleteGrant(d, id)
		return nil
	})
	return out, err
}

// deleteGrant removes a grant and every secret issued from it.
func deleteGrant(d *fileData, id string) {
	delete(d.Grants, id)
	for h, sec := range d.Secrets {
		if sec.GrantID == id {
			delete(d.Secrets, h)
		}
	}
}

func (s *FileStore) PutSecret(_ context.Context, digest string, sec *Secret) error {
	return s.change(func(d *fileData) error {
		d.Secrets[digest] = clone(sec)
		return nil
	})
}

func (s *FileStore) GetSecret(_ context.Context, digest string) (*Secret, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sec := s.data.Secrets[digest]
	if sec == nil {
		return nil, ErrNotFound
	}
	return clone(sec), nil
}

func (s *FileStore) UseSecret(_ context.Context, digest string) (*Secret, error) {
	var out *Secret
	err := s.change(func(d *fileData) error {
		sec := d.Secrets[digest]
		if sec == nil {
			return ErrNotFound
		}
		out = clone(sec)
		sec.Used = true
		return nil
	})
	return out, err
}

func (s *FileStore) DeleteSecret(_ context.Context, digest string) error {
	return s.change(func(d *fileData) error {
		delete(d.Secrets, digest)
		return nil
	})
}

func (s *FileStore) GetUpstreamClient(_ context.Context, issuer, redirectURI string) (*UpstreamClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.data.Upstream[upstreamKey(issuer, redirectURI)]
	if c == nil {
		return nil, ErrNotFound
	}
	return clone(c), nil
}

func (s *FileStore) PutUpstreamClient(_ context.Context, c *UpstreamClient) error {
	return s.change(func(d *fileData) error {
		d.Upstream[upstreamKey(c.Issuer, c.RedirectURI)] = clone(c)
		return nil
	})
}

func (s *FileStore) DeleteUpstreamClient(_ context.Context, issuer, redirectURI string) error {
	return s.change(func(d *fileData) error {
		delete(d.Upstream, upstreamKey(issuer, redirectURI))
		return nil
	})
}

// Sweep drops expired requests and secrets (a code usedCodeKept past its expiry), then the
// grants that nothing live refers to: an active grant without a live access or refresh
// token, an inactive one without a live, unused code.
func (s *FileStore) Sweep(_ context.Context, now time.Time) ([]*Grant, error) {
	var dropped []*Grant
	err := s.change(func(d *fileData) error {
		changed := false
		for id, r := range d.Requests {
			if !now.Before(r.Expires) {
				delete(d.Requests, id)
				changed = true
			}
		}
		live := map[string]bool{}
		for h, sec := range d.Secrets {
			end := sec.Expires
			if sec.Kind == KindCode {
				end = end.Add(usedCodeKept)
			}
			if !now.Before(end) {
				delete(d.Secrets, h)
				changed = true
				continue
			}
			if sec.GrantID == "" || !now.Before(sec.Expires) {
				continue
			}
			switch sec.Kind {
			case KindAccess:
				live[sec.GrantID] = true
			case KindRefresh, KindCode:
				if !sec.Used {
					live[sec.GrantID] = true
				}
			}
		}
		for id, g := range d.Grants {
			if !live[id] {
				dropped = append(dropped, clone(g))
				deleteGrant(d, id)
				changed = true
			}
		}
		if !changed {
			return errUnchanged
		}
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return nil, nil
	}
	return dropped, err
}

// errUnchanged makes change skip the write when a sweep found nothing to drop.
var errUnchanged = errors.New("unchanged")
