package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// results is everything one run measured; it is also the JSON the harness writes.
type results struct {
	Date    string       `json:"date"`
	Command string       `json:"command"`
	Machine machine      `json:"machine"`
	Load    [2]string    `json:"loadAverage"` // /proc/loadavg at the start and at the end
	Peer    string       `json:"peer,omitempty"`
	Config  resultConfig `json:"config"`
	Cells   []cellResult `json:"cells"`
	Ratios  []ratio      `json:"ratios"`
	Cold    []coldResult `json:"coldStart"`
	Idle    []idleResult `json:"idleSessions"`
	Targets []targetRow  `json:"targets"`
	Notes   []string     `json:"notes,omitempty"`
	started time.Time

	// MCPGoPatch names the mcp-go patch ours and bench/passthrough were built with
	// (-mcp-go-patch): when it is set, these are not the product's figures.
	MCPGoPatch string `json:"mcpGoPatch,omitempty"`
}

type machine struct {
	CPU    string `json:"cpu"`
	Cores  int    `json:"cores"`
	Memory string `json:"memory"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
	Node   string `json:"node,omitempty"`
}

type resultConfig struct {
	Calls      int   `json:"calls"`
	StdioCalls int   `json:"stdioCalls"`
	PeerCalls  int   `json:"peerCalls"`
	Warmup     int   `json:"warmup"`
	Conc       []int `json:"concurrency"`
	Sessions   int   `json:"idleSessions"`
	// Upstreams are the card services measured against, in order.
	Upstreams []string `json:"upstreams"`
	// ColdBaselineMs is the stdio cold start the cold start target keeps to.
	ColdBaselineMs float64 `json:"coldBaselineMs"`
}

// cellResult is one mode at one concurrency.
type cellResult struct {
	Upstream         string             `json:"upstream"` // the card service: sandbox or stub
	Mode             string             `json:"mode"`
	Concurrency      int                `json:"concurrency"`
	Protocol         string             `json:"protocol,omitempty"`
	Calls            int                `json:"calls"`
	Seconds          float64            `json:"seconds"`
	Throughput       float64            `json:"throughput"` // calls per second
	P50Ms            float64            `json:"p50Ms"`
	P99Ms            float64            `json:"p99Ms"`
	MeanMs           float64            `json:"meanMs"`
	OpP50Ms          map[string]float64 `json:"opP50Ms"`
	ServerCPUPer1k   float64            `json:"serverCpuSecondsPer1000"` // the floor: the sandbox's
	SandboxCPUPer1k  float64            `json:"sandboxCpuSecondsPer1000"`
	ClientCPUPer1k   float64            `json:"clientCpuSecondsPer1000"` // the harness itself
	ServerPeakRSSMB  float64            `json:"serverPeakRssMB"`
	SandboxPeakRSSMB float64            `json:"sandboxPeakRssMB"`
	Error            string             `json:"error,omitempty"`
}

type ratio struct {
	Upstream    string  `json:"upstream"`
	Mode        string  `json:"mode"`
	Versus      string  `json:"versus"`
	Concurrency int     `json:"concurrency"`
	Throughput  float64 `json:"throughput"`         // mode's / versus's
	P50         float64 `json:"p50"`                // mode's / versus's
	CPU         float64 `json:"serverCpu"`          // mode's server CPU per call / versus's
	AddedP50    float64 `json:"addedP50,omitempty"` // mode's p50 above the floor's / versus's (not vs the floor)
}

type coldResult struct {
	Server   string  `json:"server"`
	Runs     int     `json:"runs"`
	MedianMs float64 `json:"medianMs"`
	MinMs    float64 `json:"minMs"`
	MaxMs    float64 `json:"maxMs"`
	// From one more start with GODEBUG=inittrace=1 (Go servers only): when the last package
	// initializer finished (main starts then), and the slowest initializers.
	Traced *initTrace `json:"initTrace,omitempty"`
}

type initTrace struct {
	TotalMs   float64     `json:"totalMs"`   // spawn to initialize response, this (slower) traced start
	InitEndMs float64     `json:"initEndMs"` // process start to the end of the last initializer
	Slowest   []initEntry `json:"slowest"`
}

type initEntry struct {
	Package string  `json:"package"`
	Ms      float64 `json:"ms"`
}

type idleResult struct {
	Sessions      int     `json:"sessions"`
	StandaloneSSE bool    `json:"standaloneSSE"`
	RSSBeforeMB   float64 `json:"rssBeforeMB"`
	RSSAfterMB    float64 `json:"rssAfterMB"`
	PeakRSSMB     float64 `json:"peakRssMB"`
	PerSessionKB  float64 `json:"perSessionKB"`
	Threads       int     `json:"threads"`
}

type targetRow struct {
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

func (r *results) start(cfg config, args []string) {
	r.started = time.Now()
	r.Date = r.started.UTC().Format("2006-01-02 15:04 UTC")
	r.Command = strings.TrimSpace("go run ./cmd/cardwriter-bench " + strings.Join(args, " "))
	r.Load[0] = loadavg()
	r.Machine = machine{CPU: cpuModel(), Cores: runtime.NumCPU(), Memory: memTotal(), Kernel: kernel(), Go: runtime.Version()}
	r.Config = resultConfig{Calls: cfg.calls, StdioCalls: cfg.stdioCalls, PeerCalls: cfg.peerCalls, Warmup: cfg.warmup,
		Conc: cfg.conc, Sessions: cfg.sessions, Upstreams: cfg.upstreams, ColdBaselineMs: cfg.coldBaseline}
}

func (r *results) note(s string) { r.Notes = append(r.Notes, s) }

func loadavg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func memTotal() string {
	data, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
		}
	}
	return "unknown"
}

func kernel() string {
	out, err := exec.Command("uname", "-sr").Output()
	if err != nil {
		return runtime.GOOS
	}
	return strings.TrimSpace(string(out))
}

// fill computes the cell's figures from each call's latency (indexed by call) and the wall time.
func (c *cellResult) fill(lat []time.Duration, opList []op, wall time.Duration) {
	c.Calls = len(lat)
	c.Seconds = wall.Seconds()
	c.Throughput = float64(len(lat)) / wall.Seconds()
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	c.P50Ms = ms(percentile(sorted, 50))
	c.P99Ms = ms(percentile(sorted, 99))
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	c.MeanMs = ms(sum / time.Duration(len(lat)))
	c.OpP50Ms = map[string]float64{}
	for k, o := range opList {
		var ds []time.Duration
		for i := k; i < len(lat); i += len(opList) {
			ds = append(ds, lat[i])
		}
		slices.Sort(ds)
		c.OpP50Ms[o.Name] = ms(percentile(ds, 50))
	}
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted))+0.999999) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

func (r *results) cell(up, mode string, conc int) *cellResult {
	for i := range r.Cells {
		if c := &r.Cells[i]; c.Upstream == up && c.Mode == mode && c.Concurrency == conc && c.Error == "" {
			return c
		}
	}
	return nil
}

// peerCell is the peer cell a mode of ours is compared with, and a mark when it is the peer
// over stdio standing in for the peer over HTTP (which could not be measured).
func (r *results) peerCell(up, mode string, conc int) (*cellResult, string) {
	switch mode {
	case modeStdio:
		return r.cell(up, modePeerStdio, conc), ""
	case modeHTTP:
		if q := r.cell(up, modePeerHTTP, conc); q != nil {
			return q, ""
		}
		if q := r.cell(up, modePeerStdio, conc); q != nil {
			return q, " (vs stdio)"
		}
	}
	return nil, ""
}

// addedMs is a cell's p50 above the floor's on the same card service and concurrency; ok is
// false without the floor.
func (r *results) addedMs(c *cellResult) (float64, bool) {
	f := r.cell(c.Upstream, modeFloor, c.Concurrency)
	if f == nil {
		return 0, false
	}
	return c.P50Ms - f.P50Ms, true
}

// quotient is a/b, or 0 where b is 0 (a server CPU too small for the clock's resolution on a
// short run): JSON has no infinity, and the run's results must still be written.
func quotient(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// finish computes the ratios, pair by pair within this run, and checks the targets.
func (r *results) finish() {
	r.Load[1] = loadavg()
	pairs := [][2]string{
		{modeHTTP, modeFloor}, {modeStdio, modeFloor}, {modePeerHTTP, modeFloor}, {modePeerStdio, modeFloor},
		{modeHTTP, modePeerHTTP}, {modeStdio, modePeerStdio}, {modeHTTP, modePeerStdio},
		{modePass, modeFloor}, {modeHTTP, modePass},
	}
	for _, up := range r.Config.Upstreams {
		for _, conc := range r.Config.Conc {
			for _, p := range pairs {
				a, b := r.cell(up, p[0], conc), r.cell(up, p[1], conc)
				if a == nil || b == nil {
					continue
				}
				q := ratio{Upstream: up, Mode: p[0], Versus: p[1], Concurrency: conc,
					Throughput: quotient(a.Throughput, b.Throughput), P50: quotient(a.P50Ms, b.P50Ms), CPU: quotient(a.ServerCPUPer1k, b.ServerCPUPer1k)}
				addA, okA := r.addedMs(a)
				addB, okB := r.addedMs(b)
				if okA && okB && p[1] != modeFloor && addB > 0 {
					q.AddedP50 = addA / addB
				}
				r.Ratios = append(r.Ratios, q)
			}
		}
		r.checkTargets(up)
	}
	baseline, what := r.Config.ColdBaselineMs, fmt.Sprintf("the %.1f ms before this issue", r.Config.ColdBaselineMs)
	for _, c := range r.Cold {
		if c.Server == "before stdio" {
			baseline, what = c.MedianMs, fmt.Sprintf("the build before this issue's (%.1f ms in this run)", c.MedianMs)
		}
	}
	for _, c := range r.Cold {
		if c.Server == "ours stdio" {
			r.Targets = append(r.Targets, targetRow{"stdio cold start (median) at most " + what,
				fmt.Sprintf("%.1f ms", c.MedianMs), c.MedianMs <= baseline})
		}
	}
	for _, i := range r.Idle {
		if !i.StandaloneSSE {
			r.Targets = append(r.Targets, targetRow{fmt.Sprintf("%d idle sessions under 40 MB RSS", i.Sessions),
				fmt.Sprintf("%.1f MB", i.RSSAfterMB), i.RSSAfterMB < 40})
		}
	}
}

// checkTargets adds the per-call targets of one card service: server CPU per call at most 0.5x
// the peer's (issue 15) and under 0.9x (issue 30, with revisions) (stdio and HTTP) and at most
// 1.3x the passthrough's (HTTP); at concurrency 1, the p50 added above the floor at most 0.5x
// the peer's over stdio.
func (r *results) checkTargets(up string) {
	for _, conc := range r.Config.Conc {
		for _, m := range []string{modeStdio, modeHTTP} {
			c := r.cell(up, m, conc)
			pe, mark := r.peerCell(up, m, conc)
			if c == nil || pe == nil {
				continue
			}
			q := c.ServerCPUPer1k / pe.ServerCPUPer1k
			measured := fmt.Sprintf("%.2fx (%.3f vs %.3f s/1k)", q, c.ServerCPUPer1k, pe.ServerCPUPer1k)
			r.Targets = append(r.Targets, targetRow{fmt.Sprintf("%s, %s, concurrency %d: server CPU per call at most 0.5x the peer's%s", upstreamLabel[up], m, conc, mark),
				measured, q <= 0.5})
			// Issue 30: with a revision kept before every write, under 0.9x the peer's.
			r.Targets = append(r.Targets, targetRow{fmt.Sprintf("%s, %s, concurrency %d: server CPU per call under 0.9x the peer's%s (issue 30, revisions kept)", upstreamLabel[up], m, conc, mark),
				measured, q < 0.9})
		}
		if c, pa := r.cell(up, modeHTTP, conc), r.cell(up, modePass, conc); c != nil && pa != nil {
			q := c.ServerCPUPer1k / pa.ServerCPUPer1k
			r.Targets = append(r.Targets, targetRow{fmt.Sprintf("%s, http, concurrency %d: server CPU per call at most 1.3x the passthrough's", upstreamLabel[up], conc),
				fmt.Sprintf("%.2fx (%.3f vs %.3f s/1k)", q, c.ServerCPUPer1k, pa.ServerCPUPer1k), q <= 1.3})
		}
	}
	pe := r.cell(up, modePeerStdio, 1)
	if pe == nil {
		return
	}
	peAdded, ok := r.addedMs(pe)
	if !ok {
		return
	}
	for _, m := range []string{modeStdio, modeHTTP} {
		c := r.cell(up, m, 1)
		if c == nil {
			continue
		}
		added, _ := r.addedMs(c)
		r.Targets = append(r.Targets, targetRow{fmt.Sprintf("%s, %s, concurrency 1: p50 added above the floor at most 0.5x the peer's over stdio", upstreamLabel[up], m),
			fmt.Sprintf("%.2fx (%.3f vs %.3f ms)", added/peAdded, added, peAdded), added <= 0.5*peAdded})
	}
}

var modeLabel = map[string]string{
	modeFloor:     "floor: REST straight to the card service",
	modeHTTP:      "ours, streamable HTTP",
	modePass:      "reference: mcp-go passthrough, streamable HTTP",
	modeStdio:     "ours, stdio",
	modePeerHTTP:  "peer, streamable HTTP",
	modePeerStdio: "peer, stdio",
}

var upstreamLabel = map[string]string{upstreamSandbox: "sandbox", upstreamStub: "stub"}

// markdown renders the run as the Performance tables of docs/performance.md.
func (r *results) markdown() string {
	var sb strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	if r.MCPGoPatch != "" {
		p("**Not the product's figures**: cardwriter-mcp and bench/passthrough were built against %s, a proposed change to the framework, not against the released module the product builds with.\n\n", r.MCPGoPatch)
	}
	p("Measured %s on %s (%d cores, %s, %s), %s; load average %s at the start, %s at the end.\n",
		r.Date, r.Machine.CPU, r.Machine.Cores, r.Machine.Memory, r.Machine.Kernel, r.Machine.Go, r.Load[0], r.Load[1])
	p("Command: `%s`", r.Command)
	if r.Peer != "" {
		p("; peer: `%s` on Node %s", r.Peer, r.Machine.Node)
	}
	p(".\n\n")
	p("Each call is one of four operations in turn: get a card, set its opening lines, write a worldbook document of %d entries, list the trial cards. ", worldbookEntries)
	p("Calls per cell: %d (floor, ours), %d (ours over stdio), %d (peer), after %d unmeasured; a fresh card service and server per cell. ",
		r.Config.Calls, r.Config.StdioCalls, r.Config.PeerCalls, r.Config.Warmup)
	p("Two card services (floors): the sandbox (the emulator, which validates every request against the contract and keeps state), " +
		"and bench/stub (the sandbox's answers to the same four requests, recorded once per cell and replayed: no validation, no state), " +
		"so that a server's own cost is not hidden behind the sandbox's. ")
	p("Ratios are within one card service and concurrency, in this run. Added p50 is the p50 above the floor's; ours is compared with the peer on the same transport. " +
		"CPU is the server process's (for the floor, the card service's), in seconds per 1000 calls; RSS is its peak.\n")
	for _, up := range r.Config.Upstreams {
		r.cellTable(p, up)
	}
	if len(r.Cold) > 0 {
		p("\nCold start over stdio, spawn to the `initialize` response:\n\n| Server | Runs | Median ms | Min ms | Max ms |\n|---|--:|--:|--:|--:|\n")
		for _, c := range r.Cold {
			p("| %s | %d | %.1f | %.1f | %.1f |\n", c.Server, c.Runs, c.MedianMs, c.MinMs, c.MaxMs)
		}
	}
	if len(r.Idle) > 0 {
		p("\nMemory of `cardwriter-mcp http` holding idle initialized sessions:\n\n| Sessions | Standalone SSE stream open | RSS before MB | RSS after MB | Per session KB |\n|--:|---|--:|--:|--:|\n")
		for _, i := range r.Idle {
			sse := "no"
			if i.StandaloneSSE {
				sse = "yes (one GET stream per session)"
			}
			p("| %d | %s | %.1f | %.1f | %.1f |\n", i.Sessions, sse, i.RSSBeforeMB, i.RSSAfterMB, i.PerSessionKB)
		}
	}
	if len(r.Targets) > 0 {
		p("\nTargets (issues 15 and 30):\n\n| Target | Measured | Met |\n|---|--:|---|\n")
		for _, t := range r.Targets {
			met := "yes"
			if !t.Met {
				met = "**no**"
			}
			p("| %s | %s | %s |\n", t.Target, t.Measured, met)
		}
	}
	for _, b := range r.bounds() {
		p("\n%s\n", b)
	}
	for _, n := range r.Notes {
		p("\nNote: %s\n", shorten(n, 600))
	}
	return sb.String()
}

// cellTable renders the cells of one card service.
func (r *results) cellTable(p func(string, ...any), up string) {
	p("\nCard service: **%s**.\n\n", upstreamLabel[up])
	p("| Mode | Workers | Calls/s | p50 ms | p99 ms | Calls/s vs floor | p50 vs floor | Added p50 ms | Added p50 vs peer | Calls/s vs peer | CPU s/1k calls | CPU vs peer | CPU vs passthrough | Card service CPU s/1k | Peak RSS MB |\n")
	p("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, conc := range r.Config.Conc {
		for _, m := range allModes {
			var c *cellResult
			for i := range r.Cells {
				if r.Cells[i].Upstream == up && r.Cells[i].Mode == m && r.Cells[i].Concurrency == conc {
					c = &r.Cells[i]
				}
			}
			if c == nil {
				continue
			}
			if c.Error != "" {
				p("| %s | %d | failed: %s ||||||||||||\n", modeLabel[m], conc, strings.ReplaceAll(shorten(firstLine(c.Error), 120), "|", "/"))
				continue
			}
			var vsFloor, vsFloorP50, added, addedVsPeer, vsPeer, cpuVsPeer, cpuVsPass, upCPU string
			if f := r.cell(up, modeFloor, conc); f != nil && m != modeFloor {
				vsFloor = fmt.Sprintf("%.0f%%", c.Throughput/f.Throughput*100)
				vsFloorP50 = fmt.Sprintf("%.2fx", c.P50Ms/f.P50Ms)
				added = fmt.Sprintf("%.3f", c.P50Ms-f.P50Ms)
				upCPU = fmt.Sprintf("%.3f", c.SandboxCPUPer1k)
			}
			if q, mark := r.peerCell(up, m, conc); q != nil {
				vsPeer = fmt.Sprintf("%.1fx%s", c.Throughput/q.Throughput, mark)
				cpuVsPeer = fmt.Sprintf("%.2fx%s", c.ServerCPUPer1k/q.ServerCPUPer1k, mark)
				a, _ := r.addedMs(c)
				if qa, ok := r.addedMs(q); ok && qa > 0 {
					addedVsPeer = fmt.Sprintf("%.2fx%s", a/qa, mark)
				}
			}
			if pa := r.cell(up, modePass, conc); pa != nil && m == modeHTTP {
				cpuVsPass = fmt.Sprintf("%.2fx", c.ServerCPUPer1k/pa.ServerCPUPer1k)
			}
			p("| %s | %d | %.0f | %.3f | %.3f | %s | %s | %s | %s | %s | %.3f | %s | %s | %s | %.1f |\n", modeLabel[m], conc, c.Throughput,
				c.P50Ms, c.P99Ms, vsFloor, vsFloorP50, added, addedVsPeer, vsPeer, c.ServerCPUPer1k, cpuVsPeer, cpuVsPass, upCPU, c.ServerPeakRSSMB)
		}
	}
}

// bounds explains, from this run's figures, what bounds each per-call target that was not met.
func (r *results) bounds() []string {
	var out []string
	for _, up := range r.Config.Upstreams {
		for _, conc := range r.Config.Conc {
			h, pa := r.cell(up, modeHTTP, conc), r.cell(up, modePass, conc)
			pe, mark := r.peerCell(up, modeHTTP, conc)
			if h == nil || pa == nil {
				continue
			}
			s := fmt.Sprintf("What bounds server CPU per call (%s, concurrency %d): the bare mcp-go passthrough (no validation, no contract, no logging) spends %.3f s per 1000 calls in its server, ours %.3f",
				upstreamLabel[up], conc, pa.ServerCPUPer1k, h.ServerCPUPer1k)
			if pe != nil {
				s += fmt.Sprintf("; 0.5x the peer's%s is %.3f", mark, pe.ServerCPUPer1k/2)
				if pa.ServerCPUPer1k > pe.ServerCPUPer1k/2 {
					s += ", less than the framework's own work per call (decoding each request several times, BENCH.md)"
				}
			}
			s += fmt.Sprintf("; 1.3x the passthrough's is %.3f, which leaves ours %.3f s per 1000 calls (%.0f µs a call) for what it does and the passthrough does not: "+
				"validating arguments and results, the contract, the log line and notifications.", 1.3*pa.ServerCPUPer1k, 0.3*pa.ServerCPUPer1k, 0.3*pa.ServerCPUPer1k*1000)
			out = append(out, s)
		}
		f, pe, pa := r.cell(up, modeFloor, 1), r.cell(up, modePeerStdio, 1), r.cell(up, modePass, 1)
		if f != nil && pe != nil && pa != nil {
			out = append(out, fmt.Sprintf("What bounds the added latency (%s, concurrency 1): the peer over stdio adds %.3f ms above the floor's p50 (%.3f ms), so the target is %.3f ms; "+
				"the bare mcp-go passthrough over HTTP adds %.3f ms, the second exchange and the framework's work on both sides.",
				upstreamLabel[up], pe.P50Ms-f.P50Ms, f.P50Ms, (pe.P50Ms-f.P50Ms)/2, pa.P50Ms-f.P50Ms))
		}
	}
	return out
}

// shorten cuts s to at most n bytes, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
