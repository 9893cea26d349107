package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
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
	dead := silentAddress(t)
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
	dead := silentAddress(t) + "/healthz"
	cmd := exec.Command(binPath, "healthcheck")
	cmd.Env = cleanEnv("CARDWRITER_URL=" + dead)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "does not answer") {
		t.Errorf("a dead server: %v %s", err, out)
	}
}

// silentAddress returns the address of a server that never answers: a listener held open for
// the test and never accepting, so that its port cannot be taken by another server of a test
// running meanwhile, as a closed port can (the kernel hands it out again).
func silentAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return "http://" + ln.Addr().String()
}

// reportingStore is a store that says what its failover is at (as Redis Sentinel and Cluster
// do), and whose writes fail while failing.
type reportingStore struct {
	store.KV
	failing bool
}

func (s reportingStore) Set(ctx context.Context, key string, v []byte, ttl time.Duration) error {
	if s.failing {
		return &store.UnavailableError{Backend: "redis sentinel test", Err: errors.New("connection refused")}
	}
	return s.KV.Set(ctx, key, v, ttl)
}

func (s reportingStore) Report() string {
	if s.failing {
		return "failing over: operations fail since 12:00:00; the sentinels promote a replica"
	}
	return "followed a failover at 12:00:03; primaries now 10.0.0.2:6379"
}

// /readyz says a failover is under way (not ready), then names the one followed (ready).
func TestReadyzFailover(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		failing bool
		status  int
		key     string
		want    string
	}{
		{true, http.StatusServiceUnavailable, "store", "failing over"},
		{false, http.StatusOK, "store_failover", "followed a failover"},
	} {
		rd := &readiness{store: reportingStore{KV: store.NewMemory(), failing: tc.failing}}
		rec := httptest.NewRecorder()
		rd.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		var body struct{ Checks map[string]string }
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != tc.status || !strings.Contains(body.Checks[tc.key], tc.want) {
			t.Errorf("failing %v: %d %s", tc.failing, rec.Code, rec.Body)
		}
	}
}
