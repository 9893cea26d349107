package undo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cardwriter/cardwriter-mcp/internal/phrase"
	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// Guard is what a write asks of the object before it goes out: IfVersion, the version the
// caller read (refused as stale_write when the object changed since; "" to write anyway), and
// DryRun, to be told the change and send nothing.
type Guard struct {
	IfVersion string
	DryRun    bool
}

// stale is the failure of a write whose object changed since the version its caller read.
func stale(kind, id, now string, fields []string, entries []map[string]any) *Failure {
	detail := map[string]any{"kind": kind, "id": id, "version": now}
	var what []string
	if len(fields) > 0 {
		detail["fields"] = fields
		what = append(what, strings.Join(fields, ", "))
	}
	if len(entries) > 0 {
		detail["entries"] = entries
		var ids []string
		for _, e := range entries {
			ids = append(ids, fmt.Sprintf("%v (%v)", e["entryId"], e["change"]))
		}
		what = append(what, phrase.Count(int64(len(entries)), "entry", "entries")+" "+strings.Join(ids, ", "))
	}
	return &Failure{Code: CodeStaleWrite, Detail: detail,
		Message: fmt.Sprintf("Nothing was written: %s %s changed since you read it (%s). Read it again (its version is now %s) "+
			"and write with that version if your change still applies.", kind, id, strings.Join(what, "; "), now)}
}

// CardWrite is a planned write of a card: the fields and sections it replaces, and, for a dry
// run, the new values it sends (a field by name, a section as "sections.<name>"; one not sent
// is kept).
type CardWrite struct {
	Fields   []string
	Sections []string
	Next     map[string]json.RawMessage
}

// changes names what w replaces, for the revision's record.
func (w CardWrite) changes() []string {
	out := slices.Clone(w.Fields)
	for _, s := range w.Sections {
		out = append(out, "sections."+s)
	}
	return out
}

// BeforeCardWrite reads card roleID and refuses a stale write; for a dry run it returns the
// change w would make, else it keeps what w replaces as a revision.
func (r *Run) BeforeCardWrite(ctx context.Context, roleID string, w CardWrite, g Guard) (*Change, error) {
	card, err := ReadCard(ctx, r.Client, roleID)
	if err != nil {
		return nil, err
	}
	if err := checkCard(card, roleID, g.IfVersion); err != nil {
		return nil, err
	}
	cur := card.State(w.Fields, w.Sections)
	if g.DryRun {
		after := CardState{Fields: maps.Clone(cur.Fields), Sections: maps.Clone(cur.Sections)}
		for f := range after.Fields {
			if v, ok := w.Next[f]; ok {
				after.Fields[f] = orNull(v)
			}
		}
		for s := range after.Sections {
			if v, ok := w.Next["sections."+s]; ok {
				after.Sections[s] = orNull(v)
			}
		}
		c := CardChange(roleID, cur, after, PlanLabels)
		return &c, nil
	}
	return nil, r.Keep(ctx, revisions.KindCard, roleID, w.changes(), cur, "")
}

// checkCard refuses a write based on a version of the card other than its own.
func checkCard(card Card, roleID, ifVersion string) error {
	if ifVersion == "" {
		return nil
	}
	return compare(revisions.KindCard, roleID, ifVersion, card.Version(), cardParts)
}

// compare refuses a write whose ifVersion is not now, the version of kind id made of parts.
func compare(kind, id, ifVersion, now string, parts []string) error {
	changed, ok := changedParts(ifVersion, now, parts)
	switch {
	case !ok:
		return badVersion("ifVersion", kind, id)
	case len(changed) > 0:
		return stale(kind, id, now, changed, nil)
	}
	return nil
}

// WorldbookDoc is a planned write_worldbook_document: what the guard and the revision's record
// need of it (each op's kind, entry and ifVersion); a dry run decodes the rest.
type WorldbookDoc struct {
	Metadata map[string]json.RawMessage `json:"metadata"`
	Binding  *struct {
		RoleID string `json:"roleId"`
	} `json:"binding"`
	Ops []struct {
		Op        string  `json:"op"`
		EntryID   string  `json:"entryId"`
		IfVersion *string `json:"ifVersion"`
	} `json:"entries"`
	body json.RawMessage // the body to send
}

