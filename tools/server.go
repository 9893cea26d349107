package tools

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/cardwriter/cardwriter-mcp/internal/cpubudget"
	"github.com/cardwriter/cardwriter-mcp/internal/quota"
	"log/slog"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/trace"

	"github.com/cardwriter/cardwriter-mcp/internal/aside"
	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/tavernsync"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// Observer is told what the server does, for metrics; its methods must be fast and safe for
// concurrent use.
type Observer interface {
	// ToolCall reports a finished call: its tool, its outcome ("ok" or an error code) and duration.
	ToolCall(tool, outcome string, d time.Duration)
	// Sessions reports MCP sessions starting (+1) and ending (-1).
	Sessions(delta int)
	// StoreError reports a failure of the kept-aside store.
	StoreError()
}

// ServerName is the name the MCP server gives in its initialize answer.
const ServerName = "cardwriter-mcp"

// Options configures NewServer.
type Options struct {
	Filter  Filter       // which tools to serve; the zero value serves all
	Logger  *slog.Logger // per-call log lines (tool, duration, outcome); nil discards
	Version string       // the server version in the initialize answer; "" is "dev"
	// Instructions replaces the default server instructions (a short guide to the workflow)
	// when not empty.
	Instructions string
	// Aside keeps what the card service cannot hold of imported tavern files (extension data,
	// lorebook fields), keyed by service, user and card or worldbook, so that an export restores
	// it; nil keeps it in memory for the life of the server.
	Aside AsideStore
	// LocalFiles lets the tavern import tools read files named by source.path (stdio: the user's
	// own machine); nil refuses source.path (HTTP).
	LocalFiles *LocalFiles
	// Notifier, when set, writes the calls' progress and log notifications to the client at
	// once, in order with the responses, and each response waits for its Settle (stdio); nil
	// queues them with mcp-go.
	Notifier Notifier
	// Calls, when set, counts the calls under way (see Calls.Wait).
	Calls *Calls
	// Observer, when set, is told of every call and session, for metrics.
	Observer Observer
	// Tracer, when set, traces every tool call as a server span, the child of the trace
	// context the request's _meta carries.
	Tracer trace.TracerProvider
	// Audit, when set, gets one line per call of a write tool: who (a digest of the card
	// service token, the session, the client), the tool, the ids it acted on, the outcome and
	// the duration; never content or a token.
	Audit *slog.Logger
	// Dynamic starts the server with the cards toolset and list_toolsets and enable_toolset,
	// by which the model loads the other toolsets (of those Filter selects) when it needs them;
	// the server declares tools.listChanged and tells the client of each change.
	Dynamic bool
	// Revisions keeps, before every write that replaces or deletes an author's content, what
	// it replaces, for list_revisions, diff_revision and restore_revision; nil keeps them in
	// memory for the life of the server. A retention keeping none turns revisions off (and
	// the revisions toolset is not served).
	Revisions *RevisionStore
	// Owner says whose each call's revisions and exports are; nil is RequestOwner (the
	// request's authorization, else its token). A stdio server sets LocalOwner.
	Owner Owner
	// Exports keeps the exports too large for a result, for resources/read (Redis shared by
	// replicas, or the embedded store); nil keeps them in memory.
	Exports store.KV
	// Confirm is how the author is asked before what cannot be undone (--confirm); "" is
	// DefaultConfirmPolicy.
	Confirm ConfirmPolicy
	// SigningKey signs confirmation tokens, request states and download URLs; nil uses a key
	// kept in State (made by the first replica that needs one).
	SigningKey []byte
	// State keeps what replicas must agree on besides exports: the signing key and the spent
	// confirmation tokens; nil keeps it in Exports, or in memory when that is nil too.
	State store.KV
	// PublicURL (HTTP) is the origin the server's users reach it at: large exports then carry a
	// download URL under it (served by DownloadHandler); "" gives none.
	PublicURL string
	// ExportTTL is how long such an export stays readable; 0 is DefaultExportTTL.
	ExportTTL time.Duration
	// ExportUserBytes bounds one user's live exports together, in bytes (0: DefaultExportUserBytes;
	// negative: no limit).
	ExportUserBytes int64
	// TrialShadowsPerUser bounds the trial cards whose text one user's writes left kept (for
	// revisions) at once (0: DefaultTrialShadows; negative: no limit).
	TrialShadowsPerUser int
	// now is the clock of export expiry (tests); nil is time.Now.
	now func() time.Time
	// Extensions are extensions the server declares besides MCP Apps (HTTP: the Tasks
	// extension, which its HTTP layer serves), by identifier.
	Extensions map[string]any
	// Hooks, when set, are the server's hooks, to which NewServer adds its own (HTTP: the
	// shared session state records what sessions negotiate).
	Hooks *server.Hooks
	// ResultBudget is the most cl100k tokens a tool result's text, or its structuredContent,
	// may hold (pages are cut to fit it; a larger answer becomes an error saying how to ask for
	// less); 0 is DefaultResultBudget. Every result also stays within MaxResultChars.
	ResultBudget int
	// MatchBudget bounds the time regular expression matches (worldbook /regex/ keys) take, per
	// call and per user; nil is cpubudget's defaults.
	MatchBudget *cpubudget.Limiter
}

