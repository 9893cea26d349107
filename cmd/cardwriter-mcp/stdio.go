package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cardwriter/cardwriter-mcp/auth"
	"github.com/cardwriter/cardwriter-mcp/internal/msglimit"
	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/unread"
	"github.com/cardwriter/cardwriter-mcp/tools"
)

func runStdio(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("stdio", "stdio [--sandbox] [--api-host URL] [--toolsets LIST] [--tools LIST] [--read-only] [--dynamic-toolsets] [--allow-dir DIR]...", stdout, stderr, envToken, envConfigDir, envSandboxToken, envOTel)
	var f serverFlags
	f.register(fs)
	f.signedOutOK = true
	fs.BoolVar(&f.dynamic, "dynamic-toolsets", false, "start with the cards toolset and two tools (list_toolsets, enable_toolset) by which the model loads the others when it needs them: fewer tokens in hosts that put every tool into the model's context")
	drain := fs.Duration("drain-timeout", defaultDrain, "when the input ends, how long the calls under way may take to finish before the server exits")
	var allowDirs listFlag
	fs.Var(&allowDirs, "allow-dir", "a folder whose files the tavern import tools may read by path, besides the client's roots (repeatable, or a comma-separated list)")
	if err := parseFlags(fs, args, nil); err != nil {
		return helpOK(err)
	}
	restoreGC := deferFirstGC()
	defer restoreGC()
	var err error
	if f.tavern, err = stdioTavern(allowDirs, stderr); err != nil {
		return err
	}
	f.revisionDir, f.localProfile = stdioRevisions(stderr)
	importOldRevisions(f.revisionDir, stderr)
	tp, stopTracing, err := setupTracing(ctx)
	if err != nil {
		return err
	}
	defer stopTracing()
	f.tracer = tp
	out := newLineWriter(stdout)
	out.written = restoreGC
	f.notifier = out
	f.calls = &tools.Calls{}
	b, err := f.newBackend(stderr, "")
	if err != nil {
		return err
	}
	b.logger.Info("serving MCP over stdio", "sandbox", f.sandbox, "version", programVersion())
	s := server.NewStdioServer(b.mcp)
	s.SetErrorLogger(log.New(stderr, "", 0))
	// stdout carries the protocol and nothing else; a closed stdin ends the session cleanly,
	// once the calls under way have finished (at most --drain-timeout).
	bounded := &boundedInput{r: bufio.NewReader(os.Stdin), limits: messageLimits(), out: out, log: b.logger, listens: &out.listens}
	in := &drainingReader{r: bounded, calls: f.calls, drain: *drain, ctx: ctx}
	err = s.Listen(ctx, in, out)
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return fmt.Errorf("stdio: %w", err)
}

// revisionsDir is the folder of the stdio servers' revisions, in the config dir the sign-in
// uses.
const revisionsDir = "revisions"

// stdioRevisions returns where the stdio server keeps revisions, a folder in the config dir
// that every stdio server of the user shares (revisions.NewDir: a file per revision), so that a
// restart loses none ("" when there is no config dir: memory), and the local profile that owns
// them (the config dir).
func stdioRevisions(stderr io.Writer) (dir, profile string) {
	cfg, err := auth.Dir()
	if err != nil {
		fmt.Fprintf(stderr, "cardwriter-mcp: %v; keeping revisions in memory only\n", err)
		return "", "memory"
	}
	return filepath.Join(cfg, revisionsDir), cfg
}

// oldRevisionsFile is where an earlier version kept the stdio servers' revisions (a bbolt file
// opened per operation), in the config dir.
const oldRevisionsFile = "revisions.db"

// importOldRevisions moves the revisions of an earlier version's file into dir (of the config
// dir's local profile), once, and removes the file; a failure is said and leaves the file for
// the next start.
func importOldRevisions(dir string, stderr io.Writer) {
	if dir == "" {
		return
	}
	old := filepath.Join(filepath.Dir(dir), oldRevisionsFile)
	if _, err := os.Stat(old); err != nil {
		return
	}
	kv, err := store.OpenBolt(old) // waits for another server importing it
	if err == nil {
		s := revisions.NewDir(dir, revisions.DefaultRetention())
		// They were the card service user's (GET /me); the local profile's now.
		_, err = revisions.ImportKV(context.Background(), kv, s, func(u revisions.User) revisions.User {
			return revisions.LocalUser(u.BaseURL, filepath.Dir(dir))
		})
		_ = s.Close()
		_ = kv.Close()
	}
	if err == nil {
		err = os.Remove(old)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stderr, "cardwriter-mcp: moving the revisions of %s into %s: %v (tried again at the next start)\n", old, dir, err)
	}
}

// drainingReader is stdin that, at its end, first waits for the tool calls under way (mcp-go
// cancels the calls still running when its input ends, and their work would be lost).
type drainingReader struct {
	r     io.Reader
	calls *tools.Calls
	drain time.Duration
	ctx   context.Context
	once  sync.Once
}

func (d *drainingReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if err != nil {
		d.once.Do(func() {
			ctx, cancel := context.WithTimeout(d.ctx, d.drain)
			defer cancel()
			d.calls.Wait(ctx, 50*time.Millisecond)
		})
	}
	return n, err
}

// boundedInput is stdin with each message (a line) checked against the message limits before
// mcp-go decodes it: a request over them is answered here, on stdout, and never reaches it.
type boundedInput struct {
	r       *bufio.Reader
	limits  *msglimit.Limits
	out     io.Writer
	log     *slog.Logger
	listens *listens // told of each subscriptions/listen request; nil: none is ordered
	pending []byte   // the rest of an accepted line, not read yet
	err     error    // the error that ended the input, once pending is read
}

