// Command cardwriter-bench is the benchmark harness of cardwriter-mcp: one command, one run on
// one machine. It builds the server, starts the card service sandbox, and measures the same four
// operations (get a card, set its opening lines, write a worldbook document of 50 entries, list
// the trial cards) sent
//
//   - straight to the sandbox over loopback HTTP (the floor),
//   - as tool calls through `cardwriter-mcp http --api-host` (streamable HTTP, one MCP session per worker),
//   - as tool calls through bench/passthrough, a bare mcp-go server forwarding the same four
//     calls with no validation (a reference: what the framework and the extra hop cost alone),
//   - as tool calls through `cardwriter-mcp stdio --api-host` (one process, one session),
//   - as tool calls through the npm package @ivotoby/openapi-mcp-server (a generic OpenAPI-to-MCP
//     server, the peer) given the same contract and pointed at the same sandbox, over stdio and
//     streamable HTTP (skipped, with a note, when npm or node is missing),
//
// at several concurrencies, a fixed number of calls per cell, and reports throughput, p50/p99
// latency, ratios to the floor and to the peer, CPU seconds per 1000 calls and peak RSS of the
// server processes; then the stdio cold start (spawn to initialize response) of ours and the
// peer's, and the RSS of `http` holding 1,000 idle initialized sessions. It prints tables and
// writes JSON (-json FILE); -readme FILE puts the tables between the bench markers of FILE (docs/performance.md).
//
// Every cell gets a fresh sandbox (seeded with one card, one worldbook of 50 entries bound to
// it, and two trial cards) and a fresh server process. All traffic stays on 127.0.0.1.
//
// Usage (from the module root):
//
//	go run ./cmd/cardwriter-bench [-calls 2000] [-conc 1,8,64] [-json bench.json] [-readme docs/performance.md]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The modes, in the order they are run and listed.
const (
	modeFloor     = "floor"
	modeHTTP      = "http"
	modePass      = "passthrough"
	modeStdio     = "stdio"
	modePeerHTTP  = "peer-http"
	modePeerStdio = "peer-stdio"
)

var allModes = []string{modeFloor, modeHTTP, modePass, modeStdio, modePeerHTTP, modePeerStdio}

type config struct {
	calls        int
	stdioCalls   int
	peerCalls    int
	warmup       int
	conc         []int
	modes        []string
	coldRuns     int
	peerColdRuns int
	sessions     int
	jsonPath     string
	readme       string
	bin          string
	peer         string
	peerVersion  string
	token        string
	protocol     string
	httpArgs     []string
	skipCold     bool
	skipIdle     bool
	ops          []string
	cpuProfile   string
	serverEnv    []string
	// serverProfile is the directory for CPU profiles of our server processes over each
	// cell's measured calls (a build with -tags benchprofile); "" profiles nothing.
	serverProfile string
	upstreams     []string // upstreamSandbox, upstreamStub
	coldBaseline  float64  // ms: the stdio cold start the target keeps to, without coldBaselineBin
	// coldBaselineBin is a cardwriter-mcp built before the change, whose cold start is
	// measured in the same run as the target's baseline.
	coldBaselineBin string
	// mcpGoPatch is a patch to mcp-go: when set, ours and bench/passthrough are built against
	// mcp-go patched with it, and the results are labelled as not the product's.
	mcpGoPatch string
	// strict: a failed cell fails the run (CI).
	strict bool
}

