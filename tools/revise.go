package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"syscall"

	"github.com/mark3labs/mcp-go/server"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"
	"github.com/cardwriter/cardwriter-mcp/internal/phrase"
	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// Revisions (issue 23): before a write that replaces or deletes an author's content goes out,
// the tool reads what it will replace and keeps it as a revision (package revisions), under
// its Owner; the write's result names it, and restore_revision (revisions.go) puts
// it back. A write whose revision could not be kept is not sent.

// RevisionStore keeps the revisions of the writes (revisions.Store).
type RevisionStore = revisions.Store

// RevisionObserver, when the Observer also implements it, counts revisions kept, dropped and
// restored (internal/metrics).
type RevisionObserver interface {
	Revisions(event string, n int)
}

// codeRevisionNotKept is the outcome of a write that was not sent because its revision could
// not be kept.
const codeRevisionNotKept = "revision_not_kept"

// The card fields each card write replaces, as getCard names them.
var (
	openingFields = []string{"roleWelcome", "welcomeAlternates", "prologue"}
	profileFields = []string{"roleName", "roleDesc", "tags", "language", "contentRatingIntent", "avatarImageId", "backgroundImageId"}
)

// reviser is what a call needs to keep revisions: nil on a Call when revisions are off.
type reviser struct {
	d      *deps
	done   bool              // the tool's Revise ran
	kept   []revisions.Entry // the revisions this call kept, in order
	drops  int               // older revisions the retention dropped meanwhile
	notes  []string          // what a revision could not hold
	client string            // the MCP client, for the record
}

// beforeWrite keeps, once per call, the revision the tool's Revise makes; a handler calls it
// right before its first write (generic does).
func (c *Call) beforeWrite(ctx context.Context) error {
	if c.revs == nil || c.revs.done || c.Tool.Revise == nil {
		return nil
	}
	c.revs.done = true
	return c.Tool.Revise(ctx, c)
}

// keep stores state as a revision of the object kind/id. A failure is the call's error: the
// write must not go out.
func (c *Call) keep(ctx context.Context, kind, id string, changes []string, state any, restoreOf string) error {
	if c.revs == nil {
		return nil
	}
	data, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("encode the revision: %w", err)
	}
	user, err := c.revs.d.owner(ctx)
	if err != nil {
		return err
	}
	rev := &revisions.Revision{Kind: kind, ObjectID: id, Tool: c.Tool.Name, Client: c.revs.client, Changes: changes,
		State: data, RestoreOf: restoreOf}
	dropped, err := c.revs.d.revs.Keep(ctx, user, rev)
	if errors.Is(err, revisions.ErrTooLarge) {
		return &Failure{Code: codeRevisionNotKept, Detail: map[string]any{"kind": kind, "id": id},
			Message: fmt.Sprintf("Nothing was written: %s %s as it is now is larger than all the revisions this server keeps for you "+
				"(--revisions-user-bytes), so no revision could undo this write. Retrying will not help: ask the operator to raise the "+
				"allowance, or export the %s first.", kind, id, kind)}
	}
	if err != nil {
		return c.storeFailed(ctx, err, kind, id, "a revision of "+kind+" "+id+" to undo this write")
	}
	c.revs.kept = append(c.revs.kept, revisions.Entry{ID: rev.ID, Kind: kind, ObjectID: id})
	c.revs.drops += len(dropped)
	if o, ok := c.revs.d.observer.(RevisionObserver); ok {
		o.Revisions("kept", 1)
		if len(dropped) > 0 {
			o.Revisions("dropped", len(dropped))
		}
	}
	return nil
}

// storeFailed is the Failure of a write not sent because this server could not save what, its
// own fault (a full disk, a store down), never the card service's; the log has the cause.
func (c *Call) storeFailed(ctx context.Context, err error, kind, id, what string) error {
	c.Log.LogAttrs(ctx, slog.LevelError, "revision not kept: this server's store failed", slog.String("tool", c.Tool.Name),
		slog.String("store", c.revs.d.revs.Name()), slog.String("err", err.Error()))
	return &Failure{Code: codeRevisionNotKept, Retryable: true, Detail: map[string]any{"kind": kind, "id": id, "cause": storeCause(err)},
		Message: fmt.Sprintf("Nothing was written: this server (cardwriter-mcp, not the card service) could not save %s: %s. "+
			"Try again once its operator has fixed it.", what, storeCause(err))}
}

// storeCause says in a few words why this server's store failed: the system's reason for a
// disk fault (no space left on device, read-only file system), else that the store is down.
func storeCause(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	if store.IsUnavailable(err) {
		return "its store is unavailable"
	}
	return "its store failed"
}

