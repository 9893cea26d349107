package proxy

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/oauthserver"
)

// TestForgedRecordsAreRefused: whoever can write to the store but lacks the state key cannot
// mint a working token: an access token record written in the clear, a real one copied under
// the digest of a token of the writer's choosing, and a grant changed to another user are all
// refused (and logged, without a secret); the real token keeps working.
func TestForgedRecordsAreRefused(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.register("Forgery", "http://127.0.0.1:9/cb")
	access, _ := c.signIn()
	ctx := context.Background()
	status, _, out := e.mcpCall(access, "", listBody)
	if status != 200 {
		t.Fatalf("the real token: %d %v", status, out)
	}
	real, err := e.kv.Get(ctx, keySecret+oauthserver.Digest(access))
	if err != nil {
		t.Fatal(err)
	}
	var sec Secret
	if err := json.Unmarshal(real, &sec); err != nil || sec.MAC == "" {
		t.Fatalf("the access token's record carries no MAC: %s", real)
	}

	// 1. A record written in the clear, for a token the writer made up.
	minted := oauthserver.NewSecret(accessPrefix)
	e.secrets.Add(minted)
	forged, _ := json.Marshal(&Secret{Kind: KindAccess, GrantID: sec.GrantID, ClientID: sec.ClientID, Scope: Scope,
		Resource: sec.Resource, Expires: e.clock.Now().Add(time.Hour)})
	if err := e.kv.Set(ctx, keySecret+oauthserver.Digest(minted), forged, time.Hour); err != nil {
		t.Fatal(err)
	}
	if status, _, out := e.mcpCall(minted, "", listBody); status != 401 {
		t.Errorf("a token minted by writing its record: %d %v, want 401", status, out)
	}
	// 2. The real record, MAC and all, copied under the minted token's digest.
	if err := e.kv.Set(ctx, keySecret+oauthserver.Digest(minted), real, time.Hour); err != nil {
		t.Fatal(err)
	}
	if status, _, out := e.mcpCall(minted, "", listBody); status != 401 {
		t.Errorf("a real token record copied under another digest: %d %v, want 401", status, out)
	}
	// 3. The grant changed to another user.
	rawGrant, err := e.kv.Get(ctx, keyGrant+sec.GrantID)
	if err != nil {
		t.Fatal(err)
	}
	var g map[string]any
	_ = json.Unmarshal(rawGrant, &g)
	g["userId"] = "u_victim"
	changed, _ := json.Marshal(g)
	if err := e.kv.Set(ctx, keyGrant+sec.GrantID, changed, 0); err != nil {
		t.Fatal(err)
	}
	if status, _, out := e.mcpCall(access, "", listBody); status != 401 || out["user"] == "u_victim" {
		t.Errorf("with its grant changed to another user: %d %v, want 401", status, out)
	}
	// The sweep drops the grant that fails its authentication.
	e.srv.sweep()
	if _, err := e.kv.Get(ctx, keyGrant+sec.GrantID); err == nil {
		t.Error("the sweep kept a grant that fails its authentication")
	}
	logs := e.logs.String()
	if n := strings.Count(logs, "failed its authentication"); n < 3 {
		t.Errorf("%d refusals logged, want at least 3:\n%s", n, logs)
	}
	if !strings.Contains(logs, `"record":"secret"`) || !strings.Contains(logs, `"record":"grant"`) {
		t.Errorf("the refusals do not name the kind of record:\n%s", logs)
	}
	if strings.Contains(logs, oauthserver.Digest(minted)) {
		t.Error("the log names the minted token's digest")
	}
}

// TestStateKeyRotation: with the old state key among the previous keys, what it sealed and
// authenticated still works under a new key, and a new sign-in too; without it, the old
// sign-in ends.
func TestStateKeyRotation(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.register("Rotation", "http://127.0.0.1:9/cb")
	access, refresh := c.signIn()
	logger := e.srv.log
	old := e.key
	e.key = make([]byte, KeySize)
	_, _ = rand.Read(e.key)
	e.prevKey = [][]byte{old}
	e.start(0, logger)
	if status, _, out := e.mcpCall(access, "", listBody); status != 200 || out["user"] != "u_demo" {
		t.Fatalf("after the rotation, the old key kept for reading: %d %v", status, out)
	}
	status, tok := c.refresh(refresh)
	if status != 200 {
		t.Fatalf("refresh after the rotation: %d %v", status, tok)
	}
	fresh := &client{e: e, id: c.id, redirectURI: c.redirectURI, browser: c.browser}
	newAccess, _ := fresh.signIn()
	e.prevKey = nil
	e.start(0, logger)
	if status, _, out := e.mcpCall(newAccess, "", listBody); status != 200 {
		t.Errorf("a sign-in made under the new key, once the old one is dropped: %d %v", status, out)
	}
	if status, _, out := e.mcpCall(access, "", listBody); status != 401 {
		t.Errorf("a token of before the rotation, once the old key is dropped: %d %v, want 401", status, out)
	}
}
