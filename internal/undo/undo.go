// Package undo is the revision use case of cardwriter-mcp: before a write replaces or deletes an
// author's content it reads what the write replaces (a snapshot) and keeps it as a revision
// (package revisions); it gives every card, worldbook and trial card a version (a digest of that
// snapshot) so that a write based on an old read is refused before it is sent; it shows what a
// revision or a planned write changes (a diff), and it puts a revision back (a restore). The MCP
// mapping of it (arguments, results, text) is package tools'.
package undo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/tavernsync"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// Failure is an error the model can act on: the tools' own (tavernsync.Failure).
type Failure = tavernsync.Failure

// The error codes of this use case.
const (
	CodeRevisionNotKept   = "revision_not_kept"  // a write not sent because its revision could not be kept
	CodeRevisionNotFound  = "revision_not_found" // no such revision for this user
	CodeNotRestorable     = "not_restorable"     // the object is gone, or the revision holds too little
	CodeStaleWrite        = "stale_write"        // ifVersion names a state the object has left
	CodeRestoreIncomplete = "restore_incomplete" // a restore stopped part way; calling it again finishes it
)

// Env is what the use case runs with for one call.
type Env struct {
	Client *upstream.Client
	// Store keeps the revisions; nil when revisions are off (snapshots, versions, diffs of a
	// planned write still work).
	Store *revisions.Store
	// Owner says whose revisions the call's are; called only when Store is set.
	Owner  func(ctx context.Context) (revisions.User, error)
	Tool   string // the tool making the call, for the record
	Caller string // the MCP client, for the record ("" when unknown)
	Log    *slog.Logger
	// Observe, when set, counts revisions kept, dropped and restored.
	Observe func(event string, n int)
	// Shadows, when set, counts a user's trial shadows (quota.Ledger): a new one past the quota
	// refuses the write before anything is sent.
	Shadows ShadowLedger
}

// ShadowLedger counts what a user keeps under ids, against a quota (quota.Ledger).
type ShadowLedger interface {
	Reserve(ctx context.Context, user, id string, size int64, expires time.Time) (int64, error)
	Release(ctx context.Context, user, id string) error
}

// Run is one call's use of revisions: the Env and what the call kept.
type Run struct {
	Env
	Kept  []revisions.Entry // the revisions this call kept, in order
	Drops int               // older revisions the retention dropped meanwhile
	Notes []string          // what a revision could not hold
	// refused, when set, undoes what was kept for the write when the card service refuses it
	// (AfterWrite).
	refused func(ctx context.Context)
}

// NewRun starts a call's use of revisions.
func NewRun(env Env) *Run { return &Run{Env: env} }

func (r *Run) observe(event string, n int) {
	if r.Observe != nil && n > 0 {
		r.Observe(event, n)
	}
}

// Keep stores state as a revision of the object kind/id (nothing when revisions are off). A
// failure is the call's error: the write must not go out.
func (r *Run) Keep(ctx context.Context, kind, id string, changes []string, state any, restoreOf string) error {
	if r.Store == nil {
		return nil
	}
	data, err := encodeState(state)
	if err != nil {
		return fmt.Errorf("encode the revision: %w", err)
	}
	user, err := r.Owner(ctx)
	if err != nil {
		return err
	}
	rev := &revisions.Revision{Kind: kind, ObjectID: id, Tool: r.Tool, Client: r.Caller, Changes: changes, State: data, RestoreOf: restoreOf}
	dropped, err := r.Store.Keep(ctx, user, rev)
	if errors.Is(err, revisions.ErrTooLarge) {
		return &Failure{Code: CodeRevisionNotKept, Detail: map[string]any{"kind": kind, "id": id},
			Message: fmt.Sprintf("Nothing was written: %s %s as it is now is larger than all the revisions this server keeps for you "+
				"(--revisions-user-bytes), so no revision could undo this write. Retrying will not help: ask the operator to raise the "+
				"allowance, or export the %s first.", kind, id, kind)}
	}
	if err != nil {
		return r.storeFailed(ctx, err, kind, id, "a revision of "+kind+" "+id+" to undo this write")
	}
	r.Kept = append(r.Kept, revisions.Entry{ID: rev.ID, Kind: kind, ObjectID: id})
	r.Drops += len(dropped)
	r.observe("kept", 1)
	r.observe("dropped", len(dropped))
	return nil
}

// storeFailed is the Failure of a write not sent because this server could not save what, its
// own fault (a full disk, a store down), never the card service's; the log has the cause.
func (r *Run) storeFailed(ctx context.Context, err error, kind, id, what string) error {
	if r.Log != nil {
		r.Log.LogAttrs(ctx, slog.LevelError, "revision not kept: this server's store failed", slog.String("tool", r.Tool),
			slog.String("store", r.Store.Name()), slog.String("err", err.Error()))
	}
	return &Failure{Code: CodeRevisionNotKept, Retryable: true, Detail: map[string]any{"kind": kind, "id": id, "cause": StoreCause(err)},
		Message: fmt.Sprintf("Nothing was written: this server (cardwriter-mcp, not the card service) could not save %s: %s. "+
			"Try again once its operator has fixed it.", what, StoreCause(err))}
}

// StoreCause says in a few words why this server's store failed: the system's reason for a
// disk fault (no space left on device, read-only file system), else that the store is down.
func StoreCause(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	if store.IsUnavailable(err) {
		return "its store is unavailable"
	}
	return "its store failed"
}

// Load returns the user's revision id.
func (r *Run) Load(ctx context.Context, id string) (*revisions.Revision, error) {
	if r.Store == nil {
		return nil, Off()
	}
	user, err := r.Owner(ctx)
	if err != nil {
		return nil, err
	}
	rev, err := r.Store.Get(ctx, user, id)
	if errors.Is(err, revisions.ErrNotFound) {
		return nil, &Failure{Code: CodeRevisionNotFound, Detail: map[string]any{"revisionId": id},
			Message: fmt.Sprintf("You have no revision %s (never kept, or dropped by the retention); list_revisions lists yours.", id)}
	}
	return rev, err
}

// List returns the user's revisions of kind/id (all when both are "").
func (r *Run) List(ctx context.Context, kind, id string) ([]revisions.Entry, error) {
	if r.Store == nil {
		return nil, Off()
	}
	user, err := r.Owner(ctx)
	if err != nil {
		return nil, err
	}
	return r.Store.List(ctx, user, kind, id)
}

// Off is the failure of a revisions tool on a server that keeps none.
func Off() *Failure {
	return &Failure{Code: CodeNotRestorable, Message: "This server keeps no revisions (turned off with --revisions-per-object 0)."}
}
