package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis timeouts: a Redis that is down or slow costs a request at most about this long (the
// command is tried twice), well inside any call deadline.
const (
	redisDialTimeout = 2 * time.Second
	redisIOTimeout   = 2 * time.Second
	// updateTries bounds the optimistic retries of Update under contention.
	updateTries = 50
	// DefaultNamespace prefixes every key this server writes in Redis.
	DefaultNamespace = "cardwriter:"
)

// Redis is the KV of several replicas: every key under a namespace (default "cardwriter:",
// ?namespace=... in the URL), TTLs set by Redis itself, Take with GETDEL, Update with
// WATCH/MULTI/EXEC retried on contention. One server, a Sentinel-managed primary or a
// Cluster: every operation touches one key, so it works on a Cluster as it is (Delete of
// several keys sends one DEL per key, Scan walks every primary). A write of what must not be
// lost (KeptByReplica) is acknowledged only once replicas hold it (WAIT). A failure of Redis
// is an UnavailableError.
type Redis struct {
	c        redis.UniversalClient
	cluster  *redis.ClusterClient // nil unless a Cluster
	one      *redis.Client        // the client of one server or of a Sentinel-managed primary
	form     *redisForm
	ns       string
	replicas int
	name     string
	health   redisHealth
}

var _ KV = (*Redis)(nil)

// OpenRedis connects to the Redis a --store URL names (redis://, rediss://, redis-sentinel://,
// rediss-sentinel://, redis-cluster://, rediss-cluster://; see redisurl.go). It does not wait
// for Redis to answer: the server starts, and /readyz reports the store.
func OpenRedis(rawURL string) (*Redis, error) {
	f, err := parseRedisURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", redactURL(rawURL), err)
	}
	r := &Redis{form: f, ns: f.ns, replicas: f.replicas, name: f.name}
	switch {
	case f.single != nil:
		o := f.single
		bound(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, &o.MaxRetries, &o.ContextTimeoutEnabled)
		r.one = redis.NewClient(o)
		r.c = r.one
	case f.failover != nil:
		o := f.failover
		bound(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, &o.MaxRetries, &o.ContextTimeoutEnabled)
		r.one = redis.NewFailoverClient(o)
		r.c = r.one
	default:
		o := f.cluster
		bound(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, &o.MaxRetries, &o.ContextTimeoutEnabled)
		r.cluster = redis.NewClusterClient(o)
		r.c = r.cluster
	}
	return r, nil
}

// bound sets the timeouts of every form's options: a Redis that is down or slow costs a request
// at most about 4 seconds (the command tried twice), also inside a call's own deadline.
func bound(dial, read, write, pool *time.Duration, retries *int, contextTimeout *bool) {
	*dial = min(cmp.Or(*dial, redisDialTimeout), redisDialTimeout)
	*read, *write, *pool = redisIOTimeout, redisIOTimeout, redisIOTimeout
	*retries, *contextTimeout = 1, true
}

func init() { redis.SetLogger(quietLogger{}) }

// quietLogger keeps go-redis from printing to the standard logger (its dial failures reach the
// caller as UnavailableError).
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func (r *Redis) k(key string) string { return r.ns + key }

// fail maps redis.Nil to ErrNotFound and the rest to UnavailableError, and keeps the
// backend's health (for /readyz and the metrics) up to date.
func (r *Redis) fail(err error) error {
	switch {
	case err == nil:
		r.health.ok()
		return nil
	case errors.Is(err, redis.Nil):
		r.health.ok()
		return ErrNotFound
	case errors.Is(err, context.Canceled):
		return err
	}
	r.health.failed(err)
	return &UnavailableError{Backend: r.name, Err: err}
}

// replicaWait bounds how long a write of what must not be lost waits for its replicas.
const replicaWait = time.Second

// ReplicaWaitError is a write that Redis took but too few replicas confirmed within
// replicaWait: it may be lost in a failover, so it is reported as a failure (an
// UnavailableError wraps it) and the caller tries again.
type ReplicaWaitError struct{ Want, Got int64 }

func (e *ReplicaWaitError) Error() string {
	return fmt.Sprintf("%d of the %d replicas required confirmed the write within %s", e.Got, e.Want, replicaWait)
}

