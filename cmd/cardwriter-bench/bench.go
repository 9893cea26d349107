package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var (
	sandboxReady = regexp.MustCompile(`API at (http://\S+)/open/v1`)
	httpReady    = regexp.MustCompile(`MCP endpoint: (http://\S+)`)
)

// bench is one run of the harness.
type bench struct {
	cfg  config
	args []string
	root string
	tmp  string
	bin  string
	// passBin is bench/passthrough, built when its mode is run.
	passBin string
	// stubBin is bench/stub, built when it is a card service of the run.
	stubBin string
	// up is the card service of the cells being run.
	up   string
	peer *peer // nil when skipped
	// mcpGo is the patched mcp-go ours and bench/passthrough are built against (-mcp-go-patch),
	// or nil.
	mcpGo *mcpGoPatch
	// peerHTTPFailed is the error of the first peer-http cell that failed; later ones are skipped.
	peerHTTPFailed string
	results        results
	// configDirs counts the config directories given to `http` servers (serverEnv).
	configDirs int
}

func newBench(ctx context.Context, cfg config, args []string) (*bench, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "cardwriter-bench-")
	if err != nil {
		return nil, err
	}
	b := &bench{cfg: cfg, args: args, root: root, tmp: tmp}
	b.results.start(cfg, args)
	tags := ""
	if cfg.serverProfile != "" {
		tags = "benchprofile"
		if err := os.MkdirAll(cfg.serverProfile, 0o755); err != nil {
			b.close()
			return nil, fmt.Errorf("-server-cpuprofile: %w", err)
		}
	}
	switch {
	case cfg.bin != "" && tags != "":
		b.close()
		return nil, errors.New("-server-cpuprofile needs a build of ours: it cannot be used with -bin")
	case cfg.bin != "":
		b.bin = cfg.bin
	default:
		if cfg.mcpGoPatch != "" {
			if b.mcpGo, err = preparePatchedMCPGo(ctx, root, filepath.Join(tmp, "mcp-go-patch"), cfg.mcpGoPatch); err != nil {
				b.close()
				return nil, err
			}
			logf("NOT THE PRODUCT'S FIGURES: building ours and bench/passthrough against %s", b.mcpGo.label)
			b.results.MCPGoPatch = b.mcpGo.label
			b.results.note("not the product's figures: cmd/cardwriter-mcp and bench/passthrough built against " + b.mcpGo.label)
		}
		logf("building cmd/cardwriter-mcp (CGO_ENABLED=0)")
		if b.bin, err = buildServer(ctx, root, tmp, tags, b.mcpGo.buildFlags()); err != nil {
			b.close()
			return nil, err
		}
	}
	b.cfg.httpArgs = append(b.cfg.httpArgs, httpAuthArgs(b.bin)...)
	for _, h := range []struct {
		need bool
		bin  *string
		pkg  string
	}{{slices.Contains(cfg.modes, modePass), &b.passBin, "passthrough"}, {slices.Contains(cfg.upstreams, upstreamStub), &b.stubBin, "stub"}} {
		if !h.need {
			continue
		}
		*h.bin = filepath.Join(tmp, h.pkg)
		args := []string{"build", "-trimpath", "-o", *h.bin}
		if h.pkg == "passthrough" {
			args = append(args, b.mcpGo.buildFlags()...)
		}
		cmd := exec.CommandContext(ctx, "go", append(args, "./bench/"+h.pkg)...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.close()
			return nil, fmt.Errorf("go build ./bench/%s: %w\n%s", h.pkg, err, out)
		}
	}
	if slices.Contains(cfg.modes, modePeerHTTP) || slices.Contains(cfg.modes, modePeerStdio) || !cfg.skipCold {
		p, note := setupPeer(ctx, cfg)
		if note != "" {
			logf("peer: %s", note)
			b.results.note("peer: " + note)
		}
		b.peer = p
		if p != nil {
			b.results.Machine.Node = p.nodeVersion
			b.results.Peer = "@ivotoby/openapi-mcp-server@" + p.version
		}
	}
	return b, nil
}

