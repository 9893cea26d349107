// Package tavernsync is the tavern import and export use case: it reads character card and
// lorebook files (package tavern) from a source, splits them into the card service's operations
// (package upstream), keeps aside what the service cannot hold (package aside) and finishes a
// half-done import when it is run again; and it writes cards and worldbooks back as files, with
// what was kept aside restored. The tavern tools of package tools are thin handlers over it.
package tavernsync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// Env is what an import or export runs with: the card service, the kept-aside store, the local
// files it may read, and where its progress, log lines and errors go.
type Env struct {
	Client *upstream.Client
	Aside  AsideStore // never nil: where what the service cannot hold is kept
	// LocalFiles lets source.path name a file on this machine; nil refuses it.
	LocalFiles *LocalFiles
	// Roots returns the URIs of the roots the client declared, asked for only when a source.path
	// lies outside LocalFiles.AllowDirs; its error is returned as it is. Nil counts as no roots.
	Roots    func(ctx context.Context) ([]string, error)
	Progress Progress     // never nil
	Log      *slog.Logger // never nil; never log card text or tokens
	// Outcome classifies a failed step's error as the caller reports it: the error envelope, its
	// code, and whether it is a defect of ours (logged) rather than the caller's to act on. Nil
	// takes a Failure's and the card service's envelopes as they are, and anything else as internal.
	Outcome func(ctx context.Context, err error) (env map[string]any, code string, internal bool)
	// Revise, when set, is called right before an import first writes over something that
	// exists (kind "card" by roleId; "worldbook" by worldbookId, with the *upstream.Worldbook the
	// import has just read as next, or nil; "trial" by clientKey, with the upsertTrialCard body it
	// will send as next), to keep it as a revision; its error stops the import before that write.
	Revise func(ctx context.Context, kind, id string, next any) error
	// Jobs runs the imports under their idempotency keys; nil runs each attached to its request.
	Jobs *Jobs
}

// revise calls Revise when it is set.
func (c Env) revise(ctx context.Context, kind, id string, next any) error {
	if c.Revise == nil {
		return nil
	}
	return c.Revise(ctx, kind, id, next)
}

// outcome classifies err with Outcome, or as Outcome's doc says when it is nil.
func (c Env) outcome(ctx context.Context, err error) (env map[string]any, code string, internal bool) {
	if c.Outcome != nil {
		return c.Outcome(ctx, err)
	}
	var f *Failure
	var apiErr *upstream.Error
	switch {
	case errors.As(err, &f):
		return f.Envelope(), f.Code, false
	case errors.As(err, &apiErr):
		return apiErr.Envelope(), apiErr.Code, false
	}
	f = &Failure{Code: "internal", Message: "cardwriter-mcp could not complete the call because of an internal error (details are in its log)."}
	return f.Envelope(), f.Code, true
}

// Progress receives an import's or export's steps: done of total are complete, with a short
// message (never card text).
type Progress interface {
	Report(ctx context.Context, done, total int, message string)
}

// Failure is an error reported to the model as a tool result with isError: an envelope
// {error: Code, message: Message, detail: Detail} like the card service's own.
type Failure struct {
	Code      string
	Message   string // one sentence fit to show verbatim
	Retryable bool
	Detail    map[string]any
}

// Error returns the code and the message.
func (f *Failure) Error() string { return f.Code + ": " + f.Message }

// Envelope returns the failure as the error envelope {error, message, retryable, detail?}.
func (f *Failure) Envelope() map[string]any {
	env := map[string]any{"error": f.Code, "message": f.Message, "retryable": f.Retryable}
	if f.Detail != nil {
		env["detail"] = f.Detail
	}
	return env
}

// Error codes of the failures this package returns (upstream errors pass through unchanged).
const (
	CodeInvalidArguments = "invalid_arguments" // the arguments are wrong (a source that is not exactly one of its forms, ...)
	CodeInvalidFile      = "invalid_file"      // the source is no card or lorebook this server can read
	CodePathNotAllowed   = "path_not_allowed"  // a source.path the server may not read, or a path it may not write
	CodeFileExists       = "file_exists"       // an export's path names a file that exists, and overwrite was not set
	CodeConflict         = "conflict"          // a trial card of that clientKey holds another file's import
)

// steps reports a tool's progress as each of its steps starts, and remembers what it is doing
// for the error of a failed step. A report is never the last act before returning: over
// streamable HTTP a notification still queued when the response is written can be lost, and
// the response itself says the work is done.
type steps struct {
	p           Progress
	done, total int
	doing       string
}

// start reports that the next step begins (done of total steps are complete).
func (s *steps) start(ctx context.Context, step string) {
	s.doing = step
	s.p.Report(ctx, s.done, s.total, fmt.Sprintf("Step %d of %d: %s.", min(s.done+1, s.total), s.total, step))
}

// end counts the step started last as done.
func (s *steps) end() { s.done++ }

// skip counts a step there was nothing to do for (an earlier run did it).
func (s *steps) skip() { s.done++ }

// aside names the bookkeeping between steps, for the error should it fail.
func (s *steps) aside() { s.doing = "keep aside what the card service cannot hold" }
