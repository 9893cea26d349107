package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cardwriter/cardwriter-mcp/auth/authtest"
)

// TestHelpOnStdout: help that was asked for goes to stdout (so `--help | less` shows it) and
// succeeds; a usage mistake prints the usage on stderr and fails.
func TestHelpOnStdout(t *testing.T) {
	t.Parallel()
	env := cleanEnv("CARDWRITER_CONFIG_DIR=" + t.TempDir())
	for _, c := range commands() {
		for _, ask := range []string{"--help", "-h"} {
			stdout, stderr, err := runCLI(t, env, c.name, ask)
			if err != nil || !strings.HasPrefix(stdout, "Usage: cardwriter-mcp "+c.name) || stderr != "" {
				t.Errorf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", c.name, ask, err, stdout, stderr)
			}
		}
	}
	if stdout, stderr, err := runCLI(t, env, "--help"); err != nil || !strings.Contains(stdout, "Commands:") || stderr != "" {
		t.Errorf("--help: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	// A mistyped flag: its error, the synopsis and where the rest is, not every flag's help.
	stdout, stderr, err := runCLI(t, env, "import", "--no-such-flag")
	if err == nil || stdout != "" || !strings.Contains(stderr, "not defined: -no-such-flag") ||
		!strings.Contains(stderr, "Usage: cardwriter-mcp import") || !strings.Contains(stderr, "'cardwriter-mcp import --help'") ||
		strings.Count(stderr, "\n") > 3 {
		t.Errorf("a bad flag: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
}

// TestHelpShowsKinds: a boolean flag shows no value, a valued one its kind; defaults read as
// what they are (--result-budget's is its number); no internal variable shows; the top-level
// help says which flags a variable sets, not that every one has one.
func TestHelpShowsKinds(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(binPath, "stdio", "--help").Output()
	if err != nil {
		t.Fatal(err)
	}
	help := string(out)
	for _, want := range []string{"\n  --sandbox\n", "\n  --read-only\n", "\n  --api-host string\n", "\n  --drain-timeout duration\n",
		"\n  --result-budget int\n", "(default 10000)", `(default "info")`, "(default 30s)"} {
		if !strings.Contains(help, want) {
			t.Errorf("stdio --help lacks %q:\n%s", want, help)
		}
	}
	for _, bad := range []string{`(default "0")`, "pages fit it (0:", "CARDWRITER_BENCH"} {
		if strings.Contains(help, bad) {
			t.Errorf("stdio --help shows %q:\n%s", bad, help)
		}
	}
	top, _ := exec.Command(binPath, "--help").Output()
	if strings.Contains(string(top), "Every flag") || !strings.Contains(string(top), "[env CARDWRITER_<FLAG>]") {
		t.Errorf("top-level help:\n%s", top)
	}
	// Every flag the help shows without a variable is one the top-level help's rule covers:
	// a command-line-only flag (none of the serving commands' flags).
	for _, c := range []string{"stdio", "http", "sandbox", "login"} {
		for _, f := range readHelp(t, c).flags {
			if f.env == "" {
				t.Errorf("%s %s has no environment variable", c, f.name)
			}
		}
	}
}

// TestHelpNamesWhatEachCommandReads: a command's help lists the flags and environment
// variables it reads, and none it ignores.
func TestHelpNamesWhatEachCommandReads(t *testing.T) {
	t.Parallel()
	tests := []struct {
		command string
		has     []string
		lacks   []string
	}{
		{"probe", []string{"--api-host", "--contract", "--sandbox", "CARDWRITER_TOKEN", "--json\n"},
			[]string{"--toolsets", "--tools", "--read-only", "--audit-log", "CARDWRITER_JSON"}},
		{"doctor", []string{"--api-host", "--contract", "CARDWRITER_TOKEN", "CARDWRITER_CONFIG_DIR"},
			[]string{"--toolsets", "--audit-log", "--log-level", "--read-only"}},
		{"export", []string{"\n  -o string\n", "--contract", "CARDWRITER_CONTRACT", "CARDWRITER_TOKEN", "cli-sandbox.json"},
			[]string{"--o\n", "CARDWRITER_O]", "CARDWRITER_OUTPUT", "CARDWRITER_FORMAT"}},
		{"export-worldbook", []string{"--contract", "CARDWRITER_TOKEN"}, []string{"CARDWRITER_O]"}},
		{"import", []string{"--contract", "--client-key", "CARDWRITER_TOKEN"}, []string{"CARDWRITER_CLIENT_KEY", "CARDWRITER_MODE"}},
		{"import-worldbook", []string{"--role-id", "--worldbook-id", "--name", "--contract"}, []string{"CARDWRITER_NAME"}},
		{"stdio", []string{"CARDWRITER_TOKEN", "CARDWRITER_SANDBOX_TOKEN", "CARDWRITER_CONFIG_DIR", "OTEL_EXPORTER_OTLP_ENDPOINT"}, nil},
		{"http", []string{"CARDWRITER_SANDBOX_TOKEN", "OTEL_EXPORTER_OTLP_ENDPOINT"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			t.Parallel()
			out, err := exec.Command(binPath, tt.command, "--help").Output()
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.has {
				if !strings.Contains(string(out), w) {
					t.Errorf("lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.lacks {
				if strings.Contains(string(out), w) {
					t.Errorf("names %q, which it does not read:\n%s", w, out)
				}
			}
		})
	}
}

// TestCLISandboxLastsBetweenCommands: a card imported with --sandbox can be exported by the
// next command with --sandbox (the CLI commands share a sandbox file in the config directory).
func TestCLISandboxLastsBetweenCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := cleanEnv("CARDWRITER_CONFIG_DIR=" + filepath.Join(dir, "config"))
	src := filepath.Join(dir, "Mira.png")
	if err := os.WriteFile(src, cardPNG(t), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runCLI(t, env, "import", src, "--sandbox", "--json")
	if err != nil {
		t.Fatalf("import: %v\n%s", err, stderr)
	}
	var res struct{ RoleID, WorldbookID string }
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.RoleID == "" {
		t.Fatalf("import --json: %v\n%s", err, stdout)
	}
	if !strings.Contains(stderr, "cli-sandbox.json") {
		t.Errorf("import does not say where the sandbox is kept:\n%s", stderr)
	}
	out := filepath.Join(dir, "out.json")
	if _, stderr, err := runCLI(t, env, "export", res.RoleID, "--sandbox", "-o", out); err != nil {
		t.Fatalf("export in the next command: %v\n%s", err, stderr)
	}
	if data, err := os.ReadFile(out); err != nil || !strings.Contains(string(data), `"chara_card_v3"`) {
		t.Errorf("the exported file: %v\n%.200s", err, data)
	}
	if _, stderr, err := runCLI(t, env, "export-worldbook", res.WorldbookID, "--sandbox", "-o", filepath.Join(dir, "book.json")); err != nil {
		t.Errorf("export-worldbook in the next command: %v\n%s", err, stderr)
	}
}

// TestCLILorebooksAndWords: a lorebook has a command of its own, import says so when given
// one, and CLI errors use the command line's words, not the tool's.
func TestCLILorebooksAndWords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := cleanEnv("CARDWRITER_CONFIG_DIR=" + filepath.Join(dir, "config"))
	book := filepath.Join("..", "..", "internal", "tavern", "taverntest", "real", "Eldoria.json")
	card := filepath.Join("..", "..", "internal", "tavern", "taverntest", "real", "default_Seraphina.png")
	bookless := filepath.Join(dir, "card.json")
	if err := os.WriteFile(bookless, []byte(`{"name":"A","first_mes":"b"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  []string
		ok    bool
		has   []string
		lacks []string
	}{
		{"a lorebook given to import", []string{"import", book, "--sandbox"}, false,
			[]string{"lorebook", "cardwriter-mcp import-worldbook FILE"}, []string{"detail:"}},
		{"a trial without its key", []string{"import", card, "--sandbox", "--mode", "trial"}, false,
			[]string{"--client-key"}, []string{"clientKey", "detail:"}},
		{"a card without a lorebook given to import-worldbook", []string{"import-worldbook", bookless, "--sandbox"}, false,
			[]string{"cardwriter-mcp import FILE"}, nil},
		{"a lorebook into an unknown worldbook", []string{"import-worldbook", book, "--sandbox", "--worldbook-id", "wb_missing"}, false,
			[]string{"--worldbook-id"}, []string{"worldbookId"}},
		{"a lorebook without a name takes the file's", []string{"import-worldbook", book, "--sandbox", "--json"}, true,
			[]string{`"name": "Eldoria"`, `"entryCount": 4`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, err := runCLI(t, env, tt.args...)
			if (err == nil) != tt.ok {
				t.Errorf("err = %v, want success %v\n%s%s", err, tt.ok, stdout, stderr)
			}
			for _, w := range tt.has {
				if !strings.Contains(stdout+stderr, w) {
					t.Errorf("lacks %q:\n%s%s", w, stdout, stderr)
				}
			}
			for _, w := range tt.lacks {
				if strings.Contains(stdout+stderr, w) {
					t.Errorf("says %q:\n%s%s", w, stdout, stderr)
				}
			}
		})
	}
}

// TestCLIContract: import and export read --contract (and CARDWRITER_CONTRACT), like the
// servers: a file that does not apply is refused by name, the README's example works.
func TestCLIContract(t *testing.T) {
	t.Parallel()
	host, token := standIn(t, nil)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"openapi": "3.1.0", "paths": {"/nope": {}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(readmeContractExample(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	cardFile := filepath.Join(dir, "Mira.png")
	if err := os.WriteFile(cardFile, cardPNG(t), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"CARDWRITER_CONFIG_DIR=" + filepath.Join(dir, "config"), "CARDWRITER_TOKEN=" + token}
	for _, command := range [][]string{{"import", cardFile}, {"export", "r_1", "-o", filepath.Join(dir, "o.json")}, {"export-worldbook", "wb_1", "-o", filepath.Join(dir, "w.json")}, {"import-worldbook", cardFile}} {
		_, stderr, err := runCLI(t, cleanEnv(base...), append(command, "--api-host", host, "--contract", bad)...)
		if err == nil || !strings.Contains(stderr, "--contract") {
			t.Errorf("%s --contract bad.json: %v\n%s", command[0], err, stderr)
		}
		_, stderr, err = runCLI(t, cleanEnv(append(base, "CARDWRITER_CONTRACT="+bad)...), append(command, "--api-host", host)...)
		if err == nil || !strings.Contains(stderr, "--contract") {
			t.Errorf("%s with CARDWRITER_CONTRACT=bad.json: %v\n%s", command[0], err, stderr)
		}
	}
	if stdout, stderr, err := runCLI(t, cleanEnv(base...), "import", cardFile, "--api-host", host, "--contract", good); err != nil || !strings.Contains(stdout, "Imported") {
		t.Errorf("import --contract (the README's example): %v\n%s%s", err, stdout, stderr)
	}
}

// TestHTTPSandboxShowsDemoToken: `http --sandbox` prints the demo user's token, with which a
// person can call the sandbox's API by hand.
func TestHTTPSandboxShowsDemoToken(t *testing.T) {
	t.Parallel()
	_, found := startProcess(t, nil, []string{"http", "--sandbox", "--addr", "127.0.0.1:0"},
		`MCP endpoint: (http://\S+)/mcp`, `demo user's bearer token: (\S+)`)
	req, err := http.NewRequest(http.MethodGet, found[0]+"/open/v1/me", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+found[1])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /open/v1/me with the printed token: %d", resp.StatusCode)
	}
}

// TestStdioStartsSignedOut: a stdio server whose user has not signed in yet starts (a host would
// only show "Connection closed"), answers every call with how to sign in, and once the user
// has run login, the next call works without a restart.
func TestStdioStartsSignedOut(t *testing.T) {
	t.Parallel()
	sb := startOAuthSandbox(t)
	dir := filepath.Join(t.TempDir(), "config")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.Command(binPath, "stdio", "--api-host", sb.URL)
	cmd.Env = cleanEnv("CARDWRITER_CONFIG_DIR=" + dir)
	var stderr authtest.LogBuffer
	cmd.Stderr = &stderr
	cs, err := newClient().Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	defer cs.Close()
	for _, tool := range []string{"whoami", "list_worldbooks"} {
		out, isErr := toolText(ctx, t, cs, tool, map[string]any{})
		if !isErr || !strings.Contains(out, "cardwriter-mcp login --api-host "+sb.URL) {
			t.Errorf("%s before signing in: isError %v: %s", tool, isErr, out)
		}
	}
	loginWithBinary(t, sb, dir, &secrets{})
	if out, isErr := toolText(ctx, t, cs, "whoami", map[string]any{}); isErr || !strings.Contains(out, "u_demo") {
		t.Errorf("whoami after login: isError %v: %s", isErr, out)
	}
}
