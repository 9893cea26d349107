package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/cardwriter/cardwriter-mcp/internal/cpubudget"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/trace"

	"github.com/cardwriter/cardwriter-mcp/auth"
	"github.com/cardwriter/cardwriter-mcp/internal/metrics"
	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
	"github.com/cardwriter/cardwriter-mcp/schema"
	"github.com/cardwriter/cardwriter-mcp/tools"
)

// sandboxHost is the address the upstream client uses for the in-process sandbox; requests to it
// never leave the process.
const sandboxHost = "http://sandbox.localhost"

// serverFlags are the flags stdio and http share.
type serverFlags struct {
	sandbox     bool
	sandboxData string
	apiHost     string
	contract    string
	auditLog    string
	toolsets    string
	tools       string
	readOnly    bool
	// resultBudget is the most cl100k tokens of a tool result (0: tools.DefaultResultBudget).
	resultBudget int
	savedGrant   bool // stdio only: without CARDWRITER_TOKEN, use the sign-in saved by login
	// signedOutOK (stdio): with no saved sign-in, serve anyway, every call answering how to sign
	// in (a host shows "Connection closed" for a server that exits, and the reason is lost).
	signedOutOK bool
	// requestTokens (http with --auth proxy or passthrough): each MCP request brings its own
	// card service token, in its context (see httpauth.go).
	requestTokens bool
	logFlags

	// tavern configures the tavern toolset (kept-aside store, local files); see import.go.
	tavern tavernConfig
	// notifier writes the calls' notifications in order with the responses (stdio; HTTP under
	// 2026-07-28, into the response).
	notifier tools.Notifier
	// calls (stdio) counts the calls under way, which the end of the input waits for.
	calls *tools.Calls
	// metrics (http with --metrics-addr) observes the tools and the card service client.
	metrics *metrics.Metrics
	// tracer (OTEL_EXPORTER_OTLP_ENDPOINT set) traces the tool calls and card service calls.
	tracer trace.TracerProvider
	// limits and callTimeout (http) protect the card service and the users from one another.
	limits      *upstream.Limits
	callTimeout time.Duration
	// extensions (http) are the extensions the server's HTTP layer serves (Tasks).
	extensions map[string]any
	// hooks (http) record what MCP sessions negotiate in the shared store.
	hooks *server.Hooks
	// dynamic (stdio, --dynamic-toolsets): the model enables toolsets by a tool call.
	dynamic bool
	// keep is how long revisions are kept; revisionStore (http: the server's store) or
	// revisionDir (stdio: a folder in the config dir every stdio server shares) is where; neither:
	// memory. With --sandbox, revisions stay with the sandbox (sandboxRevisions).
	keep          revisions.Retention
	revisionStore store.KV
	revisionDir   string
	// revStore is the store of revisions, once made (revisions).
	revStore *tools.RevisionStore
	// sandboxRevisions (http --sandbox, whose sandbox runs beside it): keep revisions as stdio
	// --sandbox does, with the sandbox, not in the server's store.
	sandboxRevisions bool
	// localProfile (stdio, import, export, http --auth none): the server works for one person,
	// and revisions and exports are this profile's (tools.LocalOwner); "" for the request's user.
	localProfile string
	// exports (http) keeps exports too large for a result in the shared store; nil keeps them
	// in memory (stdio); exportTTL is how long they stay readable (--export-ttl).
	exports   store.KV
	exportTTL time.Duration
	// exportUserBytes bounds one user's live exports (--export-user-bytes); trialShadows the
	// trial cards whose text one user's writes left kept (--trial-shadows-per-user).
	exportUserBytes int64
	trialShadows    int
	// matchBudget and matchUserBudget bound regular expression matching time per call and per
	// user a minute (--match-budget, --match-user-budget; negative: no bound).
	matchBudget, matchUserBudget time.Duration
	// inlineExports (the export commands): every export inline, whatever its size; a file is
	// written, no model reads it.
	inlineExports bool
	// confirm is --confirm: how the author is asked before what cannot be undone.
	confirm string
	// publicURL (http) is the origin download URLs of large exports are under.
	publicURL string
	// state (http) keeps the signing key and spent confirmations in the server's store; nil
	// keeps them in memory (stdio).
	state store.KV
}

