package undo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cardwriter/cardwriter-mcp/internal/phrase"
	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// entriesPerDocument is the card service's limit of entry ops in one worldbook write.
const entriesPerDocument = 500

// trialGone is the note of a diff whose trial card is no longer live.
const trialGone = "The trial card is gone (deleted or expired): restoring creates it again."

// Diff returns what differs between revision rev and its object now; the old and new text of
// changed worldbook entries is shown within textBudget bytes.
func (r *Run) Diff(ctx context.Context, rev *revisions.Revision, textBudget int) (Change, error) {
	switch rev.Kind {
	case revisions.KindCard:
		st, err := stateOf[CardState](rev)
		if err != nil {
			return Change{}, err
		}
		cur, err := ReadCard(ctx, r.Client, rev.ObjectID)
		if err != nil {
			return Change{}, err
		}
		return CardChange(rev.ObjectID, st, cur.State(slices.Collect(maps.Keys(st.Fields)), slices.Collect(maps.Keys(st.Sections))), RevisionLabels), nil
	case revisions.KindWorldbook:
		st, err := stateOf[WorldbookState](rev)
		if err != nil {
			return Change{}, err
		}
		cur, err := ReadWorldbook(ctx, r.Client, rev.ObjectID, nil)
		if err != nil {
			return Change{}, err
		}
		return WorldbookChange(rev.ObjectID, st, cur, RevisionLabels, textBudget), nil
	case revisions.KindTrial:
		st, err := stateOf[TrialState](rev)
		if err != nil {
			return Change{}, err
		}
		now, err := ReadTrial(ctx, r.Client, rev.ObjectID)
		if err != nil {
			return Change{}, err
		}
		c := TrialChange(rev.ObjectID, st.Digests, now, trialGone)
		if now != nil && st.Unknown != "" {
			c.Notes = append(c.Notes, st.Unknown)
			c.settle()
		}
		return c, nil
	}
	return Change{}, fmt.Errorf("revision %s: unknown kind %q", rev.ID, rev.Kind)
}

// stateOf decodes the state a revision kept.
func stateOf[T any](rev *revisions.Revision) (T, error) {
	var st T
	if err := json.Unmarshal(rev.State, &st); err != nil {
		return st, fmt.Errorf("decode revision %s: %w", rev.ID, err)
	}
	return st, nil
}

// Restored is the result of a restore.
type Restored struct {
	RevisionID      string   `json:"revisionId"`
	Kind            string   `json:"kind"`
	ObjectID        string   `json:"objectId"`
	Restored        []string `json:"restored"`
	NotRestored     []string `json:"notRestored"`
	CreatedEntryIDs []string `json:"createdEntryIds,omitempty"`
}

// step is one write of a restore: what it puts back, and the call.
type step struct {
	what   string // for people: "opening lines", "400 entry ops", ...
	op     string
	params map[string]string
	body   any
	done   func(answer json.RawMessage) error // reads the answer; nil: ignored
}

// runSteps sends a restore's writes in order. A failure after some applied is a
// restore_incomplete failure that says what was applied and what remains: calling the restore
// again reads the object anew and sends what remains.
func (r *Run) runSteps(ctx context.Context, rev *revisions.Revision, steps []step) error {
	for i, s := range steps {
		var answer json.RawMessage
		err := r.Client.Call(ctx, s.op, s.params, s.body, &answer)
		if err == nil && s.done != nil {
			err = s.done(answer)
		}
		if err == nil {
			continue
		}
		if i == 0 {
			return err // nothing applied: the error as it is
		}
		return incomplete(rev, steps[:i], steps[i:], err, r.undoID())
	}
	return nil
}

// undoID is the revision this call kept of the object before writing ("" none).
func (r *Run) undoID() string {
	if len(r.Kept) == 0 {
		return ""
	}
	return r.Kept[len(r.Kept)-1].ID
}

// incomplete is the failure of a restore that stopped part way.
func incomplete(rev *revisions.Revision, applied, remaining []step, cause error, undo string) *Failure {
	names := func(ss []step) []string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = s.what
		}
		return out
	}
	why := "the card service did not answer"
	detail := map[string]any{"revisionId": rev.ID, "applied": names(applied), "remaining": names(remaining)}
	var apiErr *upstream.Error
	if errors.As(cause, &apiErr) {
		why = fmt.Sprintf("the card service refused it (%s: %s)", apiErr.Code, strings.TrimSuffix(apiErr.Message, "."))
		detail["cause"] = apiErr.Code
	}
	msg := fmt.Sprintf("The restore of %s %s stopped part way: %s; applied %s; not applied %s. Call restore_revision again with "+
		"revisionId %s to finish it (it sends only what remains)", rev.Kind, rev.ObjectID, why,
		strings.Join(names(applied), ", "), strings.Join(names(remaining), ", "), rev.ID)
	if undo != "" {
		detail["undoRevisionId"] = undo
		msg += fmt.Sprintf(", or restore %s to undo what was applied", undo)
	}
	return &Failure{Code: CodeRestoreIncomplete, Retryable: true, Detail: detail, Message: msg + "."}
}