// ParseWorldbookDoc decodes write_worldbook_document's body and takes out of its entry ops their
// ifVersion: it returns the document, the body to send, and each op's ifVersion by entryId.
func ParseWorldbookDoc(body json.RawMessage) (WorldbookDoc, json.RawMessage, map[string]string, error) {
	var doc WorldbookDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		return doc, nil, nil, fmt.Errorf("decode the arguments: %w", err)
	}
	doc.body = body
	var versions map[string]string
	for _, op := range doc.Ops {
		if op.IfVersion == nil {
			continue
		}
		if versions == nil {
			versions = map[string]string{}
		}
		versions[op.EntryID] = *op.IfVersion
	}
	if versions == nil {
		return doc, body, nil, nil
	}
	// Ops name their ifVersion: the body sent goes without.
	var whole map[string]json.RawMessage
	var ops []map[string]json.RawMessage
	if err := json.Unmarshal(body, &whole); err != nil {
		return doc, nil, nil, fmt.Errorf("decode the arguments: %w", err)
	}
	if err := json.Unmarshal(whole["entries"], &ops); err != nil {
		return doc, nil, nil, fmt.Errorf("decode the entry ops: %w", err)
	}
	for _, op := range ops {
		delete(op, "ifVersion")
	}
	encoded, err := marshalCompact(ops)
	if err != nil {
		return doc, nil, nil, err
	}
	whole["entries"] = encoded
	if doc.body, err = marshalCompact(whole); err != nil {
		return doc, nil, nil, err
	}
	return doc, doc.body, versions, nil
}

