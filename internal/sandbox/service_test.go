package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
)

func TestIsolation(t *testing.T) {
	t.Parallel()
	svc := newService(t, sandbox.Options{})
	alice := inProcess(t, svc)
	bobID := svc.AddUser("bob-token", "Bob")
	if svc.AddUser("bob-token", "Bob again") != bobID {
		t.Fatal("AddUser with a known token made a second user")
	}
	bob := alice.as("bob-token")
	if me := bob.call("GET", "/me", nil, http.StatusOK); me["userId"] != bobID || me["nickname"] != "Bob" {
		t.Fatalf("me %v", me)
	}
	roleID := alice.newCard("Mira")
	wb := alice.newWorldbook("Lore", "")
	img := alice.upload(roleID, "avatar", "image/png", pngBytes(t, 1, 1))
	alice.call("PUT", "/trial-cards/shared-key", map[string]any{"card": map[string]any{"roleName": "A"}}, http.StatusCreated)
	bobCard := bob.newCard("Bob's")
	bobWB := bob.newWorldbook("Bob's lore", "")

	tests := []struct {
		method, path string
		body         any
		code         string
	}{
		{"GET", "/role/detail?roleId=" + roleID, nil, "role_not_found"},
		{"PATCH", "/role/" + roleID + "/welcome", map[string]any{"roleWelcome": "x"}, "role_not_found"},
		{"PATCH", "/role/" + roleID, map[string]any{"roleName": "x"}, "role_not_found"},
		{"POST", "/role/" + roleID + "/document", map[string]any{"sections": map[string]any{}}, "role_not_found"},
		{"POST", "/role/" + roleID + "/visibility", map[string]any{"visibility": "private"}, "role_not_found"},
		{"GET", "/role/validate?roleId=" + roleID, nil, "role_not_found"},
		{"POST", "/role/" + roleID + "/publish", map[string]any{}, "role_not_found"},
		{"GET", "/role/assets?roleId=" + roleID, nil, "role_not_found"},
		{"GET", "/worldbook/bound?roleId=" + roleID, nil, "role_not_found"},
		{"POST", "/image/upload", map[string]any{"purpose": "avatar", "roleId": roleID, "contentType": "image/png", "dataBase64": "AAAA"}, "role_not_found"},
		{"GET", "/worldbook/detail?worldbookId=" + wb, nil, "worldbook_not_found"},
		{"GET", "/worldbook/entry/list?worldbookId=" + wb, nil, "worldbook_not_found"},
		{"POST", "/worldbook/" + wb + "/document", map[string]any{}, "worldbook_not_found"},
		{"POST", "/worldbook/" + bobWB + "/document", map[string]any{"binding": map[string]any{"roleId": roleID}}, "role_not_found"},
		{"GET", "/trial-cards/shared-key", nil, "trial_not_found"},
		{"DELETE", "/trial-cards/shared-key", nil, "trial_not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			bob.on(t).fail(tt.method, tt.path, tt.body, http.StatusNotFound, tt.code) // never 403
		})
	}
	if got := bob.call("GET", "/worldbook/list", nil, http.StatusOK)["list"].([]any); len(got) != 1 {
		t.Fatalf("bob's worldbooks %v", got)
	}
	if got := bob.call("GET", "/trial-cards", nil, http.StatusOK)["list"].([]any); len(got) != 0 {
		t.Fatalf("bob's trials %v", got)
	}
	// Alice's image cannot be set on Bob's card.
	bob.fail("PATCH", "/role/"+bobCard, map[string]any{"avatarImageId": img}, http.StatusBadRequest, "invalid_request")
	// Trial keys are per user.
	bob.call("PUT", "/trial-cards/shared-key", map[string]any{"card": map[string]any{"roleName": "B"}}, http.StatusCreated)
	alice.call("GET", "/trial-cards/shared-key", nil, http.StatusOK)
}

