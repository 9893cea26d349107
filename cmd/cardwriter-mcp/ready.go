package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// readiness answers /readyz: whether the card service answers, the store (the embedded file or
// Redis) takes a write, and the last revision was saved, checked at most every few seconds. /healthz stays the liveness
// check.
type readiness struct {
	apiHost string // "" with the in-process sandbox: nothing to reach
	store   store.KV
	// revisions fail the check while the last revision could not be saved (a full disk the
	// store's small probe does not notice).
	revisions interface {
		Fault() error
		Name() string
	}
	client *http.Client

	mu      sync.Mutex
	checked time.Time
	status  int
	report  map[string]string
}

const readyCacheFor = 3 * time.Second

func (rd *readiness) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rd.mu.Lock()
	if time.Since(rd.checked) > readyCacheFor {
		rd.status, rd.report = rd.check(r.Context())
		rd.checked = time.Now()
	}
	status, report := rd.status, rd.report
	rd.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	state := "ready"
	if status != http.StatusOK {
		state = "not ready"
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"status": state, "checks": report})
}

// check runs the checks: any HTTP answer of the card service (a 401 included) means it is
// reachable; the store must take a write (a Redis that fails over says so).
func (rd *readiness) check(ctx context.Context) (int, map[string]string) {
	report := map[string]string{"upstream": "ok", "store": "ok"}
	status := http.StatusOK
	if rd.apiHost != "" {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rd.apiHost+"/open/v1/me", nil)
		if err == nil {
			var resp *http.Response
			if resp, err = rd.client.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		if err != nil {
			report["upstream"] = "the card service at " + rd.apiHost + " does not answer"
			status = http.StatusServiceUnavailable
		}
	}
	if rd.store != nil {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		err := rd.store.Set(ctx, "ready:probe", []byte("1"), time.Minute)
		if err != nil {
			report["store"] = fmt.Sprintf("%s takes no writes: %v", rd.store.Name(), err)
			status = http.StatusServiceUnavailable
		}
		// A Redis Sentinel or Cluster says more: a failover under way, or the last one followed.
		if rp, ok := rd.store.(store.Reporter); ok {
			if what := rp.Report(); what != "" && err != nil {
				report["store"] = rd.store.Name() + " " + what
			} else if what != "" {
				report["store_failover"] = what
			}
		}
	}
	if rd.revisions != nil {
		if err := rd.revisions.Fault(); err != nil {
			report["revisions"] = fmt.Sprintf("this server could not save the last revision (%s): %v", rd.revisions.Name(), err)
			status = http.StatusServiceUnavailable
		}
	}
	return status, report
}