// Restore puts revision rev back: it keeps the object's current state as a new revision, then
// writes the revision's state through the operations the tools use. g.IfVersion refuses it when
// the object changed since that version; with g.DryRun it returns the change it would make and
// sends nothing.
func (r *Run) Restore(ctx context.Context, rev *revisions.Revision, g Guard, textBudget int) (*Restored, *Change, error) {
	out := &Restored{RevisionID: rev.ID, Kind: rev.Kind, ObjectID: rev.ObjectID, Restored: []string{}, NotRestored: []string{}}
	var change *Change
	var err error
	switch rev.Kind {
	case revisions.KindCard:
		change, err = r.restoreCard(ctx, rev, out, g)
	case revisions.KindWorldbook:
		change, err = r.restoreWorldbook(ctx, rev, out, g, textBudget)
	case revisions.KindTrial:
		change, err = r.restoreTrial(ctx, rev, out, g)
	default:
		err = fmt.Errorf("revision %s: unknown kind %q", rev.ID, rev.Kind)
	}
	if err != nil || g.DryRun {
		return nil, change, err
	}
	r.observe("restored", 1)
	return out, nil, nil
}

// gone turns the not-found error of an object a revision belongs to into a plain statement.
func gone(err error, rev *revisions.Revision) error {
	var apiErr *upstream.Error
	if errors.As(err, &apiErr) && strings.HasSuffix(apiErr.Code, "not_found") {
		return &Failure{Code: CodeNotRestorable, Detail: map[string]any{"revisionId": rev.ID, rev.Kind: rev.ObjectID},
			Message: fmt.Sprintf("%s %s no longer exists on the card service, and a deleted %s cannot be brought back through its API; "+
				"the revision still holds what it was.", rev.Kind, rev.ObjectID, rev.Kind)}
	}
	return err
}

// decodeFields decodes a card state's fields.
func decodeFields(rev *revisions.Revision, raw map[string]json.RawMessage) (map[string]any, error) {
	out := make(map[string]any, len(raw))
	for f, v := range raw {
		var x any
		if err := json.Unmarshal(orNull(v), &x); err != nil {
			return nil, fmt.Errorf("decode revision %s, field %s: %w", rev.ID, f, err)
		}
		out[f] = x
	}
	return out, nil
}

// restoreCard writes a card's kept fields back.
func (r *Run) restoreCard(ctx context.Context, rev *revisions.Revision, out *Restored, g Guard) (*Change, error) {
	st, err := stateOf[CardState](rev)
	if err != nil {
		return nil, err
	}
	id := rev.ObjectID
	fields, sections := slices.Sorted(maps.Keys(st.Fields)), slices.Sorted(maps.Keys(st.Sections))
	card, err := ReadCard(ctx, r.Client, id)
	if err != nil {
		return nil, gone(err, rev)
	}
	if err := checkCard(card, id, g.IfVersion); err != nil {
		return nil, err
	}
	cur := card.State(fields, sections)
	if g.DryRun {
		c := CardChange(id, cur, st, PlanLabels)
		return &c, nil
	}
	decoded, err := decodeFields(rev, st.Fields)
	if err != nil {
		return nil, err
	}
	secs, err := decodeFields(rev, st.Sections)
	if err != nil {
		return nil, err
	}
	changes := slices.Clone(fields)
	for _, s := range sections {
		changes = append(changes, "sections."+s)
	}
	if err := r.Keep(ctx, revisions.KindCard, id, changes, cur, rev.ID); err != nil {
		return nil, err
	}
	params := map[string]string{"roleId": id}
	var steps []step
	var restored [][]string // what each step restores
	if _, ok := st.Fields["roleWelcome"]; ok {
		body := map[string]any{"roleWelcome": orEmpty(decoded["roleWelcome"], ""), "alternates": orEmpty(decoded["welcomeAlternates"], []any{}),
			"prologue": orEmpty(decoded["prologue"], []any{})}
		steps = append(steps, step{what: "opening lines", op: "setOpeningLines", params: params, body: body})
		restored = append(restored, OpeningFields)
	}
	profile := map[string]any{}
	for _, f := range ProfileFields {
		v, ok := decoded[f]
		switch {
		case !ok:
		case v == nil && (f == "avatarImageId" || f == "backgroundImageId"):
			profile[f] = "" // the card had none: clear it
		case v == nil:
			out.NotRestored = append(out.NotRestored, f+" (it had no value, and this API cannot clear it)")
		default:
			profile[f] = v
		}
	}
	if len(profile) > 0 {
		steps = append(steps, step{what: "profile", op: "updateCardProfile", params: params, body: profile})
		restored = append(restored, slices.Sorted(maps.Keys(profile)))
	}
	if len(secs) > 0 {
		body := map[string]any{}
		var names []string
		for _, s := range sections {
			body[s] = orEmpty(secs[s], "")
			names = append(names, "sections."+s)
		}
		steps = append(steps, step{what: "sections", op: "writeCardDocument", params: params, body: map[string]any{"sections": body}})
		restored = append(restored, names)
	}
	if v, ok := decoded[visibilityField]; ok {
		if v == "private" {
			steps = append(steps, step{what: "visibility", op: "setCardVisibility", params: params, body: map[string]any{"visibility": "private"}})
			restored = append(restored, []string{visibilityField})
		} else {
			out.NotRestored = append(out.NotRestored, fmt.Sprintf("roleVisibility %v (this API can only make a card private; publish_card submits it for review)", v))
		}
	}
	if err := r.runSteps(ctx, rev, steps); err != nil {
		return nil, err
	}
	for _, names := range restored {
		out.Restored = append(out.Restored, names...)
	}
	return nil, nil
}

