package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/mark3labs/mcp-go/server"
)

func runStdio(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("stdio", "stdio [--sandbox] [--api-host URL] [--toolsets LIST] [--tools LIST] [--read-only] [--allow-dir DIR]...", stderr)
	var f serverFlags
	f.register(fs)
	var allowDirs listFlag
	fs.Var(&allowDirs, "allow-dir", "a folder whose files the tavern import tools may read by path, besides the client's roots (repeatable, or a comma-separated list)")
	if err := parseFlags(fs, args, nil); err != nil {
		return helpOK(err)
	}
	var err error
	if f.tavern, err = stdioTavern(allowDirs, stderr); err != nil {
		return err
	}
	b, err := f.newBackend(stderr, "")
	if err != nil {
		return err
	}
	b.logger.Info("serving MCP over stdio", "sandbox", f.sandbox, "version", programVersion())
	s := server.NewStdioServer(b.mcp)
	s.SetErrorLogger(log.New(stderr, "", 0))
	// stdout carries the protocol and nothing else; a closed stdin ends the session cleanly.
	err = s.Listen(ctx, os.Stdin, stdout)
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return fmt.Errorf("stdio: %w", err)
}
