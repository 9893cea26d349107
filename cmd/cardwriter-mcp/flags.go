package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// envPrefix starts the environment variable that backs each flag.
const envPrefix = "CARDWRITER_"

// envName is the environment variable that sets flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// newFlagSet returns a flag set whose usage lists each flag with its environment variable.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: cardwriter-mcp %s\n\nFlags:\n", synopsis)
		fs.VisitAll(func(f *flag.Flag) {
			def := ""
			if f.DefValue != "" && f.DefValue != "false" {
				def = fmt.Sprintf(" (default %q)", f.DefValue)
			}
			fmt.Fprintf(stderr, "  --%s\n      %s%s [env %s]\n", f.Name, f.Usage, def, envName(f.Name))
		})
	}
	return fs
}

// parseFlags parses args, then fills every flag not given on the command line from its
// environment variable. aliases maps a flag to further variable names tried after its own.
func parseFlags(fs *flag.FlagSet, args []string, aliases map[string][]string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		for _, name := range append([]string{envName(f.Name)}, aliases[f.Name]...) {
			v, ok := os.LookupEnv(name)
			if !ok {
				continue
			}
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("environment variable %s: %w", name, e)
			}
			return
		}
	})
	return err
}

// errHelp reports that --help was asked for and answered.
var errHelp = errors.New("help requested")

// logFlags holds the logging flags every serving command takes.
type logFlags struct {
	level  string
	format string
}

func (l *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&l.format, "log-format", "text", "log format on stderr: text or json")
}

// logger builds the structured logger; logs go to stderr, never stdout.
func (l *logFlags) logger(stderr io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", l.format)
}
