package undo

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"
	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// The card fields each card write replaces, as getCard names them.
var (
	OpeningFields = []string{"roleWelcome", "welcomeAlternates", "prologue"}
	ProfileFields = []string{"roleName", "roleDesc", "tags", "language", "contentRatingIntent", "avatarImageId", "backgroundImageId"}
	// SectionNames are the card's text sections (CardSections).
	SectionNames = []string{"description", "personality", "scenario", "exampleDialogue", "systemPrompt", "postHistoryInstructions", "creatorNotes"}
)

// visibilityField is the card field set_card_visibility replaces.
const visibilityField = "roleVisibility"

// CardState is a card as a revision keeps it: the fields a write replaces, as getCard
// returned them.
type CardState struct {
	Fields   map[string]json.RawMessage `json:"fields,omitempty"`
	Sections map[string]json.RawMessage `json:"sections,omitempty"`
}

// Card is a card as getCard returns it, its fields undecoded.
type Card struct {
	Fields   map[string]json.RawMessage
	Sections map[string]json.RawMessage
}

// ParseCard decodes getCard's answer.
func ParseCard(raw json.RawMessage) (Card, error) {
	var c Card
	if err := json.Unmarshal(raw, &c.Fields); err != nil {
		return Card{}, fmt.Errorf("decode the card: %w", err)
	}
	if s := c.Fields["sections"]; len(s) > 0 && string(s) != "null" {
		if err := json.Unmarshal(s, &c.Sections); err != nil {
			return Card{}, fmt.Errorf("decode the card's sections: %w", err)
		}
	}
	return c, nil
}

// ReadCard reads the card roleID.
func ReadCard(ctx context.Context, client *upstream.Client, roleID string) (Card, error) {
	var raw json.RawMessage
	if err := client.Call(ctx, "getCard", map[string]string{"roleId": roleID}, nil, &raw); err != nil {
		return Card{}, err
	}
	return ParseCard(raw)
}

// State returns the named fields and sections of the card.
func (c Card) State(fields, sections []string) CardState {
	st := CardState{}
	if len(fields) > 0 {
		st.Fields = map[string]json.RawMessage{}
		for _, f := range fields {
			st.Fields[f] = orNull(c.Fields[f])
		}
	}
	if len(sections) > 0 {
		st.Sections = map[string]json.RawMessage{}
		for _, s := range sections {
			st.Sections[s] = orNull(c.Sections[s])
		}
	}
	return st
}

func orNull(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	return v
}

// WorldbookState is a worldbook as a revision keeps it: its metadata, the cards it is bound
// to and every entry, as the service returned them (without lastUpdateTime and
// activationCount, which no write sets).
type WorldbookState struct {
	Name         string                       `json:"name"`
	Description  string                       `json:"description"`
	Tags         []string                     `json:"tags"`
	Format       string                       `json:"format"`
	BoundRoleIDs []string                     `json:"boundRoleIds"`
	Entries      []map[string]json.RawMessage `json:"entries"`
}

// entryKeptOut are the entry fields a revision does not keep.
var entryKeptOut = []string{"lastUpdateTime", "activationCount"}

// EntryFields are the fields of a worldbook entry a write sets.
var EntryFields = []string{"name", "content", "keywords", "secondaryKeywords", "matchOptions", "category", "isEnabled", "isConstant", "priority", "sortOrder"}

// ReadWorldbook reads a worldbook's metadata (unless wb holds it already) and entries: both at
// once, so that the read before a write waits for one exchange, not two. The metadata's error
// comes first (a worldbook that does not exist).
func ReadWorldbook(ctx context.Context, client *upstream.Client, id string, wb *upstream.Worldbook) (WorldbookState, error) {
	var list struct {
		Entries []map[string]json.RawMessage `json:"entries"`
	}
	listEntries := func() error {
		return client.Call(ctx, "listWorldbookEntries", map[string]string{"worldbookId": id}, nil, &list)
	}
	var err error
	if wb == nil {
		listed := make(chan error, 1)
		go func() { listed <- listEntries() }()
		var werr error
		wb, werr = client.GetWorldbook(ctx, id)
		err = cmp.Or(werr, <-listed)
	} else {
		err = listEntries()
	}
	if err != nil {
		return WorldbookState{}, err
	}
	for _, e := range list.Entries {
		for _, k := range entryKeptOut {
			delete(e, k)
		}
	}
	return WorldbookState{Name: wb.Name, Description: wb.Description, Tags: jsontext.NonNil(wb.Tags), Format: wb.Format,
		BoundRoleIDs: jsontext.NonNil(wb.BoundRoleIDs), Entries: jsontext.NonNil(list.Entries)}, nil
}

// EntryID returns an entry's id ("" when it has none).
func EntryID(e map[string]json.RawMessage) string {
	var id string
	_ = json.Unmarshal(e["entryId"], &id) // an entry without a string id has none
	return id
}

// TrialState is a trial card as a revision keeps it. The card service shows a trial's digests,
// not its text: the text is what this server last wrote under the clientKey (its shadow),
// when the digests show that the trial still holds it; otherwise only the digests are kept.
type TrialState struct {
	Card    json.RawMessage   `json:"card,omitempty"`    // the card, when known
	Entries json.RawMessage   `json:"entries,omitempty"` // its worldbook's entries, when known
	Digests map[string]string `json:"digests"`           // the trial's sections digests then
	Unknown string            `json:"unknown,omitempty"` // why the text is not kept
}

