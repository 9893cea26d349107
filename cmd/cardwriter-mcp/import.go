package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cardwriter/cardwriter-mcp/auth"
	"github.com/cardwriter/cardwriter-mcp/internal/aside"
	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
	"github.com/cardwriter/cardwriter-mcp/tools"
)

// tavernConfig configures the tavern toolset of a server: where what the card service cannot
// hold of an imported file is kept aside, and which local files source.path may name.
type tavernConfig struct {
	aside tools.AsideStore  // nil: in memory, for the life of the server (http)
	files *tools.LocalFiles // nil: source.path refused (http)
}

// asideDir is the kept-aside store's directory: aside/ in the config dir the sign-in uses
// ($CARDWRITER_CONFIG_DIR, else the user config dir's cardwriter-mcp/).
func asideDir() (string, error) {
	dir, err := auth.Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "aside"), nil
}

// fileAside returns the kept-aside store in the user's config dir.
func fileAside() (tools.AsideStore, error) {
	dir, err := asideDir()
	if err != nil {
		return nil, fmt.Errorf("kept-aside store: %w", err)
	}
	return aside.NewFile(dir)
}

// stdioTavern is the tavern configuration of the stdio server: a file store, and source.path
// allowed inside the client's roots and the --allow-dir folders.
func stdioTavern(allowDirs []string, stderr io.Writer) (tavernConfig, error) {
	var dirs []string
	for _, d := range allowDirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return tavernConfig{}, fmt.Errorf("--allow-dir %s: %w", d, err)
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return tavernConfig{}, fmt.Errorf("--allow-dir %s: %w", d, err)
		}
		if !fi.IsDir() {
			return tavernConfig{}, fmt.Errorf("--allow-dir %s: not a directory", d)
		}
		dirs = append(dirs, abs)
	}
	cfg := tavernConfig{files: &tools.LocalFiles{AllowDirs: dirs}}
	store, err := fileAside()
	if err != nil {
		// Imports still work; what they keep aside lasts as long as the server.
		fmt.Fprintf(stderr, "cardwriter-mcp: %v; keeping imported cards' extra data in memory only\n", err)
		return cfg, nil
	}
	cfg.aside = store
	return cfg, nil
}

// listFlag is a repeatable flag whose values may also be comma-separated lists.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, splitList(v)...)
	return nil
}

// cliFlags are the flags of the commands that call the card service once (import, export,
// export-worldbook, doctor, probe): the card service or the sandbox, the token from
// CARDWRITER_TOKEN or the saved sign-in, the contract's corrections, and logging, quiet by
// default.
func cliFlags(fs *flag.FlagSet, f *serverFlags) {
	serviceFlags(fs, f, "with --sandbox: file that keeps the sandbox's state across runs (default: memory only)")
	fs.StringVar(&f.level, "log-level", "warn", "log level: debug, info, warn or error")
	fs.StringVar(&f.format, "log-format", "text", "log format on stderr: text or json")
}

// serviceFlags are the flags that choose the card service (or the sandbox) and its contract;
// the token is CARDWRITER_TOKEN or the saved sign-in, as for stdio.
func serviceFlags(fs *flag.FlagSet, f *serverFlags, sandboxDataUsage string) {
	fs.BoolVar(&f.sandbox, "sandbox", false, "use the card service sandbox in-process, with its demo user (no account, no network)")
	fs.StringVar(&f.sandboxData, "sandbox-data", "", sandboxDataUsage)
	fs.StringVar(&f.apiHost, "api-host", "", "the card service's address, e.g. https://api.example.com (the API is under /open/v1)")
	fs.StringVar(&f.contract, "contract", "", contractUsage)
	f.savedGrant = true
}

// fileFlags are the flags of the commands that move files in and out (import, export,
// export-worldbook): cliFlags, with a sandbox that lasts from one command to the next.
func fileFlags(fs *flag.FlagSet, f *serverFlags) {
	cliFlags(fs, f)
	fs.Lookup("sandbox-data").Usage = "with --sandbox: file that keeps the sandbox's state (default: " + cliSandboxFile + " in the config directory, which import, export and export-worldbook share, so that a card imported into the sandbox can be exported by the next command)"
}

// cliSandboxFile is the file, in the config directory, of the sandbox that import, export and
// export-worldbook share when --sandbox-data is not given.
const cliSandboxFile = "cli-sandbox.json"

