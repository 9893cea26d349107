package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestBoltGivesSpaceBack opens and ends many sessions' worth of records (a session record and
// its event list, as internal/sessions writes them): once they have expired, the next
// maintenance leaves the file a fraction of its peak, with what still lives intact; a store
// opened on a sparse file compacts it at once. Before, the file kept its peak size for good.
func TestBoltGivesSpaceBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), BoltFile)
	b, err := OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	b.now = func() time.Time { return now }
	size := func() int64 {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	record := make([]byte, 4<<10)
	if err := b.Set(ctx, "keep", []byte("kept"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, "keep-list", []byte("item"), 0); err != nil {
		t.Fatal(err)
	}
	const sessions = 800
	for i := range sessions {
		id := fmt.Sprintf("mcp:session:%d", i)
		if _, err := b.Create(ctx, id, record, 30*time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Append(ctx, "mcp:events:"+id, record, 30*time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := b.Set(ctx, id, []byte(`{"terminated":true}`), 30*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	peak := size()
	now = now.Add(31 * time.Minute) // every session has expired
	if err := b.maintain(); err != nil {
		t.Fatal(err)
	}
	after := size()
	t.Logf("file: %d KiB after %d sessions, %d KiB once they expired", peak>>10, sessions, after>>10)
	if after*4 > peak {
		t.Errorf("the file is %d KiB after its sessions expired, of %d KiB at its peak: the space was not given back", after>>10, peak>>10)
	}
	if v, err := b.Get(ctx, "keep"); err != nil || string(v) != "kept" {
		t.Fatalf("a live value after compaction: %q, %v", v, err)
	}
	if n, err := b.Append(ctx, "keep-list", []byte("next"), 0); err != nil || n != 1 {
		t.Fatalf("a live list after compaction: index %d, %v", n, err)
	}
	if _, err := b.Get(ctx, "mcp:session:1"); err != ErrNotFound {
		t.Fatalf("an expired session after compaction: %v", err)
	}

	// A file left sparse (bbolt deletes without shrinking) is compacted when opened.
	for i := range sessions {
		if err := b.Set(ctx, fmt.Sprintf("x:%d", i), record, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i := range sessions {
		if err := b.Delete(ctx, fmt.Sprintf("x:%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	sparse := size()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if reopened := size(); reopened*4 > sparse {
		t.Errorf("opened on a sparse file of %d KiB, the store left it at %d KiB", sparse>>10, reopened>>10)
	}
	if v, err := b.Get(ctx, "keep"); err != nil || string(v) != "kept" {
		t.Fatalf("a live value after reopening: %q, %v", v, err)
	}
}
