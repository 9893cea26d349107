// Package storetest starts real backends for tests, on free loopback ports in temporary
// directories, stopped when the test ends: a redis-server of its own, a Sentinel-managed
// primary with a replica, a Redis Cluster of three primaries each with a replica.
package storetest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Need skips the test when the program is not installed, or fails it under CI=true, where
// .ci/run installs it.
func Need(t testing.TB, program, debianPackage string) string {
	t.Helper()
	p, err := exec.LookPath(program)
	if err == nil {
		return p
	}
	msg := fmt.Sprintf("%s is not installed (Debian package %s; .ci/run installs it)", program, debianPackage)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// RedisServer is a redis-server process of one test.
type RedisServer struct {
	t    testing.TB
	bin  string
	dir  string
	Port int
	args []string // beyond the port, address, directory and persistence
	cmd  *exec.Cmd
}

// Addr returns the server's host:port.
func (r *RedisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.Port) }

// URL returns the server's redis:// URL (database 0).
func (r *RedisServer) URL() string { return "redis://127.0.0.1:" + strconv.Itoa(r.Port) + "/0" }

// Redis starts a redis-server for the test (no persistence to disk: the test's data lives as
// long as the process), stopped at the end of the test.
func Redis(t testing.TB) *RedisServer { return redisWith(t) }

// redisWith starts a redis-server with more arguments (replicaof, cluster-enabled).
func redisWith(t testing.TB, args ...string) *RedisServer {
	t.Helper()
	bin := Need(t, "redis-server", "redis-server")
	r := &RedisServer{t: t, bin: bin, dir: t.TempDir(), Port: FreePort(t), args: args}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// Start starts the server (again, on the same port, after Stop), and waits until it answers.
func (r *RedisServer) Start() {
	r.t.Helper()
	if r.cmd != nil {
		return
	}
	cmd := exec.Command(r.bin, "--port", strconv.Itoa(r.Port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "yes", "--logfile", filepath.Join(r.dir, "redis.log"))
	cmd.Args = append(cmd.Args, r.args...)
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server: %v", err)
	}
	r.cmd = cmd
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(r.Port), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
			r.t.Fatalf("redis-server did not answer within 10 s: %v\n%s", err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL: as a crash) and waits for it.
func (r *RedisServer) Stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

// Pause stops the server's process (SIGSTOP) so that it accepts connections but never answers,
// as a Redis that hangs; the returned function resumes it.
func (r *RedisServer) Pause() (resume func()) {
	_ = r.cmd.Process.Signal(stopSignal)
	return func() { _ = r.cmd.Process.Signal(contSignal) }
}

// FreePort returns a loopback TCP port free at the time of the call.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