func (b *boundedInput) Read(p []byte) (int, error) {
	for len(b.pending) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		line, err := b.r.ReadBytes('\n')
		b.err = err
		if refused := b.limits.Check(bytes.TrimSpace(line)); refused != nil {
			b.log.Warn("mcp message refused before decoding", "reason", refused.Reason, "tool", refused.Tool)
			if answer := refused.Response(); answer != nil {
				if _, err := b.out.Write(append(answer, '\n')); err != nil {
					return 0, err
				}
			}
			continue
		}
		if b.listens != nil {
			b.listens.requested(line)
		}
		if answer, refused := stdioUnsupported(line); refused {
			if answer != nil {
				if _, err := b.out.Write(append(answer, '\n')); err != nil {
					return 0, err
				}
			}
			continue
		}
		b.pending = line
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

// lineWriter is stdout shared by mcp-go's stdio server (responses, requests to the client) and
// the tools' notifier, which writes a call's notifications at once so that they precede its
// response (tools.Options.Notifier). Every Write is one whole JSON-RPC line, kept whole.
//
// It is also the one place that decides when a response may follow the notifications written
// (Settle): the official TypeScript SDK drops a progress notification read in the same chunk as
// its call's response (tools/notify.go). Where the kernel tells how much of stdout the client
// has not read (Linux: a pipe, or the Unix socket pair Node.js hosts spawn servers with), the
// response waits until the client has read it all; elsewhere (a file, macOS, Windows) it waits
// noteGap after the last notification, a guess that held on a loaded machine but not always.
type lineWriter struct {
	mu   sync.Mutex
	w    io.Writer
	file *os.File // w, when the kernel can tell how much of it is unread
	// written, when set, is called after each line is written (deferFirstGC's restore).
	written func()

	// noted is when the last notification was written (UnixNano), or 0 since the client was
	// last seen to have read all of stdout.
	noted atomic.Int64
	// listens orders the subscriptions/listen streams' lines (listen.go).
	listens listens
}

const (
	// readCap bounds how long a response waits for the client to read the notifications before
	// it: a client that stops reading stdout is answered anyway.
	readCap = 3 * time.Second
	// noteGap is how long a response waits after the last notification where the kernel cannot
	// tell whether the client has read it. 3 ms held on an idle machine; under load (the hosts
	// suite with two servers on 2 cores) the client's event loop was sometimes busier than
	// that and read the progress and the response in one chunk.
	noteGap = 20 * time.Millisecond
)

// newLineWriter returns the writer of stdout w.
func newLineWriter(w io.Writer) *lineWriter {
	l := &lineWriter{w: w}
	l.listens.flush = func(line []byte) {
		l.mu.Lock()
		defer l.mu.Unlock()
		_, _ = l.w.Write(line)
	}
	if f, ok := w.(*os.File); ok {
		if _, err := unread.Bytes(f); err == nil {
			l.file = f
		}
	}
	return l
}

func (l *lineWriter) Write(p []byte) (int, error) {
	line := p
	if l.listens.active() {
		if line = l.listens.order(p); len(line) == 0 {
			return len(p), nil // held: written after its stream's acknowledgment
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.w.Write(line)
	if l.written != nil {
		l.written()
	}
	if err == nil {
		n = len(p)
	}
	return n, err
}

// firstGCDeadline is how long deferFirstGC waits at most for the first line out.
const firstGCDeadline = time.Second

// deferFirstGC turns the garbage collector off until the returned function is called (at the
// first line written, the initialize response; at the latest after firstGCDeadline), which
// restores the GOGC it found. The heap first reaches the runtime's 4 MB goal while the server is
// being built (the tool registry allocates 1.7 MB), so the first collection, whose start costs
// more than its marking (the mark workers started, every span swept, about 5 ms of a 40 ms cold
// start on two cores), fell on the way to the initialize response. Deferred, it runs at the next
// allocation after that response, as it would have: the same work, off the handshake's path; the
// heap meanwhile holds at most the garbage of building the server (about 2 MB). Only a call
// sent before the host read that response (pipelined) can start with it off, until the response
// is written or the deadline passes.
func deferFirstGC() (restore func()) {
	percent := debug.SetGCPercent(-1)
	once := sync.OnceFunc(func() { debug.SetGCPercent(percent) })
	t := time.AfterFunc(firstGCDeadline, once)
	return sync.OnceFunc(func() {
		t.Stop()
		once()
	})
}

// Notify writes one notification as a line.
func (l *lineWriter) Notify(_ context.Context, n mcp.JSONRPCNotification) error {
	data, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("encode notification %s: %w", n.Method, err)
	}
	_, err = l.Write(append(data, '\n'))
	l.noted.Store(time.Now().UnixNano())
	return err
}

// Settle returns once the client has read the notifications written (at most readCap), or
// noteGap after the last one where that cannot be told; at once when none is pending.
func (l *lineWriter) Settle(ctx context.Context) {
	at := l.noted.Load()
	if at == 0 {
		return
	}
	if l.file != nil {
		err := unread.Wait(ctx, l.file, readCap)
		if err == nil {
			l.noted.CompareAndSwap(at, 0) // unless another was written meanwhile
		}
		if !errors.Is(err, unread.ErrUnsupported) {
			return
		}
	}
	wait := time.Duration(at + int64(noteGap) - time.Now().UnixNano())
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
