package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeDocumentsEveryFlag runs every command's --help on the built binary and checks that
// the README documents each flag it lists and each command, so the docs cannot fall behind the code.
func TestReadmeDocumentsEveryFlag(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(readme)
	flagLine := regexp.MustCompile(`(?m)^  --([a-z0-9-]+)`)
	for _, c := range commands() {
		if !strings.Contains(doc, "`cardwriter-mcp "+c.name) {
			t.Errorf("README does not document the command %q", c.name)
		}
		out, err := exec.Command(binPath, c.name, "--help").CombinedOutput()
		if err != nil {
			t.Errorf("%s --help: %v\n%s", c.name, err, out)
			continue
		}
		for _, m := range flagLine.FindAllStringSubmatch(string(out), -1) {
			if !strings.Contains(doc, "`--"+m[1]) {
				t.Errorf("README does not document --%s of %s", m[1], c.name)
			}
		}
	}
}
