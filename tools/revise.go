package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cardwriter/cardwriter-mcp/internal/phrase"
	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/undo"
)

// Revisions (issue 23): before a write that replaces or deletes an author's content goes out,
// the tool reads what it will replace and keeps it as a revision, under its Owner (owner.go);
// the write's result names it, and restore_revision (revisions.go) puts it back. A write whose
// revision could not be kept is not sent. The use case (snapshots, versions, diffs, restores)
// is package undo's; this file maps a call's arguments onto it.

// RevisionStore keeps the revisions of the writes (revisions.Store).
type RevisionStore = revisions.Store

// RevisionObserver, when the Observer also implements it, counts revisions kept, dropped and
// restored (internal/metrics).
type RevisionObserver interface {
	Revisions(event string, n int)
}

// newRun is the revisions use case of one call (undo.Run); its Store is nil when revisions are
// off.
func newRun(ctx context.Context, t *Tool, d *deps) *undo.Run {
	env := undo.Env{Client: d.client, Owner: d.owner, Tool: t.Name, Caller: clientName(ctx), Log: d.log}
	if d.revs != nil {
		env.Store = d.revs
	}
	if o, ok := d.observer.(RevisionObserver); ok {
		env.Observe = o.Revisions
	}
	if d.shadows != nil {
		env.Shadows = d.shadows
	}
	return undo.NewRun(env)
}

// keeping reports whether the call keeps revisions.
func (c *Call) keeping() bool { return c.revs != nil && c.revs.Store != nil }

// guard returns the call's ifVersion and dryRun arguments.
func (c *Call) guard() (undo.Guard, error) {
	if !c.Tool.Guard {
		return undo.Guard{}, nil
	}
	var g struct {
		IfVersion string `json:"ifVersion"`
		DryRun    bool   `json:"dryRun"`
	}
	src := c.Extra
	if c.Tool.Operation == "" {
		src = c.Body
	}
	if len(src) > 0 {
		if err := json.Unmarshal(src, &g); err != nil {
			return undo.Guard{}, fmt.Errorf("decode ifVersion and dryRun: %w", err)
		}
	}
	return undo.Guard{IfVersion: g.IfVersion, DryRun: g.DryRun}, nil
}

// dryRun is the "error" of a write that was a dry run: its change goes back as the result, and
// nothing is sent.
type dryRun struct {
	change *undo.Change
	fill   map[string]any // the write's own result fields, saying nothing was applied
}

func (d *dryRun) Error() string { return "a dry run: nothing was sent" }

// nothingApplied returns the fields of a write's own result that a dry run gives, saying that
// nothing was applied: the object's path parameters, ok false, no entries written
// (dryRunFields names them).
func (t *Tool) nothingApplied(params map[string]string) map[string]any {
	out := map[string]any{}
	for _, p := range t.op.Params {
		if v, ok := params[p.Name]; ok && p.In == "path" {
			out[p.Name] = v
		}
	}
	if t.op.Ack {
		out["ok"] = false
	}
	if t.Operation == "writeWorldbookDocument" {
		out["createdEntryIds"], out["updatedCount"], out["deletedCount"], out["bound"] = []any{}, 0, 0, false
	}
	return out
}

// restoreNothing is what restore_revision's dry run gives of its own result: nothing restored.
func restoreNothing(revisionID string, ch *undo.Change) map[string]any {
	return map[string]any{"revisionId": revisionID, "kind": ch.Kind, "objectId": ch.ObjectID, "restored": []any{}, "notRestored": []any{}}
}

// dryRunFields names the fields of the tool's own result its dry run gives (nothingApplied,
// restoreNothing): a result schema requiring no other needs no second form.
func (t *Tool) dryRunFields() []string {
	if t.Operation == "" {
		return slices.Collect(maps.Keys(restoreNothing("", &undo.Change{})))
	}
	params := map[string]string{}
	for _, p := range t.op.Params {
		params[p.Name] = "x"
	}
	return slices.Collect(maps.Keys(t.nothingApplied(params)))
}

