package store_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/store/storetest"
)

// backends opens each backend for a test; the Redis one on a redis-server of the test's own.
func backends(t *testing.T) map[string]func(t *testing.T) store.KV {
	return map[string]func(t *testing.T) store.KV{
		"memory": func(*testing.T) store.KV { return store.NewMemory() },
		"bolt": func(t *testing.T) store.KV {
			b, err := store.OpenBolt(filepath.Join(t.TempDir(), store.BoltFile))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			return b
		},
		"redis": func(t *testing.T) store.KV {
			srv := storetest.Redis(t)
			r, err := store.OpenRedis(srv.URL() + "?namespace=test:")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return r
		},
		"sentinel": func(t *testing.T) store.KV { return openRedis(t, storetest.SentinelRedis(t).URL()+"?namespace=test:") },
		"cluster":  func(t *testing.T) store.KV { return openRedis(t, storetest.ClusterRedis(t).URL()+"?namespace=test:") },
	}
}

func openRedis(t *testing.T, url string) *store.Redis {
	t.Helper()
	r, err := store.OpenRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestKV(t *testing.T) {
	t.Parallel()
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kv := open(t)
			ctx := context.Background()
			check := func(what string, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			if _, err := kv.Get(ctx, "absent"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("get absent: %v", err)
			}
			check("set", kv.Set(ctx, "a", []byte("1"), 0))
			if v, err := kv.Get(ctx, "a"); err != nil || string(v) != "1" {
				t.Errorf("get: %q %v", v, err)
			}
			if ok, err := kv.Create(ctx, "a", []byte("2"), 0); ok || err != nil {
				t.Errorf("create over a value: %v %v", ok, err)
			}
			if ok, err := kv.Create(ctx, "b", []byte("2"), 0); !ok || err != nil {
				t.Errorf("create: %v %v", ok, err)
			}
			// An error of the change writes nothing.
			boom := errors.New("boom")
			if _, err := kv.Update(ctx, "a", store.KeepTTL, func([]byte) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
				t.Errorf("update error: %v", err)
			}
			if v, _ := kv.Get(ctx, "a"); string(v) != "1" {
				t.Errorf("after a failed update: %q", v)
			}
			// Take: one of many callers gets the value.
			check("set", kv.Set(ctx, "once", []byte("x"), 0))
			var got atomic.Int32
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					if v, err := kv.Take(ctx, "once"); err == nil && string(v) == "x" {
						got.Add(1)
					} else if !errors.Is(err, store.ErrNotFound) {
						t.Errorf("take: %v", err)
					}
				})
			}
			wg.Wait()
			if got.Load() != 1 {
				t.Errorf("%d takers got the value, want 1", got.Load())
			}
			// Update is atomic: concurrent increments all count.
			for range 8 {
				wg.Go(func() {
					for range 10 {
						_, err := kv.Update(ctx, "n", 0, func(old []byte) ([]byte, error) {
							n, _ := strconv.Atoi(string(old))
							return []byte(strconv.Itoa(n + 1)), nil
						})
						if err != nil {
							t.Errorf("update: %v", err)
						}
					}
				})
			}
			wg.Wait()
			if v, _ := kv.Get(ctx, "n"); string(v) != "80" {
				t.Errorf("80 increments gave %q", v)
			}
			// Lifetimes: expiry, KeepTTL, Touch.
			check("set", kv.Set(ctx, "short", []byte("s"), 300*time.Millisecond))
			check("set", kv.Set(ctx, "kept", []byte("k"), 300*time.Millisecond))
			_, err := kv.Update(ctx, "kept", store.KeepTTL, func([]byte) ([]byte, error) { return []byte("k2"), nil })
			check("update keepttl", err)
			check("set", kv.Set(ctx, "touched", []byte("t"), 300*time.Millisecond))
			check("touch", kv.Touch(ctx, "touched", time.Hour))
			if err := kv.Touch(ctx, "absent", time.Hour); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("touch absent: %v", err)
			}
			time.Sleep(600 * time.Millisecond)
			for _, k := range []string{"short", "kept"} {
				if _, err := kv.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("%s after its ttl: %v", k, err)
				}
			}
			if _, err := kv.Get(ctx, "touched"); err != nil {
				t.Errorf("touched: %v", err)
			}
			// Scan by prefix, glob characters included.
			for _, k := range []string{"p:[x]*?:1", "p:[x]*?:2", "p:y:1", "q:1"} {
				check("set", kv.Set(ctx, k, []byte("v"), 0))
			}
			var keys []string
			check("scan", kv.Scan(ctx, "p:[x]*?:", func(k string) error { keys = append(keys, k); return nil }))
			if strings.Join(sorted(keys), ",") != "p:[x]*?:1,p:[x]*?:2" {
				t.Errorf("scan: %v", keys)
			}
			n := 0
			check("scan", kv.Scan(ctx, "p:", func(string) error { n++; return store.ErrStop }))
			if n != 1 {
				t.Errorf("ErrStop: %d calls", n)
			}
			// Lists.
			if _, err := kv.Range(ctx, "l", 0); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("range absent: %v", err)
			}
			for i := range 3 {
				idx, err := kv.Append(ctx, "l", []byte(fmt.Sprint(i)), time.Hour)
				if err != nil || idx != int64(i) {
					t.Errorf("append %d: %d %v", i, idx, err)
				}
			}
			items, err := kv.Range(ctx, "l", 1)
			if err != nil || len(items) != 2 || string(items[0]) != "1" || string(items[1]) != "2" {
				t.Errorf("range from 1: %q %v", items, err)
			}
			if items, err := kv.Range(ctx, "l", 3); err != nil || len(items) != 0 {
				t.Errorf("range past the end: %q %v", items, err)
			}
			check("delete", kv.Delete(ctx, "a", "l", "never"))
			if _, err := kv.Range(ctx, "l", 0); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("range deleted: %v", err)
			}
			if _, err := kv.Get(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("get deleted: %v", err)
			}
			// What must not be lost: written, updated, appended to and deleted with a replica's
			// confirmation where there are replicas (Sentinel, Cluster).
			kept := "aside:" + name
			check("set kept", kv.Set(ctx, kept, []byte("1"), time.Hour))
			if ok, err := kv.Create(ctx, kept+":new", []byte("1"), 0); !ok || err != nil {
				t.Errorf("create kept: %v %v", ok, err)
			}
			if v, err := kv.Update(ctx, kept, store.KeepTTL, func(old []byte) ([]byte, error) { return append(old, '2'), nil }); err != nil || string(v) != "12" {
				t.Errorf("update kept: %q %v", v, err)
			}
			if _, err := kv.Append(ctx, kept+":list", []byte("i"), 0); err != nil {
				t.Errorf("append kept: %v", err)
			}
			check("touch kept", kv.Touch(ctx, kept, 2*time.Hour))
			if v, err := kv.Take(ctx, kept+":new"); err != nil || string(v) != "1" {
				t.Errorf("take kept: %q %v", v, err)
			}
			check("delete kept", kv.Delete(ctx, kept, kept+":list", "b"))
			for _, k := range []string{kept, kept + ":list", "b"} {
				if _, err := kv.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("%s after delete: %v", k, err)
				}
			}
			check("ping", kv.Ping(ctx))
		})
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestBoltSurvivesReopenAndIsExclusive(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state", store.BoltFile)
	b, err := store.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, "l", []byte("i"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := store.OpenBolt(path); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Errorf("second open: %v", err)
	}
	b.Close()
	b, err = store.OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if v, err := b.Get(ctx, "k"); err != nil || string(v) != "v" {
		t.Errorf("after reopening: %q %v", v, err)
	}
	if items, err := b.Range(ctx, "l", 0); err != nil || len(items) != 1 {
		t.Errorf("list after reopening: %q %v", items, err)
	}
}

