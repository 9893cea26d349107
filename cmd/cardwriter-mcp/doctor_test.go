package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
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

func TestDoctor(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
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
		{"a dead address", []string{"--api-host", dead}, nil, 1, []string{"FAIL card service", "does not answer", "FAIL sign-in", "cardwriter-mcp login --api-host " + dead}},
		{"a token the service refuses", []string{"--api-host", host}, []string{"CARDWRITER_TOKEN=wrong"}, 1, []string{"ok   card service", "FAIL token", "refused"}},
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
		})
	}
}
