package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const peerPackage = "@ivotoby/openapi-mcp-server"

// peer is an installed copy of the generic OpenAPI-to-MCP server.
type peer struct {
	node        string // the node binary
	nodeVersion string
	script      string // its bin script
	version     string
	spec        string            // the contract file it is given
	tools       map[string]string // operationId -> the peer's tool name
}

// env is the peer's environment: our contract, the sandbox's API and the bearer header, quiet logs.
func (p *peer) env(api, token string) []string {
	return envWith("API_BASE_URL="+api, "OPENAPI_SPEC_PATH="+p.spec,
		"API_HEADERS=Authorization:Bearer "+token, "VERBOSE=false")
}

// setupPeer finds or installs the peer and maps the measured operations to its tools. It returns
// nil and a note saying why when the peer cannot be run; it never stands in anything else.
func setupPeer(ctx context.Context, cfg config) (*peer, string) {
	if cfg.peer == "off" {
		return nil, "skipped (-peer off)"
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, "skipped: node is not installed"
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return nil, "skipped: node --version failed: " + err.Error()
	}
	p := &peer{node: node, nodeVersion: strings.TrimSpace(string(out)), version: cfg.peerVersion}
	dir := cfg.peer
	if dir == "auto" {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		dir = filepath.Join(cache, "cardwriter-bench", "peer-"+cfg.peerVersion)
	}
	pkgDir := filepath.Join(dir, "node_modules", filepath.FromSlash(peerPackage))
	if _, err := os.Stat(filepath.Join(pkgDir, "package.json")); err != nil {
		if cfg.peer != "auto" {
			return nil, fmt.Sprintf("skipped: no %s under %s", peerPackage, dir)
		}
		npm, err := exec.LookPath("npm")
		if err != nil {
			return nil, "skipped: npm is not installed"
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, "skipped: " + err.Error()
		}
		logf("installing %s@%s with npm into %s", peerPackage, cfg.peerVersion, dir)
		ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ictx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error",
			peerPackage+"@"+cfg.peerVersion)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Sprintf("skipped: npm install %s@%s failed: %v: %s", peerPackage, cfg.peerVersion, err, lastLines(string(out), 5))
		}
	}
	var pkg struct {
		Version string            `json:"version"`
		Bin     map[string]string `json:"bin"`
	}
	data, err := os.ReadFile(filepath.Join(pkgDir, "package.json"))
	if err == nil {
		err = json.Unmarshal(data, &pkg)
	}
	if err != nil {
		return nil, "skipped: read its package.json: " + err.Error()
	}
	p.version = pkg.Version
	for _, rel := range pkg.Bin {
		p.script = filepath.Join(pkgDir, filepath.FromSlash(rel))
	}
	if p.script == "" {
		return nil, "skipped: its package.json names no bin script"
	}
	root, err := moduleRoot()
	if err != nil {
		return nil, "skipped: " + err.Error()
	}
	p.spec = filepath.Join(root, "schema", "upstream.openapi.json")
	if err := p.mapTools(ctx); err != nil {
		return nil, "skipped: " + err.Error()
	}
	return p, ""
}

// mapTools lists the peer's tools (over stdio) and finds the one of each measured operation.
func (p *peer) mapTools(ctx context.Context) error {
	cmd := exec.Command(p.node, p.script)
	cmd.Env = p.env("http://127.0.0.1:9/open/v1", "unused")
	errTail := &tail{}
	cmd.Stderr = errTail
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "cardwriter-bench", Version: "1"}, nil)
	cs, err := client.Connect(cctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return fmt.Errorf("start the peer: %w\n%s", err, errTail)
	}
	defer cs.Close()
	var names []string
	for t, err := range cs.Tools(cctx, nil) {
		if err != nil {
			return fmt.Errorf("list the peer's tools: %w", err)
		}
		names = append(names, t.Name)
	}
	p.tools = map[string]string{}
	for _, id := range []string{"getCard", "setOpeningLines", "writeWorldbookDocument", "listTrialCards"} {
		for _, n := range names {
			if toolMatches(n, id) {
				p.tools[id] = n
				break
			}
		}
		if p.tools[id] == "" {
			return fmt.Errorf("the peer has no tool for %s among %v", id, names)
		}
	}
	return nil
}

// toolMatches reports whether a generated tool name stands for operationId: the same words, each
// word of the name a prefix or an abbreviation (same first letter, letters in order) of the
// operation's ("lst-trial-cards" for listTrialCards, "write-worldbook-doc" for
// writeWorldbookDocument).
func toolMatches(name, operationID string) bool {
	if strings.EqualFold(name, operationID) {
		return true
	}
	tw := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == '-' || r == '_' || r == '.' })
	ow := camelWords(operationID)
	if len(tw) != len(ow) {
		return false
	}
	for i := range tw {
		if !abbreviates(tw[i], ow[i]) {
			return false
		}
	}
	return true
}

func camelWords(s string) []string {
	var words []string
	var cur []rune
	for _, r := range s {
		if unicode.IsUpper(r) && len(cur) > 0 {
			words = append(words, string(cur))
			cur = nil
		}
		cur = append(cur, unicode.ToLower(r))
	}
	if len(cur) > 0 {
		words = append(words, string(cur))
	}
	return words
}

func abbreviates(short, word string) bool {
	if short == "" || word == "" || short[0] != word[0] {
		return false
	}
	j := 0
	for i := 0; i < len(word) && j < len(short); i++ {
		if word[i] == short[j] {
			j++
		}
	}
	return j == len(short)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