// httpAuthArgs returns "--auth none" when `http` has an --auth flag: the harness measures the
// server with its upstream token from CARDWRITER_TOKEN and no client authorization on /mcp;
// and no per-user limits when it has them (the harness is one user at full load).
func httpAuthArgs(bin string) []string {
	out, _ := exec.Command(bin, "http", "--help").CombinedOutput()
	return httpAuthArgsOf(out)
}

// httpAuthArgsOf is httpAuthArgs of the help `http --help` printed ("  --auth" alone on its
// line, or followed by its type: "  --auth string").
func httpAuthArgsOf(help []byte) []string {
	out := help
	var args []string
	if regexp.MustCompile(`(?m)^\s+--auth(\s|$)`).Match(out) {
		args = append(args, "--auth", "none")
	}
	if regexp.MustCompile(`(?m)^\s+--user-rate(\s|$)`).Match(out) {
		args = append(args, "--user-rate", "0", "--user-concurrency", "0", "--upstream-concurrency", "0")
	}
	return args
}

func (b *bench) close() {
	if b.tmp != "" {
		_ = os.RemoveAll(b.tmp)
	}
}

func (b *bench) run(ctx context.Context) error {
	for _, up := range b.cfg.upstreams {
		if err := b.runCells(ctx, up); err != nil {
			return err
		}
	}
	if err := b.finish(ctx); err != nil {
		return err
	}
	if b.cfg.strict {
		return failedCells(b.results.Cells)
	}
	return nil
}

