package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// StateFile is the file in which earlier versions kept the proxy's state, in the state
// directory; ImportStateFile moves it into the store.
const StateFile = "proxy-state.json"

// ImportStateFile moves the state of an earlier version's StateFile in dir into kv (clients,
// consents, requests, grants, secrets, the upstream registration), then renames the file to
// StateFile + ".imported", so that a server upgraded in place keeps its sign-ins. A missing
// file is no error. It returns how many records it moved. key is the state key the server
// will run with: the records that grant access are authenticated under it as they are moved.
func ImportStateFile(ctx context.Context, dir string, kv store.KV, key []byte) (int, error) {
	path := filepath.Join(dir, StateFile)
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("proxy: import %s: %w", path, err)
	}
	var old struct {
		Version  int                        `json:"version"`
		Clients  map[string]*Client         `json:"clients"`
		Consents map[string]*Consent        `json:"consents"`
		Requests map[string]*AuthRequest    `json:"requests"`
		Grants   map[string]*Grant          `json:"grants"`
		Secrets  map[string]*Secret         `json:"secrets"`
		Upstream map[string]*UpstreamClient `json:"upstream"`
	}
	if err := json.Unmarshal(raw, &old); err != nil || old.Version != 1 {
		return 0, fmt.Errorf("proxy: import %s: not a version 1 state file (%v)", path, err)
	}
	s := NewKVStore(kv)
	if s.keys, err = deriveKeys(key); err != nil {
		return 0, fmt.Errorf("proxy: import %s: %w", path, err)
	}
	n := 0
	step := func(err error) error {
		if err == nil {
			n++
		}
		return err
	}
	for _, c := range old.Clients {
		if err := s.CreateClient(ctx, c); err != nil {
			if _, gerr := s.GetClient(ctx, c.ID); gerr != nil {
				return n, err
			}
		}
	}
	for _, c := range old.Consents {
		if err := step(s.PutConsent(ctx, c)); err != nil {
			return n, err
		}
	}
	for _, r := range old.Requests {
		if err := step(s.PutRequest(ctx, r)); err != nil {
			return n, err
		}
	}
	for _, g := range old.Grants {
		if err := step(s.PutGrant(ctx, g)); err != nil {
			return n, err
		}
	}
	for d, sec := range old.Secrets {
		if err := step(s.PutSecret(ctx, d, sec)); err != nil {
			return n, err
		}
	}
	for _, u := range old.Upstream {
		if err := step(s.PutUpstreamClient(ctx, u)); err != nil {
			return n, err
		}
	}
	n += len(old.Clients)
	if err := os.Rename(path, path+".imported"); err != nil {
		return n, fmt.Errorf("proxy: imported %s but could not rename it: %w", path, err)
	}
	return n, nil
}
