package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cardwriter/cardwriter-mcp/internal/cpubudget"
	"github.com/cardwriter/cardwriter-mcp/internal/quota"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/tavernsync"
	"github.com/cardwriter/cardwriter-mcp/internal/undo"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

// Call is one tool call whose arguments passed the tool's input schema, split the way its
// operation takes them.
type Call struct {
	Tool   *Tool
	Params map[string]string // the operation's path and query parameters that were given
	Body   json.RawMessage   // the JSON body (every other argument); nil when the operation has none
	// Extra are the arguments tools.json's extensions add to the operation's (paging, search)
	// as a JSON object, kept by the server; nil when the tool has none.
	Extra json.RawMessage
	// Budget is the most cl100k tokens the result may hold (Options.ResultBudget, resolved).
	Budget   int
	Client   *upstream.Client
	Progress *Progress // never nil; a no-op when the client asked for no progress

	// What handlers doing more than one operation may need (the tavern toolset).
	Request    mcp.CallToolRequest // the request as received: its _meta and multi round-trip answers
	Aside      AsideStore          // never nil: where what the service cannot hold is kept
	LocalFiles *LocalFiles         // nil: arguments naming a local file are refused
	Log        *slog.Logger        // never nil; never log card text or tokens
	Exports    *exports            // never nil: the result budget, and where exports too large for it are kept
	// Content, when a handler sets it, follows the one-line summary in the result instead of
	// the result object as JSON: an exported file as text, an image.
	Content []mcp.Content
	// Meta, when a handler sets it, is the result's _meta (what the card preview shows).
	Meta map[string]any

	revs    *undo.Run          // the revisions use case; nil for a tool that neither writes over content nor reads revisions
	revised bool               // the tool's Revise ran
	match   *cpubudget.Limiter // the matching time budgets
	confirm *confirmer         // asks before what cannot be undone
	jobs    *tavernsync.Jobs   // the imports under way, by idempotency key
}

// matchBudget returns the call's budget of regular expression matching time, drawn from its
// user's and ended with ctx.
func (c *Call) matchBudget(ctx context.Context) *cpubudget.Call {
	return c.match.Call(ctx, c.Client.LimitKey(ctx))
}

// HandlerRevise runs before a call's write (Tool.Revise): it reads what the write will replace,
// refuses a write based on an older version (g.IfVersion), keeps a revision of it, or, for a dry
// run (g.DryRun), returns the change the write would make instead.
type HandlerRevise func(ctx context.Context, c *Call, g undo.Guard) (*undo.Change, error)

// needInput is the "error" of a handler that must ask the client for input first (multi
// round-trip requests, MCP 2026-07-28): its result goes back as is, and the client calls again
// with the answers in Request.Params.InputResponses.
type needInput struct{ result *mcp.CallToolResult }

func (n *needInput) Error() string { return "the tool asks the client for input first" }

// HandlerFunc runs a validated call and returns the result object (a JSON object that
// validates against the tool's output schema). Its errors are sorted by the handler wrapper:
// *upstream.Error and *upstream.ArgumentError and *Failure are the model's to act on; anything
// else is a failure of ours, logged and reported generically.
type HandlerFunc func(ctx context.Context, c *Call) (json.RawMessage, error)

// Failure is an error a handler reports to the model as a tool result with isError: an
// envelope {error: Code, message: Message, detail: Detail} like the card service's own. It is
// the tavern use case's (package tavernsync), whose failures are the tools' own.
type Failure = tavernsync.Failure

// Error codes this layer adds to the card service's own.
const (
	codeInvalidArguments = tavernsync.CodeInvalidArguments // the arguments fail the input schema
	codeValidationFailed = "validation_failed"             // publish_card: the card's validation report has errors
	codeUnavailable      = "unavailable"                   // the card service could not be reached or timed out
	codeInternal         = "internal"                      // a defect of ours; details only in the log
	codeCancelled        = "cancelled"                     // the client cancelled the call
	codeBudgetExceeded   = "budget_exceeded"               // the call spent a CPU budget of this server's
	codeQuotaExceeded    = "quota_exceeded"                // what the call would keep passes the user's quota
)