func TestPersistence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "state.json")
	clock := newFakeClock()
	opts := sandbox.Options{DataFile: file, Clock: clock.Now, DemoToken: "tok-1"}
	svc := newService(t, opts)
	c := inProcess(t, svc)
	roleID := c.call("POST", "/role", map[string]any{"roleName": "Mira", "idempotencyKey": "k"}, http.StatusCreated)["roleId"].(string)
	c.call("PATCH", "/role/"+roleID+"/welcome", map[string]any{"roleWelcome": "Hi", "prologue": []string{"Hello?"}}, http.StatusOK)
	c.call("POST", "/role/"+roleID+"/document", map[string]any{"sections": map[string]any{"description": "D"}}, http.StatusOK)
	img := c.upload(roleID, "avatar", "image/png", pngBytes(t, 2, 2))
	c.call("PATCH", "/role/"+roleID, map[string]any{"avatarImageId": img, "tags": []string{"t"}}, http.StatusOK)
	c.call("POST", "/role/"+roleID+"/publish", map[string]any{}, http.StatusOK)
	wb := c.newWorldbook("Lore", "tavern")
	c.call("POST", "/worldbook/"+wb+"/document", map[string]any{"entries": []map[string]any{
		{"op": "create", "name": "A", "content": "a", "keywords": []string{"a"}}}, "binding": map[string]any{"roleId": roleID}}, http.StatusOK)
	trial := c.call("PUT", "/trial-cards/t1", map[string]any{"card": map[string]any{"roleName": "T"},
		"worldbook": map[string]any{"entries": trialEntries(2)}}, http.StatusCreated)
	bobID := svc.AddUser("bob", "Bob")
	c.as("bob").newCard("Bob's")

	snapshot := func(c *client) []map[string]any {
		return []map[string]any{
			c.call("GET", "/role/detail?roleId="+roleID, nil, http.StatusOK),
			c.call("GET", "/role/assets?roleId="+roleID, nil, http.StatusOK),
			c.call("GET", "/worldbook/list", nil, http.StatusOK),
			c.call("GET", "/worldbook/entry/list?worldbookId="+wb, nil, http.StatusOK),
			c.call("GET", "/trial-cards", nil, http.StatusOK),
		}
	}
	before := snapshot(c)
	imgBefore := c.send("GET", "/images/"+img, nil, nil)

	info, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("data file mode %v", info.Mode().Perm())
	}
	if data, _ := os.ReadFile(file); bytes.Contains(data, []byte("tok-1")) || bytes.Contains(data, []byte(`"bob"`)) {
		t.Error("data file holds a token")
	}

	svc2 := newService(t, opts)
	c2 := inProcess(t, svc2)
	if after := snapshot(c2); !reflect.DeepEqual(after, before) {
		t.Fatalf("state changed across New:\n%v\n%v", before, after)
	}
	if r := c2.send("GET", "/images/"+img, nil, nil); r.status != http.StatusOK || !bytes.Equal(r.raw, imgBefore.raw) {
		t.Fatalf("image after reload: %d", r.status)
	}
	if g := c2.call("GET", "/trial-cards/t1", nil, http.StatusOK); !reflect.DeepEqual(g["sections"], trial["sections"]) {
		t.Fatalf("trial after reload %v", g)
	}
	// The idempotency key survives: a replay returns the same card.
	if got := c2.call("POST", "/role", map[string]any{"roleName": "Mira", "idempotencyKey": "k"}, http.StatusOK); got["roleId"] != roleID {
		t.Fatalf("replay %v", got)
	}
	// Tokens are not persisted; the demo user follows the configured token.
	c2.as("bob").fail("GET", "/me", nil, http.StatusUnauthorized, "unauthorized")
	svc3 := newService(t, sandbox.Options{DataFile: file, Clock: clock.Now, DemoToken: "tok-2"})
	c3 := inProcess(t, svc3)
	c3.call("GET", "/role/detail?roleId="+roleID, nil, http.StatusOK)
	// Users persist (without tokens): bob's card is still his, unreachable until a token maps to him again.
	if newBob := svc3.AddUser("bob", "Bob"); newBob == bobID || newBob == "" {
		t.Fatalf("AddUser after reload returned %q", newBob)
	}
}

func TestPersistenceErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"garbage":     "{not json",
		"wrong shape": `{"version":1,"cards":[]}`,
		"unknown key": `{"version":1,"extra":true}`,
		"version":     `{"version":99}`,
		"nil card":    `{"version":1,"cards":{"r_1":null}}`,
	} {
		file := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".json")
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := sandbox.New(sandbox.Options{DataFile: file})
		if err == nil || !strings.Contains(err.Error(), "corrupt") {
			t.Errorf("%s: New error %v", name, err)
		}
		if data, _ := os.ReadFile(file); string(data) != content {
			t.Errorf("%s: the corrupt file was rewritten", name)
		}
	}
	// An empty file is an empty state; a missing directory is an error at New.
	empty := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.New(sandbox.Options{DataFile: empty}); err != nil {
		t.Errorf("empty file: %v", err)
	}
	if _, err := sandbox.New(sandbox.Options{DataFile: filepath.Join(dir, "no", "such", "dir.json")}); err == nil {
		t.Error("New with an unwritable data file succeeded")
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	for _, persist := range []bool{false, true} {
		t.Run(fmt.Sprint("persist=", persist), func(t *testing.T) {
			t.Parallel()
			opts := sandbox.Options{}
			if persist {
				opts.DataFile = filepath.Join(t.TempDir(), "state.json")
			}
			svc := newService(t, opts)
			base := overHTTP(t, svc)
			const workers = 12
			var wg sync.WaitGroup
			for i := range workers {
				wg.Go(func() {
					defer func() {
						if v := recover(); v != nil && v != errAbort {
							panic(v)
						}
					}()
					token := fmt.Sprint("user-", i%3)
					svc.AddUser(token, token)
					c := base.as(token)
					c.t = &syncT{TB: t}
					id := c.newCard(fmt.Sprint("Card ", i))
					c.call("PATCH", "/role/"+id+"/welcome", map[string]any{"roleWelcome": "Hi"}, http.StatusOK)
					wb := c.newWorldbook(fmt.Sprint("WB ", i), "")
					c.call("POST", "/worldbook/"+wb+"/document", map[string]any{"entries": trialEntries(3),
						"binding": map[string]any{"roleId": id}}, http.StatusBadRequest) // trial entries lack op
					c.call("POST", "/worldbook/"+wb+"/document", map[string]any{"binding": map[string]any{"roleId": id}}, http.StatusOK)
					r := c.send("PUT", fmt.Sprint("/open/v1/trial-cards/k", i), map[string]any{"card": map[string]any{"roleName": "T"}}, nil)
					if r.status != http.StatusCreated && r.status != http.StatusConflict {
						t.Errorf("trial: %d %s", r.status, r.raw)
					}
					c.call("GET", "/trial-cards", nil, http.StatusOK)
					c.call("GET", "/worldbook/list", nil, http.StatusOK)
				})
			}
			wg.Wait()
			total := 0
			for u := range 3 {
				c := base.as(fmt.Sprint("user-", u))
				total += len(c.call("GET", "/worldbook/list", nil, http.StatusOK)["list"].([]any))
				if n := len(c.call("GET", "/trial-cards", nil, http.StatusOK)["list"].([]any)); n != 4 {
					t.Errorf("user-%d has %d trials, want 4", u, n)
				}
			}
			if total != workers {
				t.Errorf("%d worldbooks, want %d", total, workers)
			}
		})
	}
}

// syncT lets goroutines report failures without calling FailNow off the test goroutine.
type syncT struct {
	testing.TB
}

func (s *syncT) Fatalf(format string, args ...any) { s.Errorf(format, args...); panic(errAbort) }
func (s *syncT) Helper()                           {}

var errAbort = fmt.Errorf("abort")

func TestRoundTripper(t *testing.T) {
	t.Parallel()
	svc := newService(t, sandbox.Options{})
	hc := &http.Client{Transport: svc.RoundTripper()}
	for _, host := range []string{"http://anything.example", "https://api.example.com:8443"} {
		req, _ := http.NewRequest("GET", host+"/open/v1/me", nil)
		req.Header.Set("Authorization", "Bearer "+svc.DemoToken())
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d", host, res.StatusCode)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://x/open/v1/me", nil)
	if _, err := hc.Do(req); err == nil {
		t.Fatal("a cancelled request succeeded")
	}
}

func TestLogsHoldNoSecrets(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	svc := newService(t, sandbox.Options{Logger: logger, DemoToken: "secret-token-value"})
	c := inProcess(t, svc)
	id := c.newCard("SecretCardName")
	c.call("PATCH", "/role/"+id+"/welcome", map[string]any{"roleWelcome": "secret welcome text"}, http.StatusOK)
	c.as("wrong-secret-token").fail("GET", "/me", nil, http.StatusUnauthorized, "unauthorized")
	mu.Lock()
	defer mu.Unlock()
	out := logs.String()
	for _, secret := range []string{"secret-token-value", "wrong-secret-token", "SecretCardName", "secret welcome text", "Bearer"} {
		if strings.Contains(out, secret) {
			t.Errorf("log holds %q:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, "op=setOpeningLines") {
		t.Errorf("no request log line:\n%s", out)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