// NewServer returns the MCP server of the tools Filter selects, calling the card service through
// client, with the card, worldbook and trial resources, the authoring prompts whose tools are
// all served, and logging notifications.
func NewServer(client *upstream.Client, opts Options) (*server.MCPServer, error) {
	if client == nil {
		return nil, errors.New("tools: NewServer needs an upstream client")
	}
	selected, err := opts.Filter.Apply(All())
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	instructions := opts.Instructions
	if instructions == "" {
		instructions = defaultInstructions
		if opts.Revisions == nil || opts.Revisions.Retention().Enabled() {
			instructions += " " + revisionsInstruction
		}
		instructions += " " + versionsInstruction
		if opts.Dynamic {
			instructions += " Only the cards toolset is loaded at first: call list_toolsets, then enable_toolset with the toolset the task needs (authoring, worldbook, trial, tavern, revisions)."
		} else if len(selected) < len(All()) {
			instructions += " This server serves only some of these tools (see tools/list); the others are not available here."
		}
	}
	hooks := opts.Hooks
	if hooks == nil {
		hooks = &server.Hooks{}
	}
	if opts.Tracer != nil {
		traceRequests(opts.Tracer.Tracer("github.com/cardwriter/cardwriter-mcp/tools"), hooks)
	}
	if o := opts.Observer; o != nil {
		hooks.AddOnRegisterSession(func(context.Context, server.ClientSession) { o.Sessions(1) })
		hooks.AddOnUnregisterSession(func(context.Context, server.ClientSession) { o.Sessions(-1) })
	}
	cachePreviewRead(hooks)
	srv := server.NewMCPServer(ServerName, version, append([]server.ServerOption{
		server.WithHooks(hooks),
		server.WithToolCapabilities(opts.Dynamic),
		server.WithResourceCapabilities(false, false),
		server.WithPromptCapabilities(false),
		server.WithLogging(),
		server.WithRecovery(),
		server.WithResourceRecovery(),
		server.WithInstructions(instructions),
		server.WithExtensions(extensions(opts.Extensions)),
		server.WithToolFilter(appsToolFilter),
	}, append(cacheOptions(opts.Dynamic), completionOptions(client)...)...)...)
	d := &deps{budget: opts.resultBudget(), client: client, log: log, aside: opts.Aside, jobs: tavernsync.NewJobs(), files: opts.LocalFiles, notes: newNotifier(opts.Notifier), calls: opts.Calls, audit: opts.Audit, observer: opts.Observer}
	if opts.Tracer != nil {
		d.tracer = opts.Tracer.Tracer("github.com/cardwriter/cardwriter-mcp/tools")
	}
	if d.aside == nil {
		d.aside = aside.NewMemory()
	}
	d.revs = opts.Revisions
	if d.revs == nil {
		d.revs = revisions.New(store.NewMemory(), revisions.DefaultRetention())
	}
	if !d.revs.Retention().Enabled() {
		d.revs = nil
		selected = slices.DeleteFunc(selected, func(t Tool) bool { return t.Toolset == ToolsetRevisions })
	}
	if opts.Observer != nil {
		d.aside = observedAside{d.aside, opts.Observer}
	}
	d.owner = opts.Owner
	if d.owner == nil {
		d.owner = RequestOwner(client)
	}
	state := opts.stateStore()
	keys := newSigner(opts.SigningKey, state)
	d.exports = newExports(opts, client, d.owner, log, keys)
	d.confirm = newConfirmer(opts, state, keys)
	d.shadows = newShadowLedger(opts, d.exports)
	if qo, ok := opts.Observer.(interface {
		Quota(kind string, used int64, refused bool)
	}); ok {
		d.exports.quota.SetObserver(qo.Quota)
		d.shadows.SetObserver(qo.Quota)
	}
	d.match = opts.MatchBudget
	if d.match == nil {
		d.match = cpubudget.New(0, 0)
	}
	if opts.Dynamic {
		dt := &dynamicToolsets{srv: srv, selected: selected, d: d}
		if err := dt.start(); err != nil {
			return nil, err
		}
	} else {
		st := make([]server.ServerTool, 0, len(selected))
		for i := range selected {
			t := &selected[i]
			st = append(st, server.ServerTool{Tool: t.MCPTool(), Handler: toolHandler(t, d)})
		}
		srv.AddTools(st...)
	}
	addResources(srv, hooks, client, log)
	addExportResources(srv, hooks, d.exports)
	addPreview(srv)
	addPrompts(srv, selected)
	return srv, nil
}

