package main

// End-to-end tests of the stdio sign-in: the built binary's login, whoami, logout and stdio
// commands against the sandbox's OAuth server, with a scripted browser in the place of the
// person.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cardwriter/cardwriter-mcp/auth"
	"github.com/cardwriter/cardwriter-mcp/auth/authtest"
	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
)

// oauthSandbox is the sandbox (API and OAuth server) on a loopback port, with a settable clock.
type oauthSandbox struct {
	URL        string
	clock      *authtest.Clock
	tokenCalls atomic.Int64
	logs       authtest.LogBuffer
}

func startOAuthSandbox(t *testing.T) *oauthSandbox {
	t.Helper()
	s := &oauthSandbox{clock: authtest.NewClock(time.Now())}
	s.URL = authtest.Serve(t, func(url string) http.Handler {
		svc, err := sandbox.New(sandbox.Options{BaseURL: url, Clock: s.clock.Now, CheckResponses: true,
			Logger: slog.New(slog.NewJSONHandler(&s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err != nil {
			t.Fatal(err)
		}
		h := svc.Handler()
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/oauth/token" {
				s.tokenCalls.Add(1)
				time.Sleep(100 * time.Millisecond) // so that concurrent refreshes overlap
			}
			h.ServeHTTP(w, r)
		})
	})
	return s
}

// secrets collects the secrets a test saw, to look for them in every output.
type secrets struct{ authtest.Secrets }

// addStore adds every token in the store.
func (s *secrets) addStore(t *testing.T, dir string) {
	t.Helper()
	store, _ := auth.NewStore(dir)
	d, err := store.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range d.Grants {
		s.Add(g.AccessToken.Reveal(), g.RefreshToken.Reveal())
	}
}

// check fails when out holds a known secret; in log lines (JSON objects), anything
// token-shaped fails too.
func (s *secrets) check(t *testing.T, what, out string) {
	t.Helper()
	s.CheckKnown(t, what, out)
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		if m := authtest.TokenShaped.FindString(line); m != "" {
			t.Errorf("%s: a log line holds a token-shaped string %.8s…: %.200s", what, m, line)
		}
	}
}

// grant reads the saved grant for apiHost.
func grant(t *testing.T, dir, apiHost string) auth.Grant {
	t.Helper()
	store, _ := auth.NewStore(dir)
	d, err := store.Load()
	if err != nil {
		t.Fatal(err)
	}
	g := d.Latest(apiHost + "/open/v1")
	if g == nil {
		t.Fatal("no saved grant")
	}
	return *g
}

var authorizeLine = regexp.MustCompile(`^\s+(http://\S+/oauth/authorize\?\S+)$`)

