package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
	"time"
)

// listenMeta is a 2026-07-28 request's _meta.
var listenMeta = map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
	"io.modelcontextprotocol/clientCapabilities": map[string]any{}, "io.modelcontextprotocol/clientInfo": map[string]any{"name": "t", "version": "1"}}

// TestStdioListenOrder: over stdio, a subscriptions/listen stream's acknowledgment comes before
// its result (20 streams with nothing subscribed, whose result follows at once: before, the
// result came first in 4 of 5), and with --dynamic-toolsets the tools/list_changed that
// enable_toolset causes carries the stream's subscriptionId.
func TestStdioListenOrder(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binPath, "stdio", "--sandbox", "--dynamic-toolsets", "--log-level", "error")
	cmd.Env = cleanEnv()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	lines := make(chan map[string]any, 64)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
		close(lines)
	}()
	send := func(id int, method string, params map[string]any) {
		params["_meta"] = listenMeta
		data, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := in.Write(append(data, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	next := func() map[string]any {
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatal("stdout ended")
			}
			return m
		case <-time.After(30 * time.Second):
			t.Fatal("no message in 30 s")
		}
		return nil
	}
	subID := func(m map[string]any) any {
		p, _ := m["params"].(map[string]any)
		meta, _ := p["_meta"].(map[string]any)
		return meta["io.modelcontextprotocol/subscriptionId"]
	}
	for id := 1; id <= 20; id++ {
		send(id, "subscriptions/listen", map[string]any{"notifications": map[string]any{}})
		first, second := next(), next()
		if first["method"] != "notifications/subscriptions/acknowledged" || subID(first) != float64(id) || second["id"] != float64(id) {
			t.Fatalf("listen %d: %v, then %v; want the acknowledgment, then the result", id, first, second)
		}
	}
	send(100, "subscriptions/listen", map[string]any{"notifications": map[string]any{"toolsListChanged": true}})
	if ack := next(); ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("want the acknowledgment first: %v", ack)
	}
	send(101, "tools/call", map[string]any{"name": "enable_toolset", "arguments": map[string]any{"toolset": "worldbook"}})
	for seen := 0; seen < 2; {
		m := next()
		switch {
		case m["id"] == float64(101):
			seen++
		case m["method"] == "notifications/tools/list_changed":
			if subID(m) != float64(100) {
				t.Errorf("tools/list_changed without the stream's subscriptionId: %v", m)
			}
			seen++
		default:
			t.Fatalf("unexpected %s", fmt.Sprint(m))
		}
	}
}
