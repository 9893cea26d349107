package sessions_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/redis/go-redis/v9"

	"github.com/cardwriter/cardwriter-mcp/internal/sessions"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/store/storetest"
)

// limitedReplica is an mcp-go streamable server on sessions with limits l, the user of a
// request named by its X-Test-User header, and a tool that logs (so that a session has events).
func limitedReplica(t *testing.T, kv store.KV, l sessions.Limits) *httptest.Server {
	t.Helper()
	sess := sessions.New(kv, time.Minute, nil)
	l.User = func(r *http.Request) string { return r.Header.Get("X-Test-User") }
	sess.SetLimits(l)
	hooks := &server.Hooks{}
	sess.Hooks(hooks)
	mcpSrv := server.NewMCPServer("test", "1", server.WithHooks(hooks), server.WithLogging(), server.WithToolCapabilities(false))
	mcpSrv.AddTool(mcp.NewTool("log"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		_ = server.ServerFromContext(ctx).SendLogMessageToClient(ctx, mcp.NewLoggingMessageNotification(mcp.LoggingLevelWarning, "test", "w"))
		return mcp.NewToolResultText("logged"), nil
	})
	streamable := server.NewStreamableHTTPServer(mcpSrv, server.WithSessionIdManagerResolver(sess), server.WithEventStore(sess.Events()),
		server.WithSessionIdleTTL(time.Minute), server.WithDisableLocalhostProtection(true),
		server.WithHTTPContextFunc(func(ctx context.Context, r *http.Request) context.Context { return sess.Restore(ctx, r) }))
	ts := httptest.NewServer(sess.Gate(streamable))
	t.Cleanup(func() { ts.Close(); _ = streamable.Shutdown(context.Background()) })
	return ts
}

// send makes one request of user (with sid, when not "") and returns the status, the session
// id answered and the body.
func send(t *testing.T, method, url, user, sid, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Test-User", user)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func TestSessionCapPerUser(t *testing.T) {
	t.Parallel()
	ts := limitedReplica(t, store.NewMemory(), sessions.Limits{MaxSessions: 2})
	var mine []string
	for range 2 {
		status, sid, body := send(t, http.MethodPost, ts.URL, "alice", "", initBody)
		if status != http.StatusOK || sid == "" {
			t.Fatalf("initialize: %d %s", status, body)
		}
		mine = append(mine, sid)
	}
	status, _, body := send(t, http.MethodPost, ts.URL, "alice", "", initBody)
	var refused struct {
		ID    int `json:"id"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if status != http.StatusTooManyRequests || json.Unmarshal([]byte(body), &refused) != nil || refused.ID != 1 || !strings.Contains(refused.Error.Message, "at most 2 MCP sessions") {
		t.Fatalf("a third session: %d %s", status, body)
	}
	if status, _, body := send(t, http.MethodPost, ts.URL, "bob", "", initBody); status != http.StatusOK {
		t.Fatalf("another user: %d %s", status, body)
	}
	if status, _, body := send(t, http.MethodPost, ts.URL, "", "", initBody); status != http.StatusOK {
		t.Fatalf("no user (no authorization): %d %s", status, body)
	}
	if status, _, _ := send(t, http.MethodDelete, ts.URL, "alice", mine[0], ""); status/100 != 2 {
		t.Fatalf("DELETE: %d", status)
	}
	if status, _, body := send(t, http.MethodPost, ts.URL, "alice", "", initBody); status != http.StatusOK {
		t.Fatalf("a session after one ended: %d %s", status, body)
	}
}

func TestInitializeRatePerUser(t *testing.T) {
	t.Parallel()
	ts := limitedReplica(t, store.NewMemory(), sessions.Limits{InitializeRate: 0.01, InitializeBurst: 2})
	for range 2 {
		if status, _, body := send(t, http.MethodPost, ts.URL, "alice", "", initBody); status != http.StatusOK {
			t.Fatalf("initialize within the burst: %d %s", status, body)
		}
	}
	if status, _, body := send(t, http.MethodPost, ts.URL, "alice", "", initBody); status != http.StatusTooManyRequests || !strings.Contains(body, "--user-initialize-rate") {
		t.Fatalf("over the rate: %d %s", status, body)
	}
	if status, _, body := send(t, http.MethodPost, ts.URL, "bob", "", initBody); status != http.StatusOK {
		t.Fatalf("another user: %d %s", status, body)
	}
}

// TestRedisKeysOfSessionsExpire opens sessions on Redis, with events and the user's index,
// ends them, and checks that every key the sessions left carries a TTL: Redis gives back what
// ended sessions held.
func TestRedisKeysOfSessionsExpire(t *testing.T) {
	t.Parallel()
	rs := storetest.Redis(t)
	kv, err := store.OpenRedis(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	ts := limitedReplica(t, kv, sessions.Limits{MaxSessions: 10})
	for range 5 {
		status, sid, body := send(t, http.MethodPost, ts.URL, "alice", "", initBody)
		if status != http.StatusOK {
			t.Fatalf("initialize: %d %s", status, body)
		}
		send(t, http.MethodPost, ts.URL, "alice", sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		send(t, http.MethodPost, ts.URL, "alice", sid, `{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`)
		if status, _, body := send(t, http.MethodPost, ts.URL, "alice", sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"log"}}`); status != http.StatusOK {
			t.Fatalf("tools/call: %d %s", status, body)
		}
		if status, _, _ := send(t, http.MethodDelete, ts.URL, "alice", sid, ""); status/100 != 2 {
			t.Fatalf("DELETE: %d", status)
		}
	}
	opts, _ := redis.ParseURL(rs.URL())
	c := redis.NewClient(opts)
	defer c.Close()
	ctx := context.Background()
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var sawIndex, sawSession bool
	for _, k := range keys {
		ttl, err := c.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl < 0 {
			t.Errorf("%s never expires", k)
		}
		sawIndex = sawIndex || strings.Contains(k, "mcp:user-sessions:")
		sawSession = sawSession || strings.Contains(k, "mcp:session:")
	}
	if !sawIndex || !sawSession {
		t.Fatalf("keys %v: the sessions and the user's index were not kept in Redis", keys)
	}
}