// A Redis that is down or hangs gives an UnavailableError within its timeouts, and the client
// recovers when Redis is back, without being reopened.
func TestRedisDownOrHung(t *testing.T) {
	t.Parallel()
	srv := storetest.Redis(t)
	r, err := store.OpenRedis(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	resume := srv.Pause()
	if _, err := r.Get(ctx, "k"); !store.IsUnavailable(err) {
		t.Errorf("hung redis: %v, want an UnavailableError", err)
	}
	resume()
	srv.Stop()
	if _, err := r.Get(ctx, "k"); !store.IsUnavailable(err) {
		t.Errorf("redis down: %v", err)
	} else if !strings.Contains(err.Error(), "unavailable") {
		t.Errorf("message: %v", err)
	}
	srv.Start()
	if err := r.Set(ctx, "k2", []byte("v"), 0); err != nil {
		t.Errorf("after redis came back: %v", err)
	}
}

func TestOpen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ spec, want string }{
		{"postgres://u:secret@h/db", `scheme "postgres"`},
		{"redis://u:secret@h:1/notanumber", "invalid"},
	} {
		_, err := store.Open(tc.spec, t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.spec, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the password is in the message: %v", tc.spec, err)
		}
	}
	kv, err := store.Open("", t.TempDir())
	if err != nil || !strings.HasPrefix(kv.Name(), "bolt ") {
		t.Errorf("default: %v %v", kv, err)
	}
	kv.Close()
}

