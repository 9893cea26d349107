package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/linediff"
	"github.com/cardwriter/cardwriter-mcp/internal/page"
	"github.com/cardwriter/cardwriter-mcp/internal/phrase"
	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/tokens"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// The error codes of the revisions toolset.
const (
	codeRevisionNotFound = "revision_not_found" // no such revision for this user
	codeNotRestorable    = "not_restorable"     // the object is gone, or the revision holds too little
)

// Paging of list_revisions.
const (
	defaultRevisionLimit = 20
	// entriesPerDocument is the card service's limit of entry ops in one worldbook write.
	entriesPerDocument = 500
)

// revisionTools is the revisions toolset: what the writes kept, seen and put back. A toolset of
// its own (not spread over cards, worldbook and trial) because one revision id restores any
// kind of object, and so that --toolsets can leave it out.
func revisionTools() []Tool {
	return []Tool{
		{
			Name:    "list_revisions",
			Toolset: ToolsetRevisions,
			Title:   "List revisions",
			Description: "List the revisions kept before writes, newest first: of a card (roleId), worldbook (worldbookId), " +
				"trial card (clientKey), or all. Page on with nextCursor as cursor.\n\n" +
				`Example: {"roleId":"r_8f2c1a"}`,
			Annotations: readHints(),
			Handler:     listRevisions,
			Summary: func(out map[string]any) string {
				return fmt.Sprintf("%s kept.", phrase.Count(num(out, "total"), "revision", "revisions")) + pageSummary(out, "revision", "revisions")
			},
		},
		{
			Name:    "diff_revision",
			Toolset: ToolsetRevisions,
			Title:   "Compare a revision with now",
			Description: "Show what differs between a revision and now: fields (long text as a line diff, - kept, + now) and " +
				"entries added, changed or deleted since: what restore_revision would undo.",
			Annotations: readHints(),
			Handler:     diffRevision,
			Summary: func(out map[string]any) string {
				if boolean(out, "same") {
					return fmt.Sprintf("%s %s is as revision %s kept it.", str(out, "kind"), str(out, "objectId"), str(out, "revisionId"))
				}
				e := obj(out, "entries")
				return fmt.Sprintf("%s %s differs from revision %s: %s; entries %d added, %d changed, %d deleted since.",
					str(out, "kind"), str(out, "objectId"), str(out, "revisionId"),
					phrase.Count(int64(len(list(out, "fields"))), "field", "fields"),
					len(list(e, "added")), len(list(e, "changed")), len(list(e, "deleted")))
			},
		},
		{
			Name:    "restore_revision",
			Toolset: ToolsetRevisions,
			Title:   "Restore a revision",
			Description: "Put a card, worldbook or trial card back as a revision kept it. What it replaces is kept as a new " +
				"revision. Asks the user first when the client can; notRestored says what it could not put back.",
			// Destructive (it overwrites the current state); not idempotent (each call keeps a revision).
			Annotations: hints(false, true, false, true),
			Check:       "diff_revision",
			Handler:     restoreRevision,
			Revise:      reviseByUseCase,
			Summary: func(out map[string]any) string {
				s := fmt.Sprintf("Restored %s %s as revision %s kept it: %s.", str(out, "kind"), str(out, "objectId"),
					str(out, "revisionId"), joinOr(stringsOf(list(out, "restored")), "nothing to change"))
				if nr := stringsOf(list(out, "notRestored")); len(nr) > 0 {
					s += " Not restored: " + strings.Join(nr, "; ") + "."
				}
				return s
			},
		},
	}
}

// revisionsOff is the failure of a revisions tool on a server that keeps none.
func revisionsOff() *Failure {
	return &Failure{Code: codeNotRestorable, Message: "This server keeps no revisions (turned off with --revisions-per-object 0)."}
}

// revisionUser returns the store and the user of a revisions tool's call.
func revisionUser(ctx context.Context, c *Call) (*revisions.Store, revisions.User, error) {
	if c.revs == nil {
		return nil, revisions.User{}, revisionsOff()
	}
	user, err := c.revs.d.owner(ctx)
	return c.revs.d.revs, user, err
}