// failedCells is the error of a run whose cells failed (but the peer's over streamable HTTP,
// which the go-sdk client cannot drive: docs/performance.md), naming each; nil when none did.
func failedCells(cells []cellResult) error {
	var failed []string
	for _, c := range cells {
		if c.Error != "" && c.Mode != modePeerHTTP {
			failed = append(failed, fmt.Sprintf("%s %s c=%d: %s", c.Upstream, c.Mode, c.Concurrency, firstLine(c.Error)))
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("%d cell(s) failed:\n  %s", len(failed), strings.Join(failed, "\n  "))
}

// runCells measures every mode at every concurrency against one card service.
func (b *bench) runCells(ctx context.Context, up string) error {
	b.up = up
	for _, c := range b.cfg.conc {
		for _, m := range b.cfg.modes {
			if (m == modePeerHTTP || m == modePeerStdio) && b.peer == nil {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if m == modePeerHTTP && b.peerHTTPFailed != "" {
				continue
			}
			cell := b.runCell(ctx, up, m, c)
			if m == modePeerHTTP && cell.Error != "" {
				b.peerHTTPFailed = cell.Error
				b.results.note("the peer over streamable HTTP could not be measured with the go-sdk MCP client (its later cells were skipped): " +
					firstLine(cell.Error) + "; ours over HTTP is compared with the peer over stdio instead (marked \"vs stdio\").")
			}
			if cell.Error != "" {
				logf("%-7s %-10s c=%-3d FAILED: %s", up, m, c, firstLine(cell.Error))
			} else {
				logf("%-7s %-10s c=%-3d %6d calls  %8.0f calls/s  p50 %7.3f ms  p99 %7.3f ms  cpu %.3f s/1k  rss %.1f MB",
					up, m, c, cell.Calls, cell.Throughput, cell.P50Ms, cell.P99Ms, cell.ServerCPUPer1k, cell.ServerPeakRSSMB)
			}
			b.results.Cells = append(b.results.Cells, cell)
		}
	}
	return nil
}

// finish measures cold start and idle sessions, then writes the results.
func (b *bench) finish(ctx context.Context) error {
	if !b.cfg.skipCold {
		b.coldStarts(ctx)
	}
	if !b.cfg.skipIdle && b.cfg.sessions > 0 {
		for _, sse := range []bool{false, true} {
			r, err := b.idleSessions(ctx, b.cfg.sessions, sse)
			if err != nil {
				logf("idle sessions (standalone SSE %v): %v", sse, err)
				b.results.note(fmt.Sprintf("idle sessions (standalone SSE %v) failed: %v", sse, firstLine(err.Error())))
				continue
			}
			logf("idle sessions: %d (standalone SSE %v): RSS %.1f MB (%.1f MB before), %.1f KB per session",
				r.Sessions, r.StandaloneSSE, r.RSSAfterMB, r.RSSBeforeMB, r.PerSessionKB)
			b.results.Idle = append(b.results.Idle, r)
		}
	}
	b.results.finish()
	tables := b.results.markdown()
	fmt.Println(tables)
	if b.cfg.jsonPath != "" {
		data, err := json.MarshalIndent(&b.results, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(b.cfg.jsonPath, append(data, '\n'), 0o644); err != nil {
			return err
		}
		logf("wrote %s", b.cfg.jsonPath)
	}
	if b.cfg.readme != "" {
		if err := replaceBetweenMarkers(b.cfg.readme, tables); err != nil {
			return err
		}
		logf("updated %s", b.cfg.readme)
	}
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// sandbox is a running sandbox server, seeded.
type sandbox struct {
	srv  *server
	base string // http://127.0.0.1:PORT
	api  string // base + /open/v1
	seed seeded
}

func (b *bench) startSandbox(ctx context.Context) (*sandbox, error) {
	srv, base, err := startServer(ctx, "sandbox", b.bin,
		[]string{"sandbox", "--addr", "127.0.0.1:0", "--demo-token", b.cfg.token},
		envWith(), sandboxReady, 20*time.Second)
	if err != nil {
		return nil, err
	}
	sb := &sandbox{srv: srv, base: base, api: base + "/open/v1"}
	r := &rest{base: sb.api, token: b.cfg.token, client: newHTTPClient(2)}
	defer r.client.CloseIdleConnections()
	if sb.seed, err = seed(ctx, r); err != nil {
		srv.stop()
		return nil, fmt.Errorf("seed the sandbox: %w", err)
	}
	return sb, nil
}

// target is what one cell calls: callers for its workers and the server process measured.
type target struct {
	callers []caller
	server  *server // nil for the floor
	pid     int     // the measured server process (the sandbox's for the floor)
	proto   string  // negotiated MCP protocol version
	close   func()
}

// stubFor records the sandbox's answer to each operation (and the reads before writes) and starts bench/stub with them; the
// returned upstream stands in for the sandbox (its seed included).
func (b *bench) stubFor(ctx context.Context, sb *sandbox, opList []op) (*sandbox, error) {
	client := newHTTPClient(1)
	defer client.CloseIdleConnections()
	var answers []stubAnswer
	// Besides the operations, the reads a write makes first to keep a revision of what it
	// replaces (the card's is getCard, already there).
	for _, o := range append(slices.Clone(opList), preReads(sb.seed)...) {
		a, err := recordAnswer(ctx, client, sb.api, b.cfg.token, o)
		if err != nil {
			return nil, fmt.Errorf("record the answers for the stub: %w", err)
		}
		answers = append(answers, a)
	}
	data, err := json.Marshal(answers)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(b.tmp, "stub-answers.json")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		return nil, err
	}
	srv, base, err := startServer(ctx, "stub", b.stubBin, []string{"--addr", "127.0.0.1:0", "--answers", file}, envWith(), sandboxReady, 20*time.Second)
	if err != nil {
		return nil, err
	}
	return &sandbox{srv: srv, base: base, api: base + "/open/v1", seed: sb.seed}, nil
}

// runCell measures one mode at one concurrency against a fresh card service (a seeded
// sandbox, or a stub answering as one did) and server.
func (b *bench) runCell(ctx context.Context, up, mode string, conc int) (cell cellResult) {
	cell = cellResult{Upstream: up, Mode: mode, Concurrency: conc}
	n := b.cfg.calls
	switch mode {
	case modeStdio:
		n = b.cfg.stdioCalls
	case modePeerHTTP, modePeerStdio:
		n = b.cfg.peerCalls
	}
	sb, err := b.startSandbox(ctx)
	if err != nil {
		cell.Error = err.Error()
		return cell
	}
	defer sb.srv.stop()
	opList := ops(sb.seed)
	if up == upstreamStub {
		st, err := b.stubFor(ctx, sb, opList)
		sb.srv.stop()
		if err != nil {
			cell.Error = err.Error()
			return cell
		}
		sb = st
		defer sb.srv.stop()
	}
	if b.peer != nil {
		for i := range opList {
			opList[i].Peer = b.peer.tools[opList[i].Name]
		}
	}
	if len(b.cfg.ops) > 0 {
		opList = slices.DeleteFunc(opList, func(o op) bool { return !slices.Contains(b.cfg.ops, o.Name) })
		if len(opList) == 0 {
			cell.Error = "-ops selects none of the operations"
			return cell
		}
	}
	tg, err := b.connect(ctx, mode, conc, sb)
	if err != nil {
		cell.Error = err.Error()
		return cell
	}
	defer tg.close()
	cell.Protocol = tg.proto
	// One call of each operation first: a cell whose calls fail is reported, not measured.
	for i := range opList {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := tg.callers[0].call(cctx, &opList[i])
		cancel()
		if err != nil {
			cell.Error = fmt.Sprintf("preflight %s: %v", opList[i].Name, err)
			if tg.server != nil {
				cell.Error += "\n" + tg.server.stderr.String()
			}
			return cell
		}
	}
	if b.cfg.warmup > 0 {
		if _, err := drive(ctx, tg.callers, opList, b.cfg.warmup); err != nil {
			cell.Error = "warmup: " + err.Error()
			return cell
		}
	}
	runtime.GC()
	stopProfile, err := b.startProfile(mode, conc, tg.pid)
	if err != nil {
		cell.Error = err.Error()
		return cell
	}
	before, _ := readProc(tg.pid)
	sbBefore, _ := readProc(sb.srv.pid())
	var selfBefore syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &selfBefore)
	start := time.Now()
	lat, err := drive(ctx, tg.callers, opList, n)
	wall := time.Since(start)
	var selfAfter syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &selfAfter)
	after, _ := readProc(tg.pid)
	sbAfter, _ := readProc(sb.srv.pid())
	if perr := stopProfile(); perr != nil {
		logf("%s at %d: %v", mode, conc, perr)
	}
	if err != nil {
		cell.Error = err.Error()
		return cell
	}
	cell.fill(lat, opList, wall)
	per1k := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(n) }
	if mode == modeFloor {
		cell.ServerCPUPer1k = per1k(sbAfter.CPU - sbBefore.CPU)
		cell.ServerPeakRSSMB = mb(sbAfter.PeakKB)
	} else {
		cell.ServerCPUPer1k = per1k(after.CPU - before.CPU)
		cell.ServerPeakRSSMB = mb(after.PeakKB)
		cell.SandboxCPUPer1k = per1k(sbAfter.CPU - sbBefore.CPU)
	}
	cell.SandboxPeakRSSMB = mb(sbAfter.PeakKB)
	cell.ClientCPUPer1k = per1k(rusageCPU(selfAfter) - rusageCPU(selfBefore))
	return cell
}

func rusageCPU(r syscall.Rusage) time.Duration {
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

func mb(kb int64) float64 { return float64(kb) / 1024 }

// drive makes n calls with len(callers) workers, cycling through the operations in order (call i
// is operation i mod 4), and returns each call's latency, indexed by call.
func drive(ctx context.Context, callers []caller, opList []op, n int) ([]time.Duration, error) {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				o := &opList[i%len(opList)]
				cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
				t0 := time.Now()
				err := c.call(cctx, o)
				lat[i] = time.Since(t0)
				ccancel()
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("call %d (%s): %w", i, o.Name, err) })
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return lat, ctx.Err()
}