// write runs a write of key. A key of what must not be lost (KeptByReplica), when the
// deployment has replicas, is written on one connection to its primary and followed there by
// WAIT: it fails unless r.replicas replicas hold it.
func (r *Redis) write(ctx context.Context, key string, fn func(c redis.Cmdable) error) error {
	if r.replicas == 0 || !KeptByReplica(key) {
		return fn(r.c)
	}
	node := r.one
	if r.cluster != nil {
		var err error
		if node, err = r.cluster.MasterForKey(ctx, r.k(key)); err != nil {
			return err
		}
	}
	conn := node.Conn()
	defer conn.Close()
	err := fn(conn)
	if err == nil {
		err = r.wait(ctx, conn)
	}
	if err != nil && r.cluster != nil && !errors.Is(err, redis.Nil) {
		// The connection was the one of the primary the client last knew (it does not follow
		// a MOVED as the cluster client's own commands do): learn the slots again.
		r.cluster.ReloadState(ctx)
	}
	return err
}

// processor is a connection that runs any command (a *redis.Conn, a *redis.Tx).
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// wait runs WAIT on c, the connection of a write just done.
func (r *Redis) wait(ctx context.Context, c processor) error {
	cmd := redis.NewIntCmd(ctx, "wait", r.replicas, replicaWait.Milliseconds())
	err := c.Process(ctx, cmd)
	n := cmd.Val()
	if err != nil {
		return err
	}
	if n < int64(r.replicas) {
		r.health.replicaWaitFailed()
		return &ReplicaWaitError{Want: int64(r.replicas), Got: n}
	}
	return nil
}

func (r *Redis) Get(ctx context.Context, key string) ([]byte, error) {
	v, err := r.c.Get(ctx, r.k(key)).Bytes()
	return v, r.fail(err)
}

func (r *Redis) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return r.fail(r.write(ctx, key, func(c redis.Cmdable) error {
		return c.Set(ctx, r.k(key), value, max(ttl, 0)).Err()
	}))
}

func (r *Redis) Create(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	var ok bool
	err := r.write(ctx, key, func(c redis.Cmdable) error {
		var err error
		ok, err = c.SetNX(ctx, r.k(key), value, max(ttl, 0)).Result()
		return err
	})
	return ok, r.fail(err)
}

func (r *Redis) Take(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	err := r.write(ctx, key, func(c redis.Cmdable) error {
		var err error
		v, err = c.GetDel(ctx, r.k(key)).Bytes()
		return err
	})
	return v, r.fail(err)
}

func (r *Redis) Update(ctx context.Context, key string, ttl time.Duration, change func(old []byte) ([]byte, error)) ([]byte, error) {
	k := r.k(key)
	kept := r.replicas > 0 && KeptByReplica(key)
	var out []byte
	var changeErr error
	for try := range updateTries {
		if try > 0 {
			// Another writer won the key: wait a little, at random, so that many writers of one
			// key (a busy machine runs them in lockstep) do not collide again and again.
			select {
			case <-ctx.Done():
				return nil, r.fail(ctx.Err())
			case <-time.After(time.Duration(rand.Int64N(int64(min(try, 20))+1)) * time.Millisecond):
			}
		}
		err := r.c.Watch(ctx, func(tx *redis.Tx) error {
			old, err := tx.Get(ctx, k).Bytes()
			if errors.Is(err, redis.Nil) {
				old, err = nil, nil
			}
			if err != nil {
				return err
			}
			nv, err := change(old)
			if err != nil {
				changeErr = err
				return err
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				if ttl == KeepTTL && old != nil {
					p.SetArgs(ctx, k, nv, redis.SetArgs{KeepTTL: true})
				} else {
					p.Set(ctx, k, nv, max(ttl, 0))
				}
				return nil
			})
			if err == nil && kept {
				err = r.wait(ctx, tx)
			}
			out = nv
			return err
		}, k)
		switch {
		case err == nil:
			r.health.ok()
			return out, nil
		case changeErr != nil:
			return nil, changeErr
		case errors.Is(err, redis.TxFailedErr):
			continue // another writer changed the key: read it again
		}
		return nil, r.fail(err)
	}
	return nil, &UnavailableError{Backend: r.name, Err: fmt.Errorf("%d concurrent updates of one key in a row", updateTries)}
}

func (r *Redis) Touch(ctx context.Context, key string, ttl time.Duration) error {
	var ok bool
	err := r.write(ctx, key, func(c redis.Cmdable) error {
		var err error
		if ttl > 0 {
			ok, err = c.PExpire(ctx, r.k(key), ttl).Result()
		} else {
			ok, err = c.Persist(ctx, r.k(key)).Result()
			if err == nil && !ok {
				var n int64
				n, err = c.Exists(ctx, r.k(key)).Result()
				ok = n == 1
			}
		}
		return err
	})
	if err != nil {
		return r.fail(err)
	}
	if !ok {
		return ErrNotFound
	}
	return nil
}

