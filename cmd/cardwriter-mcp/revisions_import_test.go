package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// TestImportOldRevisions: the revisions an earlier version kept in revisions.db are moved
// into the folder at the next start, and the file is gone.
func TestImportOldRevisions(t *testing.T) {
	t.Parallel()
	config := t.TempDir()
	kv, err := store.OpenBolt(filepath.Join(config, oldRevisionsFile))
	if err != nil {
		t.Fatal(err)
	}
	owner := revisions.User{BaseURL: "https://api.example/open/v1", ID: "u_alice"} // GET /me's, then
	rev := &revisions.Revision{Kind: revisions.KindCard, ObjectID: "r_1", Tool: "set_opening_lines", State: json.RawMessage(`{"a":1}`)}
	if _, err := revisions.New(kv, revisions.DefaultRetention()).Keep(context.Background(), owner, rev); err != nil {
		t.Fatal(err)
	}
	_ = kv.Close()
	var stderr bytes.Buffer
	dir := filepath.Join(config, revisionsDir)
	importOldRevisions(dir, &stderr)
	if stderr.Len() > 0 {
		t.Errorf("stderr: %s", stderr.String())
	}
	local := revisions.LocalUser(owner.BaseURL, config)
	got, err := revisions.NewDir(dir, revisions.DefaultRetention()).Get(context.Background(), local, rev.ID)
	if err != nil || string(got.State) != `{"a":1}` {
		t.Errorf("after the import: %+v, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(config, oldRevisionsFile)); !os.IsNotExist(err) {
		t.Errorf("revisions.db is still there: %v", err)
	}
}