// connect starts the mode's server (none for the floor) and opens its sessions.
func (b *bench) connect(ctx context.Context, mode string, conc int, sb *sandbox) (*target, error) {
	switch mode {
	case modeFloor:
		client := newHTTPClient(conc)
		tg := &target{pid: sb.srv.pid(), close: client.CloseIdleConnections}
		for range conc {
			tg.callers = append(tg.callers, &floorCaller{base: sb.api, token: b.cfg.token, client: client})
		}
		return tg, nil
	case modeHTTP, modePass:
		bin, args := b.bin, append([]string{"http", "--addr", "127.0.0.1:0", "--api-host", sb.base}, b.cfg.httpArgs...)
		if mode == modePass {
			bin, args = b.passBin, []string{"http", "--addr", "127.0.0.1:0", "--api-host", sb.base}
		}
		srv, endpoint, err := startServer(ctx, mode, bin, args, b.serverEnv(mode, conc), httpReady, 20*time.Second)
		if err != nil {
			return nil, err
		}
		return b.httpSessions(ctx, srv, endpoint, conc, false)
	case modePeerHTTP:
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		srv, _, err := startServer(ctx, "peer http", b.peer.node,
			append([]string{b.peer.script}, "--transport", "http", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--path", "/mcp"),
			b.peer.env(sb.api, b.cfg.token), nil, 0)
		if err != nil {
			return nil, err
		}
		if err := waitListening(ctx, fmt.Sprintf("127.0.0.1:%d", port), srv, 30*time.Second); err != nil {
			srv.stop()
			return nil, err
		}
		return b.httpSessions(ctx, srv, fmt.Sprintf("http://127.0.0.1:%d/mcp", port), conc, true)
	case modeStdio, modePeerStdio:
		var cmd *exec.Cmd
		if mode == modeStdio {
			cmd = exec.Command(b.bin, "stdio", "--api-host", sb.base)
			cmd.Env = b.serverEnv(mode, conc)
		} else {
			cmd = exec.Command(b.peer.node, b.peer.script)
			cmd.Env = b.peer.env(sb.api, b.cfg.token)
		}
		errTail := &tail{}
		cmd.Stderr = errTail
		cs, err := b.client().Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 5 * time.Second}, b.sessionOptions())
		if err != nil {
			return nil, fmt.Errorf("%s: connect: %w\n%s", mode, err, errTail)
		}
		mc := &mcpCaller{session: cs, peer: mode == modePeerStdio}
		tg := &target{pid: cmd.Process.Pid, proto: cs.InitializeResult().ProtocolVersion,
			server: &server{name: mode, cmd: cmd, stderr: errTail}, close: func() { _ = cs.Close() }}
		for range conc {
			tg.callers = append(tg.callers, mc) // one session; its calls are concurrent
		}
		return tg, nil
	}
	return nil, fmt.Errorf("unknown mode %q", mode)
}

