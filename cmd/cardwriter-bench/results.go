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
}

// cellResult is one mode at one concurrency.
type cellResult struct {
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
	Mode        string  `json:"mode"`
	Versus      string  `json:"versus"`
	Concurrency int     `json:"concurrency"`
	Throughput  float64 `json:"throughput"` // mode's / versus's
	P50         float64 `json:"p50"`        // mode's / versus's
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
		Conc: cfg.conc, Sessions: cfg.sessions}
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

func (r *results) cell(mode string, conc int) *cellResult {
	for i := range r.Cells {
		if c := &r.Cells[i]; c.Mode == mode && c.Concurrency == conc && c.Error == "" {
			return c
		}
	}
	return nil
}

// finish computes the ratios, pair by pair within this run, and checks the targets.
func (r *results) finish() {
	r.Load[1] = loadavg()
	pairs := [][2]string{
		{modeHTTP, modeFloor}, {modeStdio, modeFloor}, {modePeerHTTP, modeFloor}, {modePeerStdio, modeFloor},
		{modeHTTP, modePeerHTTP}, {modeStdio, modePeerStdio}, {modeHTTP, modePeerStdio},
		{modePass, modeFloor}, {modeHTTP, modePass},
	}
	for _, conc := range r.Config.Conc {
		for _, p := range pairs {
			a, b := r.cell(p[0], conc), r.cell(p[1], conc)
			if a == nil || b == nil {
				continue
			}
			r.Ratios = append(r.Ratios, ratio{Mode: p[0], Versus: p[1], Concurrency: conc,
				Throughput: a.Throughput / b.Throughput, P50: a.P50Ms / b.P50Ms})
		}
	}
	ratioOf := func(mode, versus string, conc int) *ratio {
		for i := range r.Ratios {
			if q := &r.Ratios[i]; q.Mode == mode && q.Versus == versus && q.Concurrency == conc {
				return q
			}
		}
		return nil
	}
	if q := ratioOf(modeHTTP, modeFloor, 1); q != nil {
		r.Targets = append(r.Targets, targetRow{"http, concurrency 1: p50 at most 2x the floor's",
			fmt.Sprintf("%.2fx", q.P50), q.P50 <= 2})
	}
	if q := ratioOf(modeHTTP, modeFloor, 64); q != nil {
		r.Targets = append(r.Targets, targetRow{"http, concurrency 64: throughput at least 45% of the floor's",
			fmt.Sprintf("%.0f%%", q.Throughput*100), q.Throughput >= 0.45})
	}
	for _, p := range [][2]string{{modeHTTP, modePeerHTTP}, {modeStdio, modePeerStdio}, {modeHTTP, modePeerStdio}} {
		for _, conc := range r.Config.Conc {
			q := ratioOf(p[0], p[1], conc)
			if q == nil || (p == [2]string{modeHTTP, modePeerStdio} && ratioOf(modeHTTP, modePeerHTTP, conc) != nil) {
				continue // ours over HTTP is compared with the peer over stdio only when its HTTP could not be measured
			}
			r.Targets = append(r.Targets,
				targetRow{fmt.Sprintf("%s vs %s, concurrency %d: at least 5x the throughput", p[0], p[1], conc),
					fmt.Sprintf("%.1fx", q.Throughput), q.Throughput >= 5},
				targetRow{fmt.Sprintf("%s vs %s, concurrency %d: at most 1/5 of the p50", p[0], p[1], conc),
					fmt.Sprintf("1/%.1f", 1/q.P50), q.P50 <= 0.2})
		}
	}
	for _, c := range r.Cold {
		if c.Server == "ours stdio" {
			r.Targets = append(r.Targets, targetRow{"stdio cold start under 30 ms (median)",
				fmt.Sprintf("%.1f ms", c.MedianMs), c.MedianMs < 30})
		}
	}
	for _, i := range r.Idle {
		if !i.StandaloneSSE {
			r.Targets = append(r.Targets, targetRow{fmt.Sprintf("%d idle sessions under 40 MB RSS", i.Sessions),
				fmt.Sprintf("%.1f MB", i.RSSAfterMB), i.RSSAfterMB < 40})
		}
	}
}