// loginWithBinary runs `cardwriter-mcp login` and plays the browser with the address it
// prints. It returns stdout and stderr.
func loginWithBinary(t *testing.T, sb *oauthSandbox, dir string, sec *secrets, extra ...string) (string, string) {
	t.Helper()
	browserDone := make(chan error, 1)
	stdin, wait := startLogin(t, sb, dir, func(line string) bool {
		m := authorizeLine.FindStringSubmatch(line)
		if m == nil {
			return false
		}
		go func() { browserDone <- playBrowser(m[1], sec) }()
		return true
	}, append([]string{"--no-browser", "--log-level", "debug", "--log-format", "json"}, extra...)...)
	stdin.Close() // nothing is pasted: the browser reaches the loopback address
	stdout, stderr, err := wait()
	if err != nil {
		t.Fatalf("login: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	select {
	case err := <-browserDone:
		if err != nil {
			t.Fatalf("browser: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the browser never finished; stderr:\n%s", stderr)
	}
	return stdout, stderr
}

// playBrowser signs in as the demo user, allows access, and delivers the answer to the
// loopback address (learning the code on the way, to look for it in the outputs).
func playBrowser(authURL string, sec *secrets) error {
	b := authtest.New()
	b.StopAtCallback = true
	p, err := b.SignIn(authURL, "Sign in as Demo Author", "Allow")
	if err != nil {
		return err
	}
	loc, err := p.Location()
	if err != nil {
		return err
	}
	sec.Add(loc.Query().Get("code"))
	resp, err := http.Get(loc.String())
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "You can close this tab") {
		return &pageError{resp.StatusCode, string(body)}
	}
	return nil
}

type pageError struct {
	status int
	body   string
}

func (e *pageError) Error() string {
	return "callback page: " + http.StatusText(e.status) + ": " + e.body
}

// runBinary runs the binary with CARDWRITER_CONFIG_DIR=dir and returns its outputs.
func runBinary(t *testing.T, dir string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = cleanEnv("CARDWRITER_CONFIG_DIR=" + dir)
	cmd.Stdin = strings.NewReader("")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// toolText calls a tool and returns its text and whether it is an error.
func toolText(ctx context.Context, t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	return text(res) + " " + string(raw), res.IsError
}

// TestStdioLoginEndToEnd: login in the browser, then an MCP session over stdio with the saved
// grant: tool calls work, the access token expires and is refreshed, and a revoked grant
// becomes the tool error that says to run login.
func TestStdioLoginEndToEnd(t *testing.T) {
	t.Parallel()
	sb := startOAuthSandbox(t)
	dir := filepath.Join(t.TempDir(), "config")
	sec := &secrets{}

	stdout, stderr := loginWithBinary(t, sb, dir, sec)
	if !strings.Contains(stdout, "Signed in to "+sb.URL) || !strings.Contains(stdout, "User: Demo Author (u_demo)") {
		t.Errorf("login stdout:\n%s", stdout)
	}
	if !strings.Contains(stderr, "open this address in your browser") {
		t.Errorf("login did not print the address:\n%s", stderr)
	}
	sec.addStore(t, dir)
	if runtime.GOOS != "windows" {
		for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "grants.json"): 0o600} {
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
				t.Errorf("%s: mode %v, %v; want %o", path, fi.Mode().Perm(), err, want)
			}
		}
	}
	first := grant(t, dir, sb.URL)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.Command(binPath, "stdio", "--api-host", sb.URL, "--log-level", "debug", "--log-format", "json")
	cmd.Env = cleanEnv("CARDWRITER_CONFIG_DIR=" + dir)
	var stdioErr authtest.LogBuffer
	cmd.Stderr = &stdioErr
	cs, err := newClient().Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stdioErr.String())
	}
	defer cs.Close()

	if out, isErr := toolText(ctx, t, cs, "whoami", map[string]any{}); isErr || !strings.Contains(out, "u_demo") {
		t.Fatalf("whoami: %s", out)
	}
	out, isErr := toolText(ctx, t, cs, "create_card", map[string]any{"roleName": "Mira"})
	if isErr {
		t.Fatalf("create_card: %s", out)
	}
	roleID := regexp.MustCompile(`"roleId":"([^"]+)"`).FindStringSubmatch(out)
	if roleID == nil {
		t.Fatalf("create_card: no roleId in %s", out)
	}

	// The server's clock passes the access token's expiry: the next call is refused, the
	// server refreshes once and retries, and the rotated refresh token is saved.
	sb.clock.Advance(2 * time.Hour)
	if out, isErr := toolText(ctx, t, cs, "get_card", map[string]any{"roleId": roleID[1]}); isErr {
		t.Fatalf("get_card after the access token expired: %s", out)
	}
	refreshed := grant(t, dir, sb.URL)
	sec.Add(refreshed.AccessToken.Reveal(), refreshed.RefreshToken.Reveal())
	if refreshed.AccessToken == first.AccessToken || refreshed.RefreshToken == first.RefreshToken || refreshed.RefreshedAt.IsZero() {
		t.Error("the refreshed tokens were not saved")
	}
	if out, isErr := toolText(ctx, t, cs, "whoami", map[string]any{}); isErr {
		t.Fatalf("whoami after the refresh: %s", out)
	}

	// Revoked: every token of the grant is refused and the refresh too.
	resp, err := http.PostForm(sb.URL+"/oauth/revoke", url.Values{"token": {refreshed.RefreshToken.Reveal()}, "client_id": {refreshed.ClientID}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	out, isErr = toolText(ctx, t, cs, "whoami", map[string]any{})
	if !isErr || !strings.Contains(out, "run `cardwriter-mcp login --api-host "+sb.URL+"`") || !strings.Contains(out, `"error":"unauthorized"`) {
		t.Errorf("whoami with a revoked grant: isError %v, %s", isErr, out)
	}
	_ = cs.Close()

	sec.check(t, "login stdout", stdout)
	sec.check(t, "login stderr", stderr)
	sec.check(t, "stdio stderr", stdioErr.String())
	sec.check(t, "sandbox log", sb.logs.String())
	if !strings.Contains(stdioErr.String(), "retrying with a refreshed one") {
		t.Errorf("the refresh after the 401 was not logged:\n%s", stdioErr.String())
	}
}

// TestWhoamiConcurrentRefresh: two processes refreshing the same expired grant at once both
// succeed, refresh once, and leave a grant that still works.
func TestWhoamiConcurrentRefresh(t *testing.T) {
	t.Parallel()
	sb := startOAuthSandbox(t)
	dir := t.TempDir()
	sec := &secrets{}
	loginWithBinary(t, sb, dir, sec)
	sec.addStore(t, dir)
	expireSaved := func() {
		store, _ := auth.NewStore(dir)
		err := store.Update(context.Background(), func(d *auth.Data) error {
			d.Latest(sb.URL + "/open/v1").Expiry = time.Now().Add(-time.Minute)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	expireSaved()
	before := sb.tokenCalls.Load()
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i := range outs {
		wg.Go(func() {
			o, e, err := runBinary(t, dir, "whoami", "--api-host", sb.URL, "--log-level", "debug", "--log-format", "json")
			outs[i] = o + e
			if err != nil || !strings.Contains(o, "User:          Demo Author (u_demo)") || !strings.Contains(o, "Access token:  expires") {
				t.Errorf("whoami %d: %v\n%s%s", i, err, o, e)
			}
		})
	}
	wg.Wait()
	if n := sb.tokenCalls.Load() - before; n != 1 {
		t.Errorf("%d token requests from two processes, want 1", n)
	}
	sec.addStore(t, dir)

	// The grant still works: expire it again and refresh it once more.
	expireSaved()
	o, e, err := runBinary(t, dir, "whoami") // the only saved sign-in: no --api-host needed
	if err != nil || !strings.Contains(o, "Demo Author") {
		t.Fatalf("whoami after the concurrent refresh: %v\n%s%s", err, o, e)
	}
	sec.addStore(t, dir)
	for i, out := range append(outs, o+e) {
		sec.check(t, "whoami output "+string(rune('0'+i)), out)
	}
}

// TestLogout: logout revokes the grant at the server and deletes it; whoami and stdio then
// say to run login.
func TestLogout(t *testing.T) {
	t.Parallel()
	sb := startOAuthSandbox(t)
	dir := t.TempDir()
	sec := &secrets{}
	loginWithBinary(t, sb, dir, sec)
	sec.addStore(t, dir)
	g := grant(t, dir, sb.URL)

	o, e, err := runBinary(t, dir, "logout", "--api-host", sb.URL)
	if err != nil || !strings.Contains(o, "revoked and deleted") {
		t.Fatalf("logout: %v\n%s%s", err, o, e)
	}
	sec.check(t, "logout output", o+e)
	store, _ := auth.NewStore(dir)
	d, _ := store.Load()
	if len(d.Grants) != 0 || len(d.Clients) != 1 {
		t.Errorf("after logout: %d grants, %d clients; want 0 and the registration kept", len(d.Grants), len(d.Clients))
	}
	// The server no longer knows the refresh token.
	resp, err := http.PostForm(sb.URL+"/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {g.RefreshToken.Reveal()}, "client_id": {g.ClientID}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "invalid_grant") {
		t.Errorf("refresh after logout: %d %s", resp.StatusCode, body)
	}

	if o, e, err := runBinary(t, dir, "whoami", "--api-host", sb.URL); err == nil || !strings.Contains(o+e, "cardwriter-mcp login --api-host "+sb.URL) {
		t.Errorf("whoami after logout: %v\n%s%s", err, o, e)
	}
	// stdio still starts (see TestStdioStartsSignedOut), saying how to sign in.
	if o, e, err := runBinary(t, dir, "stdio", "--api-host", sb.URL); err != nil || !strings.Contains(o+e, "run `cardwriter-mcp login --api-host "+sb.URL+"`") {
		t.Errorf("stdio after logout: %v\n%s%s", err, o, e)
	}
	if o, _, err := runBinary(t, dir, "logout", "--api-host", sb.URL); err != nil || !strings.Contains(o, "nothing to do") {
		t.Errorf("second logout: %v\n%s", err, o)
	}

	// A second sign-in reuses the kept registration.
	loginWithBinary(t, sb, dir, sec)
	if g2 := grant(t, dir, sb.URL); g2.ClientID != g.ClientID {
		t.Errorf("the second sign-in registered another client: %s, then %s", g.ClientID, g2.ClientID)
	}
	sec.addStore(t, dir)
}

// TestLogoutRevocationFails: when the server cannot be reached, logout still deletes the
// grant and says that revocation failed.
func TestLogoutRevocationFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store, _ := auth.NewStore(dir)
	err := store.Update(context.Background(), func(d *auth.Data) error {
		d.PutGrant(auth.Grant{Issuer: "http://127.0.0.1:1", Resource: "http://127.0.0.1:1/open/v1", ClientID: "c1",
			TokenEndpoint: "http://127.0.0.1:1/oauth/token", RevocationEndpoint: "http://127.0.0.1:1/oauth/revoke",
			TokenType: "Bearer", AccessToken: "at-0123456789", RefreshToken: "rt-0123456789", ObtainedAt: time.Now()})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	o, e, err := runBinary(t, dir, "logout")
	if err != nil || !strings.Contains(e, "could not revoke") || !strings.Contains(o, "deleted") {
		t.Errorf("logout: %v\n%s%s", err, o, e)
	}
	if strings.Contains(o+e, "0123456789") {
		t.Errorf("logout printed a token:\n%s%s", o, e)
	}
	if d, _ := store.Load(); len(d.Grants) != 0 {
		t.Error("the grant was kept")
	}
}

func TestAccountCommandLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name    string
		args    []string
		wantErr bool
		out     string
	}{
		{"login help", []string{"login", "--help"}, false, "CARDWRITER_NO_BROWSER"},
		{"login help timeout", []string{"login", "--help"}, false, "CARDWRITER_TIMEOUT"},
		{"login help config dir", []string{"login", "--help"}, false, "CARDWRITER_CONFIG_DIR"},
		{"whoami help", []string{"whoami", "--help"}, false, "CARDWRITER_API_HOST"},
		{"logout help", []string{"logout", "--help"}, false, "CARDWRITER_CONFIG_DIR"},
		{"usage lists login", []string{"--help"}, false, "login"},
		{"login without api host", []string{"login"}, true, "--api-host"},
		{"login bad api host", []string{"login", "--api-host", "ftp://x"}, true, "http"},
		{"login bad timeout", []string{"login", "--api-host", "http://127.0.0.1:1", "--timeout", "0s"}, true, "--timeout"},
		{"login unreachable", []string{"login", "--api-host", "http://127.0.0.1:1", "--no-browser"}, true, "cannot reach the card service at http://127.0.0.1:1"},
		{"whoami not signed in", []string{"whoami"}, true, "cardwriter-mcp login"},
		{"logout not signed in", []string{"logout"}, true, "cardwriter-mcp login"},
		{"stdio not signed in", []string{"stdio", "--api-host", "https://api.example.com"}, false, "run `cardwriter-mcp login --api-host https://api.example.com`"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o, e, err := runBinary(t, dir, tc.args...)
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, wantErr %v\n%s%s", err, tc.wantErr, o, e)
			}
			if !strings.Contains(o+e, tc.out) {
				t.Errorf("output lacks %q:\n%s%s", tc.out, o, e)
			}
		})
	}
}

// TestStdioTokenFromEnvironmentFirst: CARDWRITER_TOKEN wins over a saved sign-in, and when the
// service refuses it, every tool and command names the variable, the service that refused it
// and the saved sign-in it hides (not "sign in again", which cannot help while it is set);
// whoami tests the variable rather than report the saved sign-in as fine.
func TestStdioTokenFromEnvironmentFirst(t *testing.T) {
	t.Parallel()
	sb := startOAuthSandbox(t)
	dir := t.TempDir()
	sec := &secrets{}
	loginWithBinary(t, sb, dir, sec)
	saved := grant(t, dir, sb.URL).ObtainedAt.Local().Format("2006-01-02 15:04")
	want := "The token in CARDWRITER_TOKEN was refused by " + sb.URL + "; unset it to use the saved sign-in of " + saved
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := cleanEnv("CARDWRITER_CONFIG_DIR="+dir, "CARDWRITER_TOKEN=not-a-valid-token")
	cmd := exec.Command(binPath, "stdio", "--api-host", sb.URL)
	cmd.Env = env
	cs, err := newClient().Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"whoami", map[string]any{}},
		{"get_card", map[string]any{"roleId": "1"}},
		{"list_worldbooks", map[string]any{}},
		{"list_trial_cards", map[string]any{}},
		{"create_card", map[string]any{"roleName": "A"}},
	} {
		if out, isErr := toolText(ctx, t, cs, call.tool, call.args); !isErr || !strings.Contains(out, want) || strings.Contains(out, "Authentication failed") {
			t.Errorf("%s with a bad CARDWRITER_TOKEN beside a good sign-in: %s", call.tool, out)
		}
	}
	card := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(card, []byte(`{"name":"A","first_mes":"b"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	lorebook := filepath.Join(t.TempDir(), "w.json")
	if err := os.WriteFile(lorebook, []byte(`{"entries":{"0":{"uid":0,"key":["a"],"content":"b"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for _, args := range [][]string{
		{"whoami"},
		{"import", card},
		{"import-worldbook", lorebook},
		{"export", "1", "-o", filepath.Join(out, "x.json")},
		{"export-worldbook", "1", "-o", filepath.Join(out, "w.json")},
		{"probe"},
		{"doctor"},
	} {
		o, e, err := runCLI(t, env, append(args, "--api-host", sb.URL)...)
		if err == nil || !strings.Contains(o+e, want) {
			t.Errorf("%s with a bad CARDWRITER_TOKEN: err %v\n%s%s", args[0], err, o, e)
		}
	}
	// whoami with a good token in the variable reports the variable, and the sign-in it hides.
	tok := grant(t, dir, sb.URL).AccessToken.Reveal()
	o, e, err := runCLI(t, cleanEnv("CARDWRITER_CONFIG_DIR="+dir, "CARDWRITER_TOKEN="+tok), "whoami", "--api-host", sb.URL)
	if err != nil || !strings.Contains(o, "Token:         CARDWRITER_TOKEN") || !strings.Contains(o, "Saved sign-in: of "+saved) {
		t.Errorf("whoami with a good CARDWRITER_TOKEN: %v\n%s%s", err, o, e)
	}
}

// startLogin runs `cardwriter-mcp login` with extra flags and hands each stderr line to see
// until it returns true; it returns the command's stdin, and a wait for its end.
func startLogin(t *testing.T, sb *oauthSandbox, dir string, see func(line string) bool, extra ...string) (io.WriteCloser, func() (string, string, error)) {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"login", "--api-host", sb.URL, "--timeout", "60s"}, extra...)...)
	cmd.Env = cleanEnv("CARDWRITER_CONFIG_DIR="+dir, "BROWSER=false", "DISPLAY=")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var stderr authtest.LogBuffer
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		done := false
		for sc.Scan() {
			stderr.Write([]byte(sc.Text() + "\n"))
			if !done {
				done = see(sc.Text())
			}
		}
	}()
	return stdin, func() (string, string, error) {
		err := cmd.Wait()
		pw.Close()
		<-scanned
		return stdout.String(), stderr.String(), err
	}
}

