package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100 on every Linux
// architecture Go supports).
const clockTicks = 100

// moduleRoot finds the directory of this module's go.mod, from the working directory upwards.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(data), "module github.com/cardwriter/cardwriter-mcp\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run the harness inside the cardwriter-mcp module (no go.mod of it found above the working directory)")
		}
		dir = parent
	}
}

// buildServer builds cmd/cardwriter-mcp as a static binary into dir, with the given build tags
// ("" for none).
func buildServer(ctx context.Context, root, dir, tags string, flags []string) (string, error) {
	bin := filepath.Join(dir, "cardwriter-mcp")
	args := append([]string{"build", "-trimpath", "-tags", tags, "-o", bin}, flags...)
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/cardwriter-mcp")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/cardwriter-mcp: %w\n%s", err, out)
	}
	return bin, nil
}

// tail keeps the last lines a process wrote, for error reports.
type tail struct {
	mu    sync.Mutex
	lines []string
	part  []byte // an unfinished line given to Write
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addLocked(line)
}

func (t *tail) addLocked(line string) {
	if len(t.lines) == 40 {
		t.lines = t.lines[1:]
	}
	if len(line) > 2000 {
		line = line[:2000] + "..."
	}
	t.lines = append(t.lines, line)
}

// Write makes a tail an io.Writer (for a process's stderr).
func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.part = append(t.part, p...)
	for {
		i := bytes.IndexByte(t.part, '\n')
		if i < 0 {
			break
		}
		t.addLocked(string(t.part[:i]))
		t.part = t.part[i+1:]
	}
	if len(t.part) > 1<<16 {
		t.part = t.part[len(t.part)-1<<16:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}

// server is a spawned server process whose stderr is drained (and its last lines kept).
type server struct {
	name   string
	cmd    *exec.Cmd
	stderr *tail
	done   chan struct{} // closed when the process has exited
	err    error         // the exit error, once done
}

// startServer starts bin with args and env; it waits until a stderr line matches ready and
// returns the server with that line's first submatch. A nil ready does not wait.
func startServer(ctx context.Context, name, bin string, args, env []string, ready *regexp.Regexp, timeout time.Duration) (*server, string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout = io.Discard
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, "", err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start %s: %w", name, err)
	}
	s := &server{name: name, cmd: cmd, stderr: &tail{}, done: make(chan struct{})}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errPipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			s.stderr.add(line)
			if ready != nil {
				if m := ready.FindStringSubmatch(line); m != nil {
					found <- m[len(m)-1]
					ready = nil
				}
			}
		}
		_, _ = io.Copy(io.Discard, errPipe)
	}()
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	if ready == nil {
		return s, "", nil
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case v := <-found:
		return s, v, nil
	case <-s.done:
		return nil, "", fmt.Errorf("%s exited before it was ready: %v\n%s", name, s.err, s.stderr)
	case <-t.C:
		s.stop()
		return nil, "", fmt.Errorf("%s was not ready after %s\n%s", name, timeout, s.stderr)
	case <-ctx.Done():
		s.stop()
		return nil, "", ctx.Err()
	}
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// stop asks the server to shut down (SIGTERM) and kills its process group after 5 s.
func (s *server) stop() {
	if s == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// procUsage is what /proc says about one process.
type procUsage struct {
	CPU     time.Duration // user + system time so far
	RSSKB   int64         // VmRSS
	PeakKB  int64         // VmHWM, the peak resident set
	Threads int
}

// readProc reads /proc/<pid>/stat and /proc/<pid>/status.
func readProc(pid int) (procUsage, error) {
	var u procUsage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// The command name (field 2) may hold spaces; the fields after it are space-separated.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return u, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return u, errors.New("unexpected /proc stat format")
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64) // field 14 utime
	st, _ := strconv.ParseInt(f[12], 10, 64) // field 15 stime
	u.CPU = time.Duration(ut+st) * time.Second / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			u.RSSKB = n
		case "VmHWM":
			u.PeakKB = n
		case "Threads":
			u.Threads = int(n)
		}
	}
	return u, nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitListening waits until addr accepts connections.
func waitListening(ctx context.Context, addr string, s *server, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("%s exited: %v\n%s", s.name, s.err, s.stderr)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not listen on %s within %s\n%s", s.name, addr, timeout, s.stderr)
		}
	}
}

// envWith returns the environment without the CARDWRITER_ and peer variables, plus extra.
func envWith(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "CARDWRITER_") || strings.HasPrefix(k, "API_") || strings.HasPrefix(k, "OPENAPI_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}
