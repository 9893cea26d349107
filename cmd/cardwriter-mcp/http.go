package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cardwriter/cardwriter-mcp/auth/proxy"
	"github.com/cardwriter/cardwriter-mcp/internal/aside"
	"github.com/cardwriter/cardwriter-mcp/internal/connlimit"
	"github.com/cardwriter/cardwriter-mcp/internal/metrics"
	"github.com/cardwriter/cardwriter-mcp/internal/msglimit"
	"github.com/cardwriter/cardwriter-mcp/internal/quota"
	"github.com/cardwriter/cardwriter-mcp/internal/reclaim"
	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/internal/sealed"
	"github.com/cardwriter/cardwriter-mcp/internal/sessions"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/tasks"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
	"github.com/cardwriter/cardwriter-mcp/tools"
)

// openStore opens what the HTTP server keeps (the OAuth proxy's state, kept-aside tavern data,
// MCP sessions and their events): --store when set (Redis for several replicas); else the
// embedded file in the state directory, into which an earlier version's files are imported;
// memory only beside an in-memory sandbox, whose cards a restart loses anyway.
//
// It returns the store twice: raw, and sealed (the records users' data or authority rest on
// carry a MAC under the seal key; see sealStore).
func openStore(ctx context.Context, spec string, f *serverFlags, af *httpAuthFlags, mode, pub string, logger *slog.Logger) (raw, kv store.KV, err error) {
	if spec == "" && f.sandbox && f.sandboxData == "" {
		raw = store.NewMemory()
		kv, err = sealStore(raw, af, mode, pub, "", true, logger)
		return raw, kv, err
	}
	dir := ""
	if spec == "" {
		var err error
		if dir, err = af.stateDirectory(); err != nil {
			return nil, nil, err
		}
	}
	raw, err = store.Open(spec, dir)
	if err != nil {
		return nil, nil, fmt.Errorf("--store: %w", err)
	}
	if kv, err = sealStore(raw, af, mode, pub, dir, spec == "memory:", logger); err != nil {
		raw.Close()
		return nil, nil, err
	}
	if dir == "" {
		return raw, kv, nil
	}
	var n int
	if _, serr := os.Stat(filepath.Join(dir, proxy.StateFile)); serr == nil && mode == authProxy {
		// An earlier version's proxy state: its grants are authenticated under the state key
		// as they are moved.
		var key []byte
		if key, _, err = af.stateKeys(pub, dir, logger); err == nil {
			n, err = proxy.ImportStateFile(ctx, dir, kv, key)
		}
	}
	if err == nil {
		var m int
		// Moved as they are: no quota refuses what was kept before there was one.
		m, err = aside.ImportDir(ctx, filepath.Join(dir, "aside"), aside.NewKVWith(kv, aside.KVOptions{UserBytes: -1}))
		n += m
	}
	if err != nil {
		raw.Close()
		return nil, nil, err
	}
	if n > 0 {
		logger.Info("moved an earlier version's state files into the store", "records", n, "store", kv.Name())
	}
	return raw, kv, nil
}

// sealedPrefixes are the records sealed beside the OAuth proxy's own (grants, secrets, consents,
// authorization requests, which carry their MAC in their JSON): revisions and trial shadows,
// MCP sessions and their owners, exports, kept-aside data, the quotas' ledgers, revocations.
var sealedPrefixes = append(revisions.Prefixes(), "mcp:session:", proxy.SessionOwnerPrefix, proxy.RevokedPrefix,
	tools.ExportKeyPrefix, aside.KeyPrefix, quota.KeyPrefix)

