package main

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestPromptMissingArgument: a prompts/get that lacks a required argument (absent or blank) is
// answered -32602 Invalid params on both transports (mcp-go answers a handler's error -32603);
// one with it is served.
func TestPromptMissingArgument(t *testing.T) {
	t.Parallel()
	connect := map[string]func(ctx context.Context, t *testing.T) *mcp.ClientSession{
		"http": func(ctx context.Context, t *testing.T) *mcp.ClientSession { return connectHTTP(ctx, t, startHTTP(t)) },
		"stdio": func(ctx context.Context, t *testing.T) *mcp.ClientSession {
			cmd := exec.Command(binPath, "stdio", "--sandbox", "--log-level", "error")
			cmd.Env = cleanEnv()
			cs, err := newClient().Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return cs
		},
	}
	for name, open := range connect {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cs := open(ctx, t)
			defer cs.Close()
			for _, args := range []map[string]string{nil, {"language": "French"}, {"idea": "  "}} {
				_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "author_card", Arguments: args})
				var rpc *jsonrpc.Error
				if !errors.As(err, &rpc) || rpc.Code != -32602 {
					t.Errorf("arguments %v: %v, want -32602", args, err)
				}
			}
			if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "author_card", Arguments: map[string]string{"idea": "A lighthouse keeper."}}); err != nil {
				t.Errorf("with its argument: %v", err)
			}
		})
	}
}
