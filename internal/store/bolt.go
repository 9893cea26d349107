package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// BoltFile is the name of the embedded store's file in the state directory.
const BoltFile = "state.db"

var (
	bucketVals  = []byte("values")
	bucketLists = []byte("lists")
	listMeta    = []byte("\x00expires-at") // in a list's bucket: its expiry (not 8 bytes long: items have 8-byte keys)
)

// Bolt is the embedded KV: one bbolt file (0600, in a 0700 directory) whose transactions are
// synced to disk before they return, so a crash loses nothing acknowledged. One process opens
// the file at a time (bbolt's exclusive lock); several replicas need Redis. Expired keys read
// as absent and are deleted by a sweep every minute, after which a file that is mostly free
// pages is compacted (and at open), so that its size follows what it holds.
type Bolt struct {
	mu   sync.RWMutex // held for reading by every transaction, for writing while the file is compacted
	db   *bolt.DB
	path string
	now  func() time.Time

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

var _ KV = (*Bolt)(nil)

// OpenBolt opens (creating) the store at path.
func OpenBolt(path string) (*Bolt, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("store: the state directory: %w", err)
	}
	db, err := bolt.Open(abs, 0o600, boltOptions())
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("store: %s is in use by another process: one server per state directory (run several replicas on --store redis://...)", abs)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", abs, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketVals, bucketLists} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: %s: %w", abs, err)
	}
	b := &Bolt{db: db, path: abs, now: time.Now, stop: make(chan struct{}), done: make(chan struct{})}
	// A file left large by a burst before a restart is compacted before it serves.
	if err := b.maintain(); IsUnavailable(err) {
		return nil, err
	}
	go b.sweeper()
	return b, nil
}

// boltOptions are the options the store's file is opened with. The free-page list is not
// written at each commit (bbolt rebuilds it from the pages at open): a commit then writes the
// pages it changed and its meta page, and nothing that grows with the file's free space. The
// map form of the list frees and allocates in constant time.
func boltOptions() *bolt.Options {
	return &bolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType}
}

// Path returns the file's path.
func (b *Bolt) Path() string { return b.path }

func (b *Bolt) fail(err error) error {
	if err == nil || errors.Is(err, ErrNotFound) {
		return err
	}
	var u *UnavailableError
	if errors.As(err, &u) {
		return err
	}
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return &UnavailableError{Backend: b.Name(), Err: err}
	}
	return err
}

// encode prefixes a value with its expiry (unix nanoseconds; 0 for never).
func encode(exp time.Time, value []byte) []byte {
	out := make([]byte, 8+len(value))
	if !exp.IsZero() {
		binary.BigEndian.PutUint64(out, uint64(exp.UnixNano()))
	}
	copy(out[8:], value)
	return out
}

// decode splits a stored value; ok is false when it expired at now.
func decode(raw []byte, now time.Time) (exp time.Time, value []byte, ok bool) {
	if len(raw) < 8 {
		return time.Time{}, nil, false
	}
	if n := binary.BigEndian.Uint64(raw); n != 0 {
		exp = time.Unix(0, int64(n))
	}
	return exp, bytes.Clone(raw[8:]), live(exp, now)
}

func (b *Bolt) getTx(tx *bolt.Tx, key string) (time.Time, []byte, bool) {
	raw := tx.Bucket(bucketVals).Get([]byte(key))
	if raw == nil {
		return time.Time{}, nil, false
	}
	return decode(raw, b.now())
}

func (b *Bolt) Get(_ context.Context, key string) ([]byte, error) {
	var out []byte
	err := b.view(func(tx *bolt.Tx) error {
		_, v, ok := b.getTx(tx, key)
		if !ok {
			return ErrNotFound
		}
		out = v
		return nil
	})
	return out, b.fail(err)
}

func (b *Bolt) Set(_ context.Context, key string, value []byte, ttl time.Duration) error {
	return b.fail(b.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketVals).Put([]byte(key), encode(expiry(b.now(), ttl), value))
	}))
}