const defaultInstructions = "cardwriter-mcp authors role-play cards on the card service. " +
	"A card is made with create_card, then filled with set_opening_lines (the character's first message, alternates, " +
	"and prologue lines, which are suggestions for the player to say), write_card_document (long text sections) and " +
	"update_card_profile; validate_card reports what is missing, and publish_card submits it for review only when the " +
	"user asks. Worldbooks hold keyword-triggered lore: create_worldbook, then write_worldbook_document to add entries " +
	"and bind it to a card. Trial cards (upsert_trial_card) are temporary cards for trying an idea; list_trial_cards " +
	"reports how many the service allows at once and how long they live. " +
	"Character cards and lorebooks from other apps (Character Card V1/V2/V3 as JSON, PNG or CHARX; SillyTavern World Info) " +
	"come in with import_tavern_card and import_tavern_worldbook and go out with export_tavern_card; " +
	"test_worldbook_triggers shows which worldbook entries a passage or chat would fire, as SillyTavern activates them; " +
	"preview_prompt, the whole prompt SillyTavern builds around them and what its budget cuts. " +
	"A result with isError carries a message to act on; invalid arguments name every failing field. " +
	"The prompts author_card, build_worldbook and try_card_as_trial walk through these workflows."

// revisionsInstruction tells the model that writes can be undone (when revisions are kept).
const revisionsInstruction = "Every write that replaces or deletes content first keeps a revision: restore_revision undoes it."

// versionsInstruction says, once for every write, what ifVersion and dryRun do (their schemas do
// not: tools/list's token budget).
const versionsInstruction = "Reads give a version (each worldbook entry its own): a write's ifVersion refuses it (stale_write) if that changed since; dryRun: true shows the change and sends nothing."

