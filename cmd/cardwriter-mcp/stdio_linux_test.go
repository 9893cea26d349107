//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStdioResponseReadAfterItsProgress: a call's response is written only once the client has
// read the progress notifications before it, so that they never share a read (the TypeScript
// SDK drops a progress notification read in the same chunk as its call's response). The client
// here waits 150 ms before its first read after publish_card; the server must not have written
// the response by then. Over a pipe, and over the Unix socket pair Node.js spawns servers with.
func TestStdioResponseReadAfterItsProgress(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"pipe", "socket"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			c := startRawStdio(t, kind)
			c.call(1, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}})
			c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
			card := c.tool(2, "create_card", map[string]any{"roleName": "Unread"})
			id := card["roleId"]
			c.tool(3, "set_opening_lines", map[string]any{"roleId": id, "roleWelcome": "Hello."})
			c.tool(4, "write_card_document", map[string]any{"roleId": id, "sections": map[string]any{"description": "A test."}})
			c.send(map[string]any{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": map[string]any{
				"name": "publish_card", "arguments": map[string]any{"roleId": id}, "_meta": map[string]any{"progressToken": "p"},
			}})
			time.Sleep(150 * time.Millisecond) // a busy client: the server has long been done
			first := c.readOnce()
			msgs := messages(t, first)
			var progress int
			for _, m := range msgs {
				if m["id"] != nil {
					t.Errorf("the response was in the client's first read with the progress notifications:\n%s", first)
				}
				if m["method"] == "notifications/progress" {
					progress++
				}
			}
			if progress == 0 {
				t.Errorf("no progress notification in the client's first read:\n%s", first)
			}
			if res := c.await(5); res["isError"] == true {
				t.Errorf("publish_card: %v", res)
			}
		})
	}
}

// rawStdio is the binary serving stdio, driven line by line, its stdout read when the test says.
type rawStdio struct {
	t    *testing.T
	in   *os.File
	out  *os.File
	rest []byte // read and not yet taken by await
	pid  int
}

// startRawStdio runs `cardwriter-mcp stdio --sandbox` with its stdout on a pipe or on one end of
// a Unix stream socket pair (kind).
func startRawStdio(t *testing.T, kind string) *rawStdio {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var outR, outW *os.File
	switch kind {
	case "pipe":
		if outR, outW, err = os.Pipe(); err != nil {
			t.Fatal(err)
		}
	case "socket":
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		// The client's end non-blocking, so that its reads can have a deadline.
		if err := syscall.SetNonblock(fds[0], true); err != nil {
			t.Fatal(err)
		}
		outR, outW = os.NewFile(uintptr(fds[0]), "client"), os.NewFile(uintptr(fds[1]), "server")
	}
	cmd := exec.Command(binPath, "stdio", "--sandbox", "--log-level", "error")
	cmd.Env = cleanEnv()
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	t.Cleanup(func() {
		inW.Close() // EOF: the server exits
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("stdio: %v\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("stdio did not exit within 10s of stdin closing")
		}
		outR.Close()
	})
	return &rawStdio{t: t, in: inW, out: outR, pid: cmd.Process.Pid}
}

// send writes one message to the server.
func (c *rawStdio) send(msg map[string]any) {
	c.t.Helper()
	data, err := json.Marshal(msg)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.in.Write(append(data, '\n')); err != nil {
		c.t.Fatalf("write to stdin: %v", err)
	}
}

// readOnce is one read of stdout: what it returned, kept also for await.
func (c *rawStdio) readOnce() []byte {
	c.t.Helper()
	if err := c.out.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		c.t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	n, err := c.out.Read(buf)
	if err != nil {
		c.t.Fatalf("read stdout: %v", err)
	}
	c.rest = append(c.rest, buf[:n]...)
	return buf[:n]
}

// await takes the messages read from stdout, reading more as needed, until the response to
// request id, and returns its result.
func (c *rawStdio) await(id int) map[string]any {
	c.t.Helper()
	for {
		end := bytes.LastIndexByte(c.rest, '\n') + 1
		lines := c.rest[:end]
		c.rest = c.rest[end:]
		for _, m := range messages(c.t, lines) {
			if m["id"] == float64(id) {
				res, ok := m["result"].(map[string]any)
				if !ok {
					c.t.Fatalf("request %d: %v", id, m)
				}
				return res
			}
		}
		c.readOnce()
	}
}

// call sends request id and returns its result.
func (c *rawStdio) call(id int, method string, params map[string]any) map[string]any {
	c.t.Helper()
	c.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return c.await(id)
}

// tool calls a tool and returns its structured content; it fails the test on an error result.
func (c *rawStdio) tool(id int, name string, args map[string]any) map[string]any {
	c.t.Helper()
	res := c.call(id, "tools/call", map[string]any{"name": name, "arguments": args})
	sc, ok := res["structuredContent"].(map[string]any)
	if res["isError"] == true || !ok {
		c.t.Fatalf("%s: %v", name, res)
	}
	return sc
}

// messages decodes the whole lines of data as JSON-RPC messages.
func messages(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %q", fmt.Errorf("decode a line of stdout: %w", err), line)
		}
		out = append(out, m)
	}
	return out
}
