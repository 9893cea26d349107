package tavernsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"

	"github.com/cardwriter/cardwriter-mcp/internal/aside"
)

// Jobs runs imports under idempotency keys. One run per key is under way at a time in a process:
// the same key issued while it runs waits for that run. A run is detached from the request that
// started it (a client that goes away half-way does not stop it), so it always ends in a state
// it records under its key: the result, or how far it got for the next run to finish. Records the
// AsideStore refuses are held in memory, so that a run repeated after a store failure continues
// from the objects the first one made instead of making them again. The zero value is not
// usable; a nil *Jobs runs every import attached to its request, with no record held.
type Jobs struct {
	mu      sync.Mutex
	running map[string]*jobRun
	held    map[aside.Key][]byte
}

// NewJobs returns an empty Jobs.
func NewJobs() *Jobs {
	return &Jobs{running: map[string]*jobRun{}, held: map[aside.Key][]byte{}}
}

// jobRun is one run under way and, once done is closed, its outcome.
type jobRun struct {
	done chan struct{}
	out  json.RawMessage
	err  error
}

// do runs fn under key unless a run of key is under way, and waits for the run (or for ctx);
// the progress p that fn reports to is detached as do returns.
// fn gets a context that keeps ctx's values and deadline but not its cancellation: a client that
// cancels or goes away does not stop the run (each card service call keeps its own timeout).
func (j *Jobs) do(ctx context.Context, key aside.Key, p *liveProgress, fn func(ctx context.Context) (json.RawMessage, error)) (json.RawMessage, error) {
	out, _, err := j.join(ctx, key, p, fn)
	return out, err
}

// join is do, and reports whether the run was one under way already (another request's).
func (j *Jobs) join(ctx context.Context, key aside.Key, p *liveProgress, fn func(ctx context.Context) (json.RawMessage, error)) (out json.RawMessage, joined bool, err error) {
	defer p.detach()
	if j == nil {
		out, err = fn(ctx)
		return out, false, err
	}
	id := key.String()
	j.mu.Lock()
	r, ok := j.running[id]
	if !ok {
		r = &jobRun{done: make(chan struct{})}
		j.running[id] = r
		bg, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
		if d, ok := ctx.Deadline(); ok {
			bg, cancel = context.WithDeadline(bg, d)
		}
		go func() {
			defer cancel()
			r.out, r.err = fn(bg)
			j.mu.Lock()
			delete(j.running, id)
			j.mu.Unlock()
			close(r.done)
		}()
	}
	j.mu.Unlock()
	select {
	case <-r.done:
		return r.out, ok, r.err
	case <-ctx.Done():
		return nil, ok, context.Cause(ctx)
	}
}

// load reads a job record: the one held in memory when the store refused it, else the store's.
func (j *Jobs) load(ctx context.Context, s AsideStore, key aside.Key, v any) (bool, error) {
	if j != nil {
		j.mu.Lock()
		data, ok := j.held[key]
		j.mu.Unlock()
		if ok {
			return loadRecord(ctx, heldRecord(data), key, v)
		}
	}
	return loadRecord(ctx, s, key, v)
}

// save writes a job record; one the store refuses is held in memory (and the error returned).
func (j *Jobs) save(ctx context.Context, s AsideStore, key aside.Key, v any) error {
	err := saveRecord(ctx, s, key, v)
	if j == nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if err == nil {
		delete(j.held, key)
		return nil
	}
	if data, merr := json.Marshal(v); merr == nil {
		j.held[key] = data
	}
	return err
}

// heldRecord is one record held in memory, read as a store.
type heldRecord []byte

func (h heldRecord) Get(context.Context, aside.Key) ([]byte, bool, error) { return h, true, nil }
func (h heldRecord) Put(context.Context, aside.Key, []byte) error         { return nil }

// jobKey is the record key of the import under idempotency key idem.
func (k asideKeys) job(idem string) aside.Key {
	sum := sha256.Sum256([]byte(idem))
	return aside.Key{BaseURL: k.base, UserID: k.user, Kind: aside.KindImport, ID: hex.EncodeToString(sum[:20])}
}

// digest is the hex SHA-256 of parts joined by NUL bytes.
func digest(parts ...string) string {
	h := sha256.New()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// liveProgress reports progress only while the request that asked for it is under way: a run
// that outlives its request reports to nobody. detach, called as the request's handler returns,
// waits for a report being sent, so that none is written to a response already finished.
type liveProgress struct {
	p    Progress
	mu   sync.Mutex
	gone bool
}

func (l *liveProgress) Report(ctx context.Context, done, total int, message string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.gone {
		l.p.Report(ctx, done, total, message)
	}
}

// detach ends the reports.
func (l *liveProgress) detach() {
	l.mu.Lock()
	l.gone = true
	l.mu.Unlock()
}
