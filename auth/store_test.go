package auth_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/auth"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

func sampleGrant(issuer, client string, obtained time.Time) auth.Grant {
	return auth.Grant{
		Issuer: issuer, Resource: issuer + "/open/v1", ClientID: client,
		TokenEndpoint: issuer + "/oauth/token", TokenType: "Bearer",
		AccessToken: upstream.Token("at-" + client), RefreshToken: upstream.Token("rt-" + client),
		Expiry: obtained.Add(time.Hour), ObtainedAt: obtained,
	}
}

func perm(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestStorePermissionsAndAtomicWrite(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("POSIX permissions")
	}
	store := newStore(t)
	if _, err := os.Stat(store.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("NewStore created the directory: %v", err)
	}
	d, err := store.Load()
	if err != nil || len(d.Grants) != 0 {
		t.Fatalf("Load of a store never written = %+v, %v", d, err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	g := sampleGrant("https://a.example", "c1", now)
	if err := store.Update(context.Background(), func(d *auth.Data) error { d.PutGrant(g); return nil }); err != nil {
		t.Fatal(err)
	}
	if p := perm(t, store.Dir()); p != 0o700 {
		t.Errorf("directory mode %o, want 700", p)
	}
	if p := perm(t, store.Path()); p != 0o600 {
		t.Errorf("file mode %o, want 600", p)
	}
	entries, _ := os.ReadDir(store.Dir())
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
	d, err = store.Load()
	if err != nil {
		t.Fatal(err)
	}
	got := d.Grant(g.Key())
	if got == nil || got.AccessToken != g.AccessToken || got.RefreshToken != g.RefreshToken || !got.Expiry.Equal(g.Expiry) {
		t.Fatalf("grant read back = %+v", got)
	}

	// Loosened permissions are tightened again.
	if err := os.Chmod(store.Dir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(store.Path(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Load(); err != nil {
		t.Fatal(err)
	}
	if p := perm(t, store.Path()); p != 0o600 {
		t.Errorf("file mode after Load %o, want 600", p)
	}
	if err := store.Update(context.Background(), func(*auth.Data) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if p := perm(t, store.Dir()); p != 0o700 {
		t.Errorf("directory mode after Update %o, want 700", p)
	}

	// A failed update writes nothing.
	before, _ := os.ReadFile(store.Path())
	boom := errors.New("boom")
	if err := store.Update(context.Background(), func(d *auth.Data) error { d.Grants = nil; return boom }); !errors.Is(err, boom) {
		t.Fatalf("Update = %v", err)
	}
	after, _ := os.ReadFile(store.Path())
	if string(before) != string(after) {
		t.Error("a failed Update changed the file")
	}
}

// TestStoreReplacesAtomically checks that a reader never sees a partial file while writers
// replace it.
func TestStoreReplacesAtomically(t *testing.T) {
	t.Parallel()
	store := newStore(t)
	ctx := context.Background()
	now := time.Now()
	stop := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			err := store.Update(ctx, func(d *auth.Data) error {
				g := sampleGrant("https://a.example", "c1", now)
				g.AccessToken = upstream.Token(strings.Repeat("x", i%5000))
				d.PutGrant(g)
				return nil
			})
			if err != nil {
				errs <- err
				return
			}
		}
	}()
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if _, err := store.Load(); err != nil {
			t.Fatalf("Load while writing: %v", err)
		}
	}
	close(stop)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

func TestStoreKeyedGrants(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	d := &auth.Data{}
	a := sampleGrant("https://a.example", "c1", now.Add(-time.Hour))
	b := sampleGrant("https://a.example", "c2", now) // same issuer and resource, another client
	c := sampleGrant("https://b.example", "c1", now) // another issuer
	for _, g := range []auth.Grant{a, b, c} {
		d.PutGrant(g)
	}
	if len(d.Grants) != 3 {
		t.Fatalf("%d grants, want 3", len(d.Grants))
	}
	if got := d.Latest("https://a.example/open/v1"); got == nil || got.ClientID != "c2" {
		t.Errorf("Latest = %+v, want the later sign-in (c2)", got)
	}
	a2 := a
	a2.AccessToken = "replaced"
	d.PutGrant(a2)
	if len(d.Grants) != 3 || d.Grant(a.Key()).AccessToken != "replaced" {
		t.Error("PutGrant with the same key did not replace the grant")
	}
	if d.Grant(auth.GrantKey{Issuer: "https://a.example", Resource: "https://a.example/open/v1", ClientID: "c9"}) != nil {
		t.Error("Grant found a grant of an unknown client")
	}
	gone := d.DeleteGrants("https://a.example/open/v1")
	if len(gone) != 2 || len(d.Grants) != 1 || d.Grants[0].Issuer != "https://b.example" {
		t.Errorf("DeleteGrants removed %d, left %+v", len(gone), d.Grants)
	}
	d.PutClient(auth.Registration{Issuer: "https://a.example", ClientID: "c1"})
	d.PutClient(auth.Registration{Issuer: "https://a.example", ClientID: "c3"})
	if len(d.Clients) != 1 || d.Client("https://a.example").ClientID != "c3" {
		t.Errorf("clients = %+v, want one per issuer", d.Clients)
	}
	d.DeleteClient("https://a.example")
	if d.Client("https://a.example") != nil {
		t.Error("DeleteClient kept the client")
	}
}

func TestStoreCorrupt(t *testing.T) {
	t.Parallel()
	const secretish = "at-SECRET-in-a-broken-file"
	tests := []struct{ name, content, want string }{
		{"not JSON", `{"version":1,"grants":[{"access_token":"` + secretish + `"`, "damaged"},
		{"garbage", "\x00\x01garbage " + secretish, "not valid JSON"},
		{"wrong shape", `["` + secretish + `"]`, "damaged"},
		{"wrong field type", `{"version":1,"grants":{"access_token":"` + secretish + `"}}`, `"grants"`},
		{"no version", `{"grants":[]}`, "no version"},
		{"trailing data", `{"version":1} {"version":1}`, "trailing"},
		{"newer", `{"version":99}`, "newer cardwriter-mcp"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := newStore(t)
			if err := os.MkdirAll(store.Dir(), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(store.Path(), []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := store.Load()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), store.Path()) {
				t.Fatalf("Load = %v, want an error naming the file and %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secretish) {
				t.Errorf("the error quotes the file: %v", err)
			}
			// Update refuses to overwrite what it cannot read.
			if err := store.Update(context.Background(), func(*auth.Data) error { return nil }); err == nil {
				t.Error("Update over a damaged store succeeded")
			}
			if _, err := auth.NewSource(store, "https://a.example", auth.SourceOptions{}); err == nil {
				t.Error("NewSource over a damaged store succeeded")
			}
		})
	}
}

func TestDirFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(auth.EnvConfigDir, dir)
	got, err := auth.Dir()
	if err != nil || got != dir {
		t.Errorf("Dir = %q, %v; want %q", got, err, dir)
	}
	s, err := auth.NewStore("")
	if err != nil || s.Path() != filepath.Join(dir, "grants.json") {
		t.Errorf("NewStore(\"\").Path = %q, %v", s.Path(), err)
	}
	t.Setenv(auth.EnvConfigDir, "")
	got, err = auth.Dir()
	if base, uerr := os.UserConfigDir(); uerr == nil && (err != nil || got != filepath.Join(base, "cardwriter-mcp")) {
		t.Errorf("default Dir = %q, %v", got, err)
	}
}

func TestGrantNeverPrintsTokens(t *testing.T) {
	t.Parallel()
	g := sampleGrant("https://a.example", "c1", time.Now())
	secrets := &secretSet{}
	secrets.addGrant(g)
	logger, _ := testLogger(t, secrets)
	logger.Info("grant", "grant", g, "ptr", &g)
	for _, s := range []string{fmtAll(g), fmtAll(&g)} {
		secrets.Check(t, "printed grant", s)
	}
}
