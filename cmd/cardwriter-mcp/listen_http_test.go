package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestHTTPListenOrder: over HTTP, each of 50 subscriptions/listen streams with nothing
// subscribed (whose result follows at once) writes the acknowledgment, with the stream's
// subscriptionId, before the result. Before, mcp-go's forwarder dropped the acknowledgment in
// 14 of 50 runs.
func TestHTTPListenOrder(t *testing.T) {
	t.Parallel()
	base := startHTTP(t)
	const runs = 50
	missed := 0
	for id := 1; id <= runs; id++ {
		params := map[string]any{"notifications": map[string]any{}, "_meta": listenMeta}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": params})
		req, err := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "subscriptions/listen")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var events []map[string]any
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data:")
			if !ok {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(strings.TrimSpace(data)), &m); err != nil {
				t.Fatalf("run %d: %q: %v", id, data, err)
			}
			events = append(events, m)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("run %d: status %d", id, resp.StatusCode)
		}
		if len(events) != 2 || events[0]["method"] != "notifications/subscriptions/acknowledged" ||
			subscriptionID(events[0]) != float64(id) || events[1]["id"] != float64(id) {
			missed++
			t.Logf("run %d: %s", id, fmt.Sprint(events))
		}
	}
	if missed > 0 {
		t.Errorf("%d of %d listen streams did not start with their acknowledgment", missed, runs)
	}
}

// subscriptionID is a notification's _meta subscriptionId.
func subscriptionID(m map[string]any) any {
	p, _ := m["params"].(map[string]any)
	meta, _ := p["_meta"].(map[string]any)
	return meta["io.modelcontextprotocol/subscriptionId"]
}