// dryRunResult is the result of a dry run: the write's own result saying nothing was applied,
// dryRun true and the change (diff_revision's shape).
func dryRunResult(t *Tool, dry *dryRun) (*mcp.CallToolResult, error) {
	out := maps.Clone(dry.fill)
	if out == nil {
		out = map[string]any{}
	}
	out["dryRun"], out["change"] = true, dry.change
	data, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode the dry run: %w", err)
	}
	m, err := decodeObject(data)
	if err != nil {
		return nil, err
	}
	s := fmt.Sprintf("Dry run of %s: nothing was sent. %s", t.Name, changeSummary(m["change"].(map[string]any)))
	return successResult(s, m, data), nil
}

// changeSummary says in one sentence what a change (diff_revision's shape) holds.
func changeSummary(ch map[string]any) string {
	if boolean(ch, "same") {
		return fmt.Sprintf("%s %s would not change.", str(ch, "kind"), str(ch, "objectId"))
	}
	e := obj(ch, "entries")
	return fmt.Sprintf("%s %s: %s would change; entries %d added, %d changed, %d deleted.", str(ch, "kind"), str(ch, "objectId"),
		phrase.Count(int64(len(list(ch, "fields"))), "field", "fields"), len(list(e, "added")), len(list(e, "changed")), len(list(e, "deleted")))
}

// beforeWrite runs, once per call, the tool's Revise (the pre-read, the ifVersion check, the dry
// run and the revision); a handler calls it right before its first write (generic does). A dry
// run ends the call there: its error is a *dryRun.
func (c *Call) beforeWrite(ctx context.Context) error {
	if c.revs == nil || c.revised || c.Tool.Revise == nil {
		return nil
	}
	c.revised = true
	g, err := c.guard()
	if err != nil {
		return err
	}
	if !c.keeping() && g == (undo.Guard{}) {
		return nil // nothing to keep, check or show: no pre-read
	}
	ch, err := c.Tool.Revise(ctx, c, g)
	switch {
	case err != nil:
		return err
	case ch != nil:
		return &dryRun{change: ch, fill: c.Tool.nothingApplied(c.Params)}
	}
	return nil
}