// serverEnv is the environment of our MCP server processes: the upstream token, -server-env,
// and where the cell's profile goes under -server-cpuprofile.
func (b *bench) serverEnv(mode string, conc int) []string {
	env := append([]string{"CARDWRITER_TOKEN=" + b.cfg.token}, b.cfg.serverEnv...)
	if mode == modeHTTP || mode == "idle" {
		// A config directory of its own, so that `http` keeps its state (state.db: the MCP
		// sessions) in a new file, as a server started for the first time does: in the user's,
		// it opened what every earlier run left there (sessions expire after 30 minutes, and a
		// server that lives less than a minute never sweeps them), and the idle measurement
		// grew with that file (6 MB of its pages resident after 1,000 sessions in an 8 MB file
		// against 0.4 MB in a new one), and a second run on the machine failed on its lock.
		b.configDirs++
		env = append(env, "XDG_CONFIG_HOME="+filepath.Join(b.tmp, fmt.Sprintf("config-%d", b.configDirs)))
	}
	if path := b.profilePath(mode, conc); path != "" {
		env = append(env, "CARDWRITER_BENCH_CPUPROFILE="+path)
	}
	return envWith(env...)
}

// profilePath is the file of the cell's server profile, "" when the cell's server is not
// profiled (no -server-cpuprofile, or not a server of ours built by the harness).
func (b *bench) profilePath(mode string, conc int) string {
	if b.cfg.serverProfile == "" || (mode != modeHTTP && mode != modeStdio) {
		return ""
	}
	return filepath.Join(b.cfg.serverProfile, fmt.Sprintf("%s-%s-%d.pprof", b.up, mode, conc))
}

