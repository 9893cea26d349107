package sandbox

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Fault is one way the sandbox misbehaves on an API request, as a real service will.
type Fault string

// The faults.
const (
	FaultRateLimited Fault = "429"          // 429 rate_limited with Retry-After, before the request is applied
	FaultInternal    Fault = "500"          // 500 internal, retryable, before the request is applied
	FaultUnavailable Fault = "503"          // 503 unavailable, retryable, before the request is applied
	FaultResetBefore Fault = "reset-before" // the connection is closed before the request is applied
	FaultResetAfter  Fault = "reset-after"  // the request is applied, then the connection is closed before the answer
	FaultTruncate    Fault = "truncate"     // the request is applied, and the answer stops halfway
	FaultSlowBody    Fault = "slow-body"    // the answer comes 16 bytes every 20 ms
	FaultStall       Fault = "stall"        // no answer until the client gives up (at most StallLimit)
)

// faultOrder lists the faults in the order a draw tries them.
var faultOrder = []Fault{FaultRateLimited, FaultInternal, FaultUnavailable, FaultResetBefore, FaultResetAfter, FaultTruncate, FaultSlowBody, FaultStall}

// StallLimit bounds how long a stalled answer waits for the client to give up.
const StallLimit = 2 * time.Minute

// Faults makes the sandbox slow and unreliable on purpose, deterministically for a seed: each
// API request (under /open/v1) first waits its Latency, then meets at most one fault, drawn with
// the Rates' probabilities from a generator seeded with Seed (the same seed and the same
// sequence of requests give the same faults). OAuth endpoints and images are never faulted.
type Faults struct {
	Seed    uint64
	Latency Latency
	Rates   map[Fault]float64 // probability per request; they add up to at most 1
	// Operations, when not empty, limits faults and latency to these operationIds.
	Operations []string
	// Limit, when positive, is how many faults are injected in all; the requests after them
	// meet none (so that a client's retry can succeed).
	Limit int

	injected int
	mu       sync.Mutex
	rnd      *rand.Rand
}

// Latency is the delay added before each request: Min when Max is 0; uniform in [Min, Max];
// or, with Exponential, exponentially distributed with mean Min (capped at 20 times it).
type Latency struct {
	Min, Max    time.Duration
	Exponential bool
}

// ParseFaults reads a fault specification: comma-separated key=value pairs, where seed=N,
// latency=D (fixed), latency=D1-D2 (uniform), latency=exp:D (exponential with mean D),
// ops=opA+opB (only these operations), count=N (at most N faults in all), and FAULT=P for each fault (429, 500, 503, reset-before,
// reset-after, truncate, slow-body, stall) with a probability P in [0, 1].
// Example: "seed=7,latency=5ms-40ms,429=0.1,reset-after=0.05".
func ParseFaults(spec string) (*Faults, error) {
	f := &Faults{Rates: map[Fault]float64{}}
	var total float64
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		key, value, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", part)
		}
		switch key {
		case "seed":
			n, err := strconv.ParseUint(value, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("seed %q is not a non-negative integer", value)
			}
			f.Seed = n
		case "latency":
			l, err := parseLatency(value)
			if err != nil {
				return nil, err
			}
			f.Latency = l
		case "ops":
			f.Operations = strings.Split(value, "+")
		case "count":
			n, err := strconv.Atoi(value)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("count %q is not a non-negative integer", value)
			}
			f.Limit = n
		default:
			fault := Fault(key)
			if !slices.Contains(faultOrder, fault) {
				return nil, fmt.Errorf("unknown key %q (seed, latency, ops, or a fault: %s)", key, faultNames())
			}
			p, err := strconv.ParseFloat(value, 64)
			if err != nil || p < 0 || p > 1 || math.IsNaN(p) {
				return nil, fmt.Errorf("%s=%q is not a probability between 0 and 1", key, value)
			}
			f.Rates[fault] = p
			total += p
		}
	}
	if total > 1+1e-9 {
		return nil, fmt.Errorf("the probabilities add up to %.3g, more than 1", total)
	}
	return f, nil
}

