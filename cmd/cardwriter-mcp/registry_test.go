package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// registryModule is the release of the MCP registry whose published server.json schemas the
// project's server.json is checked against (read from the Go module, not copied here).
const registryModule = "github.com/modelcontextprotocol/registry@v1.8.8"

// TestServerJSON validates ../../server.json, the MCP registry entry, against the schema its
// $schema names, as the registry publishes it in its Go module.
func TestServerJSON(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../server.json")
	if err != nil {
		t.Fatal(err)
	}
	var entry map[string]any
	if err := json.Unmarshal(data, &entry); err != nil {
		t.Fatalf("server.json: %v", err)
	}
	schemaURL, _ := entry["$schema"].(string)
	version := strings.TrimSuffix(filepath.Base(filepath.Dir(schemaURL)), "/")
	out, err := exec.Command("go", "mod", "download", "-json", registryModule).Output()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("go mod download %s: %v", registryModule, err)
		}
		t.Skipf("the MCP registry's module cannot be downloaded here (%v); CI checks server.json", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download: %s", out)
	}
	schemaFile := filepath.Join(mod.Dir, "internal", "validators", "schemas", version+".json")
	f, err := os.Open(schemaFile)
	if err != nil {
		t.Fatalf("the registry publishes no schema %s (server.json's $schema is %s): %v", version, schemaURL, err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schemaURL, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("server.json does not validate against %s:\n%v", schemaURL, err)
	}
}