// addRevision names, in a successful write's result, the revisions its call kept: the object
// revision in structuredContent, and a sentence after the summary.
func (c *Call) addRevision(out map[string]any, summary string) (string, json.RawMessage, error) {
	r := c.revs
	rev := map[string]any{"revisionId": r.kept[0].ID}
	s := fmt.Sprintf(" Kept revision %s of what it replaced: restore_revision undoes it.", r.kept[0].ID)
	if len(r.kept) > 1 {
		var more []any
		var ids []string
		for _, k := range r.kept[1:] {
			more = append(more, k.ID)
			ids = append(ids, k.ID+" ("+k.Kind+" "+k.ObjectID+")")
		}
		rev["alsoKept"] = more
		s += " Also kept " + strings.Join(ids, ", ") + "."
	}
	if r.drops > 0 {
		rev["dropped"] = r.drops
		s += fmt.Sprintf(" Retention dropped %s, the oldest.", phrase.Count(int64(r.drops), "revision", "revisions"))
	}
	if len(r.notes) > 0 {
		rev["notKept"] = strings.Join(r.notes, " ")
		s += " " + strings.Join(r.notes, " ")
	}
	out["revision"] = rev
	data, err := json.Marshal(out)
	if err != nil {
		return "", nil, fmt.Errorf("encode the result: %w", err)
	}
	return summary + s, data, nil
}

// clientName names the MCP client of the call, for the record ("" when unknown).
func clientName(ctx context.Context) string {
	if cs, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		if info := cs.GetClientInfo(); info.Name != "" {
			return info.Name + "/" + info.Version
		}
	}
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.ClientInfo != nil {
		return info.ClientInfo.Name + "/" + info.ClientInfo.Version
	}
	return ""
}

// cardState is a card as a revision keeps it: the fields a write replaces, as getCard
// returned them.
type cardState struct {
	Fields   map[string]json.RawMessage `json:"fields,omitempty"`
	Sections map[string]json.RawMessage `json:"sections,omitempty"`
}

// readCard returns the card roleID as getCard returns it, its fields undecoded.
func readCard(ctx context.Context, client *upstream.Client, roleID string) (fields, sections map[string]json.RawMessage, err error) {
	var raw json.RawMessage
	if err := client.Call(ctx, "getCard", map[string]string{"roleId": roleID}, nil, &raw); err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, nil, fmt.Errorf("decode the card: %w", err)
	}
	if s := fields["sections"]; len(s) > 0 && string(s) != "null" {
		if err := json.Unmarshal(s, &sections); err != nil {
			return nil, nil, fmt.Errorf("decode the card's sections: %w", err)
		}
	}
	return fields, sections, nil
}

// cardSnapshot reads the card and returns the named fields and sections of it.
func cardSnapshot(ctx context.Context, client *upstream.Client, roleID string, fields, sections []string) (cardState, error) {
	all, secs, err := readCard(ctx, client, roleID)
	if err != nil {
		return cardState{}, err
	}
	st := cardState{}
	if len(fields) > 0 {
		st.Fields = map[string]json.RawMessage{}
		for _, f := range fields {
			st.Fields[f] = orNull(all[f])
		}
	}
	if len(sections) > 0 {
		st.Sections = map[string]json.RawMessage{}
		for _, s := range sections {
			st.Sections[s] = orNull(secs[s])
		}
	}
	return st, nil
}

func orNull(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	return v
}

// bodyKeys returns the keys of the call's body object (of its member at path, when given).
func bodyKeys(body json.RawMessage, path ...string) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return nil
	}
	for _, p := range path {
		var inner map[string]json.RawMessage
		if json.Unmarshal(m[p], &inner) != nil {
			return nil
		}
		m = inner
	}
	return slices.Sorted(maps.Keys(m))
}

// reviseCard returns the Revise of a card write that replaces fields and sections chosen from
// the call.
func reviseCard(pick func(c *Call) (fields, sections []string)) func(ctx context.Context, c *Call) error {
	return func(ctx context.Context, c *Call) error {
		roleID := c.Params["roleId"]
		fields, sections := pick(c)
		st, err := cardSnapshot(ctx, c.Client, roleID, fields, sections)
		if err != nil {
			return err
		}
		changes := slices.Clone(fields)
		for _, s := range sections {
			changes = append(changes, "sections."+s)
		}
		return c.keep(ctx, revisions.KindCard, roleID, changes, st, "")
	}
}

