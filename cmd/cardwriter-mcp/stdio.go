package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cardwriter/cardwriter-mcp/tools"
)

func runStdio(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("stdio", "stdio [--sandbox] [--api-host URL] [--toolsets LIST] [--tools LIST] [--read-only] [--dynamic-toolsets] [--allow-dir DIR]...", stderr)
	var f serverFlags
	f.register(fs)
	fs.BoolVar(&f.dynamic, "dynamic-toolsets", false, "start with the cards toolset and two tools (list_toolsets, enable_toolset) by which the model loads the others when it needs them: fewer tokens in hosts that put every tool into the model's context")
	drain := fs.Duration("drain-timeout", defaultDrain, "when the input ends, how long the calls under way may take to finish before the server exits")
	var allowDirs listFlag
	fs.Var(&allowDirs, "allow-dir", "a folder whose files the tavern import tools may read by path, besides the client's roots (repeatable, or a comma-separated list)")
	if err := parseFlags(fs, args, nil); err != nil {
		return helpOK(err)
	}
	var err error
	if f.tavern, err = stdioTavern(allowDirs, stderr); err != nil {
		return err
	}
	tp, stopTracing, err := setupTracing(ctx)
	if err != nil {
		return err
	}
	defer stopTracing()
	f.tracer = tp
	out := &lineWriter{w: stdout}
	f.notifier = out.notify
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
	in := &drainingReader{r: os.Stdin, calls: f.calls, drain: *drain, ctx: ctx}
	err = s.Listen(ctx, in, out)
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return fmt.Errorf("stdio: %w", err)
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

// lineWriter is stdout shared by mcp-go's stdio server (responses, requests to the client) and
// the tools' notifier, which writes a call's notifications at once so that they precede its
// response (tools.Options.Notifier). Every Write is one whole JSON-RPC line, kept whole.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// notify writes one notification as a line.
func (l *lineWriter) notify(_ context.Context, n mcp.JSONRPCNotification) error {
	data, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("encode notification %s: %w", n.Method, err)
	}
	_, err = l.Write(append(data, '\n'))
	return err
}
