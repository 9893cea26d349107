package tools

import (
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// TestExportsKeptByReplica: an export link's file is among what must not be lost while it
// lives, so a Redis deployment with replicas acknowledges it only once a replica holds it.
func TestExportsKeptByReplica(t *testing.T) {
	t.Parallel()
	if !store.KeptByReplica(exportKeyPrefix + "0123") {
		t.Errorf("%s is not kept by a replica", exportKeyPrefix)
	}
}