// generic is the handler of every tool without its own: one call of the tool's operation.
func generic(ctx context.Context, c *Call) (json.RawMessage, error) {
	var out json.RawMessage
	if err := c.beforeWrite(ctx); err != nil {
		return nil, err
	}
	var body any // stays a nil interface when the operation has no body
	if c.Body != nil {
		body = upstream.CompactJSON(c.Body) // prepare made it: valid and compact
	}
	err := c.Client.Call(ctx, c.Tool.Operation, c.Params, body, &out)
	c.afterWrite(ctx, err)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// firstProblems cuts every list of the card service's error detail (problems, per-op errors)
// to its first maxProblems items, and says in detail.more how many it left out.
func firstProblems(env map[string]any) map[string]any {
	detail, _ := env["detail"].(map[string]any)
	detail = maps.Clone(detail) // the error's own map stays whole
	more := 0
	for k, v := range detail {
		if l, ok := v.([]any); ok && len(l) > maxProblems {
			more += len(l) - maxProblems
			detail[k] = l[:maxProblems]
		}
	}
	if more > 0 {
		detail["more"] = more
		env["detail"] = detail
	}
	return env
}

// invalidArguments is the Failure for arguments that fail the input schema: the message names
// every failing location and why, so that the model can correct its call.
func invalidArguments(problems []schema.Problem) *Failure {
	parts := make([]string, len(problems))
	list := make([]any, 0, min(len(problems), maxProblems))
	for i, p := range problems {
		parts[i] = p.String()
		if i < maxProblems {
			list = append(list, map[string]any{"instanceLocation": p.InstanceLocation, "message": p.Message})
		}
	}
	detail := map[string]any{"problems": list}
	if len(problems) > maxProblems {
		detail["more"] = len(problems) - maxProblems
	}
	return &Failure{
		Code:    codeInvalidArguments,
		Message: "Invalid arguments: " + firstOf(parts, "; "),
		Detail:  detail,
	}
}

// prepare validates the raw arguments and splits them into the operation's parameters and body.
func (t *Tool) prepare(raw json.RawMessage) (params map[string]string, body, extra json.RawMessage, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage(`{}`)
	}
	inst, err := schema.DecodeArguments(raw)
	if err != nil {
		var ve *schema.ValidationError
		if errors.As(err, &ve) {
			return nil, nil, nil, invalidArguments(ve.Problems)
		}
		return nil, nil, nil, invalidArguments([]schema.Problem{{InstanceLocation: "/", Message: err.Error()}})
	}
	if raw, err = t.dropHostArguments(raw, inst); err != nil {
		return nil, nil, nil, err
	}
	if err := t.input.Validate(inst); err != nil {
		var ve *schema.ValidationError
		if errors.As(err, &ve) {
			return nil, nil, nil, invalidArguments(ve.Problems)
		}
		return nil, nil, nil, fmt.Errorf("validate the arguments of %s: %w", t.Name, err)
	}
	if t.Operation == "" {
		// A tool that is no single operation takes its arguments whole.
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, nil, nil, fmt.Errorf("compact the arguments of %s: %w", t.Name, err)
		}
		return map[string]string{}, buf.Bytes(), nil, nil
	}
	fields, err := splitObject(raw)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("split the arguments of %s: %w", t.Name, err)
	}
	if len(t.extra) > 0 {
		var kept members
		for _, k := range t.extra {
			if v, ok := fields.take(k); ok {
				kept = append(kept, member{key: k, plain: true, value: v})
			}
		}
		if extra, err = kept.encode(0); err != nil {
			return nil, nil, nil, fmt.Errorf("encode the extension arguments of %s: %w", t.Name, err)
		}
	}
	params = map[string]string{}
	for _, p := range t.op.Params {
		v, ok := fields.take(p.Name)
		if !ok {
			continue
		}
		s, err := jsonString(v)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("parameter %s of %s is not a string: %w", p.Name, t.Name, err)
		}
		if p.In == "path" {
			// Refuse, before any request (a custom handler may send others first), an id
			// that would change the path.
			if _, err := upstream.PathSegment(s); err != nil {
				var argErr *upstream.ArgumentError
				if errors.As(err, &argErr) {
					argErr.Param = p.Name
				}
				return nil, nil, nil, err
			}
		}
		params[p.Name] = s
	}
	if t.op.Body == nil {
		if len(fields) > 0 {
			return nil, nil, nil, fmt.Errorf("%s: arguments %v belong to no parameter", t.Name, fields.keys())
		}
		return params, nil, extra, nil
	}
	// Sorted keys; the values as the client sent them (compacted, <>& left unescaped).
	body, err = fields.encode(len(raw))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("encode the body of %s: %w", t.Name, err)
	}
	return params, body, extra, nil
}

