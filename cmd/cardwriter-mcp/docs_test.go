package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

var updateDocs = flag.Bool("update", false, "rewrite the generated tables of docs/configuration.md from the commands' help")

// The generated part of docs/configuration.md.
const (
	configurationDoc = "../../docs/configuration.md"
	flagsBegin       = "<!-- flags:begin -->"
	flagsEnd         = "<!-- flags:end -->"
)

// helpEntry is one flag as a command's --help lists it.
type helpEntry struct {
	name, usage, def, env string
}

// helpOf is what one command's --help says: its flags and the environment variables it reads
// besides its flags'.
type helpOf struct {
	flags []helpEntry
	env   []string // "NAME  what it does"
}

var (
	helpFlagLine  = regexp.MustCompile(`^  (--?[a-z0-9-]+)(?: [a-z]+)?$`)
	helpUsageLine = regexp.MustCompile(`^      (.*?)(?: \(default (?:"(.*)"|([^" ]+))\))?(?: \[env ([A-Z0-9_]+)\])?$`)
)

// readHelp runs `cardwriter-mcp command --help` and reads it.
func readHelp(t *testing.T, command string) helpOf {
	t.Helper()
	out, err := exec.Command(binPath, command, "--help").Output()
	if err != nil {
		t.Fatalf("%s --help: %v", command, err)
	}
	var h helpOf
	lines := strings.Split(string(out), "\n")
	inEnv := false
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if line == "Environment:" {
			inEnv = true
			continue
		}
		if inEnv {
			if s := strings.TrimSpace(line); s != "" {
				h.env = append(h.env, s)
			}
			continue
		}
		m := helpFlagLine.FindStringSubmatch(line)
		if m == nil || i+1 >= len(lines) {
			continue
		}
		u := helpUsageLine.FindStringSubmatch(lines[i+1])
		if u == nil {
			t.Fatalf("%s --help: no usage line after %s: %q", command, m[1], lines[i+1])
		}
		h.flags = append(h.flags, helpEntry{name: m[1], usage: u[1], def: u[2] + u[3], env: u[4]})
		i++
	}
	return h
}

// configurationTables renders the commands, their flags and the environment variables, from
// each command's --help: what the program reads, said once.
func configurationTables(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("\n| Command | What it does |\n|---|---|\n")
	type row struct {
		flag     helpEntry
		commands []string
	}
	var rows []*row
	envUse := map[string][]string{}
	var envOrder []string
	for _, c := range commands() {
		fmt.Fprintf(&b, "| `cardwriter-mcp %s` | %s |\n", c.name, c.summary)
		h := readHelp(t, c.name)
		for _, f := range h.flags {
			i := slices.IndexFunc(rows, func(r *row) bool { return r.flag == f })
			if i < 0 {
				rows = append(rows, &row{flag: f})
				i = len(rows) - 1
			}
			rows[i].commands = append(rows[i].commands, c.name)
		}
		for _, e := range h.env {
			if _, seen := envUse[e]; !seen {
				envOrder = append(envOrder, e)
			}
			envUse[e] = append(envUse[e], c.name)
		}
	}
	slices.SortStableFunc(rows, func(a, b *row) int {
		return strings.Compare(strings.TrimLeft(a.flag.name, "-"), strings.TrimLeft(b.flag.name, "-"))
	})
	b.WriteString("\n| Flag | Commands | Default | Environment variable | Meaning |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		def, env := "", ""
		if r.flag.def != "" {
			def = "`" + r.flag.def + "`"
		}
		if r.flag.env != "" {
			env = "`" + r.flag.env + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", r.flag.name, strings.Join(r.commands, ", "), def, env, cell(r.flag.usage))
	}
	b.WriteString("\n| Environment variable (besides the flags') | Commands | Meaning |\n|---|---|---|\n")
	for _, e := range envOrder {
		name, meaning, _ := strings.Cut(e, " ")
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", name, strings.Join(envUse[e], ", "), cell(strings.TrimSpace(meaning)))
	}
	return b.String()
}

// cell escapes text for a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(s)
}