// loadRevision returns the revision the call names.
func loadRevision(ctx context.Context, c *Call) (*revisions.Revision, error) {
	var in struct {
		RevisionID string `json:"revisionId"`
	}
	if err := json.Unmarshal(c.Body, &in); err != nil {
		return nil, fmt.Errorf("decode the arguments: %w", err)
	}
	st, user, err := revisionUser(ctx, c)
	if err != nil {
		return nil, err
	}
	rev, err := st.Get(ctx, user, in.RevisionID)
	if errors.Is(err, revisions.ErrNotFound) {
		return nil, &Failure{Code: codeRevisionNotFound, Detail: map[string]any{"revisionId": in.RevisionID},
			Message: fmt.Sprintf("You have no revision %s (never kept, or dropped by the retention); list_revisions lists yours.", in.RevisionID)}
	}
	return rev, err
}

// listRevisions is list_revisions: a page of the user's revisions, newest first.
func listRevisions(ctx context.Context, c *Call) (json.RawMessage, error) {
	var in struct {
		RoleID      string `json:"roleId"`
		WorldbookID string `json:"worldbookId"`
		ClientKey   string `json:"clientKey"`
		Cursor      string `json:"cursor"`
		Limit       int    `json:"limit"`
	}
	if err := json.Unmarshal(c.Body, &in); err != nil {
		return nil, fmt.Errorf("decode the arguments: %w", err)
	}
	kind, id := "", ""
	for _, k := range []struct{ kind, id string }{{revisions.KindCard, in.RoleID}, {revisions.KindWorldbook, in.WorldbookID}, {revisions.KindTrial, in.ClientKey}} {
		if k.id == "" {
			continue
		}
		if kind != "" {
			return nil, &Failure{Code: codeInvalidArguments, Message: "Give at most one of roleId, worldbookId and clientKey."}
		}
		kind, id = k.kind, k.id
	}
	st, user, err := revisionUser(ctx, c)
	if err != nil {
		return nil, err
	}
	all, err := st.List(ctx, user, kind, id)
	if err != nil {
		return nil, err
	}
	items := make([]page.Item, len(all))
	for i, e := range all {
		// Newest first, in ascending Order.
		items[i] = page.Item{Order: fmt.Sprintf("%019d", math.MaxInt64-e.Time.UnixNano()) + e.ID}
	}
	limit := in.Limit
	if limit == 0 {
		limit = defaultRevisionLimit
	}
	shown := make([]map[string]any, len(all))
	for i, e := range all {
		shown[i] = map[string]any{"revisionId": e.ID, "kind": e.Kind, "objectId": e.ObjectID, "time": e.Time.Format(time.RFC3339),
			"tool": e.Tool, "changes": e.Changes}
		if e.RestoreOf != "" {
			shown[i]["restoreOf"] = e.RestoreOf
		}
	}
	var sizeErr error
	req := page.Request{Scope: page.Scope("list_revisions", kind, id), Cursor: in.Cursor, Limit: limit, Budget: max(c.Budget-pageOverhead, 1)}
	p, err := page.Make(items, req, func(i int) int {
		raw, _ := json.Marshal(shown[i])
		n, err := tokens.Count(string(raw))
		if err != nil {
			sizeErr = err
		}
		return n + 1 // and its comma
	})
	switch {
	case err != nil:
		return nil, &Failure{Code: codeInvalidCursor, Detail: map[string]any{"argument": "cursor"},
			Message: "The cursor is not one list_revisions gave for these arguments; leave it out to start again."}
	case sizeErr != nil:
		return nil, sizeErr
	}
	out := map[string]any{"revisions": shown[p.Start:p.End]}
	addPageFields(out, p, "list_revisions")
	return json.Marshal(out)
}

// entryFields are the fields of a worldbook entry a write sets.
var entryFields = []string{"name", "content", "keywords", "secondaryKeywords", "matchOptions", "category", "isEnabled", "isConstant", "priority", "sortOrder"}

// equalJSON reports whether two JSON values are equal as values (a missing one is null).
func equalJSON(a, b json.RawMessage) bool {
	var x, y any
	_ = json.Unmarshal(orNull(a), &x)
	_ = json.Unmarshal(orNull(b), &y)
	return reflect.DeepEqual(x, y)
}

// changedFields returns the entry fields in which a and b differ.
func changedFields(a, b map[string]json.RawMessage) []string {
	var out []string
	for _, f := range entryFields {
		if !equalJSON(a[f], b[f]) {
			out = append(out, f)
		}
	}
	return out
}