var (
	reviseOpeningLines = reviseCard(func(*Call) ([]string, []string) { return openingFields, nil })
	reviseProfile      = reviseCard(func(c *Call) ([]string, []string) {
		var fields []string
		for _, k := range bodyKeys(c.Body) {
			if slices.Contains(profileFields, k) {
				fields = append(fields, k)
			}
		}
		return fields, nil
	})
	reviseDocument   = reviseCard(func(c *Call) ([]string, []string) { return nil, bodyKeys(c.Body, "sections") })
	reviseVisibility = reviseCard(func(*Call) ([]string, []string) { return []string{"roleVisibility"}, nil })
)

// worldbookState is a worldbook as a revision keeps it: its metadata, the cards it is bound
// to and every entry, as the service returned them (without lastUpdateTime and
// activationCount, which no write sets).
type worldbookState struct {
	Name         string                       `json:"name"`
	Description  string                       `json:"description"`
	Tags         []string                     `json:"tags"`
	Format       string                       `json:"format"`
	BoundRoleIDs []string                     `json:"boundRoleIds"`
	Entries      []map[string]json.RawMessage `json:"entries"`
}

// entryKeptOut are the entry fields a revision does not keep.
var entryKeptOut = []string{"lastUpdateTime", "activationCount"}

// worldbookSnapshot reads a worldbook's metadata and entries.
func worldbookSnapshot(ctx context.Context, client *upstream.Client, id string) (worldbookState, error) {
	return worldbookSnapshotOf(ctx, client, id, nil)
}

// worldbookSnapshotOf is worldbookSnapshot with the worldbook's metadata already read (wb), or
// nil to read it.
func worldbookSnapshotOf(ctx context.Context, client *upstream.Client, id string, wb *upstream.Worldbook) (worldbookState, error) {
	if wb == nil {
		var err error
		if wb, err = client.GetWorldbook(ctx, id); err != nil {
			return worldbookState{}, err
		}
	}
	var list struct {
		Entries []map[string]json.RawMessage `json:"entries"`
	}
	if err := client.Call(ctx, "listWorldbookEntries", map[string]string{"worldbookId": id}, nil, &list); err != nil {
		return worldbookState{}, err
	}
	for _, e := range list.Entries {
		for _, k := range entryKeptOut {
			delete(e, k)
		}
	}
	return worldbookState{Name: wb.Name, Description: wb.Description, Tags: jsontext.NonNil(wb.Tags), Format: string(wb.Format),
		BoundRoleIDs: jsontext.NonNil(wb.BoundRoleIDs), Entries: jsontext.NonNil(list.Entries)}, nil
}

// reviseWorldbook is the Revise of write_worldbook_document: the whole worldbook as it was.
func reviseWorldbook(ctx context.Context, c *Call) error {
	id := c.Params["worldbookId"]
	var doc struct {
		Metadata json.RawMessage `json:"metadata"`
		Binding  json.RawMessage `json:"binding"`
		Entries  []struct {
			Op string `json:"op"`
		} `json:"entries"`
	}
	if err := json.Unmarshal(c.Body, &doc); err != nil {
		return fmt.Errorf("decode the arguments: %w", err)
	}
	var changes []string
	if doc.Metadata != nil {
		changes = append(changes, "metadata")
	}
	ops := map[string]int{}
	for _, e := range doc.Entries {
		ops[e.Op]++
	}
	for _, op := range []string{"create", "update", "delete"} {
		if n := ops[op]; n > 0 {
			changes = append(changes, fmt.Sprintf("%s %s", phrase.Count(int64(n), "entry", "entries"), op+"d"))
		}
	}
	if doc.Binding != nil {
		changes = append(changes, "binding")
	}
	return keepWorldbook(ctx, c, id, changes, "")
}

// keepWorldbook keeps the worldbook id as it is now.
func keepWorldbook(ctx context.Context, c *Call, id string, changes []string, restoreOf string) error {
	st, err := worldbookSnapshot(ctx, c.Client, id)
	if err != nil {
		return err
	}
	return c.keep(ctx, revisions.KindWorldbook, id, changes, st, restoreOf)
}