// keepSandbox gives --sandbox without --sandbox-data the config directory's shared sandbox file.
func (f *serverFlags) keepSandbox() error {
	if !f.sandbox || f.sandboxData != "" {
		return nil
	}
	dir, err := auth.Dir()
	if err != nil {
		return fmt.Errorf("--sandbox: %w; give --sandbox-data FILE", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--sandbox: %w; give --sandbox-data FILE", err)
	}
	f.sandboxData = filepath.Join(dir, cliSandboxFile)
	return nil
}

// cliEnv are the environment variables the cliFlags commands read besides their flags'.
var cliEnv = []string{envToken, envConfigDir, envSandboxToken}

// parseWithPositional parses args that hold flags and n positional arguments in any order.
func parseWithPositional(fs *flag.FlagSet, args []string, n int) ([]string, error) {
	var pos, flags []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if fl := fs.Lookup(name); fl != nil {
			if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				continue
			}
			if i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
		}
	}
	if err := parseFlags(fs, flags, nil); err != nil {
		return nil, err
	}
	if len(pos) != n {
		fmt.Fprintf(fs.Output(), "want %d argument(s), got %d\n", n, len(pos))
		fs.Usage()
		return nil, errUsage
	}
	return pos, nil
}

// callTool runs one tool of the backend's MCP server through an in-process MCP client, exactly
// as a model's call would run, printing progress on stderr. An isError result is an error
// carrying the result's message.
func callTool(ctx context.Context, b *backend, name string, args map[string]any, stderr io.Writer) (*mcp.CallToolResult, map[string]any, error) {
	c, err := client.NewInProcessClient(b.mcp)
	if err != nil {
		return nil, nil, err
	}
	// Progress is reported as each step starts ("Step 2 of 7: ..."); notifications arrive
	// asynchronously, so the last ones may come after the result.
	var mu sync.Mutex
	var last, total float64 = -1, 0
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != string(mcp.MethodNotificationProgress) {
			return
		}
		p := n.Params.AdditionalFields
		mu.Lock()
		defer mu.Unlock()
		last, _ = p["progress"].(float64)
		total, _ = p["total"].(float64)
		fmt.Fprintln(stderr, p["message"])
	})
	defer func() {
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			done := last >= total-1
			mu.Unlock()
			if done {
				return
			}
		}
	}()
	if err := c.Start(ctx); err != nil {
		return nil, nil, err
	}
	defer c.Close()
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "cardwriter-mcp-cli", Version: programVersion()}
	if _, err := c.Initialize(ctx, init); err != nil {
		return nil, nil, err
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	req.Params.Meta = &mcp.Meta{ProgressToken: "cli"}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	if res.IsError {
		msg := firstText(res)
		if env, ok := tools.ErrorEnvelope(res); ok {
			if d, ok := env["detail"]; ok {
				if js, err := json.Marshal(d); err == nil {
					msg += "\ndetail: " + string(js)
				}
			}
			return res, env, errors.New(msg)
		}
		return res, nil, errors.New(msg)
	}
	var sc map[string]any
	if raw, err := json.Marshal(res.StructuredContent); err == nil {
		_ = json.Unmarshal(raw, &sc)
	}
	return res, sc, nil
}

// firstText returns a result's first text content.
func firstText(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			return tc.Text
		}
	}
	return ""
}

// importer is one import command: the tool it calls with a file, the flags that become the
// tool's other arguments, and the command line's words for the tool's argument names (so that a
// message about clientKey says --client-key).
type importer struct {
	command, usage, what, tool string
	// flags registers the command's own flags and returns what sets their arguments (and
	// defaults that come from the file).
	flags func(fs *flag.FlagSet) func(file string, data []byte, args map[string]any)
	words map[string]string
	// refused adds advice for a file the tool refused (e.g. a lorebook given to import).
	refused func(data []byte) string
}

