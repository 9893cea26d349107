package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// TestSoak is the bounded soak (CARDWRITER_SOAK=30s, say; skipped without it): many MCP
// sessions over streamable HTTP make calls for that long against a sandbox with faults on.
// Every card a worker meant to create exists exactly once at the end (a lost answer is settled
// with the idempotency key the result names, a plain failure is retried), and the server's
// goroutines and heap stay flat: the figures are logged.
func TestSoak(t *testing.T) {
	d, err := time.ParseDuration(os.Getenv("CARDWRITER_SOAK"))
	if err != nil || d <= 0 {
		t.Skip("set CARDWRITER_SOAK to a duration (e.g. 30s) to run the soak")
	}
	const workers = 16
	faults, err := sandbox.ParseFaults("seed=11,latency=0ms-2ms,429=0.02,503=0.02,reset-before=0.01,reset-after=0.01,truncate=0.01")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := sandbox.New(sandbox.Options{DemoToken: demoToken, Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	up, err := upstream.New("http://sandbox.localhost", upstream.StaticToken(demoToken), upstream.WithTransport(svc.RoundTripper()),
		upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 4, BaseDelay: 2 * time.Millisecond, MaxDelay: 20 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(up, Options{})
	if err != nil {
		t.Fatal(err)
	}
	httpSrv := server.NewStreamableHTTPServer(srv, server.WithEndpointPath("/mcp"), server.WithStateful(true))
	ts := httptest.NewServer(httpSrv)
	defer ts.Close()

	baseGoroutines := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var created, calls, retried atomic.Int64
	var samples []string
	var mu sync.Mutex
	var heapFirst, heapLast uint64
	var goroutinesPeak int
	sample := func(label string) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		n := runtime.NumGoroutine()
		mu.Lock()
		defer mu.Unlock()
		if heapFirst == 0 {
			heapFirst = ms.HeapInuse
		}
		heapLast = ms.HeapInuse
		goroutinesPeak = max(goroutinesPeak, n)
		samples = append(samples, fmt.Sprintf("%s: %d goroutines, heap in use %.1f MB, RSS %s, %d calls", label, n, float64(ms.HeapInuse)/1e6, rss(), calls.Load()))
	}

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			if err := soakWorker(ctx, ts.URL+"/mcp", w, &created, &calls, &retried); err != nil {
				errs <- fmt.Errorf("worker %d: %w", w, err)
			}
		})
	}
	start := time.Now()
	tick := time.NewTicker(d / 6)
	for done := false; !done; {
		select {
		case <-tick.C:
			sample(fmt.Sprintf("t+%s", time.Since(start).Truncate(time.Second)))
		case <-ctx.Done():
			done = true
		}
	}
	tick.Stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	httpSrv.CloseSessions(context.Background())
	time.Sleep(200 * time.Millisecond)
	sample("after")
	t.Logf("soak %s, %d sessions: %d tool calls, %d repeated after a failure, %d cards\n%s", d, workers, calls.Load(), retried.Load(),
		created.Load(), strings.Join(samples, "\n"))
	if inv := svc.Inventory(demoToken); int64(inv.Cards) != created.Load() {
		t.Errorf("the sandbox holds %d cards; the workers made %d (a lost or a doubled write)", inv.Cards, created.Load())
	}
	if end := runtime.NumGoroutine(); end > baseGoroutines+10 {
		t.Errorf("goroutines: %d before, %d after (peak %d)", baseGoroutines, end, goroutinesPeak)
	}
	if heapLast > heapFirst*2+16<<20 {
		t.Errorf("heap in use grew from %.1f MB to %.1f MB", float64(heapFirst)/1e6, float64(heapLast)/1e6)
	}
}

// rss returns the process's resident set size as /proc reports it ("?" elsewhere).
func rss() string {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// soakWorker is one session's loop: make a card, write to it, read it, upsert a trial.
func soakWorker(ctx context.Context, url string, w int, created, calls, retried *atomic.Int64) error {
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		return err
	}
	defer c.Close()
	bg := context.Background()
	if err := c.Start(bg); err != nil {
		return err
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "soak", Version: "1"}
	if _, err := c.Initialize(bg, init); err != nil {
		return err
	}
	// call settles one logical call: it repeats what a model would, as the result says.
	call := func(name string, args map[string]any) (map[string]any, error) {
		for attempt := 0; attempt < 20; attempt++ {
			req := mcp.CallToolRequest{}
			req.Params.Name, req.Params.Arguments = name, args
			res, err := c.CallTool(bg, req)
			calls.Add(1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if !res.IsError {
				raw, _ := json.Marshal(res.StructuredContent)
				var out map[string]any
				_ = json.Unmarshal(raw, &out)
				return out, nil
			}
			env, _ := ErrorEnvelope(res)
			detail, _ := env["detail"].(map[string]any)
			switch key, _ := detail["idempotencyKey"].(string); {
			case key != "":
				args["idempotencyKey"] = key
			case env["retryable"] == true:
			default:
				return nil, fmt.Errorf("%s: %v", name, env)
			}
			retried.Add(1)
		}
		return nil, fmt.Errorf("%s: no success in 20 tries", name)
	}
	for i := 0; ctx.Err() == nil; i++ {
		card, err := call("create_card", map[string]any{"roleName": fmt.Sprintf("Soak %d-%d", w, i)})
		if err != nil {
			return err
		}
		created.Add(1)
		roleID := card["roleId"].(string)
		if _, err := call("set_opening_lines", map[string]any{"roleId": roleID, "roleWelcome": "Hello."}); err != nil {
			return err
		}
		if _, err := call("get_card", map[string]any{"roleId": roleID}); err != nil {
			return err
		}
		if _, err := call("upsert_trial_card", map[string]any{"clientKey": fmt.Sprintf("soak-%d", w%4), "card": map[string]any{"roleName": "Soak"}}); err != nil {
			return err
		}
	}
	return nil
}