// trialState is a trial card as a revision keeps it. The card service shows a trial's digests,
// not its text: the text is what this server last wrote under the clientKey (its shadow),
// when the digests show that the trial still holds it; otherwise only the digests are kept.
type trialState struct {
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

// trialFields are the card fields a trial summary digests, with the value an omitted one holds.
var trialFields = map[string]any{
	"roleName": "", "roleDesc": "", "roleWelcome": "", "welcomeAlternates": []any{}, "prologue": []any{}, "sections": map[string]any{},
}

// trialDigests returns the digest of each field of a trial card, as the service computes them
// (SHA-256 of the canonical JSON, omitted fields as "", [] or {}).
func trialDigests(card json.RawMessage) (map[string]string, error) {
	var m map[string]any
	if err := json.Unmarshal(card, &m); err != nil {
		return nil, err
	}
	values := map[string]any{}
	for f, empty := range trialFields {
		v, ok := m[f]
		if !ok || v == nil {
			v = empty
		}
		values[f] = v
	}
	return jsontext.Digests(values)
}

// trialNow is a live trial card as the service shows it.
type trialNow struct {
	Sections  map[string]string `json:"sections"`
	Worldbook struct {
		Entries int `json:"entries"`
	} `json:"worldbook"`
}

// readTrial returns the live trial clientKey; nil when there is none.
func readTrial(ctx context.Context, client *upstream.Client, key string) (*trialNow, error) {
	var now trialNow
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

// trialSnapshot returns the live trial clientKey as a revision keeps it (nil when none is
// live) and the shadow behind it (nil when unknown).
func (c *Call) trialSnapshot(ctx context.Context, user revisions.User, key string) (*trialState, *trialShadow, error) {
	now, err := readTrial(ctx, c.Client, key)
	if err != nil || now == nil {
		return nil, nil, err
	}
	st := &trialState{Digests: now.Sections}
	data, ok, err := c.revs.d.revs.Shadow(ctx, user, key)
	if err != nil {
		return nil, nil, err
	}
	var sh trialShadow
	if ok && json.Unmarshal(data, &sh) == nil && len(sh.Card) > 0 {
		digests, err := trialDigests(sh.Card)
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

// keepTrial keeps the live trial clientKey as a revision (nothing when none is live), then,
// when next is not nil, records next (an upsertTrialCard body) as the trial about to be
// written.
func (c *Call) keepTrial(ctx context.Context, key string, changes []string, next json.RawMessage, restoreOf string) error {
	if c.revs == nil {
		return nil
	}
	user, err := c.revs.d.owner(ctx)
	if err != nil {
		return err
	}
	st, old, err := c.trialSnapshot(ctx, user, key)
	if err != nil {
		return err
	}
	if st != nil {
		if err := c.keep(ctx, revisions.KindTrial, key, changes, st, restoreOf); err != nil {
			return err
		}
		if st.Unknown != "" {
			c.revs.notes = append(c.revs.notes, st.Unknown)
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
	// Saved before the write: a write that fails leaves digests that do not match it, and the
	// shadow is then not used.
	if err := c.revs.d.revs.SaveShadow(ctx, user, key, data); err != nil {
		return c.storeFailed(ctx, err, revisions.KindTrial, key, fmt.Sprintf("trial card %q to undo this write later", key))
	}
	return nil
}

// reviseUpsertTrial is the Revise of upsert_trial_card.
func reviseUpsertTrial(ctx context.Context, c *Call) error {
	changes := []string{"card"}
	if slices.Contains(bodyKeys(c.Body), "worldbook") {
		changes = append(changes, "worldbook entries")
	}
	return c.keepTrial(ctx, c.Params["clientKey"], changes, c.Body, "")
}

// reviseDeleteTrial is the Revise of delete_trial_card.
func reviseDeleteTrial(ctx context.Context, c *Call) error {
	return c.keepTrial(ctx, c.Params["clientKey"], []string{"deleted"}, nil, "")
}

// reviseByUseCase is the Revise of the tavern imports: the use case keeps its revisions itself,
// through tavernsync.Env.Revise (tavernRevise), right before it writes over an existing card,
// worldbook or trial card.
func reviseByUseCase(context.Context, *Call) error { return nil }

// tavernRevise keeps, for the tavern use case, the object it is about to write over: next is
// the upsertTrialCard body of a trial.
func (c *Call) tavernRevise(ctx context.Context, kind, id string, next any) error {
	switch kind {
	case revisions.KindCard:
		st, err := cardSnapshot(ctx, c.Client, id, append(slices.Clone(openingFields), profileFields...), cardSectionNames)
		if err != nil {
			return err
		}
		return c.keep(ctx, kind, id, []string{"opening lines", "profile", "sections"}, st, "")
	case revisions.KindWorldbook:
		wb, _ := next.(*upstream.Worldbook) // the import's own read, when it made one
		st, err := worldbookSnapshotOf(ctx, c.Client, id, wb)
		if err != nil {
			return err
		}
		return c.keep(ctx, kind, id, []string{"entries imported"}, st, "")
	case revisions.KindTrial:
		body, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("encode the trial card: %w", err)
		}
		return c.keepTrial(ctx, id, []string{"card", "worldbook entries"}, body, "")
	}
	return fmt.Errorf("revisions: unknown kind %q", kind)
}

// cardSectionNames are the card's text sections (CardSections).
var cardSectionNames = []string{"description", "personality", "scenario", "exampleDialogue", "systemPrompt", "postHistoryInstructions", "creatorNotes"}
