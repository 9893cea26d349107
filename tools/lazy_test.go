package tools

import "testing"

// TestValidatorsCompile compiles every tool's validators, which the registry leaves to their
// first use, so that a schema that does not compile fails here rather than at a call.
func TestValidatorsCompile(t *testing.T) {
	for _, tool := range All() {
		if err := tool.input.Compile(); err != nil {
			t.Errorf("%s: input: %v", tool.Name, err)
		}
		if err := tool.output.Compile(); err != nil {
			t.Errorf("%s: output: %v", tool.Name, err)
		}
	}
}