// startProfile starts the cell's server profile (SIGUSR1 to a benchprofile build) and returns
// the function that stops it (SIGUSR2) and waits until the profile is written.
func (b *bench) startProfile(mode string, conc, pid int) (stop func() error, err error) {
	path := b.profilePath(mode, conc)
	if path == "" {
		return func() error { return nil }, nil
	}
	_ = os.Remove(path)
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		return nil, fmt.Errorf("start the server profile: %w", err)
	}
	if err := waitFile(path+".tmp", 5*time.Second); err != nil {
		return nil, fmt.Errorf("start the server profile: %w", err)
	}
	return func() error {
		if err := syscall.Kill(pid, syscall.SIGUSR2); err != nil {
			return fmt.Errorf("stop the server profile: %w", err)
		}
		if err := waitFile(path, 10*time.Second); err != nil {
			return fmt.Errorf("stop the server profile: %w", err)
		}
		logf("server profile: %s", path)
		return nil
	}, nil
}

// waitFile waits until path exists.
func waitFile(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not appear within %s", path, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (b *bench) client() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "cardwriter-bench", Version: "1"}, nil)
}

// sessionfulProtocol is the newest MCP revision with sessions: under 2026-07-28 a client holds
// no session on the server, so there would be nothing idle to measure.
const sessionfulProtocol = "2025-11-25"

// idleSessionOptions asks for -protocol when it is set, else for sessionfulProtocol.
func (b *bench) idleSessionOptions() *mcp.ClientSessionOptions {
	if b.cfg.protocol != "" {
		return b.sessionOptions()
	}
	return &mcp.ClientSessionOptions{ProtocolVersion: sessionfulProtocol}
}

// sessionOptions asks for -protocol when it is set.
func (b *bench) sessionOptions() *mcp.ClientSessionOptions {
	return &mcp.ClientSessionOptions{ProtocolVersion: b.cfg.protocol}
}

// httpSessions opens one streamable HTTP session per worker on endpoint.
func (b *bench) httpSessions(ctx context.Context, srv *server, endpoint string, conc int, peer bool) (*target, error) {
	hc := newHTTPClient(2*conc + 4) // a POST and the standalone SSE stream per session
	var sessions []*mcp.ClientSession
	closeAll := func() {
		for _, cs := range sessions {
			_ = cs.Close()
		}
		hc.CloseIdleConnections()
		srv.stop()
	}
	tg := &target{server: srv, pid: srv.pid(), close: closeAll}
	client := b.client()
	for range conc {
		cs, err := connectWithin(ctx, 15*time.Second, srv, func() (*mcp.ClientSession, error) {
			return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1}, b.sessionOptions())
		})
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("connect to %s: %w\n%s", endpoint, err, srv.stderr)
		}
		sessions = append(sessions, cs)
		tg.callers = append(tg.callers, &mcpCaller{session: cs, peer: peer})
		tg.proto = cs.InitializeResult().ProtocolVersion
	}
	return tg, nil
}

// connectWithin runs connect, giving up after d: the go-sdk client waits for the standalone SSE
// stream's response headers without watching its context, so the server is stopped (which
// closes the stream) when it does not answer in time.
func connectWithin(ctx context.Context, d time.Duration, srv *server, connect func() (*mcp.ClientSession, error)) (*mcp.ClientSession, error) {
	type result struct {
		cs  *mcp.ClientSession
		err error
	}
	ch := make(chan result, 1)
	go func() {
		cs, err := connect()
		ch <- result{cs, err}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.cs, r.err
	case <-t.C:
	case <-ctx.Done():
	}
	srv.stop()
	r := <-ch
	if r.cs != nil {
		_ = r.cs.Close()
	}
	return nil, fmt.Errorf("no session after %s (the server was stopped to end the attempt; last error: %v)", d, r.err)
}