func (b *Bolt) Create(_ context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	created := false
	err := b.update(func(tx *bolt.Tx) error {
		if _, _, ok := b.getTx(tx, key); ok {
			return nil
		}
		created = true
		return tx.Bucket(bucketVals).Put([]byte(key), encode(expiry(b.now(), ttl), value))
	})
	return created && err == nil, b.fail(err)
}

func (b *Bolt) Take(_ context.Context, key string) ([]byte, error) {
	var out []byte
	err := b.update(func(tx *bolt.Tx) error {
		_, v, ok := b.getTx(tx, key)
		if !ok {
			return ErrNotFound
		}
		out = v
		return tx.Bucket(bucketVals).Delete([]byte(key))
	})
	return out, b.fail(err)
}

func (b *Bolt) Update(_ context.Context, key string, ttl time.Duration, change func(old []byte) ([]byte, error)) ([]byte, error) {
	var out []byte
	err := b.update(func(tx *bolt.Tx) error {
		exp, old, ok := b.getTx(tx, key)
		if !ok {
			old, exp = nil, time.Time{}
		}
		nv, err := change(old)
		if err != nil {
			return err
		}
		if ttl != KeepTTL {
			exp = expiry(b.now(), ttl)
		}
		out = nv
		return tx.Bucket(bucketVals).Put([]byte(key), encode(exp, nv))
	})
	if err != nil {
		return nil, b.fail(err)
	}
	return out, nil
}

func (b *Bolt) Touch(_ context.Context, key string, ttl time.Duration) error {
	return b.fail(b.update(func(tx *bolt.Tx) error {
		if _, v, ok := b.getTx(tx, key); ok {
			return tx.Bucket(bucketVals).Put([]byte(key), encode(expiry(b.now(), ttl), v))
		}
		if lb := b.listTx(tx, key); lb != nil {
			return lb.Put(listMeta, encode(expiry(b.now(), ttl), nil))
		}
		return ErrNotFound
	}))
}

func (b *Bolt) Delete(_ context.Context, keys ...string) error {
	return b.fail(b.update(func(tx *bolt.Tx) error { return deleteTx(tx, keys) }))
}

func (b *Bolt) Scan(ctx context.Context, prefix string, fn func(key string) error) error {
	var keys []string
	err := b.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketVals).Cursor()
		now := b.now()
		for k, v := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
			if _, _, ok := decode(v, now); ok {
				keys = append(keys, string(k))
			}
		}
		return nil
	})
	if err != nil {
		return b.fail(err)
	}
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(k); errors.Is(err, ErrStop) {
			return nil
		} else if err != nil {
			return err
		}
	}
	return nil
}

// listTx returns a live list's bucket, or nil.
func (b *Bolt) listTx(tx *bolt.Tx, key string) *bolt.Bucket {
	lb := tx.Bucket(bucketLists).Bucket([]byte(key))
	if lb == nil {
		return nil
	}
	if _, _, ok := decode(lb.Get(listMeta), b.now()); !ok {
		return nil
	}
	return lb
}

func (b *Bolt) Append(_ context.Context, key string, item []byte, ttl time.Duration) (int64, error) {
	var index int64
	err := b.update(func(tx *bolt.Tx) error {
		lists := tx.Bucket(bucketLists)
		lb := b.listTx(tx, key)
		if lb == nil {
			if err := lists.DeleteBucket([]byte(key)); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
				return err
			}
			var err error
			if lb, err = lists.CreateBucket([]byte(key)); err != nil {
				return err
			}
		}
		seq, err := lb.NextSequence()
		if err != nil {
			return err
		}
		index = int64(seq - 1)
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], uint64(index))
		if err := lb.Put(k[:], item); err != nil {
			return err
		}
		return lb.Put(listMeta, encode(expiry(b.now(), ttl), nil))
	})
	return index, b.fail(err)
}

func (b *Bolt) Range(_ context.Context, key string, from int64) ([][]byte, error) {
	var out [][]byte
	err := b.view(func(tx *bolt.Tx) error {
		lb := b.listTx(tx, key)
		if lb == nil {
			return ErrNotFound
		}
		if from < 0 {
			from = 0
		}
		var start [8]byte
		binary.BigEndian.PutUint64(start[:], uint64(from))
		c := lb.Cursor()
		for k, v := c.Seek(start[:]); k != nil; k, v = c.Next() {
			if len(k) == 8 {
				out = append(out, bytes.Clone(v))
			}
		}
		return nil
	})
	return out, b.fail(err)
}

