package tools

import (
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// TestExportsKeptByReplica: an export link's file is among what must not be lost while it
// lives, so a Redis deployment with replicas acknowledges it only once a replica holds it.
// So are each user's list of exports, the signing key and the confirmation tokens spent (a
// token spent stays spent).
func TestExportsKeptByReplica(t *testing.T) {
	t.Parallel()
	for _, key := range []string{exportKeyPrefix + "0123", exportIndexPrefix + "0123", signingKeyName, confirmSpentPrefix + "0123"} {
		if !store.KeptByReplica(key) {
			t.Errorf("%s is not kept by a replica", key)
		}
	}
}