func (f *serverFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.sandbox, "sandbox", false, "run the card service sandbox in-process with a signed-in demo user (no account, no network)")
	fs.StringVar(&f.sandboxData, "sandbox-data", "", "with --sandbox: file that keeps the sandbox's state across restarts (default: memory only, this server's own: not the sandbox of the import and export commands)")
	fs.StringVar(&f.apiHost, "api-host", "", "the card service's address, e.g. https://api.example.com (the API is under /open/v1)")
	fs.StringVar(&f.auditLog, "audit-log", "", "write one JSON line per write tool call (who, tool, ids, outcome, duration; never content or tokens) to this file, or - for stderr")
	fs.StringVar(&f.contract, "contract", "", contractUsage)
	fs.StringVar(&f.toolsets, "toolsets", "", "comma-separated toolsets to serve (default: all): "+strings.Join(tools.Toolsets(), ", "))
	fs.StringVar(&f.tools, "tools", "", "comma-separated tool names to serve (default: all in the chosen toolsets)")
	fs.BoolVar(&f.readOnly, "read-only", false, "serve only tools that change nothing (readOnlyHint)")
	f.keep = revisions.DefaultRetention()
	if name := fs.Name(); name == "stdio" || name == "http" {
		fs.IntVar(&f.keep.PerObject, "revisions-per-object", f.keep.PerObject, "revisions kept per card, worldbook or trial card before the writes that replace their content (0: keep none, and serve no revisions tools)")
		fs.DurationVar(&f.keep.MaxAge, "revisions-max-age", f.keep.MaxAge, "drop revisions older than this (0: no age limit)")
		fs.StringVar(&f.confirm, "confirm", string(tools.DefaultConfirmPolicy), "how the author confirms publish_card and delete_trial_card: elicit (a form where the client declares form elicitation; a client declaring none is not asked; where the host cannot show the form, as headless claude -p, asked in the conversation), conversation (the model asks the author and calls again with the one-time confirmationToken) or never")
		fs.Int64Var(&f.keep.UserBytes, "revisions-user-bytes", f.keep.UserBytes, "the size of one user's revisions together, in bytes; the oldest go first (0: no limit)")
		fs.IntVar(&f.trialShadows, "trial-shadows-per-user", tools.DefaultTrialShadows, "trial cards whose text one user's writes left kept for revisions at once (removed with the trial); a new trial card past it is refused until one is deleted (negative: no limit)")
	}
	fs.IntVar(&f.resultBudget, "result-budget", tools.DefaultResultBudget, "the most cl100k tokens a tool result's text or structuredContent may hold; pages fit it")
	fs.DurationVar(&f.exportTTL, "export-ttl", tools.DefaultExportTTL, "how long an export too large for a tool result stays readable by resources/read at its resource_link, by the user who made it")
	fs.Int64Var(&f.exportUserBytes, "export-user-bytes", tools.DefaultExportUserBytes, "the size of one user's live exports together (those kept for resources/read), in bytes; an export past it is refused until older ones expire (negative: no limit)")
	fs.DurationVar(&f.matchBudget, "match-budget", cpubudget.DefaultPerCall, "the most time one tool call may spend matching regular expressions (worldbook /regex/ keys); a call over it fails, retryable (negative: no limit)")
	fs.DurationVar(&f.matchUserBudget, "match-user-budget", cpubudget.DefaultPerUser, "the most time one user's calls may spend matching regular expressions in a minute (negative: no limit)")
	f.logFlags.register(fs)
	// A saved sign-in belongs to one person: only the stdio server (run by that person's
	// desktop host) uses it; the HTTP server serves many clients and authorizes them itself.
	f.savedGrant = fs.Name() == "stdio"
}

// contractUsage is the help of --contract.
const contractUsage = "an OpenAPI 3.1 file whose operations correct the embedded contract, by operationId: method, path, parameters, body, responses (a whole copy of the contract works too)"

// backend is what a serving command needs: the MCP server and, with --sandbox, the emulator.
type backend struct {
	mcp     *server.MCPServer
	sandbox *sandbox.Service // nil unless --sandbox
	logger  *slog.Logger
}