func (b *Bolt) Ping(context.Context) error {
	return b.fail(b.view(func(*bolt.Tx) error { return nil }))
}

func (b *Bolt) Name() string { return "bolt " + b.path }

// Close stops the sweep and closes the file, releasing its lock.
func (b *Bolt) Close() error {
	b.stopOnce.Do(func() { close(b.stop) })
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.db.Close()
}

func (b *Bolt) sweeper() {
	defer close(b.done)
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			_ = b.maintain()
		}
	}
}

func (b *Bolt) view(fn func(*bolt.Tx) error) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.db.View(fn)
}

func (b *Bolt) update(fn func(*bolt.Tx) error) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.db.Update(fn)
}

// compactMin is the smallest file worth compacting.
const compactMin = 1 << 20

// maintain deletes what expired and gives the space back to the file system when most of the
// file is free pages (bbolt reuses free pages but never shrinks its file: after a burst of
// sessions, the file would keep its peak size for good).
func (b *Bolt) maintain() error {
	if err := b.sweep(); err != nil {
		return err
	}
	return b.compactIfSparse()
}

// sparse reports whether the file is over compactMin and more than half of it is free.
func (b *Bolt) sparse() bool {
	fi, err := os.Stat(b.path)
	if err != nil || fi.Size() < compactMin {
		return false
	}
	var live int64
	_ = b.db.View(func(tx *bolt.Tx) error {
		st := b.db.Stats()
		pages := tx.Size() / int64(b.db.Info().PageSize)
		live = (pages - int64(st.FreePageN) - int64(st.PendingPageN)) * int64(b.db.Info().PageSize)
		return nil
	})
	return live*2 < fi.Size()
}

// compactIfSparse rewrites a sparse file without its free pages: a copy is compacted beside it,
// synced, and renamed over it, then opened in its place. Transactions wait meanwhile.
func (b *Bolt) compactIfSparse() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.sparse() {
		return nil
	}
	tmp := b.path + ".compact"
	_ = os.Remove(tmp)
	dst, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("store: compact %s: %w", b.path, err)
	}
	if err := bolt.Compact(dst, b.db, 4<<20); err != nil {
		dst.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("store: compact %s: %w", b.path, err)
	}
	if err := dst.Close(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("store: compact %s: %w", b.path, err)
	}
	if err := b.db.Close(); err != nil {
		return fmt.Errorf("store: compact %s: %w", b.path, err)
	}
	renamed := os.Rename(tmp, b.path)
	if d, err := os.Open(filepath.Dir(b.path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	// Open the file again whether or not the rename took (then it is the old one, whole).
	db, err := bolt.Open(b.path, 0o600, boltOptions())
	if err != nil {
		return &UnavailableError{Backend: b.Name(), Err: fmt.Errorf("reopen after compaction: %w", err)}
	}
	b.db = db
	if renamed != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("store: compact %s: %w", b.path, renamed)
	}
	return nil
}

// sweep deletes expired values and lists.
func (b *Bolt) sweep() error {
	return b.update(func(tx *bolt.Tx) error {
		now := b.now()
		var dead [][]byte
		_ = tx.Bucket(bucketVals).ForEach(func(k, v []byte) error {
			if _, _, ok := decode(v, now); !ok {
				dead = append(dead, bytes.Clone(k))
			}
			return nil
		})
		for _, k := range dead {
			if err := tx.Bucket(bucketVals).Delete(k); err != nil {
				return err
			}
		}
		dead = dead[:0]
		lists := tx.Bucket(bucketLists)
		_ = lists.ForEachBucket(func(k []byte) error {
			if _, _, ok := decode(lists.Bucket(k).Get(listMeta), now); !ok {
				dead = append(dead, bytes.Clone(k))
			}
			return nil
		})
		for _, k := range dead {
			if err := lists.DeleteBucket(k); err != nil {
				return err
			}
		}
		return nil
	})
}