// orEmpty returns v, or empty when v is null.
func orEmpty(v, empty any) any {
	if v == nil {
		return empty
	}
	return v
}

// restoreWorldbook makes a worldbook's metadata, bindings and entries what the revision kept:
// entries added since are deleted, changed ones updated, deleted ones created anew. It sends
// them in as few documents as the service takes; a failure after the first says which applied.
func (r *Run) restoreWorldbook(ctx context.Context, rev *revisions.Revision, out *Restored, g Guard, textBudget int) (*Change, error) {
	st, err := stateOf[WorldbookState](rev)
	if err != nil {
		return nil, err
	}
	id := rev.ObjectID
	cur, err := ReadWorldbook(ctx, r.Client, id, nil)
	if err != nil {
		return nil, gone(err, rev)
	}
	if err := checkWorldbook(cur, id, g.IfVersion, nil); err != nil {
		return nil, err
	}
	if g.DryRun {
		c := WorldbookChange(id, cur, st, PlanLabels, textBudget)
		return &c, nil
	}
	if err := r.Keep(ctx, revisions.KindWorldbook, id, []string{"restore"}, cur, rev.ID); err != nil {
		return nil, err
	}
	meta := map[string]any{}
	if st.Name != cur.Name {
		meta["name"] = st.Name
	}
	if st.Description != cur.Description {
		meta["description"] = st.Description
	}
	if !slices.Equal(st.Tags, cur.Tags) {
		meta["tags"] = st.Tags
	}
	pair := pairEntries(st.Entries, cur.Entries)
	taken := make([]bool, len(st.Entries))
	var ops []map[string]any
	for i, e := range cur.Entries {
		k := pair[i]
		if k < 0 {
			ops = append(ops, map[string]any{"op": "delete", "entryId": EntryID(e)})
			continue
		}
		taken[k] = true
		if f := changedFields(st.Entries[k], e); len(f) > 0 {
			op := map[string]any{"op": "update", "entryId": EntryID(e)}
			for _, name := range f {
				op[name] = orNull(st.Entries[k][name])
			}
			ops = append(ops, op)
		}
	}
	recreated := 0
	for k, e := range st.Entries {
		if taken[k] {
			continue
		}
		op := map[string]any{"op": "create"}
		for _, name := range EntryFields {
			if v, ok := e[name]; ok && string(v) != "null" {
				op[name] = v
			}
		}
		ops = append(ops, op)
		recreated++
	}
	var bind []string
	for _, role := range st.BoundRoleIDs {
		if !slices.Contains(cur.BoundRoleIDs, role) {
			bind = append(bind, role)
		}
	}
	for _, role := range cur.BoundRoleIDs {
		if !slices.Contains(st.BoundRoleIDs, role) {
			out.NotRestored = append(out.NotRestored, fmt.Sprintf("the binding to card %s made since (this API cannot unbind a worldbook)", role))
		}
	}
	params := map[string]string{"worldbookId": id}
	var created []string
	short := 0 // creates the service named no id for
	var steps []step
	for first := true; first || len(ops) > 0 || len(bind) > 0; first = false {
		doc := map[string]any{}
		var what []string
		if first && len(meta) > 0 {
			doc["metadata"] = meta
			what = append(what, "metadata")
		}
		creates := 0
		if n := min(len(ops), entriesPerDocument); n > 0 {
			doc["entries"] = ops[:n]
			for _, op := range ops[:n] {
				if op["op"] == "create" {
					creates++
				}
			}
			what = append(what, opsSummary(ops[:n]))
			ops = ops[n:]
		}
		if len(bind) > 0 {
			doc["binding"] = map[string]any{"roleId": bind[0]}
			what = append(what, "the binding to card "+bind[0])
			bind = bind[1:]
		}
		if len(doc) == 0 {
			break
		}
		steps = append(steps, step{what: strings.Join(what, " and "), op: "writeWorldbookDocument", params: params, body: doc,
			done: func(answer json.RawMessage) error {
				var res struct {
					CreatedEntryIDs []string `json:"createdEntryIds"`
				}
				if err := json.Unmarshal(answer, &res); err != nil {
					return &upstream.UnreadableError{Operation: "writeWorldbookDocument", Status: 200, Err: err}
				}
				created = append(created, res.CreatedEntryIDs...)
				short += max(creates-len(res.CreatedEntryIDs), 0)
				return nil
			}})
	}
	if err := r.runSteps(ctx, rev, steps); err != nil {
		return nil, err
	}
	if len(meta) > 0 {
		out.Restored = append(out.Restored, "metadata")
	}
	out.Restored = append(out.Restored, "entries")
	if len(st.BoundRoleIDs) > 0 {
		out.Restored = append(out.Restored, "bindings")
	}
	if recreated > 0 {
		out.CreatedEntryIDs = created
		out.NotRestored = append(out.NotRestored, fmt.Sprintf("the ids of %s deleted since: they came back as new entries with new ids (createdEntryIds)",
			phrase.Count(int64(recreated), "entry", "entries")))
	}
	if short > 0 {
		out.NotRestored = append(out.NotRestored, fmt.Sprintf("the new ids of %s: the card service did not name them (list_worldbook_entries shows them)",
			phrase.Count(int64(short), "created entry", "created entries")))
	}
	return nil, nil
}