// deps is what every tool handler is given besides its call.
type deps struct {
	budget   int // the result budget, in tokens
	notes    notifier
	calls    *Calls
	audit    *slog.Logger
	observer Observer
	tracer   trace.Tracer
	client   *upstream.Client
	log      *slog.Logger
	aside    AsideStore
	jobs     *tavernsync.Jobs
	files    *LocalFiles
	revs     *RevisionStore // nil: revisions are off
	owner    Owner          // whose revisions and exports a call's are
	exports  *exports
	match    *cpubudget.Limiter
	shadows  *quota.Ledger // trial shadows per user (shadows.go)
	confirm  *confirmer
}

// toolHandler wraps a tool: validate and split the arguments, run the tool's handler, turn the
// outcome into a tool result, and log the call (server log and client log notifications).
func toolHandler(t *Tool, d *deps) server.ToolHandlerFunc {
	handle := t.Handler
	if handle == nil {
		handle = generic
	}
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if d.calls != nil {
			d.calls.begin()
			defer d.calls.end()
		}
		start := time.Now()
		ctx, span := startCallSpan(ctx, d.tracer, t, req)
		d.notes.log(ctx, mcp.LoggingLevelDebug, map[string]any{"tool": t.Name, "event": "started"})
		res, code, err := runTool(ctx, t, d, handle, req)
		if code != codeInputRequired {
			fitted, over, ferr := fitBudget(t, res, d.budget)
			switch {
			case ferr != nil && err == nil:
				err = ferr // logged; the result goes out as it is
			case ferr == nil:
				res = fitted
				if over != "" {
					code = over
				}
			}
		}
		endCallSpan(span, code)
		dur := time.Since(start)
		logCall(ctx, d.log, t.Name, dur, code, err)
		audit(ctx, d.audit, d, t, req, res, code, dur)
		if d.observer != nil {
			d.observer.ToolCall(t.Name, code, dur)
		}
		if code != codeInputRequired {
			notifyClient(ctx, d.notes, t.Name, dur, code, res)
		}
		d.notes.settle(ctx)
		return res, nil
	}
}

// codeInputRequired is the outcome of a call answered with a request for client input.
const codeInputRequired = "input_required"

// runTool runs one call and returns its result and its outcome code ("ok" or an error code);
// err is the defect behind an "internal" outcome, or the cause of a fault of this server's
// store, for the log only.
func runTool(ctx context.Context, t *Tool, d *deps, handle HandlerFunc, req mcp.CallToolRequest) (*mcp.CallToolResult, string, error) {
	var body json.RawMessage // once known: what went upstream, for a lost answer's advice
	fail := func(err error) (*mcp.CallToolResult, string, error) {
		if f := t.lostAnswer(ctx, err, body); f != nil {
			err = f
		}
		env, code, internal := outcome(ctx, err)
		if !internal && !store.IsUnavailable(err) && !localFault(err) {
			err = nil // a fault of this server's own store is logged with its cause
		}
		return errorResult(env), code, err
	}
	raw, err := rawArguments(req)
	if err != nil {
		return fail(err)
	}
	params, body, extra, err := t.prepare(raw)
	if err != nil {
		return fail(err)
	}
	body = withIdempotencyKey(t, body)
	call := &Call{Tool: t, Params: params, Body: body, Extra: extra, Budget: d.budget, Client: d.client, Progress: newProgress(req.Params.Meta, d.notes, d.log),
		Request: req, Aside: d.aside, LocalFiles: d.files, Log: d.log, Exports: d.exports, match: d.match, confirm: d.confirm, jobs: d.jobs}
	if t.Revise != nil || t.Toolset == ToolsetRevisions {
		call.revs = newRun(ctx, t, d)
	}
	data, err := handle(ctx, call)
	var ask *needInput
	var dry *dryRun
	var decodeErr *upstream.UnreadableError
	switch {
	case errors.As(err, &ask):
		return ask.result, codeInputRequired, nil
	case errors.As(err, &dry):
		res, err := dryRunResult(t, dry)
		if err != nil {
			return fail(err)
		}
		return res, "ok", nil
	case errors.As(err, &decodeErr):
		return fail(t.unreadable(nil, body, decodeErr))
	case err != nil:
		return fail(err)
	}
	out, data, err := t.readResult(data, params, body)
	if err != nil {
		return fail(err)
	}
	if t.Version != nil {
		v := t.Version(out)
		out["version"], data = v, withMember(data, "version", v)
	}
	if t.Cut != "" {
		if data, err = cutList(out, t.Cut, data, d.budget/2); err != nil {
			return fail(err)
		}
	}
	summary := t.Summary(out)
	if call.revs != nil && len(call.revs.Kept) > 0 {
		if summary, data, err = call.addRevision(out, summary); err != nil {
			return fail(err)
		}
	}
	res := successResult(summary, out, data)
	if call.Content != nil {
		res.Content = append(res.Content[:1:1], call.Content...)
	}
	if call.Meta == nil && t.Preview != nil {
		call.Meta = t.Preview(out)
	}
	if call.Meta != nil && declaresApps(ctx) {
		res.Meta = mcp.NewMetaFromMap(call.Meta)
	}
	return res, "ok", nil
}

