package main

import (
	"encoding/json"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

func getReady(t *testing.T, base string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	if status, body := getReady(t, startHTTP(t)); status != http.StatusOK || body["status"] != "ready" {
		t.Errorf("sandbox: %d %v", status, body)
	}

	// A card service that does not answer: not ready, and why.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	_, found := startProcess(t, []string{"CARDWRITER_TOKEN=t", "CARDWRITER_CONFIG_DIR=" + t.TempDir()},
		[]string{"http", "--addr", "127.0.0.1:0", "--api-host", dead, "--auth", "none", "--state-dir", t.TempDir()}, `MCP endpoint: (http://\S+)/mcp`)
	status, body := getReady(t, found[0])
	checks, _ := body["checks"].(map[string]any)
	if status != http.StatusServiceUnavailable || !strings.Contains(checks["upstream"].(string), "does not answer") || checks["store"] != "ok" {
		t.Errorf("dead card service: %d %v", status, body)
	}
}

func TestHealthcheckCommand(t *testing.T) {
	t.Parallel()
	base := startHTTP(t)
	out, err := exec.Command(binPath, "healthcheck", "--url", base+"/healthz").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "healthy") {
		t.Errorf("a live server: %v %s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/healthz"
	ln.Close()
	cmd := exec.Command(binPath, "healthcheck")
	cmd.Env = cleanEnv("CARDWRITER_URL=" + dead)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "does not answer") {
		t.Errorf("a dead server: %v %s", err, out)
	}
}