// dropHostArguments removes from the decoded arguments inst, and from raw, the host additions
// the tool does not declare (see hostArguments), returning raw without them.
func (t *Tool) dropHostArguments(raw json.RawMessage, inst any) (json.RawMessage, error) {
	args, ok := inst.(map[string]any)
	if !ok {
		return raw, nil
	}
	var drop []string
	for _, name := range t.dropped {
		if _, ok := args[name]; ok {
			drop = append(drop, name)
			delete(args, name)
		}
	}
	if len(drop) == 0 {
		return raw, nil
	}
	fields, err := splitObject(raw)
	if err != nil {
		return nil, fmt.Errorf("split the arguments of %s: %w", t.Name, err)
	}
	for _, name := range drop {
		fields.take(name)
	}
	out, err := fields.encode(len(raw))
	if err != nil {
		return nil, fmt.Errorf("encode the arguments of %s: %w", t.Name, err)
	}
	return out, nil
}

// rawArguments returns the call's arguments as JSON, as they came over the wire when known.
func rawArguments(req mcp.CallToolRequest) (json.RawMessage, error) {
	if len(req.Params.RawArguments) > 0 {
		return req.Params.RawArguments, nil
	}
	if req.Params.Arguments == nil {
		return nil, nil
	}
	return json.Marshal(req.Params.Arguments)
}

// decodeObject decodes a result object, keeping numbers exact.
func decodeObject(data json.RawMessage) (map[string]any, error) {
	v, err := schema.DecodeJSON(data)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("the result is not a JSON object")
	}
	return m, nil
}

// successResult is a tool result: structuredContent is the result object as is; the text is the
// tool's one-line summary, followed by the object as JSON for clients that pass only text on
// to the model (the MCP spec asks for the serialized structured content in a text block).
//
// The compacted object is also the wire form of structuredContent (RawStructuredContent), so
// that encoding the response copies it instead of encoding the decoded map again.
func successResult(summary string, out map[string]any, raw json.RawMessage) *mcp.CallToolResult {
	compact := compactBytes(raw)
	return &mcp.CallToolResult{
		Content:              []mcp.Content{mcp.NewTextContent(summary), mcp.NewTextContent(string(compact))},
		StructuredContent:    out,
		RawStructuredContent: compact,
	}
}

// errorResult is a tool result with isError: a first text block with the envelope's message
// (written to be shown verbatim), a second with the rest of the envelope as JSON ({error,
// retryable, detail?}: the message is not repeated, since hosts show the model both blocks,
// and Gemini CLI quotes them once more inside its own error line), and no structuredContent.
// The MCP spec asks structured results to conform to the tool's output schema, and the
// official TypeScript SDK client validates any structuredContent it gets, error or not,
// throwing -32602 when it does not match: an envelope there would hide the message from the
// model in most hosts.
func errorResult(env map[string]any) *mcp.CallToolResult {
	msg, _ := env["message"].(string)
	rest := make(map[string]any, len(env))
	for k, v := range env {
		if k != "message" {
			rest[k] = v
		}
	}
	data, err := json.Marshal(rest)
	if err != nil {
		// An envelope is strings, booleans and decoded JSON: this cannot fail, but never
		// answer without the code.
		data = []byte(`{"error":"internal","retryable":false}`)
	}
	return &mcp.CallToolResult{
		Content: []mcp.Content{mcp.NewTextContent(msg), mcp.NewTextContent(string(data))},
		IsError: true,
	}
}

// ErrorEnvelope returns the error envelope {error, message, retryable, detail?} of a result
// with isError: its second text block with the first's message; ok is false for any other
// result.
func ErrorEnvelope(res *mcp.CallToolResult) (env map[string]any, ok bool) {
	if res == nil || !res.IsError || len(res.Content) < 2 {
		return nil, false
	}
	msg, isText := res.Content[0].(mcp.TextContent)
	tc, isText2 := res.Content[1].(mcp.TextContent)
	if !isText || !isText2 {
		return nil, false
	}
	env, err := decodeObject(json.RawMessage(tc.Text))
	if err != nil {
		return nil, false
	}
	env["message"] = msg.Text
	return env, true
}