var modeLabel = map[string]string{
	modeFloor:     "floor: REST straight to the sandbox",
	modeHTTP:      "ours, streamable HTTP",
	modePass:      "reference: mcp-go passthrough, streamable HTTP",
	modeStdio:     "ours, stdio",
	modePeerHTTP:  "peer, streamable HTTP",
	modePeerStdio: "peer, stdio",
}

// peerOf is the peer mode each of ours is compared with.
var peerOf = map[string]string{modeHTTP: modePeerHTTP, modeStdio: modePeerStdio}

// markdown renders the run as the README's Performance tables.
func (r *results) markdown() string {
	var sb strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&sb, format, args...) }
	p("Measured %s on %s (%d cores, %s, %s), %s; load average %s at the start, %s at the end.\n",
		r.Date, r.Machine.CPU, r.Machine.Cores, r.Machine.Memory, r.Machine.Kernel, r.Machine.Go, r.Load[0], r.Load[1])
	p("Command: `%s`", r.Command)
	if r.Peer != "" {
		p("; peer: `%s` on Node %s", r.Peer, r.Machine.Node)
	}
	p(".\n\n")
	p("Each call is one of four operations in turn: get a card, set its opening lines, write a worldbook document of %d entries, list the trial cards. ", worldbookEntries)
	p("Calls per cell: %d (floor, ours), %d (ours over stdio), %d (peer), after %d unmeasured; a fresh sandbox and server per cell. ",
		r.Config.Calls, r.Config.StdioCalls, r.Config.PeerCalls, r.Config.Warmup)
	p("Ratios are to the floor and to the peer on the same transport, at the same concurrency, in this run. CPU is the server process's (for the floor, the sandbox's), in seconds per 1000 calls; RSS is its peak.\n\n")
	p("| Mode | Workers | Calls/s | p50 ms | p99 ms | Calls/s vs floor | p50 vs floor | Calls/s vs peer | p50 vs peer | CPU s/1k calls | Sandbox CPU s/1k | Peak RSS MB |\n")
	p("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, conc := range r.Config.Conc {
		for _, m := range allModes {
			var c *cellResult
			for i := range r.Cells {
				if r.Cells[i].Mode == m && r.Cells[i].Concurrency == conc {
					c = &r.Cells[i]
				}
			}
			if c == nil {
				continue
			}
			if c.Error != "" {
				p("| %s | %d | failed: %s |||||||||\n", modeLabel[m], conc, strings.ReplaceAll(shorten(firstLine(c.Error), 120), "|", "/"))
				continue
			}
			vsFloor, vsFloorP50, vsPeer, vsPeerP50 := "", "", "", ""
			if f := r.cell(modeFloor, conc); f != nil && m != modeFloor {
				vsFloor = fmt.Sprintf("%.0f%%", c.Throughput/f.Throughput*100)
				vsFloorP50 = fmt.Sprintf("%.2fx", c.P50Ms/f.P50Ms)
			}
			if pm, ok := peerOf[m]; ok {
				mark := ""
				q := r.cell(pm, conc)
				if q == nil && m == modeHTTP {
					q, mark = r.cell(modePeerStdio, conc), " (vs stdio)"
				}
				if q != nil {
					vsPeer = fmt.Sprintf("%.1fx%s", c.Throughput/q.Throughput, mark)
					vsPeerP50 = fmt.Sprintf("1/%.1f%s", q.P50Ms/c.P50Ms, mark)
				}
			}
			sandboxCPU := ""
			if m != modeFloor {
				sandboxCPU = fmt.Sprintf("%.3f", c.SandboxCPUPer1k)
			}
			p("| %s | %d | %.0f | %.3f | %.3f | %s | %s | %s | %s | %.3f | %s | %.1f |\n", modeLabel[m], conc, c.Throughput,
				c.P50Ms, c.P99Ms, vsFloor, vsFloorP50, vsPeer, vsPeerP50, c.ServerCPUPer1k, sandboxCPU, c.ServerPeakRSSMB)
		}
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
		p("\n| Target | Measured | Met |\n|---|--:|---|\n")
		for _, t := range r.Targets {
			met := "yes"
			if !t.Met {
				met = "**no**"
			}
			p("| %s | %s | %s |\n", t.Target, t.Measured, met)
		}
	}
	for _, c := range r.Cold {
		if c.Traced == nil || c.MedianMs < 30 {
			continue
		}
		var slow []string
		for _, e := range c.Traced.Slowest {
			slow = append(slow, fmt.Sprintf("%s %.1f ms", e.Package, e.Ms))
		}
		p("\nWhat bounds the cold start: in one more start traced with GODEBUG=inittrace=1 (%.1f ms to the response), "+
			"package initialization ended %.1f ms after the process started, before main ran; the slowest initializers: %s. "+
			"After that, main derives the tool schemas and makes the MCP server (BENCH.md).\n",
			c.Traced.TotalMs, c.Traced.InitEndMs, strings.Join(slow, ", "))
	}
	for _, b := range r.bounds() {
		p("\n%s\n", b)
	}
	for _, n := range r.Notes {
		p("\nNote: %s\n", shorten(n, 600))
	}
	return sb.String()
}