func entryID(e map[string]json.RawMessage) string {
	var id string
	_ = json.Unmarshal(e["entryId"], &id)
	return id
}

func entryBrief(e map[string]json.RawMessage) map[string]any {
	var name string
	_ = json.Unmarshal(e["name"], &name)
	return map[string]any{"entryId": entryID(e), "name": name}
}

// fieldDiff is one field of diff_revision: the values, or a line diff for long text.
func fieldDiff(name string, kept, now json.RawMessage) map[string]any {
	var a, b any
	_ = json.Unmarshal(orNull(kept), &a)
	_ = json.Unmarshal(orNull(now), &b)
	sa, okA := a.(string)
	sb, okB := b.(string)
	if okA && okB && (len(sa)+len(sb) > 400 || strings.Contains(sa+sb, "\n")) {
		return map[string]any{"field": name, "diff": linediff.Diff(sa, sb)}
	}
	return map[string]any{"field": name, "revision": a, "current": b}
}

// diffRevision is diff_revision: the revision against the object now.
func diffRevision(ctx context.Context, c *Call) (json.RawMessage, error) {
	rev, err := loadRevision(ctx, c)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"revisionId": rev.ID, "kind": rev.Kind, "objectId": rev.ObjectID}
	fields := []map[string]any{}
	var notes []string
	entries := map[string]any{"added": []any{}, "changed": []any{}, "deleted": []any{}}
	switch rev.Kind {
	case revisions.KindCard:
		var st cardState
		if err := json.Unmarshal(rev.State, &st); err != nil {
			return nil, fmt.Errorf("decode revision %s: %w", rev.ID, err)
		}
		cur, err := cardSnapshot(ctx, c.Client, rev.ObjectID, slices.Collect(maps.Keys(st.Fields)), slices.Collect(maps.Keys(st.Sections)))
		if err != nil {
			return nil, err
		}
		for _, f := range slices.Sorted(maps.Keys(st.Fields)) {
			if !equalJSON(st.Fields[f], cur.Fields[f]) {
				fields = append(fields, fieldDiff(f, st.Fields[f], cur.Fields[f]))
			}
		}
		for _, s := range slices.Sorted(maps.Keys(st.Sections)) {
			if !equalJSON(st.Sections[s], cur.Sections[s]) {
				fields = append(fields, fieldDiff("sections."+s, st.Sections[s], cur.Sections[s]))
			}
		}
	case revisions.KindWorldbook:
		var st worldbookState
		if err := json.Unmarshal(rev.State, &st); err != nil {
			return nil, fmt.Errorf("decode revision %s: %w", rev.ID, err)
		}
		cur, err := worldbookSnapshot(ctx, c.Client, rev.ObjectID)
		if err != nil {
			return nil, err
		}
		fields = worldbookFieldDiffs(st, cur)
		added, changed, deleted := entryDiff(st.Entries, cur.Entries)
		entries = map[string]any{"added": added, "changed": changed, "deleted": deleted}
	case revisions.KindTrial:
		var st trialState
		if err := json.Unmarshal(rev.State, &st); err != nil {
			return nil, fmt.Errorf("decode revision %s: %w", rev.ID, err)
		}
		now, err := readTrial(ctx, c.Client, rev.ObjectID)
		if err != nil {
			return nil, err
		}
		if now == nil {
			notes = append(notes, "The trial card is gone (deleted or expired): restoring creates it again.")
			break
		}
		for _, f := range slices.Sorted(maps.Keys(trialFields)) {
			if st.Digests[f] != now.Sections[f] {
				fields = append(fields, map[string]any{"field": f})
			}
		}
		if len(fields) > 0 {
			notes = append(notes, "The card service shows only digests of a trial card's fields: the fields that differ are named, not shown.")
		}
		if st.Unknown != "" {
			notes = append(notes, st.Unknown)
		}
	}
	out["fields"] = fields
	out["entries"] = entries
	out["same"] = len(fields) == 0 && len(entries["added"].([]any))+len(entries["changed"].([]any))+len(entries["deleted"].([]any)) == 0 && len(notes) == 0
	if len(notes) > 0 {
		out["notes"] = notes
	}
	return json.Marshal(out)
}