// TestLoginPastedAddress: over SSH the browser runs on another machine and cannot reach the
// loopback redirect; `login --no-browser` takes the address the browser ended on, pasted into
// the terminal (a stranger's address is refused and the wait goes on), and nothing ever
// requests the loopback address.
func TestLoginPastedAddress(t *testing.T) {
	t.Parallel()
	sb := startOAuthSandbox(t)
	dir := t.TempDir()
	pasted := make(chan *url.URL, 1)
	var stdin io.WriteCloser
	stdin, wait := startLogin(t, sb, dir, func(line string) bool {
		m := authorizeLine.FindStringSubmatch(line)
		if m == nil {
			return false
		}
		go func() {
			b := authtest.New()
			b.StopAtCallback = true // the browser's machine cannot reach the loopback address
			p, err := b.SignIn(m[1], "Sign in as Demo Author", "Allow")
			if err != nil {
				t.Error(err)
				close(pasted)
				return
			}
			loc, err := p.Location()
			if err != nil {
				t.Error(err)
			}
			pasted <- loc
		}()
		return true
	}, "--no-browser")
	loc, ok := <-pasted
	if !ok || loc == nil {
		stdin.Close()
		wait()
		t.Fatal("the browser did not finish")
	}
	forged := *loc
	q := forged.Query()
	q.Set("state", "not-this-sign-in")
	forged.RawQuery = q.Encode()
	fmt.Fprintf(stdin, "%s\n%s\n", forged.String(), loc.String())
	o, e, err := wait()
	stdin.Close()
	if err != nil || !strings.Contains(o, "Signed in to "+sb.URL) || !strings.Contains(e, "paste it here") || !strings.Contains(e, "Unknown sign-in") {
		t.Fatalf("login: %v\nstdout:\n%s\nstderr:\n%s", err, o, e)
	}
	if o, e, err := runBinary(t, dir, "whoami"); err != nil || !strings.Contains(o, "User:") {
		t.Errorf("whoami after the pasted sign-in: %v\n%s%s", err, o, e)
	}
}