// opsSummary says in brief what a document's entry ops do.
func opsSummary(ops []map[string]any) string {
	n := map[any]int{}
	for _, op := range ops {
		n[op["op"]]++
	}
	var parts []string
	for _, op := range []string{"delete", "update", "create"} {
		if n[op] > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", phrase.Count(int64(n[op]), "entry", "entries"), op+"d"))
		}
	}
	return strings.Join(parts, ", ")
}

// restoreTrial upserts a trial card as the revision kept it.
func (r *Run) restoreTrial(ctx context.Context, rev *revisions.Revision, out *Restored, g Guard) (*Change, error) {
	st, err := stateOf[TrialState](rev)
	if err != nil {
		return nil, err
	}
	key := rev.ObjectID
	if len(st.Card) == 0 {
		return nil, &Failure{Code: CodeNotRestorable, Detail: map[string]any{"revisionId": rev.ID, "clientKey": key}, Message: st.Unknown}
	}
	now, err := ReadTrial(ctx, r.Client, key)
	if err != nil {
		return nil, err
	}
	if err := checkTrial(now, key, g.IfVersion); err != nil {
		return nil, err
	}
	if g.DryRun {
		c := TrialChange(key, digestsOr(now), &Trial{Sections: st.Digests}, "")
		return &c, nil
	}
	body := map[string]any{"card": st.Card}
	if len(st.Entries) > 0 {
		body["worldbook"] = map[string]any{"entries": st.Entries}
	} else {
		out.NotRestored = append(out.NotRestored, "the worldbook entries (this server did not write them, so the revision does not hold them)")
	}
	next, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode the trial card: %w", err)
	}
	if err := r.KeepTrial(ctx, key, now, []string{"restore"}, next, rev.ID); err != nil {
		return nil, err
	}
	err = r.Client.Call(ctx, "upsertTrialCard", map[string]string{"clientKey": key}, json.RawMessage(next), nil)
	var apiErr *upstream.Error
	if errors.As(err, &apiErr) && apiErr.Code == "trial_slots_full" {
		return nil, &Failure{Code: apiErr.Code, Detail: apiErr.Detail, Message: fmt.Sprintf("Trial card %q could not be restored: its slot is gone "+
			"(every trial slot is in use). Delete a trial card with delete_trial_card, then restore again.", key)}
	}
	if err != nil {
		return nil, err
	}
	out.Restored = append(out.Restored, "card")
	if len(st.Entries) > 0 {
		out.Restored = append(out.Restored, "worldbook entries")
	}
	return nil, nil
}

// digestsOr returns a live trial's digests (none for no trial).
func digestsOr(t *Trial) map[string]string {
	if t == nil {
		return map[string]string{}
	}
	return t.Sections
}
