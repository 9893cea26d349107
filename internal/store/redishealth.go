package store

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Observer is told what a Redis store goes through (the metrics count it).
type Observer interface {
	// StoreUnavailable counts an operation the store failed, retryably: reason is "unavailable"
	// (Redis did not answer or refused) or "replica_wait" (too few replicas confirmed a write).
	StoreUnavailable(reason string)
	// StoreFailover counts a change of primary the store followed (Sentinel or Cluster).
	StoreFailover()
}

// Reporter is implemented by a backend that can say more than whether it answers: a failover
// under way, or the last one it followed. /readyz shows it.
type Reporter interface {
	// Report describes the backend's failover state, "" when there is nothing to say.
	Report() string
}

// redisHealth is what a Redis store knows of its own state: whether its last operation
// failed, and the primaries it last saw. ok costs one atomic load when nothing changed.
type redisHealth struct {
	failing atomic.Bool

	mu           sync.Mutex
	obs          Observer
	since        time.Time // when the operations began to fail
	lastErr      string
	primaries    []string
	lastFailover time.Time
	stopWatch    context.CancelFunc // ends Observe's watch
	watching     sync.WaitGroup
}

func (h *redisHealth) ok() {
	if !h.failing.Load() {
		return
	}
	h.mu.Lock()
	h.failing.Store(false)
	h.since, h.lastErr = time.Time{}, ""
	h.mu.Unlock()
}

func (h *redisHealth) failed(err error) {
	h.mu.Lock()
	if !h.failing.Load() {
		h.failing.Store(true)
		h.since = time.Now()
	}
	h.lastErr = err.Error()
	obs := h.obs
	h.mu.Unlock()
	if obs != nil {
		obs.StoreUnavailable("unavailable")
	}
}

func (h *redisHealth) replicaWaitFailed() {
	h.mu.Lock()
	obs := h.obs
	h.mu.Unlock()
	if obs != nil {
		obs.StoreUnavailable("replica_wait")
	}
}

// observed records the primaries seen now, and reports whether they changed since the last
// time (a failover).
func (h *redisHealth) observed(primaries []string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	changed := h.primaries != nil && !slices.Equal(h.primaries, primaries)
	h.primaries = primaries
	if changed {
		h.lastFailover = time.Now()
	}
	return changed
}

// failoverWatch is how often a Sentinel or Cluster store asks who the primaries are.
const failoverWatch = time.Second

// Observe tells obs what the store goes through from now on, and, for a Sentinel or a Cluster,
// watches who the primaries are (once a second, until ctx ends or the store is closed), so that a failover is counted
// and reported even when go-redis followed it before any operation failed.
func (r *Redis) Observe(ctx context.Context, obs Observer) {
	if r.form.single != nil {
		r.health.mu.Lock()
		r.health.obs = obs
		r.health.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	r.health.mu.Lock()
	r.health.obs = obs
	if r.health.stopWatch != nil {
		r.health.stopWatch() // one watch at a time
	}
	r.health.stopWatch = cancel
	r.health.mu.Unlock()
	r.health.watching.Go(func() {
		t := time.NewTicker(failoverWatch)
		defer t.Stop()
		for {
			if p, err := r.Primaries(ctx); err == nil && r.health.observed(p) {
				if r.cluster != nil {
					r.cluster.ReloadState(ctx)
				}
				if obs != nil {
					obs.StoreFailover()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

// stopWatching ends the watch Observe started, and waits for it.
func (h *redisHealth) stopWatching() {
	h.mu.Lock()
	if h.stopWatch != nil {
		h.stopWatch()
	}
	h.mu.Unlock()
	h.watching.Wait()
}

// Primaries returns the addresses of the primaries, sorted: the one the sentinels name, or
// those of a Cluster's slots; for one server, its address.
func (r *Redis) Primaries(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, redisIOTimeout)
	defer cancel()
	switch {
	case r.cluster != nil:
		slots, err := r.cluster.ClusterSlots(ctx).Result()
		if err != nil {
			return nil, err
		}
		var out []string
		for _, s := range slots {
			if len(s.Nodes) > 0 && !slices.Contains(out, s.Nodes[0].Addr) {
				out = append(out, s.Nodes[0].Addr)
			}
		}
		slices.Sort(out)
		return out, nil
	case r.form.failover != nil:
		fo := r.form.failover
		var err error
		for _, addr := range fo.SentinelAddrs {
			sc := redis.NewSentinelClient(&redis.Options{Addr: addr, Username: fo.SentinelUsername, Password: fo.SentinelPassword,
				TLSConfig: fo.TLSConfig, DialTimeout: redisDialTimeout, ReadTimeout: redisIOTimeout, WriteTimeout: redisIOTimeout, MaxRetries: -1})
			var hp []string
			hp, err = sc.GetMasterAddrByName(ctx, fo.MasterName).Result()
			sc.Close()
			if err == nil && len(hp) == 2 {
				return []string{hp[0] + ":" + hp[1]}, nil
			}
		}
		return nil, &UnavailableError{Backend: r.name, Err: err}
	}
	return []string{r.form.single.Addr}, nil
}

// Report says a failover is under way (the store's operations fail, and it is a Sentinel or a
// Cluster that promotes a replica), or names the last one the store followed.
func (r *Redis) Report() string {
	h := &r.health
	h.mu.Lock()
	defer h.mu.Unlock()
	who := "the sentinels promote a replica"
	if r.cluster != nil {
		who = "the cluster promotes the failed primary's replica"
	}
	switch {
	case r.form.single != nil:
		return ""
	case h.failing.Load():
		return "failing over: operations fail since " + h.since.UTC().Format(time.TimeOnly) + " (" + h.lastErr + "); " + who +
			", and this server follows the new primary without a restart"
	case !h.lastFailover.IsZero():
		return "followed a failover at " + h.lastFailover.UTC().Format(time.TimeOnly) + "; primaries now " + strings.Join(h.primaries, ",")
	}
	return ""
}