// sealStore returns kv with sealedPrefixes sealed under the seal key: derived from the state key
// when one is given (--state-key, --state-key-file) or, in proxy mode, generated on a loopback
// URL; else, for one server's embedded store, the state key generated beside it (the state
// directory's state.key); for a store that dies with the process (memory), a random one. Replicas sharing
// Redis must be given the state key.
func sealStore(kv store.KV, af *httpAuthFlags, mode, pub, dir string, ephemeral bool, logger *slog.Logger) (store.KV, error) {
	var key []byte
	var err error
	switch {
	case af.stateKey != "" || af.keyFile != "" || mode == authProxy:
		if key, _, err = af.stateKeys(pub, dir, logger); err != nil {
			return nil, err
		}
	case ephemeral:
		key = make([]byte, sealed.KeySize)
		_, _ = rand.Read(key)
	case dir == "":
		return nil, errors.New("--store with Redis: the replicas seal the records users' data rests on (revisions, sessions, exports, kept-aside data) with one key: set --state-key (or CARDWRITER_STATE_KEY) or --state-key-file to the same key on each")
	default:
		if key, _, err = proxy.LoadKey("", dir); err != nil {
			return nil, fmt.Errorf("the seal key: %w", err)
		}
	}
	log := logger.With("component", "store")
	return sealed.New(kv, sealed.Derive(key, "cardwriter-mcp store records"), func(k string) {
		log.Warn("a store record failed its seal (written without the key, or moved): ignored", "prefix", keyPrefixOf(k))
	}, sealedPrefixes...), nil
}

// keyPrefixOf is a store key's prefix up to its last colon, for logs (never an id).
func keyPrefixOf(k string) string {
	if i := strings.LastIndex(k, ":"); i >= 0 {
		return k[:i+1]
	}
	return k
}

// httpProtocolVersions are the MCP revisions served over streamable HTTP, newest first.
var httpProtocolVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"}

// defaultMaxBody caps MCP request bodies: room for the largest tool argument (a card file as
// base64) and 1 MiB for the rest of the request, so that an argument over its own limit is
// refused by its schema, as a result the model can read, rather than by the transport.
func defaultMaxBody() int64 { return tools.LargestArgument(tools.All()) + 1<<20 }

// messageLimits bound what an MCP message may hold before it is decoded: nesting, values, and
// each tool's arguments by the tool's schemas.
func messageLimits() *msglimit.Limits {
	args := tools.NewArgumentLimits(tools.All())
	return &msglimit.Limits{Depth: msglimit.DefaultDepth, Values: msglimit.DefaultValues, Envelope: msglimit.DefaultEnvelope,
		Argument: args.Argument, Arguments: args.Arguments, Invalid: tools.InvalidPromptArguments}
}

// requestUser is who an MCP request over HTTP acts for, wherever users must be told apart (the
// per-user limits of sessions): the card service's user of the request's principal, as the
// authorization layer found it; "" without authorization. The one place that says so.
func requestUser(r *http.Request) string {
	if p := proxy.PrincipalFrom(r.Context()); p != nil {
		return p.UserID
	}
	return ""
}

const (
	// defaultUserSessions is room for a person's hosts and their restarts within the idle time.
	defaultUserSessions = 32
	// defaultBodyTimeout lets the largest body (45 MB) arrive at 1 MB/s; one trickled a byte at
	// a time holds its connection no longer.
	defaultBodyTimeout = time.Minute
	// defaultMaxConnections stays under the usual limit of 1024 open files per process, with
	// room for the store, the card service's connections and the logs.
	defaultMaxConnections = 512
)

