package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version and commit are set at build time with -ldflags "-X main.version=... -X
// main.commit=..."; otherwise they come from what the Go toolchain recorded (the module version
// of go install, the VCS revision of a build in a checkout), or "dev" and "".
var (
	version = ""
	commit  = ""
)

// programCommit returns the commit this binary was built from ("" when not known), with
// "+dirty" when the checkout had changes.
func programCommit() string {
	if commit != "" {
		return commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && modified == "true" {
		rev += "+dirty"
	}
	return rev
}

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

// serverVersion is the version in every MCP session's serverInfo: the version, and the commit
// as build metadata when known ("1.2.3+abc123").
func serverVersion() string {
	if c := programCommit(); c != "" {
		return programVersion() + "+" + c
	}
	return programVersion()
}

// userAgent names the program and version in upstream requests.
func userAgent() string { return "cardwriter-mcp/" + programVersion() }

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "version", stdout, stderr)
	if err := parseFlags(fs, args, nil); err != nil {
		return helpOK(err)
	}
	details := runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH
	if c := programCommit(); c != "" {
		details = "commit " + c + ", " + details
	}
	_, err := fmt.Fprintf(stdout, "cardwriter-mcp %s (%s)\n", programVersion(), details)
	return err
}

// helpOK turns an answered --help into success.
func helpOK(err error) error {
	if err == errHelp {
		return nil
	}
	return err
}