// newBackend builds the upstream client (real service or in-process sandbox) and the MCP server.
// sandboxBase is the public origin under which the sandbox's images are served ("" = none).
func (f *serverFlags) newBackend(stderr io.Writer, sandboxBase string) (*backend, error) {
	logger, err := f.logger(stderr)
	if err != nil {
		return nil, err
	}
	if f.keep.PerObject < 0 || f.keep.MaxAge < 0 || f.keep.UserBytes < 0 {
		return nil, errors.New("--revisions-per-object, --revisions-max-age and --revisions-user-bytes must not be negative")
	}
	if f.resultBudget != 0 && (f.resultBudget < tools.MinResultBudget || f.resultBudget > tools.MaxResultBudget) {
		return nil, fmt.Errorf("--result-budget %d: give %d to %d tokens (default %d)", f.resultBudget, tools.MinResultBudget, tools.MaxResultBudget, tools.DefaultResultBudget)
	}
	confirm, err := tools.ParseConfirmPolicy(f.confirm)
	if err != nil {
		return nil, err
	}
	b := &backend{logger: logger}
	client, svc, err := f.newClient(logger, sandboxBase)
	if err != nil {
		return nil, err
	}
	b.sandbox = svc
	auditLog, err := f.openAudit(stderr)
	if err != nil {
		return nil, err
	}
	var observer tools.Observer
	if f.metrics != nil {
		observer = f.metrics
	}
	budget := f.resultBudget
	if f.inlineExports {
		budget = math.MaxInt32 // a file is written, no model reads it
	}
	b.mcp, err = tools.NewServer(client, tools.Options{
		Observer:     observer,
		Tracer:       f.tracer,
		Audit:        auditLog,
		Filter:       tools.Filter{Toolsets: splitList(f.toolsets), Tools: splitList(f.tools), ReadOnly: f.readOnly},
		Logger:       logger,
		Version:      serverVersion(),
		Hooks:        f.hooks,
		Extensions:   f.extensions,
		Dynamic:      f.dynamic,
		ResultBudget: budget,
		MatchBudget:  cpubudget.New(f.matchBudget, f.matchUserBudget),

		// Large exports (tools/exports.go).
		Exports:             f.exports,
		ExportTTL:           f.exportTTL,
		ExportUserBytes:     f.exportUserBytes,
		TrialShadowsPerUser: f.trialShadows,

		// The tavern toolset (import.go).
		Notifier:   f.notifier,
		Calls:      f.calls,
		Aside:      f.tavern.aside,
		LocalFiles: f.tavern.files,

		Revisions: f.revisions(),
		Owner:     f.owner(client),
		Confirm:   confirm,
		State:     f.state,
		PublicURL: f.publicURL,
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// newClient builds the card service client: of the in-process sandbox (returned too) with
// --sandbox, else of --api-host with its token, calling the operations of --contract when set.
func (f *serverFlags) newClient(logger *slog.Logger, sandboxBase string) (*upstream.Client, *sandbox.Service, error) {
	opts := []upstream.Option{upstream.WithUserAgent(userAgent()), upstream.WithLogger(logger)}
	if f.limits != nil {
		opts = append(opts, upstream.WithLimits(*f.limits))
	}
	if f.metrics != nil {
		opts = append(opts, upstream.WithObserver(f.metrics))
	}
	if f.tracer != nil {
		opts = append(opts, upstream.WithTracer(f.tracer))
	}
	if f.callTimeout > 0 {
		opts = append(opts, upstream.WithTimeout(f.callTimeout))
	}
	if f.contract != "" {
		if f.sandbox {
			return nil, nil, errContractWithSandbox
		}
		table, err := loadContract(f.contract)
		if err != nil {
			return nil, nil, err
		}
		logger.Info("card service contract corrected", "file", f.contract)
		for _, w := range table.Warnings() {
			logger.Warn("the contract corrects a documented operation", "file", f.contract, "correction", w)
		}
		opts = append(opts, upstream.WithContract(table))
	}
	switch {
	case f.sandbox:
		if f.apiHost != "" {
			return nil, nil, errors.New("--sandbox and --api-host exclude each other: the sandbox is the card service")
		}
		if sandboxBase == "" {
			sandboxBase = sandboxHost
		}
		svc, err := sandbox.New(sandbox.Options{DataFile: f.sandboxData, DemoToken: os.Getenv("CARDWRITER_SANDBOX_TOKEN"), BaseURL: sandboxBase, Logger: logger.With("component", "sandbox")})
		if err != nil {
			return nil, nil, fmt.Errorf("sandbox: %w", err)
		}
		client, err := upstream.New(sandboxHost, upstream.StaticToken(svc.DemoToken()), append(opts, upstream.WithTransport(svc.RoundTripper()))...)
		if err != nil {
			return nil, nil, err
		}
		return client, svc, nil
	case f.apiHost == "":
		return nil, nil, errors.New("set --api-host (or CARDWRITER_API_HOST) to the card service's address, or use --sandbox to try it offline")
	}
	ts, err := f.tokenSource(logger)
	if err != nil {
		return nil, nil, err
	}
	client, err := upstream.New(f.apiHost, ts, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("--api-host: %w", err)
	}
	return client, nil, nil
}

// revisions returns the store of revisions (one per server). The sandbox's stay with it: in memory, or beside
// its --sandbox-data file; else in revisionDir, revisionStore, or memory.
func (f *serverFlags) revisions() *tools.RevisionStore {
	if f.revStore == nil {
		f.revStore = f.openRevisions()
	}
	return f.revStore
}

func (f *serverFlags) openRevisions() *tools.RevisionStore {
	switch {
	case (f.sandbox || f.sandboxRevisions) && f.sandboxData != "":
		return revisions.NewDir(f.sandboxData+sandboxRevisionsSuffix, f.keep)
	case f.sandbox || f.sandboxRevisions:
		return revisions.New(store.NewMemory(), f.keep)
	case f.revisionDir != "":
		return revisions.NewDir(f.revisionDir, f.keep)
	case f.revisionStore != nil:
		return revisions.New(f.revisionStore, f.keep)
	}
	return revisions.New(store.NewMemory(), f.keep)
}

// sandboxRevisionsSuffix names, after the --sandbox-data file's path, the folder of the
// sandbox's revisions.
const sandboxRevisionsSuffix = ".revisions"

// owner returns whose the calls' revisions and exports are: the local profile on client's card
// service, or (nil) the request's user.
func (f *serverFlags) owner(client *upstream.Client) tools.Owner {
	if f.localProfile == "" {
		return nil
	}
	return tools.LocalOwner(client.BaseURL(), f.localProfile)
}

// openAudit returns the audit log of --audit-log: JSON lines appended to the file (0600), or
// to stderr for "-"; nil without the flag.
func (f *serverFlags) openAudit(stderr io.Writer) (*slog.Logger, error) {
	var w io.Writer
	switch f.auditLog {
	case "":
		return nil, nil
	case "-":
		w = stderr
	default:
		file, err := os.OpenFile(f.auditLog, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, fmt.Errorf("--audit-log: %w", err)
		}
		w = file // open for the life of the process
	}
	return slog.New(slog.NewJSONHandler(w, nil)).With("log", "audit"), nil
}

// errContractWithSandbox refuses --contract beside --sandbox.
var errContractWithSandbox = errors.New("--contract corrects what the real card service is guessed to be; the sandbox follows the embedded contract: drop --sandbox or --contract")

// loadContract reads a --contract file and applies it to the embedded contract.
func loadContract(path string) (*schema.Table, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--contract: %w", err)
	}
	table, err := schema.LoadOverride(path, data)
	if err != nil {
		return nil, fmt.Errorf("--contract: %w", err)
	}
	return table, nil
}

// tokenSource picks the card service token: CARDWRITER_TOKEN when set; otherwise, for stdio,
// the sign-in saved by `cardwriter-mcp login` for --api-host, refreshed as needed.
func (f *serverFlags) tokenSource(logger *slog.Logger) (upstream.TokenSource, error) {
	if f.requestTokens {
		return upstream.ContextTokenSource{}, nil
	}
	if token := os.Getenv("CARDWRITER_TOKEN"); token != "" {
		return newVariableToken(token, f.apiHost, f.savedGrant), nil
	}
	if !f.savedGrant {
		return nil, errors.New("set CARDWRITER_TOKEN to your card service access token (scope mcp:card-writer), or use --sandbox")
	}
	if _, err := auth.Resource(f.apiHost); err != nil {
		return nil, fmt.Errorf("--api-host: %w", err)
	}
	store, err := auth.NewStore("")
	if err != nil {
		return nil, err
	}
	src, err := auth.NewSource(store, f.apiHost, auth.SourceOptions{Logger: logger.With("component", "auth")})
	if errors.Is(err, auth.ErrNotSignedIn) && f.signedOutOK {
		msg := fmt.Sprintf("Not signed in to the card service at %s: run `cardwriter-mcp login --api-host %s` in a terminal (or set CARDWRITER_TOKEN in this server's configuration), then call the tool again; restarting the host is not needed.", f.apiHost, f.apiHost)
		logger.Warn("serving without a sign-in: every tool call answers how to sign in", "apiHost", f.apiHost,
			"fix", "run `cardwriter-mcp login --api-host "+f.apiHost+"`")
		return &signedOut{msg: msg, store: store, apiHost: f.apiHost, logger: logger}, nil
	}
	if errors.Is(err, auth.ErrNotSignedIn) {
		if rerr := reach(context.Background(), f.apiHost); errors.Is(rerr, errUnreachable) {
			return nil, rerr // a mistyped address, not a missing sign-in
		}
		return nil, fmt.Errorf("not signed in to %s: run `cardwriter-mcp login --api-host %s` first, or set CARDWRITER_TOKEN to an access token (scope mcp:card-writer), or use --sandbox", f.apiHost, f.apiHost)
	}
	if err != nil {
		return nil, err
	}
	return src, nil
}

// variableToken is the token source of CARDWRITER_TOKEN: the token as given, and, when the service
// refuses it, an upstream.AuthError naming the variable, the service that refused it and what to
// do (the saved sign-in it hides, when there is one): a refresh cannot help a token the user set.
type variableToken struct {
	tok     upstream.StaticToken
	apiHost string
	saved   bool // a saved sign-in would be used without the variable (not by http)
}

func newVariableToken(token, apiHost string, saved bool) *variableToken {
	return &variableToken{tok: upstream.StaticToken(token), apiHost: apiHost, saved: saved}
}

// Token returns the variable's token.
func (e *variableToken) Token(ctx context.Context) (upstream.Token, error) { return e.tok.Token(ctx) }

// Refresh is asked when the service refused the token: it says which credential that was.
func (e *variableToken) Refresh(context.Context, upstream.Token) (upstream.Token, error) {
	if !e.saved {
		return "", &upstream.AuthError{Message: "The token in CARDWRITER_TOKEN was refused by " + e.apiHost + "; set it to a valid access token (scope mcp:card-writer)."}
	}
	return "", &upstream.AuthError{Message: refusedEnvToken(e.apiHost)}
}

// refusedEnvToken says that the service at apiHost refused CARDWRITER_TOKEN, and what to do:
// unset it to use the saved sign-in (named by its date), or set a valid token or sign in.
func refusedEnvToken(apiHost string) string {
	msg := "The token in CARDWRITER_TOKEN was refused by " + apiHost + "; "
	if when := savedSignInDate(apiHost); when != "" {
		return msg + "unset it to use the saved sign-in of " + when + ", or set it to a valid access token (scope mcp:card-writer)."
	}
	return msg + "set it to a valid access token (scope mcp:card-writer), or unset it and run `cardwriter-mcp login --api-host " + apiHost + "`."
}

// savedSignInDate is when the sign-in saved for apiHost was made ("" without one).
func savedSignInDate(apiHost string) string {
	resource, err := auth.Resource(apiHost)
	if err != nil {
		return ""
	}
	store, err := auth.NewStore("")
	if err != nil {
		return ""
	}
	d, err := store.Load()
	if err != nil {
		return ""
	}
	g := d.Latest(resource)
	if g == nil {
		return ""
	}
	return g.ObtainedAt.Local().Format("2006-01-02 15:04")
}

// signedOut is the token source of a stdio server started before its user signed in: each call
// looks for the sign-in again (login may have run since), and without one fails with an
// upstream.AuthError whose message says how to sign in, which the tools return as the result.
// Once found, the sign-in serves as it would have from the start (refreshed as needed).
type signedOut struct {
	msg     string
	store   *auth.Store
	apiHost string
	logger  *slog.Logger

	mu  sync.Mutex
	src *auth.Source
}

// source returns the saved sign-in, once there is one.
func (s *signedOut) source() (*auth.Source, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.src == nil {
		src, err := auth.NewSource(s.store, s.apiHost, auth.SourceOptions{Logger: s.logger.With("component", "auth")})
		if err != nil {
			return nil, &upstream.AuthError{Message: s.msg}
		}
		s.src = src
	}
	return s.src, nil
}

// Token returns the saved sign-in's access token.
func (s *signedOut) Token(ctx context.Context) (upstream.Token, error) {
	src, err := s.source()
	if err != nil {
		return "", err
	}
	return src.Token(ctx)
}

// Refresh refreshes the saved sign-in's access token.
func (s *signedOut) Refresh(ctx context.Context, rejected upstream.Token) (upstream.Token, error) {
	src, err := s.source()
	if err != nil {
		return "", err
	}
	return src.Refresh(ctx, rejected)
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// sandboxRoutes mounts the in-process sandbox's API and images beside the MCP endpoint, so that
// image URLs it hands out resolve and a person can call the API with the demo token.
func sandboxRoutes(mux *http.ServeMux, svc *sandbox.Service) {
	h := svc.Handler()
	mux.Handle("/open/v1/", h)
	mux.Handle("/images/", h)
}
