package tavernsync

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"

	"github.com/cardwriter/cardwriter-mcp/internal/aside"
	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// AsideStore keeps what the card service has no field for (tavern.Card.Leftovers: extension data,
// the creator, lorebook settings, each entry's extra fields) beside the card, so that
// import_tavern_card followed by export_tavern_card loses nothing. The service cannot hold it, so
// it lives with the MCP server: a file per key under the user's config dir for stdio and the
// command line (package aside), in memory otherwise. Records are JSON.
type AsideStore interface {
	Get(ctx context.Context, key aside.Key) (data []byte, ok bool, err error)
	Put(ctx context.Context, key aside.Key, data []byte) error
}

// recordVersion is the version of the records below; a newer one is not read.
const recordVersion = 1

// cardRecord is what is kept aside for a card made by import_tavern_card (or a trial), and the
// state of that import, so that a retried import finishes it without making anything twice.
type cardRecord struct {
	Version int `json:"version"`
	// Source identifies the imported file: the SHA-256 of its bytes and what it was.
	Source struct {
		SHA256 string        `json:"sha256"`
		Format tavern.Format `json:"format"`
	} `json:"source"`
	// Card, Creator and CharacterVersion are the card's part of tavern.Leftovers.
	Card             map[string]any `json:"card,omitempty"`
	Creator          string         `json:"creator,omitempty"`
	CharacterVersion string         `json:"characterVersion,omitempty"`
	// Tags are the card's tags when the service could not hold them (a trial).
	Tags []string `json:"tags,omitempty"`
	// KeptAside names what is kept, for the user.
	KeptAside []string `json:"keptAside"`
	// AvatarImageID is the avatar uploaded by the import.
	AvatarImageID string `json:"avatarImageId,omitempty"`
	// WorldbookID is the worldbook made from the card's character_book (its own record holds the
	// book's leftovers).
	WorldbookID string `json:"worldbookId,omitempty"`
	// Assets are the members of the CHARX the card came from (other than card.json), and
	// AssetsLeftOut the members not kept (over tavern.MaxKeptAssetBytes).
	Assets        []tavern.Asset `json:"assets,omitempty"`
	AssetsLeftOut []string       `json:"assetsLeftOut,omitempty"`
	// Complete is true once every step of the import succeeded.
	Complete bool `json:"complete"`
}

// worldbookRecord is what is kept aside for a worldbook whose entries came from a tavern file.
type worldbookRecord struct {
	Version int `json:"version"`
	// Name is the lorebook's own name, and GeneratedName the name the worldbook got instead
	// when the lorebook had none (the service needs one); export gives back Name while the
	// worldbook still carries GeneratedName.
	Name          string `json:"name"`
	GeneratedName string `json:"generatedName,omitempty"`
	// Book is the lorebook's Extensions (scan_depth, token_budget, extensions, ...).
	Book map[string]any `json:"book,omitempty"`
	// Order lists the entries made from the file, in file order (the service lists by sortOrder).
	Order []string `json:"order"`
	// Entries holds each imported entry's leftovers, by entryId.
	Entries map[string]entryAside `json:"entries"`
	// KeptAside names what is kept, for the user.
	KeptAside []string `json:"keptAside"`
}

// entryAside is one entry's leftovers: its Extensions, and its matchOptions when the worldbook
// could not hold them (a native worldbook).
type entryAside struct {
	Extensions   map[string]any       `json:"extensions"`
	MatchOptions *tavern.MatchOptions `json:"matchOptions,omitempty"`
}

// trialRecord is what is kept aside for a trial card made by import_tavern_card: the card's
// leftovers and the worldbook entries' leftovers, matchOptions included (trial worldbooks are
// native), in file order.
type trialRecord struct {
	cardRecord
	Book    map[string]any `json:"book,omitempty"`
	Entries []trialEntry   `json:"entries,omitempty"`
}

// trialEntry is one trial entry's leftovers.
type trialEntry struct {
	Name         string               `json:"name"`
	Extensions   map[string]any       `json:"extensions"`
	MatchOptions *tavern.MatchOptions `json:"matchOptions,omitempty"`
}

// asideKeys makes the store's keys for one user of one card service.
type asideKeys struct {
	base, user string
}

// asideKeysFor asks the card service who is signed in (GET /me): records are kept per user.
func asideKeysFor(ctx context.Context, c *upstream.Client) (asideKeys, error) {
	me, err := c.GetMe(ctx)
	if err != nil {
		return asideKeys{}, err
	}
	return asideKeys{base: c.BaseURL(), user: me.UserID}, nil
}

func (k asideKeys) card(roleID string) aside.Key {
	return aside.Key{BaseURL: k.base, UserID: k.user, Kind: aside.KindCard, ID: roleID}
}

func (k asideKeys) worldbook(id string) aside.Key {
	return aside.Key{BaseURL: k.base, UserID: k.user, Kind: aside.KindWorldbook, ID: id}
}

func (k asideKeys) trial(clientKey string) aside.Key {
	return aside.Key{BaseURL: k.base, UserID: k.user, Kind: aside.KindTrial, ID: clientKey}
}

// checkAside refuses, before anything is sent to the card service, an import whose kept-aside
// data (v, nil: nothing more) would pass the user's quota, in a store that has one.
func checkAside(ctx context.Context, s AsideStore, keys asideKeys, v any) error {
	q, ok := s.(interface {
		Check(ctx context.Context, user string, size int64) error
	})
	if !ok {
		return nil
	}
	size := 0
	if v != nil {
		data, err := jsontext.Marshal(v)
		if err != nil {
			return fmt.Errorf("measure what is kept aside: %w", err)
		}
		size = len(data)
	}
	return q.Check(ctx, keys.user, int64(size))
}