// What one process publishes reaches the subscribers of every process (two clients here).
func TestRedisBroadcast(t *testing.T) {
	t.Parallel()
	srv := storetest.Redis(t)
	var clients [2]*store.Redis
	for i := range clients {
		r, err := store.OpenRedis(srv.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		clients[i] = r
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 4)
	if err := clients[1].Subscribe(ctx, "ch", func(m []byte) { got <- string(m) }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond) // longer than the read timeout: the subscription must outlive it
	if err := clients[0].Publish(ctx, "ch", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m != "hello" {
			t.Errorf("got %q", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the message did not arrive")
	}
}

// A toucher writes a key's lifetime once per interval, not at every use.
func TestToucher(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kv := store.NewMemory()
	tc := &store.Toucher{KV: kv, Every: time.Hour}
	if err := tc.Touch(ctx, "k", time.Minute); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("touching an absent key: %v", err)
	}
	if err := kv.Set(ctx, "k", []byte("v"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := tc.Touch(ctx, "k", time.Minute); err != nil {
		t.Fatal(err)
	}
	// Deleted behind its back: within the interval the toucher does not write, so it does not
	// notice; after Forget it does.
	if err := kv.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := tc.Touch(ctx, "k", time.Minute); err != nil {
		t.Errorf("a touch within the interval wrote: %v", err)
	}
	tc.Forget("k")
	if err := tc.Touch(ctx, "k", time.Minute); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after Forget: %v", err)
	}
}

// countingObserver counts what a Redis store reports; failedOver is closed at the first failover.
type countingObserver struct {
	unavailable, replicaWait, failovers atomic.Int64
	once                                sync.Once
	failedOver                          chan struct{}
}

func newCountingObserver() *countingObserver {
	return &countingObserver{failedOver: make(chan struct{})}
}

func (o *countingObserver) StoreUnavailable(reason string) {
	if reason == "replica_wait" {
		o.replicaWait.Add(1)
	} else {
		o.unavailable.Add(1)
	}
}
func (o *countingObserver) StoreFailover() {
	o.failovers.Add(1)
	o.once.Do(func() { close(o.failedOver) })
}

// When the primary of a Sentinel deployment or of a Cluster dies, operations fail retryably
// (an UnavailableError, never a silent loss), the store follows the promoted replica without
// being reopened, says so, and counts the failover; every write it acknowledged (of what must
// not be lost, so confirmed by the replica) is there afterwards.
func TestRedisFailover(t *testing.T) {
	t.Parallel()
	for _, form := range []string{"sentinel", "cluster"} {
		t.Run(form, func(t *testing.T) {
			t.Parallel()
			var url string
			var primary func() *storetest.RedisServer
			switch form {
			case "sentinel":
				s := storetest.SentinelRedis(t)
				url, primary = s.URL(), s.Primary
			case "cluster":
				c := storetest.ClusterRedis(t)
				url, primary = c.URL(), func() *storetest.RedisServer { return c.PrimaryOf(store.DefaultNamespace + "aside:{0}:0") }
			}
			r := openRedis(t, url)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			obs := newCountingObserver()
			r.Observe(ctx, obs)
			var acked []string
			write := func(k string) error {
				err := r.Set(ctx, k, []byte(k), 0)
				if err == nil {
					acked = append(acked, k)
				}
				return err
			}
			// Every key in one hash slot: on the Cluster, all on the primary killed.
			for i := range 50 {
				if err := write(fmt.Sprint("aside:{0}:", i)); err != nil {
					t.Fatal(err)
				}
			}
			before, err := r.Primaries(ctx)
			if err != nil {
				t.Fatal(err)
			}
			killed := primary()
			killed.Stop()
			// The killed server comes back (as its supervisor would restart it) once a replica
			// took its place, and rejoins as a replica of the new primary: writes of what must
			// not be lost need a replica again.
			restarted := false
			deadline := time.Now().Add(60 * time.Second)
			failed := 0
			for i := 50; ; i++ {
				err := write(fmt.Sprint("aside:{0}:", i))
				if err == nil && failed > 0 {
					break
				}
				if err != nil {
					if !store.IsUnavailable(err) {
						t.Fatalf("write during the failover: %v, want an UnavailableError", err)
					}
					if failed == 0 && !strings.Contains(r.Report(), "failing over") {
						t.Errorf("report while writes fail: %q", r.Report())
					}
					failed++
					if failed%20 == 1 {
						t.Logf("%s %v", time.Now().Format(time.TimeOnly), err)
					}
					time.Sleep(50 * time.Millisecond) // a pause between tries, as a client's retry would

				}
				if !restarted {
					if now, err := r.Primaries(ctx); err == nil && !slices.Equal(now, before) {
						t.Logf("%s failed over: %v -> %v", time.Now().Format(time.TimeOnly), before, now)
						killed.Start()
						restarted = true
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("the store did not follow a new primary within 60 s: %v", err)
				}
			}
			for _, k := range acked {
				if v, err := r.Get(ctx, k); err != nil || string(v) != k {
					t.Errorf("acknowledged %s: %q %v", k, v, err)
				}
			}
			select {
			case <-obs.failedOver:
			case <-time.After(time.Until(deadline)):
				t.Fatal("no failover counted")
			}
			if !strings.Contains(r.Report(), "followed a failover") {
				t.Errorf("report after the failover: %q", r.Report())
			}
			if obs.unavailable.Load() == 0 {
				t.Error("no failure counted")
			}
			t.Logf("%s: %d writes acknowledged, %d refused while failing over", form, len(acked), failed)
		})
	}
}

// A write of what must not be lost that no replica confirms is a failure the caller sees
// (retryable), not a silent success; other writes go on without a replica.
func TestRedisReplicaWait(t *testing.T) {
	t.Parallel()
	s := storetest.SentinelRedis(t)
	r := openRedis(t, s.URL())
	ctx := context.Background()
	obs := newCountingObserver()
	r.Observe(ctx, obs)
	if err := r.Set(ctx, "aside:a", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	for _, srv := range s.Servers {
		if srv != s.Primary() {
			srv.Stop()
		}
	}
	err := r.Set(ctx, "aside:b", []byte("1"), 0)
	var rw *store.ReplicaWaitError
	if !store.IsUnavailable(err) || !errors.As(err, &rw) {
		t.Errorf("kept write without a replica: %v, want an UnavailableError of too few replicas", err)
	}
	if _, err := r.Update(ctx, "aside:a", 0, func([]byte) ([]byte, error) { return []byte("2"), nil }); !errors.As(err, &rw) {
		t.Errorf("kept update without a replica: %v", err)
	}
	if err := r.Set(ctx, "mcp:session:x", []byte("1"), 0); err != nil {
		t.Errorf("a session without a replica: %v", err)
	}
	if obs.replicaWait.Load() != 2 {
		t.Errorf("%d replica waits counted, want 2", obs.replicaWait.Load())
	}
	// With replicas=0 the operator says there are none to wait for.
	r0 := openRedis(t, s.URL()+"?replicas=0")
	if err := r0.Set(ctx, "aside:b", []byte("1"), 0); err != nil {
		t.Errorf("replicas=0: %v", err)
	}
}

// TestBatch: the backends that batch (Bolt, Memory) apply a batch's writes together, see them
// within it, and apply none when its function fails.
func TestBatch(t *testing.T) {
	t.Parallel()
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kv := open(t)
			b, ok := kv.(store.Batcher)
			if !ok {
				t.Skipf("%s does not batch", name)
			}
			ctx := context.Background()
			if err := kv.Set(ctx, "old", []byte("o"), 0); err != nil {
				t.Fatal(err)
			}
			boom := errors.New("boom")
			err := b.Batch(ctx, func(tx store.Tx) error {
				if err := tx.Set("x", []byte("1"), 0); err != nil {
					return err
				}
				if err := tx.Delete("old"); err != nil {
					return err
				}
				return boom
			})
			if !errors.Is(err, boom) {
				t.Fatalf("a failed batch: %v, want its error", err)
			}
			if _, err := kv.Get(ctx, "x"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a failed batch's write is there: %v", err)
			}
			if v, err := kv.Get(ctx, "old"); err != nil || string(v) != "o" {
				t.Errorf("a failed batch's delete applied: %q %v", v, err)
			}
			err = b.Batch(ctx, func(tx store.Tx) error {
				if err := tx.Set("x", []byte("1"), time.Hour); err != nil {
					return err
				}
				if v, err := tx.Get("x"); err != nil || string(v) != "1" {
					t.Errorf("within the batch, x: %q %v", v, err)
				}
				if err := tx.Delete("old"); err != nil {
					return err
				}
				if _, err := tx.Get("old"); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("within the batch, a deleted key: %v", err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if v, err := kv.Get(ctx, "x"); err != nil || string(v) != "1" {
				t.Errorf("after the batch, x: %q %v", v, err)
			}
			if _, err := kv.Get(ctx, "old"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("after the batch, the deleted key: %v", err)
			}
		})
	}
}