// logCall writes the server's log line of a call: tool, duration and outcome ("ok", the error
// code the caller got, or "failure" for a defect of ours, logged with its error); never the
// arguments or the result (they hold card text) and never a token.
func logCall(ctx context.Context, log *slog.Logger, tool string, d time.Duration, code string, defect error) {
	outcome, level := code, slog.LevelInfo
	switch code {
	case "ok":
	case codeInternal:
		outcome, level = "failure", slog.LevelError
	case codeUnavailable, codeUnexpectedResponse:
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{slog.String("tool", tool), slog.Duration("duration", d), slog.String("outcome", outcome)}
	if defect != nil {
		attrs = append(attrs, slog.String("err", defect.Error()))
	}
	log.LogAttrs(ctx, level, "tool call", attrs...)
}

// notifyClient sends the client one log notification about the call, at a level that
// logging/setLevel filters: info when it succeeded, notice for argument mistakes, warning for
// errors of the card service, error for failures of ours. The data names the tool, outcome and
// duration, and for an error its code and the envelope's message; never arguments or card text.
func notifyClient(ctx context.Context, notes notifier, tool string, d time.Duration, code string, res *mcp.CallToolResult) {
	data := map[string]any{"tool": tool, "outcome": code, "durationMs": d.Milliseconds()}
	level := mcp.LoggingLevelInfo
	if code != "ok" {
		if env, ok := ErrorEnvelope(res); ok {
			data["message"] = env["message"]
		}
		switch code {
		case codeInvalidArguments, codeCancelled:
			level = mcp.LoggingLevelNotice
		case codeInternal:
			level = mcp.LoggingLevelError
		default:
			level = mcp.LoggingLevelWarning
		}
	}
	notes.log(ctx, level, data)
}

// observedAside reports the kept-aside store's failures to an Observer.
type observedAside struct {
	AsideStore
	o Observer
}

func (s observedAside) Get(ctx context.Context, key AsideKey) ([]byte, bool, error) {
	data, ok, err := s.AsideStore.Get(ctx, key)
	if err != nil {
		s.o.StoreError()
	}
	return data, ok, err
}

// Check passes on the wrapped store's quota check, when it has one.
func (s observedAside) Check(ctx context.Context, user string, size int64) error {
	if q, ok := s.AsideStore.(interface {
		Check(ctx context.Context, user string, size int64) error
	}); ok {
		return q.Check(ctx, user, size)
	}
	return nil
}

func (s observedAside) Put(ctx context.Context, key AsideKey, data []byte) error {
	err := s.AsideStore.Put(ctx, key, data)
	if err != nil {
		s.o.StoreError()
	}
	return err
}

// stateStore returns where the server keeps its signing key and spent confirmations: State,
// else Exports, else a new memory store.
func (o *Options) stateStore() store.KV {
	switch {
	case o.State != nil:
		return o.State
	case o.Exports != nil:
		return o.Exports
	}
	return store.NewMemory()
}
