package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func runDoctorBinary(t *testing.T, args []string, env ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"doctor"}, args...)...)
	cmd.Env = cleanEnv(append([]string{"CARDWRITER_CONFIG_DIR=" + t.TempDir()}, env...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), 0
}

// deadAddress is the address of a loopback port nothing listens on (any more).
func deadAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String()
}

func TestDoctor(t *testing.T) {
	t.Parallel()
	dead := deadAddress(t)
	host, token := standIn(t, nil)
	notFound := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notFound.Close)
	tests := []struct {
		name string
		args []string
		env  []string
		code int
		want []string
	}{
		{"the sandbox", []string{"--sandbox"}, nil, 0, []string{"ok   sandbox", "accepted: signed in as", "All checks passed."}},
		// A dead address is a wrong address, not a missing sign-in: no login advice.
		{"a dead address", []string{"--api-host", dead}, nil, 1, []string{"FAIL card service", "cannot reach the card service at " + dead, "connection refused", "fix: check the address"}},
		// No scheme: the address to give, and no Go parse error.
		{"no scheme", []string{"--api-host", strings.TrimPrefix(dead, "http://")}, nil, 1, []string{"FAIL card service", "has no scheme", "fix: use --api-host " + dead + "\n"}},
		{"a token the service refuses", []string{"--api-host", host}, []string{"CARDWRITER_TOKEN=wrong"}, 1, []string{"ok   card service", "FAIL token", "refused",
			"The token in CARDWRITER_TOKEN was refused by " + host, "fix: unset CARDWRITER_TOKEN"}},
		{"a token it takes", []string{"--api-host", host}, []string{"CARDWRITER_TOKEN=" + token}, 0, []string{"ok   token", "All checks passed.",
			"ok   identity", "local profile's", "Identity operation getMe (GET /me, a guess) answers"}},
		{"no address", nil, nil, 1, []string{"FAIL card service", "--sandbox"}},
		{"a public URL without a state key", []string{"--sandbox", "--public-url", "https://mcp.example.com"}, nil, 1,
			[]string{"FAIL state key", "outside the state directory", "CARDWRITER_STATE_KEY"}},
		{"a public URL with a state key", []string{"--sandbox", "--public-url", "https://mcp.example.com"},
			[]string{"CARDWRITER_STATE_KEY=MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}, 0, []string{"ok   state key", "outside the state directory"}},
		// The API's path given with the address: say to drop it, and advise nothing with it.
		{"the API path in the address", []string{"--api-host", host + "/open/v1"}, nil, 1, []string{"FAIL card service", "not an origin", "use --api-host " + host + "\n"}},
		// A server that answers 404 everywhere is no card service.
		{"404 everywhere", []string{"--api-host", notFound.URL}, []string{"CARDWRITER_TOKEN=" + token}, 1, []string{"FAIL card service", "404 at /open/v1/me"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, code := runDoctorBinary(t, tt.args, tt.env...)
			if code != tt.code {
				t.Errorf("exit %d, want %d:\n%s", code, tt.code, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "--api-host "+host+"/open/v1") {
				t.Errorf("advises the wrong address:\n%s", out)
			}
			if strings.Contains(out, token) {
				t.Error("the token was printed")
			}
			if tt.name == "a dead address" || tt.name == "no scheme" {
				for _, bad := range []string{"login", "parse ", "FAIL sign-in"} {
					if strings.Contains(out, bad) {
						t.Errorf("a wrong address is answered with %q:\n%s", bad, out)
					}
				}
			}
		})
	}
}

// TestWrongAddress: a wrong port is a wrong address, said as one (import does not say "not
// signed in", login prints no raw "dial tcp"), and an address without a scheme is answered with
// a valid one to copy.
func TestWrongAddress(t *testing.T) {
	t.Parallel()
	dead := deadAddress(t)
	dir := t.TempDir()
	card := filepath.Join(dir, "c.json")
	if err := os.WriteFile(card, []byte(`{"name":"A","first_mes":"b"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := cleanEnv("CARDWRITER_CONFIG_DIR=" + dir)
	tests := []struct {
		name  string
		args  []string
		want  []string
		never []string
	}{
		{"import, a wrong port", []string{"import", card, "--api-host", dead}, []string{"cannot reach the card service at " + dead, "connection refused"}, []string{"not signed in", "login"}},
		{"export, a wrong port", []string{"export", "1", "-o", filepath.Join(dir, "o.json"), "--api-host", dead}, []string{"cannot reach the card service at " + dead}, []string{"not signed in"}},
		{"login, a wrong port", []string{"login", "--no-browser", "--api-host", dead}, []string{"cannot reach the card service at " + dead, "check --api-host"}, []string{"dial tcp"}},
		{"login, no scheme", []string{"login", "--no-browser", "--api-host", strings.TrimPrefix(dead, "http://")}, []string{"e.g. " + dead}, []string{"dial tcp", "not a valid URL"}},
		{"import, no scheme", []string{"import", card, "--api-host", "cards.example.org"}, []string{"e.g. https://cards.example.org"}, []string{"parse "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, e, err := runCLI(t, env, tt.args...)
			if err == nil {
				t.Fatalf("succeeded:\n%s%s", o, e)
			}
			for _, w := range tt.want {
				if !strings.Contains(o+e, w) {
					t.Errorf("lacks %q:\n%s%s", w, o, e)
				}
			}
			for _, w := range tt.never {
				if strings.Contains(o+e, w) {
					t.Errorf("says %q:\n%s%s", w, o, e)
				}
			}
		})
	}
}