// coldStarts measures spawn-to-initialize-response over stdio for ours and the peer.
func (b *bench) coldStarts(ctx context.Context) {
	sb, err := b.startSandbox(ctx)
	if err != nil {
		b.results.note("cold start: " + err.Error())
		return
	}
	defer sb.srv.stop()
	ours := func() *exec.Cmd {
		cmd := exec.Command(b.bin, "stdio", "--api-host", sb.base)
		cmd.Env = b.serverEnv("cold", 0)
		return cmd
	}
	servers := []coldServer{{name: "ours stdio", runs: b.cfg.coldRuns, mk: ours}}
	if b.cfg.coldBaselineBin != "" {
		servers = append([]coldServer{{name: "before stdio", runs: b.cfg.coldRuns, mk: func() *exec.Cmd {
			cmd := exec.Command(b.cfg.coldBaselineBin, "stdio", "--api-host", sb.base)
			cmd.Env = b.serverEnv("cold", 0)
			return cmd
		}}}, servers...)
	}
	if b.peer != nil {
		servers = append(servers, coldServer{name: "peer stdio", runs: b.cfg.peerColdRuns, mk: func() *exec.Cmd {
			cmd := exec.Command(b.peer.node, b.peer.script)
			cmd.Env = b.peer.env(sb.api, b.cfg.token)
			return cmd
		}})
	}
	b.measureColdStarts(ctx, servers)
	for i := range b.results.Cold {
		if b.results.Cold[i].Server != "ours stdio" {
			continue
		}
		if tr, err := tracedStart(ctx, ours()); err == nil {
			b.results.Cold[i].Traced = tr
		} else {
			logf("cold start traced: %v", err)
		}
	}
}

// coldServer is a server whose cold start is measured runs times; mk makes one start's command.
type coldServer struct {
	name string
	runs int
	mk   func() *exec.Cmd
}

// measureColdStarts starts the servers in turn, one start each per round, so that a change of
// the machine's load during the measurement weighs on all of them alike; a server that fails to
// start is noted and left out.
func (b *bench) measureColdStarts(ctx context.Context, servers []coldServer) {
	ds := make([][]time.Duration, len(servers))
	failed := make([]bool, len(servers))
	for round := 0; ; round++ {
		more := false
		for i, s := range servers {
			if failed[i] || round >= s.runs {
				continue
			}
			more = true
			d, err := coldStart(ctx, s.mk())
			if err != nil {
				logf("cold start %s: %v", s.name, err)
				b.results.note(fmt.Sprintf("cold start %s: %v", s.name, firstLine(err.Error())))
				failed[i] = true
				continue
			}
			ds[i] = append(ds[i], d)
		}
		if !more {
			break
		}
	}
	for i, s := range servers {
		if failed[i] {
			continue
		}
		r := coldResult{Server: s.name, Runs: s.runs}
		slices.Sort(ds[i])
		r.MedianMs = ms(ds[i][len(ds[i])/2])
		r.MinMs = ms(ds[i][0])
		r.MaxMs = ms(ds[i][len(ds[i])-1])
		logf("cold start %-12s median %.1f ms (min %.1f, max %.1f, %d runs)", s.name, r.MedianMs, r.MinMs, r.MaxMs, s.runs)
		b.results.Cold = append(b.results.Cold, r)
	}
}

var initLine = regexp.MustCompile(`^init (\S+) @([\d.]+) ms, ([\d.]+) ms clock`)