// marshalCompact encodes v without HTML escapes (card text is full of <, > and &).
func marshalCompact(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode the document: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// changes names what doc changes, for the revision's record.
func (doc WorldbookDoc) changes() []string {
	var out []string
	if doc.Metadata != nil {
		out = append(out, "metadata")
	}
	ops := map[string]int{}
	for _, e := range doc.Ops {
		ops[e.Op]++
	}
	for _, op := range []string{"create", "update", "delete"} {
		if n := ops[op]; n > 0 {
			out = append(out, fmt.Sprintf("%s %s", phrase.Count(int64(n), "entry", "entries"), op+"d"))
		}
	}
	if doc.Binding != nil {
		out = append(out, "binding")
	}
	return out
}

// BeforeWorldbookWrite reads worldbook id and refuses a stale write: ifVersion (g) guards its
// metadata and bindings, entryVersions (by entryId) the entries the ops update or delete; for a
// dry run it returns the change doc would make, else it keeps the worldbook as a revision.
func (r *Run) BeforeWorldbookWrite(ctx context.Context, id string, doc WorldbookDoc, entryVersions map[string]string, g Guard, textBudget int) (*Change, error) {
	cur, err := ReadWorldbook(ctx, r.Client, id, nil)
	if err != nil {
		return nil, err
	}
	if err := checkWorldbook(cur, id, g.IfVersion, entryVersions); err != nil {
		return nil, err
	}
	if g.DryRun {
		next, err := doc.apply(cur)
		if err != nil {
			return nil, err
		}
		c := WorldbookChange(id, cur, next, PlanLabels, textBudget)
		return &c, nil
	}
	return nil, r.Keep(ctx, revisions.KindWorldbook, id, doc.changes(), cur, "")
}

// checkWorldbook refuses a write based on versions of the worldbook's metadata or entries other
// than their own.
func checkWorldbook(cur WorldbookState, id, ifVersion string, entryVersions map[string]string) error {
	var fields []string
	now := cur.MetaVersion()
	if ifVersion != "" {
		changed, ok := changedParts(ifVersion, now, metaParts)
		if !ok {
			return badVersion("ifVersion", revisions.KindWorldbook, id)
		}
		fields = changed
	}
	var entries []map[string]any
	if len(entryVersions) > 0 {
		byID := make(map[string]map[string]json.RawMessage, len(cur.Entries))
		for _, e := range cur.Entries {
			byID[EntryID(e)] = e
		}
		for _, eid := range slices.Sorted(maps.Keys(entryVersions)) {
			v := entryVersions[eid]
			if !validEntryVersion(v) {
				return badVersion("entries[].ifVersion", "entry", eid)
			}
			e, ok := byID[eid]
			switch {
			case !ok:
				entries = append(entries, map[string]any{"entryId": eid, "change": "deleted"})
			case rawEntryVersion(e) != v:
				entries = append(entries, map[string]any{"entryId": eid, "change": "changed", "version": rawEntryVersion(e)})
			}
		}
	}
	if len(fields) > 0 || len(entries) > 0 {
		return stale(revisions.KindWorldbook, id, now, fields, entries)
	}
	return nil
}

// apply returns the worldbook cur as doc would leave it (created entries without ids).
func (doc WorldbookDoc) apply(cur WorldbookState) (WorldbookState, error) {
	var full struct {
		Entries []map[string]json.RawMessage `json:"entries"`
	}
	if err := json.Unmarshal(doc.body, &full); err != nil {
		return WorldbookState{}, fmt.Errorf("decode the entry ops: %w", err)
	}
	next := cur
	next.Tags = slices.Clone(cur.Tags)
	next.BoundRoleIDs = slices.Clone(cur.BoundRoleIDs)
	for k, v := range doc.Metadata {
		switch k {
		case "name":
			_ = json.Unmarshal(v, &next.Name) // the input schema holds each to its type
		case "description":
			_ = json.Unmarshal(v, &next.Description)
		case "tags":
			_ = json.Unmarshal(v, &next.Tags)
		}
	}
	if doc.Binding != nil && !slices.Contains(next.BoundRoleIDs, doc.Binding.RoleID) {
		next.BoundRoleIDs = append(next.BoundRoleIDs, doc.Binding.RoleID)
	}
	entries := make([]map[string]json.RawMessage, 0, len(cur.Entries))
	at := make(map[string]int, len(cur.Entries))
	for _, e := range cur.Entries {
		at[EntryID(e)] = len(entries)
		entries = append(entries, maps.Clone(e))
	}
	deleted := map[int]bool{}
	for _, op := range full.Entries {
		var kind string
		_ = json.Unmarshal(op["op"], &kind) // the input schema holds it to create, update or delete
		i, ok := at[EntryID(op)]
		switch {
		case kind == "create":
			e := map[string]json.RawMessage{}
			for _, f := range EntryFields {
				if v, ok := op[f]; ok {
					e[f] = v
				}
			}
			entries = append(entries, e)
		case kind == "update" && ok:
			for _, f := range EntryFields {
				if v, ok := op[f]; ok {
					entries[i][f] = v
				}
			}
		case kind == "delete" && ok:
			deleted[i] = true
		}
	}
	next.Entries = entries[:0:0]
	for i, e := range entries {
		if !deleted[i] {
			next.Entries = append(next.Entries, e)
		}
	}
	return next, nil
}

// BeforeTrialWrite reads trial card key and refuses a stale write; for a dry run it returns the
// change next (an upsertTrialCard body; nil: a delete) would make, else it keeps the trial as a
// revision and records next as what is about to be written.
func (r *Run) BeforeTrialWrite(ctx context.Context, key string, next json.RawMessage, changes []string, g Guard) (*Change, error) {
	now, err := ReadTrial(ctx, r.Client, key)
	if err != nil {
		return nil, err
	}
	if err := checkTrial(now, key, g.IfVersion); err != nil {
		return nil, err
	}
	if g.DryRun {
		return trialPlan(key, now, next)
	}
	return nil, r.KeepTrial(ctx, key, now, changes, next, "")
}

// checkTrial refuses a write based on a version of the trial card (nil: none live) other than
// its own.
func checkTrial(now *Trial, key, ifVersion string) error {
	if ifVersion == "" {
		return nil
	}
	v := TrialVersion(now)
	if ifVersion == Absent || now == nil {
		if ifVersion != v {
			return stale(revisions.KindTrial, key, v, []string{"the trial card itself (created or deleted)"}, nil)
		}
		return nil
	}
	return compare(revisions.KindTrial, key, ifVersion, v, trialParts)
}

// trialPlan is the change a trial write would make.
func trialPlan(key string, now *Trial, next json.RawMessage) (*Change, error) {
	if next == nil {
		c := newChange(revisions.KindTrial, key)
		if now != nil {
			c.Notes = []string{"The trial card would be deleted."}
		}
		c.settle()
		return &c, nil
	}
	var body struct {
		Card json.RawMessage `json:"card"`
	}
	if err := json.Unmarshal(next, &body); err != nil {
		return nil, fmt.Errorf("decode the trial card: %w", err)
	}
	digests, err := TrialDigests(body.Card)
	if err != nil {
		return nil, fmt.Errorf("decode the trial card: %w", err)
	}
	c := TrialChange(key, digestsOr(now), &Trial{Sections: digests}, "")
	if now == nil {
		c.Notes = append(c.Notes, "The trial card would be created.")
		c.settle()
	}
	return &c, nil
}

// BeforeImport keeps, for the tavern use case, the object it is about to write over: next is the
// upsertTrialCard body of a trial; for a worldbook, the import's own read of it when it made one
// (*upstream.Worldbook).
func (r *Run) BeforeImport(ctx context.Context, kind, id string, next any) error {
	switch kind {
	case revisions.KindCard:
		card, err := ReadCard(ctx, r.Client, id)
		if err != nil {
			return err
		}
		st := card.State(slices.Concat(OpeningFields, ProfileFields), SectionNames)
		return r.Keep(ctx, kind, id, []string{"opening lines", "profile", "sections"}, st, "")
	case revisions.KindWorldbook:
		wb, _ := next.(*upstream.Worldbook) // the import's own read, when it made one
		st, err := ReadWorldbook(ctx, r.Client, id, wb)
		if err != nil {
			return err
		}
		return r.Keep(ctx, kind, id, []string{"entries imported"}, st, "")
	case revisions.KindTrial:
		body, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("encode the trial card: %w", err)
		}
		now, err := ReadTrial(ctx, r.Client, id)
		if err != nil {
			return err
		}
		return r.KeepTrial(ctx, id, now, []string{"card", "worldbook entries"}, body, "")
	}
	return fmt.Errorf("revisions: unknown kind %q", kind)
}