func parseLatency(v string) (Latency, error) {
	bad := func() (Latency, error) {
		return Latency{}, fmt.Errorf("latency %q is not D, D1-D2 or exp:D (durations such as 20ms)", v)
	}
	if mean, ok := strings.CutPrefix(v, "exp:"); ok {
		d, err := time.ParseDuration(mean)
		if err != nil || d < 0 {
			return bad()
		}
		return Latency{Min: d, Exponential: true}, nil
	}
	if lo, hi, ok := strings.Cut(v, "-"); ok {
		a, err1 := time.ParseDuration(lo)
		b, err2 := time.ParseDuration(hi)
		if err1 != nil || err2 != nil || a < 0 || b < a {
			return bad()
		}
		return Latency{Min: a, Max: b}, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return bad()
	}
	return Latency{Min: d}, nil
}

func faultNames() string {
	names := make([]string, len(faultOrder))
	for i, f := range faultOrder {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

// draw picks the latency and the fault (or "") of one request.
func (f *Faults) draw() (time.Duration, Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rnd == nil {
		f.rnd = rand.New(rand.NewPCG(f.Seed, 0x5eed))
	}
	var delay time.Duration
	switch l := f.Latency; {
	case l.Exponential:
		delay = time.Duration(min(f.rnd.ExpFloat64(), 20) * float64(l.Min))
	case l.Max > l.Min:
		delay = l.Min + time.Duration(f.rnd.Int64N(int64(l.Max-l.Min)+1))
	default:
		delay = l.Min
	}
	x := f.rnd.Float64()
	if f.Limit > 0 && f.injected >= f.Limit {
		return delay, ""
	}
	for _, fault := range faultOrder {
		p := f.Rates[fault]
		if x < p {
			f.injected++
			return delay, fault
		}
		x -= p
	}
	return delay, ""
}

// applies reports whether faults apply to the operation opID.
func (f *Faults) applies(opID string) bool {
	return len(f.Operations) == 0 || slices.Contains(f.Operations, opID)
}

// serveFaulty serves an API request of operation opID through serve, with the faults drawn;
// it returns the status answered (0 when none was).
func (s *Service) serveFaulty(w http.ResponseWriter, r *http.Request, opID string, serve func(http.ResponseWriter) int) int {
	f := s.opts.Faults
	delay, fault := f.draw()
	if !sleepCtx(r.Context(), delay) {
		return 0
	}
	if fault != "" {
		s.log.Debug("sandbox fault", "method", r.Method, "path", r.URL.Path, "op", opID, "fault", string(fault))
	}
	switch fault {
	case FaultRateLimited:
		w.Header().Set("Retry-After", "1")
		return s.writeError(w, nil, newError(codeRateLimited, "Too many requests; try again in a second.", nil))
	case FaultInternal:
		return s.writeError(w, nil, errInternal())
	case FaultUnavailable:
		return s.writeError(w, nil, newError(codeUnavailable, "The service is briefly unavailable; try again.", nil))
	case FaultResetBefore:
		panic(http.ErrAbortHandler)
	case FaultResetAfter, FaultTruncate, FaultSlowBody:
		rec := &recorder{header: http.Header{}}
		serve(rec) // applied, whatever comes next
		if fault == FaultResetAfter {
			panic(http.ErrAbortHandler)
		}
		body := rec.body.Bytes()
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(max(rec.status, http.StatusOK))
		if fault == FaultTruncate {
			_, _ = w.Write(body[:len(body)/2])
			if fl, ok := w.(http.Flusher); ok {
				fl.Flush()
			}
			panic(http.ErrAbortHandler)
		}
		for chunk := range slices.Chunk(body, 16) {
			if _, err := w.Write(chunk); err != nil {
				break
			}
			if fl, ok := w.(http.Flusher); ok {
				fl.Flush()
			}
			if !sleepCtx(r.Context(), 20*time.Millisecond) {
				break
			}
		}
		return max(rec.status, http.StatusOK)
	case FaultStall:
		sleepCtx(r.Context(), StallLimit)
		return 0
	}
	return serve(w)
}

// sleepCtx waits d or until ctx ends; it reports whether the wait ran its course.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