// loadRecord reads a record into v; ok is false when there is none. Numbers are kept exact, so
// that extension values are written back exactly as they came.
func loadRecord(ctx context.Context, s AsideStore, key aside.Key, v any) (bool, error) {
	data, ok, err := s.Get(ctx, key)
	if err != nil || !ok {
		return false, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return false, fmt.Errorf("kept-aside record of %s: %w", key, err)
	}
	var head struct {
		Version int `json:"version"`
	}
	_ = json.Unmarshal(data, &head)
	if head.Version > recordVersion {
		return false, fmt.Errorf("kept-aside record of %s was written by a newer cardwriter-mcp (version %d)", key, head.Version)
	}
	return true, nil
}

// saveRecord writes a record.
func saveRecord(ctx context.Context, s AsideStore, key aside.Key, v any) error {
	data, err := jsontext.Marshal(v)
	if err != nil {
		return fmt.Errorf("kept-aside record of %s: %w", key, err)
	}
	if err := s.Put(ctx, key, data); err != nil {
		return fmt.Errorf("keep aside for %s: %w", key, err)
	}
	return nil
}

// Names of what is kept aside, as the V3 file names it.

// cardKeptAside names the card-level leftovers: data.* fields, root.* fields, creator and version.
func cardKeptAside(l *tavern.Leftovers) []string {
	var out []string
	for _, ns := range []string{"data", "root"} {
		m, _ := l.Card[ns].(map[string]any)
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok && k == "extensions" && len(sub) > 0 {
				for sk := range sub {
					out = append(out, ns+"."+k+"."+sk)
				}
				continue
			}
			out = append(out, ns+"."+k)
		}
	}
	for ns, v := range l.Card {
		switch ns {
		case "data", "root":
		case "rootCopies": // the top-level copies of data fields: named as where they go
			list, _ := v.([]any)
			for _, k := range list {
				if k, ok := k.(string); ok {
					out = append(out, "root."+k)
				}
			}
		default:
			out = append(out, ns)
		}
	}
	if l.Creator != "" {
		out = append(out, "data.creator")
	}
	if l.CharacterVersion != "" {
		out = append(out, "data.character_version")
	}
	for _, a := range l.Assets {
		out = append(out, "charx/"+a.Path)
	}
	sort.Strings(out)
	return out
}

// bookKeptAside names a lorebook's leftovers under prefix ("character_book" or "lorebook"):
// its own fields, and the union of its entries' fields.
func bookKeptAside(prefix string, b *tavern.Book) []string {
	set := map[string]bool{}
	for k, v := range b.Extensions {
		if sub, ok := v.(map[string]any); ok && k == "extensions" && len(sub) > 0 {
			for sk := range sub {
				set[prefix+".extensions."+sk] = true
			}
			continue
		}
		set[prefix+"."+k] = true
	}
	for _, e := range b.Entries {
		for k, v := range e.Extensions {
			if sub, ok := v.(map[string]any); ok && k == "extensions" && len(sub) > 0 {
				for sk := range sub {
					set[prefix+".entries[].extensions."+sk] = true
				}
				continue
			}
			set[prefix+".entries[]."+k] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// unionSorted merges name lists, sorted and without repeats.
func unionSorted(lists ...[]string) []string {
	set := map[string]bool{}
	for _, l := range lists {
		for _, s := range l {
			set[s] = true
		}
	}
	out := slices.Sorted(maps.Keys(set))
	if out == nil {
		out = []string{}
	}
	return out
}

// KeptWorldbook is what an import kept aside for a worldbook: the lorebook's own fields and each
// imported entry's extensions.
type KeptWorldbook struct {
	Book    map[string]any            // scan_depth, token_budget, extensions, ...
	Entries map[string]map[string]any // each entry's Extensions, by entryId
}

// LoadKeptWorldbook reads what was kept aside for worldbook id of the user signed in to client;
// ok is false when nothing was. The card service's errors are returned as they are.
func LoadKeptWorldbook(ctx context.Context, client *upstream.Client, store AsideStore, id string) (kept KeptWorldbook, ok bool, err error) {
	keys, err := asideKeysFor(ctx, client)
	if err != nil {
		return KeptWorldbook{}, false, err
	}
	var rec worldbookRecord
	found, err := loadRecord(ctx, store, keys.worldbook(id), &rec)
	if err != nil {
		return KeptWorldbook{}, false, fmt.Errorf("read the SillyTavern fields of worldbook %s: %w", id, err)
	}
	if !found {
		return KeptWorldbook{}, false, nil
	}
	kept = KeptWorldbook{Book: rec.Book, Entries: make(map[string]map[string]any, len(rec.Entries))}
	for id, a := range rec.Entries {
		kept.Entries[id] = a.Extensions
	}
	return kept, true, nil
}

// LoadKeptCard reads the fields an import kept aside for card roleID of the user signed in to
// client (the card's Leftovers.Card: "data" and "root" fields the service has no place for); ok is
// false when nothing was kept.
func LoadKeptCard(ctx context.Context, client *upstream.Client, store AsideStore, roleID string) (card map[string]any, ok bool, err error) {
	keys, err := asideKeysFor(ctx, client)
	if err != nil {
		return nil, false, err
	}
	var rec cardRecord
	found, err := loadRecord(ctx, store, keys.card(roleID), &rec)
	if err != nil {
		return nil, false, fmt.Errorf("read the SillyTavern fields of card %s: %w", roleID, err)
	}
	return rec.Card, found, nil
}