// bounds explains, from this run's figures, what bounds each target that was not met.
func (r *results) bounds() []string {
	var out []string
	floor1, http1, pass1 := r.cell(modeFloor, 1), r.cell(modeHTTP, 1), r.cell(modePass, 1)
	if floor1 != nil && http1 != nil && pass1 != nil && http1.P50Ms > 2*floor1.P50Ms {
		out = append(out, fmt.Sprintf("What bounds the concurrency-1 latency: the bare mcp-go passthrough (no validation, no contract, "+
			"no logging) has p50 %.3f ms, %.2fx the floor's %.3f ms, so the second HTTP exchange and the MCP framework's "+
			"per-call work (client and server) alone exceed 2x; ours adds %.3f ms to it.",
			pass1.P50Ms, pass1.P50Ms/floor1.P50Ms, floor1.P50Ms, http1.P50Ms-pass1.P50Ms))
	}
	floor64, http64, pass64 := r.cell(modeFloor, 64), r.cell(modeHTTP, 64), r.cell(modePass, 64)
	if floor64 != nil && http64 != nil && http64.Throughput < 0.45*floor64.Throughput {
		s := fmt.Sprintf("What bounds the concurrency-64 throughput: the run is CPU-bound on %d cores shared by the harness's MCP "+
			"client (%.3f s of CPU per 1000 calls, against %.3f for the floor's plain HTTP client), our server (%.3f) and the sandbox (%.3f).",
			r.Machine.Cores, http64.ClientCPUPer1k, floor64.ClientCPUPer1k, http64.ServerCPUPer1k, http64.SandboxCPUPer1k)
		if pass64 != nil {
			s += fmt.Sprintf(" The passthrough reaches %.0f%% of the floor with %.3f s per 1000 calls in its server; "+
				"ours spends %.3f s more, most of it validating the 50-entry worldbook document against the contract (BENCH.md).",
				pass64.Throughput/floor64.Throughput*100, pass64.ServerCPUPer1k, http64.ServerCPUPer1k-pass64.ServerCPUPer1k)
		}
		out = append(out, s)
	}
	for _, conc := range r.Config.Conc {
		f, pe := r.cell(modeFloor, conc), r.cell(modePeerStdio, conc)
		if f == nil || pe == nil {
			continue
		}
		var parts []string
		switch pa := r.cell(modePass, conc); {
		case pe.P50Ms/5 < f.P50Ms:
			parts = append(parts, fmt.Sprintf("1/5 of the peer's p50 (%.3f ms) is below the floor's own p50 (%.3f ms), which every server making the same upstream call includes", pe.P50Ms/5, f.P50Ms))
		case pa != nil && pe.P50Ms/5 < pa.P50Ms:
			parts = append(parts, fmt.Sprintf("1/5 of the peer's p50 (%.3f ms) is below the p50 of the bare mcp-go passthrough (%.3f ms), which only forwards", pe.P50Ms/5, pa.P50Ms))
		}
		if 5*pe.Throughput > f.Throughput {
			parts = append(parts, fmt.Sprintf("5x the peer's throughput (%.0f calls/s) is above the floor's own %.0f calls/s", 5*pe.Throughput, f.Throughput))
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("What bounds the comparison with the peer at concurrency %d: %s.", conc, strings.Join(parts, "; ")))
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
