package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// mcpGoModule is the framework a -mcp-go-patch is applied to.
const mcpGoModule = "github.com/mark3labs/mcp-go"

// mcpGoPatch is mcp-go as go.mod requires it, copied from the module cache and patched, for
// measuring a proposed change to the framework (-mcp-go-patch); the repository's go.mod and
// go.sum are left as they are.
type mcpGoPatch struct {
	// label names the patch in the results: its file, the version it was applied to and its
	// SHA-256.
	label string
	// modfile is a copy of the repository's go.mod with a replace directive pointing at the
	// patched copy (its go.sum beside it), for go build -modfile.
	modfile string
}

// preparePatchedMCPGo copies the required mcp-go from the module cache into dir, applies
// patchFile to the copy with git apply, and writes dir/go.mod and dir/go.sum: the module root's
// own, plus a replace directive for mcp-go pointing at the copy.
func preparePatchedMCPGo(ctx context.Context, root, dir, patchFile string) (*mcpGoPatch, error) {
	patchFile, err := filepath.Abs(patchFile)
	if err != nil {
		return nil, err
	}
	patch, err := os.ReadFile(patchFile)
	if err != nil {
		return nil, fmt.Errorf("-mcp-go-patch: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}\t{{.Version}}", mcpGoModule)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m %s: %w", mcpGoModule, err)
	}
	src, version, ok := strings.Cut(strings.TrimSpace(string(out)), "\t")
	if !ok || src == "" {
		return nil, fmt.Errorf("go list -m %s: no module directory (run go mod download)", mcpGoModule)
	}
	copyDir := filepath.Join(dir, "mcp-go@"+version)
	// os.CopyFS makes the copy writable: the module cache's files are read-only.
	if err := os.CopyFS(copyDir, os.DirFS(src)); err != nil {
		return nil, fmt.Errorf("copying %s: %w", src, err)
	}
	cmd = exec.CommandContext(ctx, "git", "apply", "-p1", patchFile)
	cmd.Dir = copyDir
	// Inside a repository git apply would skip the paths outside the working directory.
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("applying %s to %s@%s: %w\n%s", patchFile, mcpGoModule, version, err, out)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	gosum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		return nil, err
	}
	gomod = append(bytes.TrimRight(gomod, "\n"), fmt.Sprintf("\n\nreplace %s => %s\n", mcpGoModule, copyDir)...)
	p := &mcpGoPatch{modfile: filepath.Join(dir, "go.mod")}
	if err := os.WriteFile(p.modfile, gomod, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), gosum, 0o644); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(patch)
	p.label = fmt.Sprintf("%s@%s patched with %s (sha256 %s)", mcpGoModule, version, filepath.Base(patchFile), hex.EncodeToString(sum[:6]))
	return p, nil
}

// buildFlags returns the go build flags that build against the patched copy (none without a
// patch).
func (p *mcpGoPatch) buildFlags() []string {
	if p == nil {
		return nil
	}
	return []string{"-modfile", p.modfile}
}