// TestConfigurationDocs fails when docs/configuration.md's tables differ from what the
// commands' --help says (every flag with its default and environment variable, every other
// variable a command reads); `go test ./cmd/cardwriter-mcp -run TestConfigurationDocs -update`
// rewrites them.
func TestConfigurationDocs(t *testing.T) {
	t.Parallel()
	const regenerate = "regenerate them with: go test ./cmd/cardwriter-mcp -run TestConfigurationDocs -update"
	data, err := os.ReadFile(configurationDoc)
	if err != nil {
		t.Fatalf("%v (%s)", err, regenerate)
	}
	doc := string(data)
	begin, end := strings.Index(doc, flagsBegin), strings.Index(doc, flagsEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s has no %s ... %s block", configurationDoc, flagsBegin, flagsEnd)
	}
	want := configurationTables(t)
	if got := doc[begin+len(flagsBegin) : end]; got == want {
		return
	}
	if *updateDocs {
		doc = doc[:begin+len(flagsBegin)] + want + doc[end:]
		if err := os.WriteFile(configurationDoc, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the tables of %s are out of date; %s", configurationDoc, regenerate)
}

// TestDocsLinks: every link of the README and docs/ to a file of the repository names one that
// exists, and every #anchor one of its headings (docs moved between pages keep their links).
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../../README.md", "../../BENCH.md")
	heading := regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		a := map[string]bool{}
		for _, m := range heading.FindAllStringSubmatch(string(data), -1) {
			a[slug(m[1])] = true
		}
		anchors[path] = a
		return a
	}
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: the link %s names no file of the repository", page, target)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchorsOf(path)[anchor] {
				t.Errorf("%s: the link %s names no heading of %s", page, target, path)
			}
		}
	}
}

// slug is the anchor GitHub gives a heading.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// foreignFlags are the flags the docs name of other programs (the hosts, the Inspector).
var foreignFlags = map[string]bool{"--strict": true, "--allowedTools": true, "--transport": true, "--env": true, "--help": true}

// TestDocsNameOnlyRealFlags: every flag the README and docs/ name is one the binary takes (a flag
// renamed or dropped leaves no page that still tells of it): a code span that is a flag, and in
// code spans and fenced blocks every flag after `cardwriter-mcp COMMAND` (one that command takes)
// and in a host configuration's "args" list.
func TestDocsNameOnlyRealFlags(t *testing.T) {
	t.Parallel()
	known := map[string]bool{}
	byCommand := map[string]map[string]bool{}
	for _, c := range commands() {
		byCommand[c.name] = map[string]bool{}
		for _, f := range readHelp(t, c.name).flags {
			known[f.name] = true
			byCommand[c.name][f.name] = true
		}
	}
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range append(pages, "../../README.md") {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range flagUses(string(data)) {
			switch {
			case u.command != "" && byCommand[u.command] == nil:
				t.Errorf("%s: %q names the command %s, which does not exist", page, u.code, u.command)
			case u.command != "" && !byCommand[u.command][u.flag]:
				t.Errorf("%s: %q gives %s %s, which it does not take", page, u.code, u.command, u.flag)
			case u.command == "" && !known[u.flag] && !foreignFlags[u.flag]:
				t.Errorf("%s: %q names %s, which no command takes", page, u.code, u.flag)
			}
		}
	}
}

// flagUse is a flag a page names: in the code (a line of a fenced block, or a code span), after
// `cardwriter-mcp COMMAND` (command set), or on its own or in an "args" list (command "").
type flagUse struct {
	code, command, flag string
}

var (
	fencedBlock = regexp.MustCompile("(?s)```[a-z]*\n(.*?)```")
	codeSpan    = regexp.MustCompile("`([^`\n]+)`")
	longFlag    = regexp.MustCompile(`(?:^|[\s"\[])(--[a-zA-Z0-9][a-zA-Z0-9-]*)`)
	argsList    = regexp.MustCompile(`"args":\s*\[([^\]]*)\]`)
	commandWord = regexp.MustCompile(`^[a-z][a-z-]*$`)
)

// flagUses finds the flags a Markdown page names in its code.
func flagUses(page string) []flagUse {
	var codes []string
	for _, m := range fencedBlock.FindAllStringSubmatch(page, -1) {
		codes = append(codes, strings.Split(m[1], "\n")...)
	}
	outside := fencedBlock.ReplaceAllString(page, "")
	for _, m := range codeSpan.FindAllStringSubmatch(outside, -1) {
		codes = append(codes, m[1])
	}
	var uses []flagUse
	for _, code := range codes {
		if strings.HasPrefix(code, "--") { // a flag on its own: `--sandbox`, `--result-budget 0`
			uses = append(uses, flagUse{code: code, flag: longFlag.FindStringSubmatch(code)[1]})
			continue
		}
		for _, m := range argsList.FindAllStringSubmatch(code, -1) {
			for _, f := range longFlag.FindAllStringSubmatch(m[1], -1) {
				uses = append(uses, flagUse{code: code, flag: f[1]})
			}
		}
		for _, piece := range strings.FieldsFunc(code, func(r rune) bool { return strings.ContainsRune("|;&()", r) }) {
			_, after, ok := strings.Cut(piece, "cardwriter-mcp ")
			if !ok {
				continue
			}
			words := strings.Fields(after)
			if len(words) == 0 || !commandWord.MatchString(words[0]) {
				continue
			}
			for _, f := range longFlag.FindAllStringSubmatch(after, -1) {
				uses = append(uses, flagUse{code: code, command: words[0], flag: f[1]})
			}
		}
	}
	return uses
}
