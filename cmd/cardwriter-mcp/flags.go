package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
)

// envPrefix starts the environment variable that backs each flag.
const envPrefix = "CARDWRITER_"

// envName is the environment variable that sets flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// newFlagSet returns a flag set whose usage lists each flag with its environment variable (but
// for the command-line-only ones, see cliOnly). --help (-h) prints the usage on stdout and
// answers errHelp; a usage mistake prints it on stderr. env lists further environment variables
// the command reads, "NAME  what it does", for the usage to name.
func newFlagSet(name, synopsis string, stdout, stderr io.Writer, env ...string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	help := &helpFlag{}
	fs.Var(help, "help", "show this help")
	fs.Var(help, "h", "show this help")
	fs.Usage = func() {
		if !help.asked {
			// A usage mistake: its error is printed already; one line says where the rest is.
			fmt.Fprintf(fs.Output(), "Usage: cardwriter-mcp %s\nRun 'cardwriter-mcp %s --help' for every flag.\n", synopsis, name)
			return
		}
		w := stdout
		fmt.Fprintf(w, "Usage: cardwriter-mcp %s\n\nFlags:\n", synopsis)
		fs.VisitAll(func(f *flag.Flag) {
			if _, ok := f.Value.(*helpFlag); ok {
				return
			}
			dash := "--"
			if len(f.Name) == 1 {
				dash = "-"
			}
			envNote := ""
			if !isCLIOnly(f) {
				envNote = " [env " + envName(f.Name) + "]"
			}
			fmt.Fprintf(w, "  %s%s%s\n      %s%s%s\n", dash, f.Name, valueName(f), f.Usage, defaultNote(f), envNote)
		})
		if len(env) > 0 {
			fmt.Fprintln(w, "\nEnvironment:")
			for _, e := range env {
				fmt.Fprintf(w, "  %s\n", e)
			}
		}
	}
	return fs
}

// isBool reports a flag that takes no value (--sandbox, not --sandbox true).
func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// valueName is what the help shows after a flag that takes a value (" string", " duration"),
// and nothing after a boolean one, so that the two kinds look different.
func valueName(f *flag.Flag) string {
	if isBool(f) {
		return ""
	}
	v := f.Value
	if c, ok := v.(cliOnly); ok {
		v = c.Value
	}
	switch v.(type) {
	case *listFlag:
		return " list"
	case *stringValue:
		return " string"
	}
	if g, ok := v.(flag.Getter); ok {
		switch g.Get().(type) {
		case string:
			return " string"
		case time.Duration:
			return " duration"
		case int, int64, uint, uint64:
			return " int"
		case float64:
			return " number"
		}
	}
	return " value"
}

// defaultNote is the help's "(default ...)": quoted for a string, bare for a number, a duration
// or a boolean that is on by default, and absent for an empty string, zero or false.
func defaultNote(f *flag.Flag) string {
	switch d := f.DefValue; {
	case d == "" || d == "false" || (d == "0" && valueName(f) == " int"):
		return ""
	case valueName(f) == " string":
		return fmt.Sprintf(" (default %q)", d)
	default:
		return " (default " + d + ")"
	}
}

// helpFlag is --help and -h: asking for help prints the usage on stdout.
type helpFlag struct{ asked bool }

func (h *helpFlag) String() string   { return "" }
func (h *helpFlag) IsBoolFlag() bool { return true }

func (h *helpFlag) Set(string) error {
	h.asked = true
	return nil
}

// cliOnly marks a flag that only the command line sets (an output file, a report format): no
// environment variable backs it.
type cliOnly struct{ flag.Value }

// cliOnlyString defines a string flag that no environment variable sets.
func cliOnlyString(fs *flag.FlagSet, p *string, name, value, usage string) {
	*p = value
	fs.Var(cliOnly{(*stringValue)(p)}, name, usage)
}

// cliOnlyBool defines a bool flag that no environment variable sets.
func cliOnlyBool(fs *flag.FlagSet, name, usage string) *bool {
	p := new(bool)
	fs.Var(cliOnly{(*boolValue)(p)}, name, usage)
	return p
}

// IsBoolFlag passes on the wrapped value's.
func (c cliOnly) IsBoolFlag() bool {
	b, ok := c.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func isCLIOnly(f *flag.Flag) bool {
	_, ok := f.Value.(cliOnly)
	return ok
}

// stringValue and boolValue are flag.Values over plain variables (the flag package's are not
// exported).
type (
	stringValue string
	boolValue   bool
)

func (s *stringValue) String() string     { return string(*s) }
func (s *stringValue) Set(v string) error { *s = stringValue(v); return nil }
func (b *boolValue) String() string       { return strconv.FormatBool(bool(*b)) }
func (b *boolValue) IsBoolFlag() bool     { return true }

func (b *boolValue) Set(v string) error {
	x, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	*b = boolValue(x)
	return nil
}

// parseFlags parses args, then fills every flag not given on the command line from its
// environment variable. aliases maps a flag to further variable names tried after its own.
func parseFlags(fs *flag.FlagSet, args []string, aliases map[string][]string) error {
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if h, ok := fs.Lookup("help").Value.(*helpFlag); ok && h.asked {
		fs.Usage()
		return errHelp
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
		if set[f.Name] || err != nil || isCLIOnly(f) {
			return
		}
		if _, ok := f.Value.(*helpFlag); ok {
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

// The environment variables that back no flag, as the usage of each command that reads them
// names them.
const (
	envToken        = "CARDWRITER_TOKEN             a card service access token (scope mcp:card-writer), used instead of the sign-in saved by login"
	envConfigDir    = "CARDWRITER_CONFIG_DIR        the folder of the saved sign-in and the kept-aside tavern data (default: <user config dir>/cardwriter-mcp)"
	envSandboxToken = "CARDWRITER_SANDBOX_TOKEN     with --sandbox: the demo user's access token (default: random, printed at start by http)"
	envOTel         = "OTEL_EXPORTER_OTLP_ENDPOINT  send traces of the tool calls and card service calls there (OpenTelemetry; OTEL_* variables apply)"
)

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