// compactBytes returns the JSON raw without insignificant whitespace, as json.Compact does
// (FuzzCompactBytes). Answers usually come compact but for a final newline: those are returned
// trimmed, not copied.
func compactBytes(raw json.RawMessage) json.RawMessage {
	if trimmed := bytes.TrimSpace(raw); isCompact(trimmed) {
		return trimmed
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}

// isCompact reports whether data has no whitespace outside its strings (for JSON, nothing
// json.Compact would remove).
func isCompact(data []byte) bool {
	inString := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case inString && c == '\\':
			i++ // the escaped character
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

// outcome classifies a handler error. It returns the envelope to answer with and the code to
// log; internal reports whether the error is a defect of ours (or of the service's answer)
// rather than something the caller can act on.
//
// The two channels (style.md): everything a model can act on, including "the service is down,
// try later", is a tool result with isError, so that it can correct its call or tell the user.
// A JSON-RPC error is left for protocol faults (unknown tool, malformed request), which mcp-go
// answers itself. A defect also becomes an isError result, with a generic message: its details
// (never a token: upstream errors carry none) go to the log only.
func outcome(ctx context.Context, err error) (env map[string]any, code string, internal bool) {
	var f *Failure
	var apiErr *upstream.Error
	var argErr *upstream.ArgumentError
	var qe *quota.ExceededError
	switch {
	case errors.As(err, &f):
		return f.Envelope(), f.Code, false
	case errors.As(err, &qe):
		f := quotaFailure(qe)
		return f.Envelope(), f.Code, false
	case errors.As(err, &apiErr):
		return firstProblems(apiErr.Envelope()), apiErr.Code, false
	case errors.As(err, &argErr):
		name := argErr.Param
		if name == "" {
			name = "argument"
		}
		f := invalidArguments([]schema.Problem{{InstanceLocation: "/" + name, Message: argErr.Reason}})
		return f.Envelope(), f.Code, false
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		f := &Failure{Code: codeCancelled, Message: "The call was cancelled before the card service answered."}
		return f.Envelope(), f.Code, false
	case store.IsUnavailable(err) || localFault(err):
		// Redis down, failing over, a write no replica confirmed, a full disk: nothing was kept.
		f := &Failure{Code: codeUnavailable, Retryable: true, Detail: map[string]any{"cause": undo.StoreCause(err)},
			Message: "This server (cardwriter-mcp, not the card service) could not save what it keeps beside the card service: " +
				undo.StoreCause(err) + ". Try again once its operator has fixed it."}
		return f.Envelope(), f.Code, false
	case unreachable(err):
		f := &Failure{Code: codeUnavailable, Retryable: true,
			Message: "The card service could not be reached or did not answer in time; try again in a moment."}
		return f.Envelope(), f.Code, false
	}
	f = &Failure{Code: codeInternal,
		Message: "cardwriter-mcp could not complete the call because of an internal error (details are in its log); your arguments were not the cause."}
	return f.Envelope(), f.Code, true
}

// localFault reports a failure of this server's own files (a full disk, a read-only folder),
// which must not read as the card service's.
func localFault(err error) bool {
	var pathErr *fs.PathError
	var opErr *net.OpError
	return errors.As(err, &pathErr) && !errors.As(err, &opErr)
}

// unreachable reports a transport failure that outlived the client's retries: no connection,
// a broken one, or no answer before the deadline.
func unreachable(err error) bool {
	var netErr net.Error
	var opErr *net.OpError
	var dnsErr *net.DNSError
	return errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &opErr) || errors.As(err, &dnsErr) || errors.As(err, &netErr) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// budgetFailure is the Failure of a call that spent a CPU budget (a *cpubudget.ExceededError):
// retryable, naming the budget and its flag; any other error (the call ended) is returned as is.
func budgetFailure(err error) error {
	var ex *cpubudget.ExceededError
	if !errors.As(err, &ex) {
		return err
	}
	detail := map[string]any{"budget": ex.Budget, "limit": ex.Limit.String(), "flag": ex.Flag}
	msg := fmt.Sprintf("This call used up the server's %s budget of regular expression matching time (%s, set by %s): "+
		"a /regex/ key takes too long on this text. Simplify the slow keys (nested repeats such as (a+)+ backtrack without end) or test fewer entries at once.",
		ex.Budget, ex.Limit, ex.Flag)
	if ex.RetryAfter > 0 {
		detail["retryAfterSeconds"] = int(ex.RetryAfter.Seconds())
		msg += fmt.Sprintf(" Your budget refills over a minute: try again in %s.", ex.RetryAfter)
	}
	return &Failure{Code: codeBudgetExceeded, Retryable: true, Message: msg, Detail: detail}
}

// quotaFailure is the Failure of what would pass a user's quota, naming the quota, its flag and
// how to free space.
func quotaFailure(ex *quota.ExceededError) *Failure {
	detail := map[string]any{"quota": ex.Kind, "limit": ex.Limit, "used": ex.Used, "needed": ex.Want, "unit": ex.Unit, "flag": ex.Flag}
	if !ex.FreesAt.IsZero() {
		detail["freesAt"] = ex.FreesAt.UTC().Format(time.RFC3339)
	}
	return &Failure{Code: codeQuotaExceeded, Message: ex.Error(), Detail: detail}
}
