package main

import (
	"encoding/base64"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStateKeysOnAPublicURL: in proxy mode on a public URL the state key must come from
// outside the state directory (the environment or a file elsewhere); on a loopback URL one is
// generated there as before; previous keys are read for a rotation.
func TestStateKeysOnAPublicURL(t *testing.T) {
	t.Parallel()
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	old := base64.StdEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))
	outside := filepath.Join(t.TempDir(), "state.key")
	if err := os.WriteFile(outside, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name    string
		pub     string
		flags   httpAuthFlags
		inDir   bool   // --state-key-file in the state directory
		wantErr string // "" for success
		prev    int
	}{
		{name: "public URL, no key", pub: "https://mcp.example.com", wantErr: "outside the state directory"},
		{name: "public URL, key file in the state directory", pub: "https://mcp.example.com", inDir: true, wantErr: "inside the state directory"},
		{name: "public URL, key in the environment", pub: "https://mcp.example.com", flags: httpAuthFlags{stateKey: key}},
		{name: "public URL, key file elsewhere", pub: "https://mcp.example.com", flags: httpAuthFlags{keyFile: outside}},
		{name: "both", pub: "https://mcp.example.com", flags: httpAuthFlags{stateKey: key, keyFile: outside}, wantErr: "not both"},
		{name: "rotation", pub: "https://mcp.example.com", flags: httpAuthFlags{stateKey: key, previous: old}, prev: 1},
		{name: "bad previous key", pub: "https://mcp.example.com", flags: httpAuthFlags{stateKey: key, previous: "c2hvcnQ="}, wantErr: "--state-key-previous"},
		{name: "loopback URL, generated", pub: "http://127.0.0.1:8080"},
		{name: "localhost URL, generated", pub: "http://localhost:8080"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			f := tc.flags
			if tc.inDir {
				f.keyFile = filepath.Join(dir, "secret", "key")
				_ = os.MkdirAll(filepath.Dir(f.keyFile), 0o700)
				_ = os.WriteFile(f.keyFile, []byte(key), 0o600)
			}
			k, prev, err := f.stateKeys(tc.pub, dir, quiet)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(k) != 32 || len(prev) != tc.prev {
				t.Fatalf("key of %d bytes, %d previous, err %v", len(k), len(prev), err)
			}
			_, statErr := os.Stat(filepath.Join(dir, "state.key"))
			if generated, want := statErr == nil, !strings.HasPrefix(tc.pub, "https://"); generated != want {
				t.Errorf("a key generated into the state directory: %v, want %v", generated, want)
			}
		})
	}
}
