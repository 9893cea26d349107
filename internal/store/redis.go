package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
// WATCH/MULTI/EXEC retried on contention. A failure of Redis is an UnavailableError.
type Redis struct {
	c    *redis.Client
	ns   string
	name string
}

var _ KV = (*Redis)(nil)

// OpenRedis connects to the Redis a redis:// or rediss:// URL names (go-redis's URL format:
// redis://[user:password@]host:port/db, plus ?namespace=prefix:). It does not wait for Redis
// to answer: the server starts, and /readyz reports the store.
func OpenRedis(rawURL string) (*Redis, error) {
	ns := DefaultNamespace
	if before, after, ok := strings.Cut(rawURL, "?"); ok {
		var rest []string
		for _, kv := range strings.Split(after, "&") {
			if v, ok := strings.CutPrefix(kv, "namespace="); ok {
				ns = v
				continue
			}
			rest = append(rest, kv)
		}
		rawURL = before
		if len(rest) > 0 {
			rawURL += "?" + strings.Join(rest, "&")
		}
	}
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", redactURL(rawURL), err)
	}
	if opts.DialTimeout == 0 || opts.DialTimeout > redisDialTimeout {
		opts.DialTimeout = redisDialTimeout
	}
	opts.ReadTimeout, opts.WriteTimeout, opts.PoolTimeout = redisIOTimeout, redisIOTimeout, redisIOTimeout
	opts.MaxRetries = 1
	opts.ContextTimeoutEnabled = true
	return &Redis{c: redis.NewClient(opts), ns: ns, name: "redis " + opts.Addr + "/" + fmt.Sprint(opts.DB)}, nil
}

func init() { redis.SetLogger(quietLogger{}) }

// quietLogger keeps go-redis from printing to the standard logger (its dial failures reach the
// caller as UnavailableError).
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func (r *Redis) k(key string) string { return r.ns + key }

// fail maps redis.Nil to ErrNotFound and the rest to UnavailableError.
func (r *Redis) fail(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, redis.Nil):
		return ErrNotFound
	case errors.Is(err, context.Canceled):
		return err
	}
	return &UnavailableError{Backend: r.name, Err: err}
}

func (r *Redis) Get(ctx context.Context, key string) ([]byte, error) {
	v, err := r.c.Get(ctx, r.k(key)).Bytes()
	return v, r.fail(err)
}

func (r *Redis) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return r.fail(r.c.Set(ctx, r.k(key), value, max(ttl, 0)).Err())
}

func (r *Redis) Create(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	ok, err := r.c.SetNX(ctx, r.k(key), value, max(ttl, 0)).Result()
	return ok, r.fail(err)
}

func (r *Redis) Take(ctx context.Context, key string) ([]byte, error) {
	v, err := r.c.GetDel(ctx, r.k(key)).Bytes()
	return v, r.fail(err)
}

func (r *Redis) Update(ctx context.Context, key string, ttl time.Duration, change func(old []byte) ([]byte, error)) ([]byte, error) {
	k := r.k(key)
	var out []byte
	var changeErr error
	for range updateTries {
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
			out = nv
			return err
		}, k)
		switch {
		case err == nil:
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
	var err error
	if ttl > 0 {
		ok, err = r.c.PExpire(ctx, r.k(key), ttl).Result()
	} else {
		ok, err = r.c.Persist(ctx, r.k(key)).Result()
		if err == nil && !ok {
			var n int64
			n, err = r.c.Exists(ctx, r.k(key)).Result()
			ok = n == 1
		}
	}
	if err != nil {
		return r.fail(err)
	}
	if !ok {
		return ErrNotFound
	}
	return nil
}

func (r *Redis) Delete(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	ks := make([]string, len(keys))
	for i, k := range keys {
		ks[i] = r.k(k)
	}
	return r.fail(r.c.Del(ctx, ks...).Err())
}

func (r *Redis) Scan(ctx context.Context, prefix string, fn func(key string) error) error {
	it := r.c.Scan(ctx, 0, escapeGlob(r.k(prefix))+"*", 500).Iterator()
	seen := map[string]bool{} // SCAN may return a key twice
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
	return r.fail(it.Err())
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
	_, err := r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		push = p.RPush(ctx, k, item)
		if ttl > 0 {
			p.PExpire(ctx, k, ttl)
		} else {
			p.Persist(ctx, k)
		}
		return nil
	})
	if err != nil {
		return 0, r.fail(err)
	}
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

func (r *Redis) Close() error { return r.c.Close() }

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