// worldbookFieldDiffs compares a worldbook's metadata and bindings.
func worldbookFieldDiffs(st, cur worldbookState) []map[string]any {
	var out []map[string]any
	pairs := []struct {
		name      string
		kept, now any
	}{{"name", st.Name, cur.Name}, {"description", st.Description, cur.Description}, {"tags", st.Tags, cur.Tags}, {"boundRoleIds", st.BoundRoleIDs, cur.BoundRoleIDs}}
	for _, p := range pairs {
		a, _ := json.Marshal(p.kept)
		b, _ := json.Marshal(p.now)
		if !equalJSON(a, b) {
			out = append(out, fieldDiff(p.name, a, b))
		}
	}
	return jsonNonNil(out)
}

func jsonNonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// pairEntries pairs each entry now with the kept entry it is: the one of the same id, or, for
// an entry whose id the revision does not hold, a kept entry of the same content whose id is
// gone (a deleted entry a restore created anew). It returns, for each entry now, the index of
// its kept entry or -1.
func pairEntries(kept, now []map[string]json.RawMessage) []int {
	keptByID := map[string]int{}
	for i, e := range kept {
		keptByID[entryID(e)] = i
	}
	pair := make([]int, len(now))
	taken := make([]bool, len(kept))
	for i, e := range now {
		pair[i] = -1
		if k, ok := keptByID[entryID(e)]; ok {
			pair[i], taken[k] = k, true
		}
	}
	for i, e := range now {
		if pair[i] >= 0 {
			continue
		}
		for k, ke := range kept {
			if !taken[k] && len(changedFields(ke, e)) == 0 {
				pair[i], taken[k] = k, true
				break
			}
		}
	}
	return pair
}

// entryDiff returns the entries added since the revision, changed, and deleted.
func entryDiff(kept, now []map[string]json.RawMessage) (added, changed, deleted []any) {
	added, changed, deleted = []any{}, []any{}, []any{}
	pair := pairEntries(kept, now)
	taken := make([]bool, len(kept))
	for i, e := range now {
		k := pair[i]
		if k < 0 {
			added = append(added, entryBrief(e))
			continue
		}
		taken[k] = true
		if f := changedFields(kept[k], e); len(f) > 0 {
			b := entryBrief(e)
			b["fields"] = f
			changed = append(changed, b)
		}
	}
	for k, e := range kept {
		if !taken[k] {
			deleted = append(deleted, entryBrief(e))
		}
	}
	return added, changed, deleted
}

// restored is the result of restore_revision.
type restored struct {
	RevisionID      string   `json:"revisionId"`
	Kind            string   `json:"kind"`
	ObjectID        string   `json:"objectId"`
	Restored        []string `json:"restored"`
	NotRestored     []string `json:"notRestored"`
	CreatedEntryIDs []string `json:"createdEntryIds,omitempty"`
}