func runHTTP(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("http", "http [--addr 127.0.0.1:8080] [--api-host URL | --sandbox] [--auth proxy|passthrough|none] [--public-url URL] [flags]", stdout, stderr, envConfigDir, envSandboxToken, envOTel)
	var f serverFlags
	f.register(fs)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on; the MCP endpoint is /mcp")
	origins := fs.String("allowed-origins", "", "comma-separated extra Origins allowed to call /mcp (loopback origins are too, unless --public-url is a non-loopback one)")
	hosts := fs.String("allowed-hosts", "", "comma-separated Host header values accepted besides loopback names (needed behind a proxy; the --public-url host always is)")
	maxBody := fs.Int64("max-body-bytes", defaultMaxBody(), "largest MCP request body accepted from an authenticated client, in bytes (an unauthenticated request's body is never read)")
	bodyTimeout := fs.Duration("body-timeout", defaultBodyTimeout, "the longest an MCP request body may take to arrive (a slower one gets 408 and its connection is closed)")
	maxConns := fs.Int("max-connections", defaultMaxConnections, "connections open at once, all clients together (more are answered 503 and closed)")
	sourceConns := fs.Int("source-connections", 0, "connections one source address may hold open at once (behind --trusted-proxies, the proxies are exempt); more from it are answered 503 (0: a quarter of --max-connections)")
	keepAlive := fs.Duration("keep-alive-idle", connlimit.DefaultIdle, "how long an idle keep-alive connection stays open while under half of --max-connections are; it shortens to 1s as they fill, and an idle one gives way to a new connection when none is left")
	asideTTL := fs.Duration("aside-ttl", aside.DefaultTTL, "how long what the card service cannot hold of an imported file (kept-aside data) is kept after its import, for exports to put back (negative: for good)")
	asideUserBytes := fs.Int64("aside-user-bytes", aside.DefaultUserBytes, "the size of one user's kept-aside import data together, in bytes; an import past it is refused before anything is sent (negative: no limit)")
	idle := fs.Duration("session-idle-ttl", 30*time.Minute, "end MCP sessions idle this long")
	userSessions := fs.Int("user-sessions", defaultUserSessions, "MCP sessions one user may have open at once (more: 429 until one ends or expires idle; 0: no limit; none without authorization)")
	initRate := fs.Float64("user-initialize-rate", 1, "new MCP sessions (initialize) one user may start per second, in bursts of ten times that (0: no limit; none without authorization)")
	drain := fs.Duration("drain-timeout", defaultDrain, "on SIGTERM, how long the calls under way may take to finish before the server exits")
	var limits upstream.Limits
	fs.IntVar(&limits.UserConcurrency, "user-concurrency", 8, "card service calls one user may have under way at once (0: no limit)")
	fs.Float64Var(&limits.UserRate, "user-rate", 20, "card service calls one user may start per second, with bursts of twice that (0: no limit)")
	fs.IntVar(&limits.Concurrency, "upstream-concurrency", 64, "card service calls under way at once, all users together (0: no limit)")
	callTimeout := fs.Duration("call-timeout", upstream.DefaultTimeout, "deadline of one card service call, its retries included")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics, on a listener of its own (default: off)")
	storeSpec := fs.String("store", "", "where the server keeps its state (proxy sign-ins, kept-aside tavern data, revisions, large exports, MCP sessions): for several replicas, Redis: redis://host:port/db, redis-sentinel://host:port[,host:port...]/MASTER[?db=N] or redis-cluster://host:port[,host:port...] (rediss... for TLS; ?namespace=prefix:, ?replicas=N); default the embedded file <state-dir>/state.db, one server per directory")
	var af httpAuthFlags
	af.register(fs)
	if err := parseFlags(fs, args, nil); err != nil {
		return helpOK(err)
	}
	if *sourceConns < 0 || *keepAlive <= 0 {
		return fmt.Errorf("--source-connections must not be negative and --keep-alive-idle must be positive, got %d and %s", *sourceConns, *keepAlive)
	}
	if *maxBody <= 0 || *bodyTimeout <= 0 || *maxConns <= 0 {
		return fmt.Errorf("--max-body-bytes, --body-timeout and --max-connections must be positive, got %d, %s and %d", *maxBody, *bodyTimeout, *maxConns)
	}
	if *userSessions < 0 || *initRate < 0 {
		return errors.New("--user-sessions and --user-initialize-rate must not be negative")
	}
	if limits.UserConcurrency < 0 || limits.Concurrency < 0 || limits.UserRate < 0 || *callTimeout <= 0 {
		return errors.New("--user-concurrency, --user-rate and --upstream-concurrency must not be negative, and --call-timeout must be positive")
	}
	f.callTimeout = *callTimeout
	if !f.sandbox {
		// The limits protect a card service shared by many users; an in-process or side
		// sandbox serves one tester.
		f.limits = &limits
	}
	mode, err := af.resolveMode(f.sandbox)
	if err != nil {
		return err
	}
	if *storeSpec != "" && mode == authProxy && af.stateKey == "" && af.keyFile == "" {
		return errors.New("--store with Redis is for several replicas, which must seal tokens with one key: set --state-key (or CARDWRITER_STATE_KEY) or --state-key-file to the same key on each")
	}
	tp, stopTracing, err := setupTracing(ctx)
	if err != nil {
		return err
	}
	defer stopTracing()
	f.tracer = tp
	if *metricsAddr != "" {
		f.metrics = metrics.New()
		mln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", f.metrics.Handler())
		mctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() { _ = serve(mctx, mln, mux, slog.New(slog.DiscardHandler)) }()
		fmt.Fprintf(stderr, "metrics: http://%s/metrics\n", mln.Addr())
	}
	tcp, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	var refused func()
	var limited func(string)
	if f.metrics != nil {
		refused, limited = f.metrics.ConnectionRefused, f.metrics.Refused
	}
	ln := connlimit.Listen(tcp, *maxConns, refused)
	proxies, err := af.trustedProxies()
	if err != nil {
		return err
	}
	if *sourceConns == 0 {
		*sourceConns = max(1, *maxConns/4)
	}
	ln.SetSourceShare(*sourceConns, func(a netip.Addr) bool {
		return slices.ContainsFunc(proxies, func(p netip.Prefix) bool { return p.Contains(a) })
	})
	ln.SetIdle(*keepAlive)
	defer ln.Close()
	base := "http://" + ln.Addr().String()
	loopback := false
	if ap, err := netip.ParseAddrPort(ln.Addr().String()); err == nil {
		loopback = ap.Addr().IsLoopback()
	}
	pub := base
	withSandbox := f.sandbox
	if mode != authNone {
		if pub, err = af.resolvePublicURL(base, loopback); err != nil {
			return err
		}
		if f.sandbox && f.contract != "" {
			return errContractWithSandbox
		}
		if f.sandbox {
			// With authorization, the sandbox must be a real service the browser can reach:
			// it runs beside this server on a loopback port of its own.
			stopSandbox, apiHost, err := startSideSandbox(ctx, &f, stderr)
			if err != nil {
				return err
			}
			defer stopSandbox()
			f.sandbox, f.apiHost = false, apiHost
		}
		f.requestTokens = true
	}
	setupLogger, err := f.logger(stderr)
	if err != nil {
		return err
	}
	rawKV, kv, err := openStore(ctx, *storeSpec, &f, &af, mode, pub, setupLogger)
	if err != nil {
		return err
	}
	defer rawKV.Close()
	if r, ok := rawKV.(*store.Redis); ok {
		// Failures and failovers of Redis, counted and shown by /readyz.
		var o store.Observer
		if f.metrics != nil {
			o = f.metrics
		}
		r.Observe(ctx, o)
	}
	asideOpts := aside.KVOptions{TTL: *asideTTL, UserBytes: *asideUserBytes}
	if f.metrics != nil {
		asideOpts.Observer = f.metrics.Quota
	}
	f.tavern.aside = aside.NewKVWith(kv, asideOpts)
	f.revisionStore = kv
	f.sandboxRevisions = withSandbox
	if mode == authNone {
		// One person's server (its own token): revisions and exports are that person's.
		f.localProfile = "http"
	}
	f.exports = kv
	f.state = kv
	f.publicURL = pub
	sess := sessions.New(kv, *idle, setupLogger.With("component", "sessions"))
	sessionLimits := sessions.Limits{User: requestUser, MaxSessions: *userSessions, InitializeRate: *initRate}
	if f.metrics != nil {
		sessionLimits.Refused = f.metrics.Refused
	}
	sess.SetLimits(sessionLimits)
	f.hooks = &server.Hooks{}
	sess.Hooks(f.hooks)
	afterListen(f.hooks)
	f.extensions = map[string]any{tasks.Extension: map[string]any{}}
	f.notifier = httpNotifier{sess}
	b, err := f.newBackend(stderr, base)
	if err != nil {
		return err
	}
	var onSignIn func(string)
	if f.metrics != nil {
		onSignIn = f.metrics.SignIn
	}
	az, err := newHTTPAuth(mode, pub, f.apiHost, &af, kv, *idle, b.logger, stderr, onSignIn)
	if err != nil {
		return err
	}
	defer az.close()
	streamable := server.NewStreamableHTTPServer(b.mcp,
		server.WithEndpointPath(proxy.MCPPath),
		// Sessions live in the store, so that any replica serves any request of a session; a
		// replica forgets an idle session on its own, the store when it is idle everywhere.
		server.WithSessionIdManagerResolver(sess),
		server.WithSessionIdleTTL(*idle),
		// With an event store, a request's notifications are delivered in order ahead of its
		// response and none is lost to the forwarder of an earlier request of the same session
		// (without one, mcp-go drops such notifications); in the shared store, a stream broken on
		// one replica resumes on another. Events are purged when the session ends.
		server.WithEventStore(sess.Events()),
		server.WithStreamableHTTPProtocolVersions(httpProtocolVersions...),
		server.WithStreamableHTTPLogger(b.logger),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context {
			return sess.Restore(proxy.HTTPContext(ctx, r), r)
		}),
	)
	// Clients' answers to the server's requests (elicitations) published by other replicas.
	if err := sess.Listen(ctx, streamable); err != nil {
		return fmt.Errorf("--store: %w", err)
	}
	allowedHosts := splitList(*hosts)
	allowedOrigins := splitList(*origins)
	if mode != authNone && pub != base {
		allowedHosts = append(allowedHosts, hostOf(pub))
		allowedOrigins = append(allowedOrigins, pub)
	}
	if largest := tools.LargestArgument(tools.All()); *maxBody < largest {
		b.logger.Warn("--max-body-bytes is below the largest tool argument: larger images and card files are refused with HTTP 413, which a model cannot read",
			"max_body_bytes", *maxBody, "largest_argument_bytes", largest)
	}
	if !loopback && len(allowedHosts) == 0 {
		b.logger.Warn("listening on a non-loopback address without --allowed-hosts: any Host header is accepted; Origin is still checked")
	}
	g := &guard{
		allowedOrigins: allowedOrigins, allowedHosts: allowedHosts,
		loopback: loopback, public: deployedPublic(af.publicURL), maxBody: *maxBody, bodyTimeout: *bodyTimeout, logger: b.logger, limited: limited, messages: messageLimits(),
	}
	taskStore := &tasks.Store{KV: f.state, TTL: taskTTL, PollInterval: taskPoll}
	g.next = az.protect(g.body(protocolHTTP(tasksHTTP(taskStore, sess.Gate(listenHTTP(streamable))))))
	mux := http.NewServeMux()
	mux.Handle(proxy.MCPPath, g)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	ready := &readiness{apiHost: f.apiHost, client: &http.Client{Timeout: 3 * time.Second}, store: rawKV}
	ready.revisions = f.revisions()
	if b.sandbox != nil {
		ready.apiHost = "" // in-process: nothing to reach
	}
	mux.Handle("GET /readyz", ready)
	// Download URLs of large exports, opened by the author's browser: signed, no sign-in.
	mux.Handle("GET "+tools.DownloadPath, g.hostOnly(tools.DownloadHandler(tools.Options{Exports: kv, State: kv, Logger: b.logger})))
	if az.handler != nil {
		mux.Handle("/", g.hostOnly(az.handler))
	}
	if b.sandbox != nil {
		sandboxRoutes(mux, b.sandbox)
		fmt.Fprintf(stderr, "card service sandbox (in-process): API at %s/open/v1, %s\n", base, demoTokenNote(b.sandbox))
	}
	fmt.Fprintf(stderr, "MCP endpoint: %s/mcp\n", base)
	b.logger.Info("serving MCP over streamable HTTP", "addr", ln.Addr().String(), "auth", mode, "sandbox", withSandbox, "version", programVersion())
	// Once no request has come for a second, the memory the runtime keeps for reuse goes back
	// to the system: an idle server holds what its sessions use, not twice that.
	quiet := reclaim.New(g.bodyDeadline(mux), reclaim.Quiet)
	go quiet.Run(ctx)
	// On SIGTERM: no new connection, the sessions' GET streams closed (new requests of those
	// sessions get 404), the calls under way finished within --drain-timeout.
	err = serveDraining(ctx, ln, quiet, b.logger, *drain, func() { streamable.CloseSessions(context.Background()) })
	closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if cerr := streamable.Shutdown(closeCtx); cerr != nil && !errors.Is(cerr, http.ErrServerClosed) {
		b.logger.Warn("closing MCP sessions", "err", cerr)
	}
	return err
}