// tracedStart starts cmd once more with GODEBUG=inittrace=1 and reads when package
// initialization ended and which initializers took longest.
func tracedStart(ctx context.Context, cmd *exec.Cmd) (*initTrace, error) {
	cmd.Env = append(cmd.Env, "GODEBUG=inittrace=1")
	errTail := &traceWriter{}
	d, err := coldStartWith(ctx, cmd, errTail)
	if err != nil {
		return nil, err
	}
	tr := &initTrace{TotalMs: ms(d)}
	var all []initEntry
	for _, line := range strings.Split(errTail.String(), "\n") {
		m := initLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, _ := strconv.ParseFloat(m[2], 64)
		clock, _ := strconv.ParseFloat(m[3], 64)
		tr.InitEndMs = max(tr.InitEndMs, at+clock)
		all = append(all, initEntry{Package: m[1], Ms: clock})
	}
	if len(all) == 0 {
		return nil, errors.New("no inittrace lines")
	}
	slices.SortFunc(all, func(a, b initEntry) int { return cmpFloat(b.Ms, a.Ms) })
	tr.Slowest = all[:min(3, len(all))]
	return tr, nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// traceWriter keeps everything written to it (a traced start's stderr is short).
type traceWriter struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (w *traceWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *traceWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

const initializeRequest = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cardwriter-bench","version":"1"}}}` + "\n"

// coldStart starts cmd, sends initialize at once and times the arrival of its response.
func coldStart(ctx context.Context, cmd *exec.Cmd) (time.Duration, error) {
	return coldStartWith(ctx, cmd, &tail{})
}

// coldStartWith is coldStart with the process's stderr going to errOut.
func coldStartWith(ctx context.Context, cmd *exec.Cmd, errOut interface {
	io.Writer
	String() string
}) (time.Duration, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	errTail := errOut
	cmd.Stderr = errTail
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	if _, err := io.WriteString(stdin, initializeRequest); err != nil {
		return 0, err
	}
	type answer struct {
		d   time.Duration
		err error
	}
	got := make(chan answer, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
			}
			if json.Unmarshal(sc.Bytes(), &msg) == nil && string(msg.ID) == "1" && msg.Result != nil {
				got <- answer{d: time.Since(t0)}
				_, _ = io.Copy(io.Discard, stdout)
				return
			}
		}
		got <- answer{err: errors.New("no initialize response")}
	}()
	select {
	case a := <-got:
		if a.err != nil {
			return 0, fmt.Errorf("%w\n%s", a.err, errTail)
		}
		return a.d, nil
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("no initialize response within 30 s\n%s", errTail)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// idleSessions measures the RSS of `http` holding n initialized sessions that make no calls.
func (b *bench) idleSessions(ctx context.Context, n int, sse bool) (idleResult, error) {
	r := idleResult{Sessions: n, StandaloneSSE: sse}
	sb, err := b.startSandbox(ctx)
	if err != nil {
		return r, err
	}
	defer sb.srv.stop()
	srv, endpoint, err := startServer(ctx, "cardwriter-mcp http", b.bin,
		append([]string{"http", "--addr", "127.0.0.1:0", "--api-host", sb.base}, b.cfg.httpArgs...),
		b.serverEnv("idle", 0), httpReady, 20*time.Second)
	if err != nil {
		return r, err
	}
	defer srv.stop()
	time.Sleep(200 * time.Millisecond)
	before, _ := readProc(srv.pid())
	r.RSSBeforeMB = mb(before.RSSKB)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	client := b.client()
	sessions := make([]*mcp.ClientSession, n)
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc,
					MaxRetries: -1, DisableStandaloneSSE: !sse}, b.idleSessionOptions())
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				sessions[i] = cs
			}
		}()
	}
	wg.Wait()
	defer func() {
		for _, cs := range sessions {
			if cs != nil {
				_ = cs.Close()
			}
		}
	}()
	if firstErr != nil {
		return r, fmt.Errorf("open session: %w", firstErr)
	}
	// Let the server settle (GC, idle connection bookkeeping) before reading its RSS.
	time.Sleep(2 * time.Second)
	after, _ := readProc(srv.pid())
	r.RSSAfterMB = mb(after.RSSKB)
	r.PeakRSSMB = mb(after.PeakKB)
	r.Threads = after.Threads
	r.PerSessionKB = float64(after.RSSKB-before.RSSKB) / float64(n)
	return r, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// replaceBetweenMarkers writes content between the bench markers of the file at path.
func replaceBetweenMarkers(path, content string) error {
	const begin, end = "<!-- bench:begin -->", "<!-- bench:end -->"
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(data)
	i := strings.Index(s, begin)
	j := strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s ... %s markers", path, begin, end)
	}
	s = s[:i+len(begin)] + "\n" + strings.TrimSpace(content) + "\n" + s[j:]
	return os.WriteFile(filepath.Clean(path), []byte(s), 0o644)
}