// addRevision names, in a successful write's result, the revisions its call kept: the object
// revision in structuredContent, and a sentence after the summary.
func (c *Call) addRevision(out map[string]any, summary string) (string, json.RawMessage, error) {
	r := c.revs
	rev := map[string]any{"revisionId": r.Kept[0].ID}
	s := fmt.Sprintf(" Kept revision %s of what it replaced: restore_revision undoes it.", r.Kept[0].ID)
	if len(r.Kept) > 1 {
		var more []any
		var ids []string
		for _, k := range r.Kept[1:] {
			more = append(more, k.ID)
			ids = append(ids, k.ID+" ("+k.Kind+" "+k.ObjectID+")")
		}
		rev["alsoKept"] = more
		s += " Also kept " + strings.Join(ids, ", ") + "."
	}
	if r.Drops > 0 {
		rev["dropped"] = r.Drops
		s += fmt.Sprintf(" Retention dropped %s, the oldest.", phrase.Count(int64(r.Drops), "revision", "revisions"))
	}
	if len(r.Notes) > 0 {
		rev["notKept"] = strings.Join(r.Notes, " ")
		s += " " + strings.Join(r.Notes, " ")
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

// bodyObject returns the call's body object (its member at path, when given), undecoded.
func bodyObject(body json.RawMessage, path ...string) map[string]json.RawMessage {
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
	return m
}

// reviseCard returns the Revise of a card write: plan says which fields and sections the call
// replaces and the values it sends.
func reviseCard(plan func(c *Call) undo.CardWrite) HandlerRevise {
	return func(ctx context.Context, c *Call, g undo.Guard) (*undo.Change, error) {
		return c.revs.BeforeCardWrite(ctx, c.Params["roleId"], plan(c), g)
	}
}

var (
	reviseOpeningLines = reviseCard(func(c *Call) undo.CardWrite {
		body := bodyObject(c.Body)
		next := map[string]json.RawMessage{}
		for arg, field := range map[string]string{"roleWelcome": "roleWelcome", "alternates": "welcomeAlternates", "prologue": "prologue"} {
			if v, ok := body[arg]; ok {
				next[field] = v
			}
		}
		return undo.CardWrite{Fields: undo.OpeningFields, Next: next}
	})
	reviseProfile = reviseCard(func(c *Call) undo.CardWrite {
		body := bodyObject(c.Body)
		var fields []string
		for _, k := range slices.Sorted(maps.Keys(body)) {
			if slices.Contains(undo.ProfileFields, k) {
				fields = append(fields, k)
			}
		}
		return undo.CardWrite{Fields: fields, Next: body}
	})
	reviseDocument = reviseCard(func(c *Call) undo.CardWrite {
		secs := bodyObject(c.Body, "sections")
		next := make(map[string]json.RawMessage, len(secs))
		for s, v := range secs {
			next["sections."+s] = v
		}
		return undo.CardWrite{Sections: slices.Sorted(maps.Keys(secs)), Next: next}
	})
	reviseVisibility = reviseCard(func(c *Call) undo.CardWrite {
		return undo.CardWrite{Fields: []string{"roleVisibility"}, Next: map[string]json.RawMessage{"roleVisibility": bodyObject(c.Body)["visibility"]}}
	})
)

// reviseWorldbook is the Revise of write_worldbook_document: the whole worldbook as it was. The
// entry ops' ifVersion are taken out of the body sent.
func reviseWorldbook(ctx context.Context, c *Call, g undo.Guard) (*undo.Change, error) {
	doc, body, versions, err := undo.ParseWorldbookDoc(c.Body)
	if err != nil {
		return nil, err
	}
	c.Body = body
	return c.revs.BeforeWorldbookWrite(ctx, c.Params["worldbookId"], doc, versions, g, textBudget(c))
}

// textBudget is how many bytes of old and new text a diff shows: about half the result budget.
func textBudget(c *Call) int { return c.Budget * 2 }

// reviseUpsertTrial is the Revise of upsert_trial_card.
func reviseUpsertTrial(ctx context.Context, c *Call, g undo.Guard) (*undo.Change, error) {
	changes := []string{"card"}
	if _, ok := bodyObject(c.Body)["worldbook"]; ok {
		changes = append(changes, "worldbook entries")
	}
	return c.revs.BeforeTrialWrite(ctx, c.Params["clientKey"], c.Body, changes, g)
}

// reviseDeleteTrial is the Revise of delete_trial_card.
func reviseDeleteTrial(ctx context.Context, c *Call, g undo.Guard) (*undo.Change, error) {
	return c.revs.BeforeTrialWrite(ctx, c.Params["clientKey"], nil, []string{"deleted"}, g)
}

// reviseByUseCase is the Revise of the tavern imports and of restore_revision: the use case
// keeps its revisions itself (tavernsync.Env.Revise, undo.Run.Restore), right before it writes
// over an existing card, worldbook or trial card.
func reviseByUseCase(context.Context, *Call, undo.Guard) (*undo.Change, error) { return nil, nil }

// withMember returns the JSON object data with the string member key: v added first; data as
// it is when it is no object.
func withMember(data json.RawMessage, key, v string) json.RawMessage {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) < 2 || trimmed[0] != '{' {
		return data
	}
	rest := bytes.TrimLeft(trimmed[1:], " \t\r\n")
	member, _ := json.Marshal(v) // a string: cannot fail
	out := make([]byte, 0, len(data)+len(key)+len(member)+4)
	out = append(append(append(append(out, `{"`...), key...), `":`...), member...)
	if rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}