// demoTokenNote says which bearer token calls the sandbox's API by hand: the one
// CARDWRITER_SANDBOX_TOKEN set, or the random one, shown (it is the emulator's, good only for
// this process's demo user).
func demoTokenNote(svc *sandbox.Service) string {
	if os.Getenv("CARDWRITER_SANDBOX_TOKEN") != "" {
		return "the demo user's bearer token is CARDWRITER_SANDBOX_TOKEN's"
	}
	return "the demo user's bearer token: " + svc.DemoToken()
}

// startSideSandbox serves the sandbox on a loopback port of its own (for --sandbox with
// --auth proxy or passthrough) and returns its address, the API host.
func startSideSandbox(ctx context.Context, f *serverFlags, stderr io.Writer) (stop func(), apiHost string, err error) {
	logger, err := f.logger(stderr)
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("sandbox: %w", err)
	}
	apiHost = "http://" + ln.Addr().String()
	svc, err := sandbox.New(sandbox.Options{DataFile: f.sandboxData, DemoToken: os.Getenv("CARDWRITER_SANDBOX_TOKEN"), BaseURL: apiHost,
		Logger: logger.With("component", "sandbox")})
	if err != nil {
		ln.Close()
		return nil, "", fmt.Errorf("sandbox: %w", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = serve(sctx, ln, svc.Handler(), logger.With("component", "sandbox"))
	}()
	fmt.Fprintf(stderr, "card service sandbox: API at %s/open/v1, sign-in at %s/oauth/authorize, %s\n", apiHost, apiHost, demoTokenNote(svc))
	return func() { cancel(); <-done }, apiHost, nil
}

// httpNotifier sends the notifications of calls over streamable HTTP. Under 2026-07-28 the gate
// writes them into the call's response; before, they go through mcp-go's queue, and the call's
// result waits until they are written to one of the session's streams (sessions.Sent, Settle).
type httpNotifier struct{ sess *sessions.Sessions }

// Notify sends n for the call in ctx.
func (h httpNotifier) Notify(ctx context.Context, n mcp.JSONRPCNotification) error {
	if ok, err := h.sess.Notify(ctx, n); ok {
		return err
	}
	srv := server.ServerFromContext(ctx)
	if srv == nil {
		return server.ErrNotificationNotInitialized
	}
	if err := srv.SendNotificationToClient(ctx, n.Method, n.Params.AdditionalFields); err != nil {
		return err
	}
	h.sess.Sent(ctx)
	return nil
}

// settleLimit bounds how long a call's result waits for its notifications to be written.
const settleLimit = time.Second

// Settle returns when the call's notifications are on their way to the client.
func (h httpNotifier) Settle(ctx context.Context) { h.sess.Settle(ctx, settleLimit) }