var (
	cardImporter = importer{command: "import", what: "card", tool: "import_tavern_card",
		usage: "import FILE [--mode card|trial] [--client-key KEY] [--json] [--sandbox [--sandbox-data FILE] | --api-host URL [--contract FILE]]",
		flags: func(fs *flag.FlagSet) func(string, []byte, map[string]any) {
			var mode, clientKey string
			cliOnlyString(fs, &mode, "mode", "card", "card (a new card) or trial (the trial card named --client-key)")
			cliOnlyString(fs, &clientKey, "client-key", "", "the trial's name (--mode trial); with --mode card, another key imports the same file again as a separate card")
			return func(_ string, _ []byte, args map[string]any) {
				args["mode"] = mode
				setIf(args, "clientKey", clientKey)
			}
		},
		words: map[string]string{"clientKey": "--client-key"},
		refused: func(data []byte) string {
			if _, _, err := tavern.Read(data); err != nil {
				if _, err := tavern.ReadBook(data); err == nil {
					return "The file is a lorebook (World Info): import it with `cardwriter-mcp import-worldbook FILE`."
				}
			}
			return ""
		},
	}
	worldbookImporter = importer{command: "import-worldbook", what: "lorebook", tool: "import_tavern_worldbook",
		usage: "import-worldbook FILE [--name NAME] [--worldbook-id ID] [--role-id ROLE_ID] [--json] [--sandbox [--sandbox-data FILE] | --api-host URL [--contract FILE]]",
		flags: func(fs *flag.FlagSet) func(string, []byte, map[string]any) {
			var name, worldbookID, roleID string
			cliOnlyString(fs, &name, "name", "", "the new worldbook's name (default: the lorebook's own, else the file's name)")
			cliOnlyString(fs, &worldbookID, "worldbook-id", "", "add the entries to this existing worldbook instead of creating one")
			cliOnlyString(fs, &roleID, "role-id", "", "bind the worldbook to this card")
			return func(file string, data []byte, args map[string]any) {
				if name == "" && worldbookID == "" {
					if b, err := tavern.ReadBook(data); err == nil && strings.TrimSpace(b.Name) == "" {
						name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
					}
				}
				setIf(args, "name", name)
				setIf(args, "worldbookId", worldbookID)
				setIf(args, "roleId", roleID)
			}
		},
		words: map[string]string{"worldbookId": "--worldbook-id", "roleId": "--role-id"},
		refused: func(data []byte) string {
			if _, err := tavern.ReadBook(data); err != nil {
				if _, _, err := tavern.Read(data); err == nil {
					return "The file is a character card: import it with `cardwriter-mcp import FILE`."
				}
			}
			return ""
		},
	}
)

// setIf sets args[name] to v when v is not empty.
func setIf(args map[string]any, name, v string) {
	if v != "" {
		args[name] = v
	}
}

// runImport imports a character card file, with import_tavern_card.
func runImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return cardImporter.run(ctx, args, stdout, stderr)
}

// runImportWorldbook imports a lorebook (SillyTavern World Info, a V2/V3 character_book), with
// import_tavern_worldbook.
func runImportWorldbook(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return worldbookImporter.run(ctx, args, stdout, stderr)
}

func (m importer) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet(m.command, m.usage, stdout, stderr, cliEnv...)
	var f serverFlags
	fileFlags(fs, &f)
	setArgs := m.flags(fs)
	asJSON := cliOnlyBool(fs, "json", "print the tool's result as JSON instead of a summary")
	pos, err := parseWithPositional(fs, args, 1)
	if err != nil {
		return helpOK(err)
	}
	if err := f.keepSandbox(); err != nil {
		return err
	}
	file := pos[0]
	fi, err := os.Stat(file)
	if err != nil {
		return err
	}
	if fi.Size() > tavern.MaxInputSize {
		return fmt.Errorf("%s is larger than %d MiB, the most a %s file may be", file, tavern.MaxInputSize>>20, m.what)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if f.tavern.aside, err = fileAside(); err != nil {
		return err
	}
	// An import over a card imported before keeps a revision where the stdio server keeps them.
	f.revisionDir, f.localProfile = stdioRevisions(stderr)
	b, err := f.newBackend(stderr, "")
	if err != nil {
		return err
	}
	callArgs := map[string]any{"source": map[string]any{"dataBase64": base64.StdEncoding.EncodeToString(data)}}
	setArgs(file, data, callArgs)
	res, sc, err := callTool(ctx, b, m.tool, callArgs, stderr)
	if err != nil {
		err = cliWords(err, m.words)
		if advice := m.refused(data); advice != "" {
			err = fmt.Errorf("%w\n%s", err, advice)
		}
		return err
	}
	if f.sandbox {
		fmt.Fprintf(stderr, "The sandbox is kept in %s for the next command.\n", f.sandboxData)
	}
	if *asJSON {
		return printJSON(stdout, sc)
	}
	_, err = fmt.Fprintln(stdout, firstText(res))
	return err
}

// cliWords rewrites a tool's message for the command line: each tool argument name in words
// (camelCase names, whole words only) becomes the flag or operand that sets it, and a detail
// that only names the argument is dropped (the message says it).
func cliWords(err error, words map[string]string) error {
	msg, _, _ := strings.Cut(err.Error(), "\ndetail: {\"argument\":")
	for arg, word := range words {
		msg = regexp.MustCompile(`\b`+regexp.QuoteMeta(arg)+`\b`).ReplaceAllLiteralString(msg, word)
	}
	return errors.New(msg)
}

// printJSON prints v indented.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