// trialShadow is what the server keeps of the last trial it wrote under a clientKey.
type trialShadow struct {
	Card    json.RawMessage `json:"card"`
	Entries json.RawMessage `json:"entries,omitempty"` // absent: not known
}

// TrialFields are the card fields a trial summary digests, with the value an omitted one holds.
var TrialFields = map[string]any{
	"roleName": "", "roleDesc": "", "roleWelcome": "", "welcomeAlternates": []any{}, "prologue": []any{}, "sections": map[string]any{},
}

// TrialDigests returns the digest of each field of a trial card, as the service computes them
// (SHA-256 of the canonical JSON, omitted fields as "", [] or {}).
func TrialDigests(card json.RawMessage) (map[string]string, error) {
	var m map[string]any
	if err := json.Unmarshal(card, &m); err != nil {
		return nil, err
	}
	values := map[string]any{}
	for f, empty := range TrialFields {
		v, ok := m[f]
		if !ok || v == nil {
			v = empty
		}
		values[f] = v
	}
	return jsontext.Digests(values)
}

// Trial is a live trial card as the service shows it.
type Trial struct {
	Sections  map[string]string `json:"sections"`
	Worldbook struct {
		Entries int `json:"entries"`
	} `json:"worldbook"`
}

// ReadTrial returns the live trial clientKey; nil when there is none.
func ReadTrial(ctx context.Context, client *upstream.Client, key string) (*Trial, error) {
	var now Trial
	err := client.Call(ctx, "getTrialCard", map[string]string{"clientKey": key}, nil, &now)
	var apiErr *upstream.Error
	if errors.As(err, &apiErr) && apiErr.Code == "trial_not_found" {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &now, nil
}

// trialSnapshot returns the live trial now as a revision keeps it and the shadow behind it (nil
// when unknown).
func (r *Run) trialSnapshot(ctx context.Context, user revisions.User, key string, now *Trial) (*TrialState, *trialShadow, error) {
	st := &TrialState{Digests: now.Sections}
	data, ok, err := r.Store.Shadow(ctx, user, key)
	if err != nil {
		return nil, nil, err
	}
	var sh trialShadow
	if ok && json.Unmarshal(data, &sh) == nil && len(sh.Card) > 0 {
		digests, err := TrialDigests(sh.Card)
		if err == nil && maps.Equal(digests, now.Sections) {
			st.Card = sh.Card
			var entries []json.RawMessage
			if json.Unmarshal(sh.Entries, &entries) == nil && len(entries) == now.Worldbook.Entries {
				st.Entries = sh.Entries
			} else {
				sh.Entries = nil
				st.Unknown = "The trial card's worldbook entries were not written by this server, so this revision does not hold them."
			}
			return st, &sh, nil
		}
	}
	st.Unknown = "The card service does not show a trial card's text and this server did not write the one replaced, " +
		"so this revision holds only its digests: restore_revision cannot bring its text back."
	return st, nil, nil
}

// KeepTrial keeps the trial clientKey as it is now (nothing when none is live: now is nil) as a
// revision, then, when next is not nil, records next (an upsertTrialCard body) as the trial
// about to be written.
func (r *Run) KeepTrial(ctx context.Context, key string, now *Trial, changes []string, next json.RawMessage, restoreOf string) error {
	if r.Store == nil {
		return nil
	}
	user, err := r.Owner(ctx)
	if err != nil {
		return err
	}
	var st *TrialState
	var old *trialShadow
	if now != nil {
		if st, old, err = r.trialSnapshot(ctx, user, key, now); err != nil {
			return err
		}
		if err := r.Keep(ctx, revisions.KindTrial, key, changes, st, restoreOf); err != nil {
			return err
		}
		if st.Unknown != "" {
			r.Notes = append(r.Notes, st.Unknown)
		}
	}
	if next == nil {
		return nil
	}
	var body struct {
		Card      json.RawMessage `json:"card"`
		Worldbook *struct {
			Entries json.RawMessage `json:"entries"`
		} `json:"worldbook"`
	}
	if err := json.Unmarshal(next, &body); err != nil {
		return fmt.Errorf("decode the trial card: %w", err)
	}
	sh := trialShadow{Card: body.Card}
	switch {
	case body.Worldbook != nil:
		sh.Entries = body.Worldbook.Entries
	case st == nil:
		sh.Entries = json.RawMessage("[]") // a new trial without a worldbook has no entries
	case old != nil:
		sh.Entries = old.Entries
	}
	data, err := json.Marshal(sh)
	if err != nil {
		return fmt.Errorf("encode the trial card: %w", err)
	}
	if err := r.reserveShadow(ctx, user, key); err != nil {
		return err
	}
	if st == nil { // a refused upsert of a new trial keeps no shadow
		r.refused = func(ctx context.Context) { r.forgetShadow(ctx, user, key) }
	}
	// Saved before the write: a write that fails leaves digests that do not match it, and the
	// shadow is then not used.
	if err := r.Store.SaveShadow(ctx, user, key, data); err != nil {
		return r.storeFailed(ctx, err, revisions.KindTrial, key, fmt.Sprintf("trial card %q to undo this write later", key))
	}
	return nil
}