// Delete sends one DEL for all keys to one server; on a Cluster, and for keys of what must not
// be lost, one DEL per key (keys of different hash slots cannot share a command there).
func (r *Redis) Delete(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	var rest []string
	for _, k := range keys {
		if r.replicas > 0 && KeptByReplica(k) {
			if err := r.write(ctx, k, func(c redis.Cmdable) error { return c.Del(ctx, r.k(k)).Err() }); err != nil {
				return r.fail(err)
			}
			continue
		}
		rest = append(rest, r.k(k))
	}
	switch {
	case len(rest) == 0:
		return r.fail(nil)
	case r.cluster == nil || len(rest) == 1:
		return r.fail(r.c.Del(ctx, rest...).Err())
	}
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range rest {
			p.Del(ctx, k)
		}
		return nil
	})
	return r.fail(err)
}

// Scan walks the keyspace of one server, or of every primary of a Cluster, one after the other.
func (r *Redis) Scan(ctx context.Context, prefix string, fn func(key string) error) error {
	nodes := []*redis.Client{r.one}
	if r.cluster != nil {
		var mu sync.Mutex
		nodes = nil
		err := r.cluster.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
			mu.Lock()
			nodes = append(nodes, c)
			mu.Unlock()
			return nil
		})
		if err != nil {
			return r.fail(err)
		}
	}
	seen := map[string]bool{} // SCAN may return a key twice
	for _, node := range nodes {
		it := node.Scan(ctx, 0, escapeGlob(r.k(prefix))+"*", 500).Iterator()
		for it.Next(ctx) {
			k := strings.TrimPrefix(it.Val(), r.ns)
			if seen[k] {
				continue
			}
			seen[k] = true
			if err := fn(k); errors.Is(err, ErrStop) {
				return nil
			} else if err != nil {
				return err
			}
		}
		if err := it.Err(); err != nil {
			return r.fail(err)
		}
	}
	return r.fail(nil)
}

// escapeGlob escapes the characters SCAN's MATCH treats as a pattern.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\^-`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func (r *Redis) Append(ctx context.Context, key string, item []byte, ttl time.Duration) (int64, error) {
	k := r.k(key)
	var push *redis.IntCmd
	err := r.write(ctx, key, func(c redis.Cmdable) error {
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			push = p.RPush(ctx, k, item)
			if ttl > 0 {
				p.PExpire(ctx, k, ttl)
			} else {
				p.Persist(ctx, k)
			}
			return nil
		})
		return err
	})
	if err != nil {
		return 0, r.fail(err)
	}
	r.health.ok()
	return push.Val() - 1, nil
}

func (r *Redis) Range(ctx context.Context, key string, from int64) ([][]byte, error) {
	k := r.k(key)
	var n *redis.IntCmd
	var items *redis.StringSliceCmd
	_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		n = p.LLen(ctx, k)
		items = p.LRange(ctx, k, max(from, 0), -1)
		return nil
	})
	if err != nil {
		return nil, r.fail(err)
	}
	r.health.ok()
	if n.Val() == 0 {
		return nil, ErrNotFound
	}
	out := make([][]byte, len(items.Val()))
	for i, s := range items.Val() {
		out[i] = []byte(s)
	}
	return out, nil
}

func (r *Redis) Ping(ctx context.Context) error { return r.fail(r.c.Ping(ctx).Err()) }

func (r *Redis) Name() string { return r.name }

func (r *Redis) Close() error {
	r.health.stopWatching()
	return r.c.Close()
}

var _ Broadcaster = (*Redis)(nil)

// Publish sends msg on the namespaced channel.
func (r *Redis) Publish(ctx context.Context, channel string, msg []byte) error {
	return r.fail(r.c.Publish(ctx, r.k(channel), msg).Err())
}

// Subscribe subscribes to the namespaced channel (go-redis reconnects and resubscribes when
// Redis comes back) and calls fn with each message until ctx ends.
func (r *Redis) Subscribe(ctx context.Context, channel string, fn func(msg []byte)) error {
	ps := r.c.Subscribe(ctx, r.k(channel))
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		return r.fail(err)
	}
	ch := ps.Channel()
	go func() {
		defer ps.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-ch:
				if !ok {
					return
				}
				fn([]byte(m.Payload))
			}
		}
	}()
	return nil
}
