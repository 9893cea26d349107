// Command cardwriter-mcp is the cardwriter MCP server and its companion commands: sign-in
// (login, logout, whoami), the card service sandbox and the version. Each flag that a command's
// --help shows with "[env CARDWRITER_<FLAG>]" can also be set by that environment variable;
// a flag on the command line wins.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand of the binary.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"stdio", "serve MCP over stdin/stdout (desktop hosts)", runStdio},
		{"http", "serve MCP over streamable HTTP at /mcp (remote MCP)", runHTTP},
		{"login", "sign in to the card service in a browser, here or on any device (--no-browser, --device), and save the sign-in (used by stdio)", runLogin},
		{"logout", "revoke and delete the saved sign-in", runLogout},
		{"whoami", "show who the saved sign-in (or CARDWRITER_TOKEN, when set) belongs to and when its access token expires", runWhoami},
		{"import", "import a character card file (V1/V2/V3 JSON, PNG, CHARX) as a card, or as a trial card", runImport},
		{"import-worldbook", "import a lorebook (SillyTavern World Info, a V2/V3 character_book) as a worldbook", runImportWorldbook},
		{"export", "export a card as a Character Card V3 file (JSON, PNG or CHARX)", runExport},
		{"export-worldbook", "export a worldbook as a SillyTavern World Info or lorebook_v3 file", runExportWorldbook},
		{"doctor", "check your setup (config dir, saved sign-in, the card service, the token) and say what to fix", runDoctor},
		{"probe", "compare the card service's answers with the contract (read operations and a trial created, read and deleted)", runProbe},
		{"sandbox", "serve the card service emulator (API under /open/v1) with a signed-in demo user", runSandbox},
		{"healthcheck", "ask a running server whether it lives (for container health checks)", runHealthcheck},
		{"version", "print the version", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var code exitCode
	if errors.As(err, &code) {
		os.Exit(int(code)) // explained already
	}
	if err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "cardwriter-mcp:", err)
		}
		os.Exit(2)
	}
}

// errUsage reports a usage mistake whose explanation was already printed.
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stderr)
		return errUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout) // asked for: on stdout, so that `--help | less` shows it
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "cardwriter-mcp: unknown command %q\n\n", args[0])
	usage(stderr)
	return errUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: cardwriter-mcp <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-16s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'cardwriter-mcp <command> --help' for a command's flags.")
	fmt.Fprintln(w, "A flag whose help shows [env CARDWRITER_<FLAG>] may also be set by that variable (the")
	fmt.Fprintln(w, "command line wins); the others, such as -o, --format and --json, only on the command line.")
}