// restoreRevision is restore_revision: confirmed by the user where the client can ask, it keeps
// the current state as a revision, then writes the revision's state back through the same
// operations the tools use.
func restoreRevision(ctx context.Context, c *Call) (json.RawMessage, error) {
	rev, err := loadRevision(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := confirm(ctx, c, "Restore a revision",
		fmt.Sprintf("Put %s %s back as it was at %s (revision %s, before %s)? What it holds now is kept as a new revision.",
			rev.Kind, rev.ObjectID, rev.Time.Format(time.RFC3339), rev.ID, rev.Tool)); err != nil {
		return nil, err
	}
	out := restored{RevisionID: rev.ID, Kind: rev.Kind, ObjectID: rev.ObjectID, Restored: []string{}, NotRestored: []string{}}
	switch rev.Kind {
	case revisions.KindCard:
		err = restoreCard(ctx, c, rev, &out)
	case revisions.KindWorldbook:
		err = restoreWorldbook(ctx, c, rev, &out)
	case revisions.KindTrial:
		err = restoreTrial(ctx, c, rev, &out)
	default:
		err = fmt.Errorf("revision %s: unknown kind %q", rev.ID, rev.Kind)
	}
	if err != nil {
		return nil, err
	}
	if o, ok := c.revs.d.observer.(RevisionObserver); ok {
		o.Revisions("restored", 1)
	}
	return json.Marshal(out)
}

// gone turns the not-found error of an object a revision belongs to into a plain statement.
func gone(err error, rev *revisions.Revision) error {
	var apiErr *upstream.Error
	if errors.As(err, &apiErr) && strings.HasSuffix(apiErr.Code, "not_found") {
		return &Failure{Code: codeNotRestorable, Detail: map[string]any{"revisionId": rev.ID, rev.Kind: rev.ObjectID},
			Message: fmt.Sprintf("%s %s no longer exists on the card service, and a deleted %s cannot be brought back through its API; "+
				"the revision still holds what it was.", rev.Kind, rev.ObjectID, rev.Kind)}
	}
	return err
}

// restoreCard writes a card's kept fields back.
func restoreCard(ctx context.Context, c *Call, rev *revisions.Revision, out *restored) error {
	var st cardState
	if err := json.Unmarshal(rev.State, &st); err != nil {
		return fmt.Errorf("decode revision %s: %w", rev.ID, err)
	}
	id := rev.ObjectID
	fields, sections := slices.Sorted(maps.Keys(st.Fields)), slices.Sorted(maps.Keys(st.Sections))
	cur, err := cardSnapshot(ctx, c.Client, id, fields, sections)
	if err != nil {
		return gone(err, rev)
	}
	changes := slices.Clone(fields)
	for _, s := range sections {
		changes = append(changes, "sections."+s)
	}
	if err := c.keep(ctx, revisions.KindCard, id, changes, cur, rev.ID); err != nil {
		return err
	}
	params := map[string]string{"roleId": id}
	var decoded = map[string]any{}
	for f, v := range st.Fields {
		var x any
		_ = json.Unmarshal(v, &x)
		decoded[f] = x
	}
	if _, ok := st.Fields["roleWelcome"]; ok {
		body := map[string]any{"roleWelcome": orEmpty(decoded["roleWelcome"], ""), "alternates": orEmpty(decoded["welcomeAlternates"], []any{}),
			"prologue": orEmpty(decoded["prologue"], []any{})}
		if err := c.Client.Call(ctx, "setOpeningLines", params, body, nil); err != nil {
			return err
		}
		out.Restored = append(out.Restored, openingFields...)
	}
	profile := map[string]any{}
	for _, f := range profileFields {
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
		if err := c.Client.Call(ctx, "updateCardProfile", params, profile, nil); err != nil {
			return err
		}
		out.Restored = append(out.Restored, slices.Sorted(maps.Keys(profile))...)
	}
	if len(st.Sections) > 0 {
		secs := map[string]any{}
		for s, v := range st.Sections {
			var x any
			_ = json.Unmarshal(v, &x)
			secs[s] = orEmpty(x, "")
		}
		if err := c.Client.Call(ctx, "writeCardDocument", params, map[string]any{"sections": secs}, nil); err != nil {
			return err
		}
		for _, s := range sections {
			out.Restored = append(out.Restored, "sections."+s)
		}
	}
	if v, ok := decoded["roleVisibility"]; ok {
		if v == "private" {
			if err := c.Client.Call(ctx, "setCardVisibility", params, map[string]any{"visibility": "private"}, nil); err != nil {
				return err
			}
			out.Restored = append(out.Restored, "roleVisibility")
		} else {
			out.NotRestored = append(out.NotRestored, fmt.Sprintf("roleVisibility %v (this API can only make a card private; publish_card submits it for review)", v))
		}
	}
	return nil
}

// orEmpty returns v, or empty when v is null.
func orEmpty(v, empty any) any {
	if v == nil {
		return empty
	}
	return v
}

// restoreWorldbook makes a worldbook's metadata, bindings and entries what the revision kept:
// entries added since are deleted, changed ones updated, deleted ones created anew.
func restoreWorldbook(ctx context.Context, c *Call, rev *revisions.Revision, out *restored) error {
	var st worldbookState
	if err := json.Unmarshal(rev.State, &st); err != nil {
		return fmt.Errorf("decode revision %s: %w", rev.ID, err)
	}
	id := rev.ObjectID
	cur, err := worldbookSnapshot(ctx, c.Client, id)
	if err != nil {
		return gone(err, rev)
	}
	if err := c.keep(ctx, revisions.KindWorldbook, id, []string{"restore"}, cur, rev.ID); err != nil {
		return err
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
			ops = append(ops, map[string]any{"op": "delete", "entryId": entryID(e)})
			continue
		}
		taken[k] = true
		if f := changedFields(st.Entries[k], e); len(f) > 0 {
			op := map[string]any{"op": "update", "entryId": entryID(e)}
			for _, name := range f {
				op[name] = st.Entries[k][name]
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
		for _, name := range entryFields {
			if v, ok := e[name]; ok && string(v) != "null" {
				op[name] = v
			}
		}
		ops = append(ops, op)
		recreated++
	}
	var bind []string
	for _, r := range st.BoundRoleIDs {
		if !slices.Contains(cur.BoundRoleIDs, r) {
			bind = append(bind, r)
		}
	}
	for _, r := range cur.BoundRoleIDs {
		if !slices.Contains(st.BoundRoleIDs, r) {
			out.NotRestored = append(out.NotRestored, fmt.Sprintf("the binding to card %s made since (this API cannot unbind a worldbook)", r))
		}
	}
	params := map[string]string{"worldbookId": id}
	var created []string
	for first := true; first || len(ops) > 0 || len(bind) > 0; first = false {
		doc := map[string]any{}
		if first && len(meta) > 0 {
			doc["metadata"] = meta
		}
		if n := min(len(ops), entriesPerDocument); n > 0 {
			doc["entries"] = ops[:n]
			ops = ops[n:]
		}
		if len(bind) > 0 {
			doc["binding"] = map[string]any{"roleId": bind[0]}
			bind = bind[1:]
		}
		if len(doc) == 0 {
			break
		}
		var res struct {
			CreatedEntryIDs []string `json:"createdEntryIds"`
		}
		if err := c.Client.Call(ctx, "writeWorldbookDocument", params, doc, &res); err != nil {
			return err
		}
		created = append(created, res.CreatedEntryIDs...)
	}
	if len(meta) > 0 {
		out.Restored = append(out.Restored, "metadata")
	}
	out.Restored = append(out.Restored, "entries")
	if len(st.BoundRoleIDs) > 0 {
		out.Restored = append(out.Restored, "bindings")
	}
	if recreated > 0 {
		out.CreatedEntryIDs = created[len(created)-recreated:]
		out.NotRestored = append(out.NotRestored, fmt.Sprintf("the ids of %s deleted since: they came back as new entries with new ids (createdEntryIds)",
			phrase.Count(int64(recreated), "entry", "entries")))
	}
	return nil
}

// restoreTrial upserts a trial card as the revision kept it.
func restoreTrial(ctx context.Context, c *Call, rev *revisions.Revision, out *restored) error {
	var st trialState
	if err := json.Unmarshal(rev.State, &st); err != nil {
		return fmt.Errorf("decode revision %s: %w", rev.ID, err)
	}
	key := rev.ObjectID
	if len(st.Card) == 0 {
		return &Failure{Code: codeNotRestorable, Detail: map[string]any{"revisionId": rev.ID, "clientKey": key}, Message: st.Unknown}
	}
	body := map[string]any{"card": st.Card}
	if len(st.Entries) > 0 {
		body["worldbook"] = map[string]any{"entries": st.Entries}
	} else {
		out.NotRestored = append(out.NotRestored, "the worldbook entries (this server did not write them, so the revision does not hold them)")
	}
	next, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode the trial card: %w", err)
	}
	if err := c.keepTrial(ctx, key, []string{"restore"}, next, rev.ID); err != nil {
		return err
	}
	err = c.Client.Call(ctx, "upsertTrialCard", map[string]string{"clientKey": key}, json.RawMessage(next), nil)
	var apiErr *upstream.Error
	if errors.As(err, &apiErr) && apiErr.Code == "trial_slots_full" {
		return &Failure{Code: apiErr.Code, Detail: apiErr.Detail, Message: fmt.Sprintf("Trial card %q could not be restored: its slot is gone "+
			"(every trial slot is in use). Delete a trial card with delete_trial_card, then restore again.", key)}
	}
	if err != nil {
		return err
	}
	out.Restored = append(out.Restored, "card")
	if len(st.Entries) > 0 {
		out.Restored = append(out.Restored, "worldbook entries")
	}
	return nil
}
