package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/page"
	"github.com/cardwriter/cardwriter-mcp/internal/phrase"
	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/tokens"
	"github.com/cardwriter/cardwriter-mcp/internal/undo"
)

// The error codes of the revisions toolset, under the names the tools' tests know.
const (
	codeRevisionNotFound = undo.CodeRevisionNotFound
	codeNotRestorable    = undo.CodeNotRestorable
	codeRevisionNotKept  = undo.CodeRevisionNotKept
	codeStaleWrite       = undo.CodeStaleWrite
)

// defaultRevisionLimit is list_revisions' page size when limit is left out.
const defaultRevisionLimit = 20

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
				"entries added, changed (old and new text) or deleted since: what restore_revision would undo.",
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
				"revision, whose revisionId undoes this restore. notRestored says what it could not put back.",
			// Destructive (it overwrites the current state); not idempotent (each call keeps a revision).
			Annotations: hints(false, true, false, true),
			Check:       "diff_revision",
			Handler:     restoreRevision,
			Revise:      reviseByUseCase,
			Guard:       true,
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

// loadRevision returns the revision the call names.
func loadRevision(ctx context.Context, c *Call) (*revisions.Revision, error) {
	var in struct {
		RevisionID string `json:"revisionId"`
	}
	if err := json.Unmarshal(c.Body, &in); err != nil {
		return nil, fmt.Errorf("decode the arguments: %w", err)
	}
	return c.revs.Load(ctx, in.RevisionID)
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
	all, err := c.revs.List(ctx, kind, id)
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

// diffRevision is diff_revision: the revision against the object now.
func diffRevision(ctx context.Context, c *Call) (json.RawMessage, error) {
	rev, err := loadRevision(ctx, c)
	if err != nil {
		return nil, err
	}
	ch, err := c.revs.Diff(ctx, rev, textBudget(c))
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		RevisionID string `json:"revisionId"`
		undo.Change
	}{rev.ID, ch})
}

// restoreRevision is restore_revision: it keeps the current state as a revision, then writes the
// revision's state back through the same operations the tools use. It asks nothing: the
// revision it keeps undoes it. With dryRun it shows the change and sends nothing.
func restoreRevision(ctx context.Context, c *Call) (json.RawMessage, error) {
	rev, err := loadRevision(ctx, c)
	if err != nil {
		return nil, err
	}
	g, err := c.guard()
	if err != nil {
		return nil, err
	}
	out, ch, err := c.revs.Restore(ctx, rev, g, textBudget(c))
	switch {
	case err != nil:
		return nil, err
	case ch != nil:
		return nil, &dryRun{change: ch, fill: restoreNothing(rev.ID, ch)}
	}
	return json.Marshal(out)
}