// The card services a run measures against.
const (
	upstreamSandbox = "sandbox" // the emulator: validates every request, keeps state
	upstreamStub    = "stub"    // bench/stub: fixed answers, no validation
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "cardwriter-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	var cfg config
	fs := flag.NewFlagSet("cardwriter-bench", flag.ContinueOnError)
	fs.IntVar(&cfg.calls, "calls", 2000, "measured calls per cell (floor and http)")
	fs.IntVar(&cfg.stdioCalls, "stdio-calls", 0, "measured calls per stdio cell (0: same as -calls)")
	fs.IntVar(&cfg.peerCalls, "peer-calls", 1000, "measured calls per peer cell")
	fs.IntVar(&cfg.warmup, "warmup", 200, "unmeasured calls per cell before the measured ones")
	concs := fs.String("conc", "1,8,64", "comma-separated concurrencies (workers)")
	modes := fs.String("modes", strings.Join(allModes, ","), "comma-separated modes: "+strings.Join(allModes, ", "))
	fs.IntVar(&cfg.coldRuns, "cold-runs", 20, "stdio cold starts measured for ours")
	fs.IntVar(&cfg.peerColdRuns, "peer-cold-runs", 5, "stdio cold starts measured for the peer")
	fs.IntVar(&cfg.sessions, "sessions", 1000, "idle initialized sessions held open on `http` for the memory measurement")
	fs.StringVar(&cfg.jsonPath, "json", "", "write the results as JSON to this file")
	fs.StringVar(&cfg.readme, "readme", "", "write the tables between <!-- bench:begin --> and <!-- bench:end --> in this file")
	fs.StringVar(&cfg.bin, "bin", "", "use this cardwriter-mcp binary instead of building one")
	fs.StringVar(&cfg.peer, "peer", "auto", `the peer: "auto" (install it with npm into a cache directory), "off", or the directory of an npm install of it`)
	fs.StringVar(&cfg.peerVersion, "peer-version", "1.16.1", "version of @ivotoby/openapi-mcp-server to install")
	fs.StringVar(&cfg.token, "token", "bench-demo-token", "the sandbox demo user's bearer token")
	fs.StringVar(&cfg.protocol, "protocol", "", "MCP protocol version the client asks for (default: the go-sdk client's)")
	httpArgs := fs.String("http-args", "", "extra space-separated arguments for `cardwriter-mcp http`")
	fs.BoolVar(&cfg.skipCold, "skip-cold", false, "skip the cold start measurement")
	fs.BoolVar(&cfg.skipIdle, "skip-idle", false, "skip the idle sessions measurement")
	serverEnv := fs.String("server-env", "", "comma-separated KEY=VALUE added to the environment of our server processes only (e.g. GOGC=400), for experiments")
	opNames := fs.String("ops", "", "comma-separated operationIds to call (default: all four); for looking at one operation alone")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the harness itself (the MCP client side) to this file")
	ups := fs.String("upstreams", upstreamSandbox+","+upstreamStub, "comma-separated card services to measure against: sandbox (the emulator), stub (bench/stub: fixed answers recorded from a seeded sandbox, no validation)")
	fs.Float64Var(&cfg.coldBaseline, "cold-baseline-ms", 33.5, "the stdio cold start median (ms) the cold start target keeps to (the README's before this run's changes)")
	fs.StringVar(&cfg.coldBaselineBin, "cold-baseline-bin", "", "a cardwriter-mcp built before the change: its stdio cold start is measured in the same run and is the cold start target's baseline (instead of -cold-baseline-ms)")
	fs.StringVar(&cfg.serverProfile, "server-cpuprofile", "", "write a CPU profile of our server over each http and stdio cell's measured calls into this directory (MODE-WORKERS.pprof; builds the server with -tags benchprofile)")
	fs.BoolVar(&cfg.strict, "strict", false, "exit 1 when a cell of a mode fails (CI's short pass: every mode must run); the peer over streamable HTTP, which the go-sdk client cannot drive, excepted")
	fs.StringVar(&cfg.mcpGoPatch, "mcp-go-patch", "", "build cmd/cardwriter-mcp and bench/passthrough against mcp-go patched with this file (a proposal for upstream, measured; the results are labelled as not the product's)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if cfg.mcpGoPatch != "" && cfg.readme != "" {
		return errors.New("-mcp-go-patch cannot be used with -readme: the README shows the product's figures, built against released mcp-go")
	}
	if cfg.mcpGoPatch != "" && cfg.bin != "" {
		return errors.New("-mcp-go-patch needs a build of ours: it cannot be used with -bin")
	}
	if cfg.stdioCalls == 0 {
		cfg.stdioCalls = cfg.calls
	}
	if cfg.calls < 1 || cfg.stdioCalls < 1 || cfg.peerCalls < 1 || cfg.warmup < 0 || cfg.sessions < 0 {
		return errors.New("call counts must be positive")
	}
	for _, s := range splitList(*concs) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1024 {
			return fmt.Errorf("-conc: %q is not a concurrency from 1 to 1024", s)
		}
		cfg.conc = append(cfg.conc, n)
	}
	for _, m := range splitList(*modes) {
		if !contains(allModes, m) {
			return fmt.Errorf("-modes: unknown mode %q", m)
		}
		cfg.modes = append(cfg.modes, m)
	}
	for _, u := range splitList(*ups) {
		if u != upstreamSandbox && u != upstreamStub {
			return fmt.Errorf("-upstreams: unknown card service %q", u)
		}
		cfg.upstreams = append(cfg.upstreams, u)
	}
	if len(cfg.upstreams) == 0 {
		return errors.New("-upstreams: name at least one card service")
	}
	cfg.httpArgs = strings.Fields(*httpArgs)
	cfg.ops = splitList(*opNames)
	cfg.serverEnv = splitList(*serverEnv)
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	b, err := newBench(ctx, cfg, args)
	if err != nil {
		return err
	}
	defer b.close()
	return b.run(ctx)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