var (
	deviceAddressLine = regexp.MustCompile(`^\s+(http://\S+/oauth/device)$`)
	deviceCodeLine    = regexp.MustCompile(`^\s+([A-Z]{4}-[A-Z]{4})$`)
)

// TestLoginDevice: `login --device` signs in with the device grant: the person types the code
// on a page opened anywhere (here, a scripted browser that knows only the address and the code
// the terminal printed), and login, which listens on no port, saves the sign-in.
func TestLoginDevice(t *testing.T) {
	t.Parallel()
	sb := startOAuthSandbox(t)
	dir := t.TempDir()
	var address string
	browsed := make(chan error, 1)
	stdin, wait := startLogin(t, sb, dir, func(line string) bool {
		if m := deviceAddressLine.FindStringSubmatch(line); m != nil {
			address = m[1]
			return false
		}
		m := deviceCodeLine.FindStringSubmatch(line)
		if m == nil || address == "" {
			return false
		}
		go func() { browsed <- typeDeviceCode(address, strings.ToLower(m[1])) }()
		return true
	}, "--device")
	defer stdin.Close()
	o, e, err := wait()
	if err != nil || !strings.Contains(o, "Signed in to "+sb.URL) || !strings.Contains(o, "User: Demo Author") {
		t.Fatalf("login --device: %v\nstdout:\n%s\nstderr:\n%s", err, o, e)
	}
	if err := <-browsed; err != nil {
		t.Fatal(err)
	}
	if g := grant(t, dir, sb.URL); g.RefreshToken == "" {
		t.Error("the device sign-in saved no refresh token")
	}
}

// typeDeviceCode opens the device page, types the code, signs in as the demo user and allows.
func typeDeviceCode(address, code string) error {
	b := authtest.New()
	p, err := b.Get(address)
	if err != nil {
		return err
	}
	p.Body = strings.Replace(p.Body, `name="user_code" value=""`, `name="user_code" value="`+code+`"`, 1)
	for _, button := range []string{"Continue", "Sign in as Demo Author", "Allow"} {
		if p, err = b.Submit(p, button); err != nil {
			return err
		}
		if p.Status != http.StatusOK {
			return fmt.Errorf("after %q: %d %q", button, p.Status, p.Title())
		}
	}
	if p.Title() != "Signed in" {
		return fmt.Errorf("the last page is %q", p.Title())
	}
	return nil
}
