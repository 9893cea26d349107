package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=..."; otherwise it comes from the
// module version recorded by go install, or "dev".
var version = ""

// programVersion returns the version this binary reports.
func programVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// userAgent names the program and version in upstream requests.
func userAgent() string { return "cardwriter-mcp/" + programVersion() }

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "version", stderr)
	if err := parseFlags(fs, args, nil); err != nil {
		return helpOK(err)
	}
	_, err := fmt.Fprintf(stdout, "cardwriter-mcp %s\n", programVersion())
	return err
}

// helpOK turns an answered --help into success.
func helpOK(err error) error {
	if err == errHelp {
		return nil
	}
	return err
}
