package tools

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/sealed"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// TestPlantedRevisionNotRestored: a revision record rewritten in the store by someone without
// the server's key (the state of a user's latest revision changed to planted text) is never
// used: restore_revision does not write the planted text into the card.
func TestPlantedRevisionNotRestored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw := store.NewMemory()
	kv := sealed.New(raw, bytes.Repeat([]byte{7}, sealed.KeySize), nil, revisions.Prefixes()...)
	e := newEnv(t, Options{Revisions: revisions.New(kv, revisions.DefaultRetention())})
	roleID := e.ok("create_card", `{"roleName":"Mira"}`)["roleId"].(string)
	e.ok("write_card_document", jsonArg(t, map[string]any{"roleId": roleID, "sections": map[string]string{"description": "The original."}}))
	res := e.call("write_card_document", jsonArg(t, map[string]any{"roleId": roleID, "sections": map[string]string{"description": "The second."}}))
	revID := revisionOf(t, structured(t, res).(map[string]any), res)
	planted := 0
	err := raw.Scan(ctx, "rev:", func(key string) error {
		v, err := raw.Get(ctx, key)
		if err != nil || !bytes.Contains(v, []byte("The original.")) {
			return nil
		}
		i := bytes.Index(v, []byte("{")) // past the seal: the record as a writer without the key sees it
		if err := raw.Set(ctx, key, bytes.ReplaceAll(v[i:], []byte("The original."), []byte("PLANTED")), 0); err != nil {
			return err
		}
		planted++
		return nil
	})
	if err != nil || planted == 0 {
		t.Fatalf("planting: %v (%d records)", err, planted)
	}
	e.call("restore_revision", jsonArg(t, map[string]any{"revisionId": revID}))
	card := e.ok("get_card", jsonArg(t, map[string]any{"roleId": roleID}))
	if got := obj(card, "sections")["description"]; strings.Contains(str(card, "roleName")+toString(got), "PLANTED") {
		t.Fatalf("the planted revision was restored: %v", got)
	}
}

func toString(v any) string { s, _ := v.(string); return s }
