package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestResultBudgetFlag: --result-budget and CARDWRITER_RESULT_BUDGET outside 1,000..25,000 (0:
// the default) stop the server with a message naming the range, before it serves anything.
func TestResultBudgetFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		env  []string
	}{
		{"flag too small", []string{"--result-budget", "10"}, nil},
		{"flag too large", []string{"--result-budget", "30000"}, nil},
		{"env", nil, []string{"CARDWRITER_RESULT_BUDGET=-5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(binPath, append([]string{"stdio", "--sandbox"}, tc.args...)...)
			cmd.Env = cleanEnv(append([]string{"CARDWRITER_CONFIG_DIR=" + t.TempDir()}, tc.env...)...)
			cmd.Stdin = strings.NewReader("")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			if _, exited := err.(*exec.ExitError); !exited || !strings.Contains(out.String(), "--result-budget") || !strings.Contains(out.String(), "1000 to 25000") {
				t.Fatalf("err %v, output %q", err, out.String())
			}
		})
	}
}
