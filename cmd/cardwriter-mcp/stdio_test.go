package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestLineWriterSettleFallsBackToPause: where the kernel cannot tell what the client has read (a
// regular file here), a response waits noteGap after the last notification, and not at all when
// none was written.
func TestLineWriterSettleFallsBackToPause(t *testing.T) {
	t.Parallel()
	f, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := newLineWriter(f)
	if l.file != nil {
		t.Fatal("a regular file was taken for one whose unread bytes can be told")
	}
	start := time.Now()
	l.Settle(context.Background())
	if took := time.Since(start); took >= noteGap/2 {
		t.Errorf("Settle with no notification written took %v", took)
	}
	if err := l.Notify(context.Background(), mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: "notifications/progress"}}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	l.Settle(context.Background())
	if took := time.Since(start); took < noteGap*9/10 {
		t.Errorf("Settle after a notification took %v, want about %v", took, noteGap)
	}
}
