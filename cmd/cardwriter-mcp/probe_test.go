package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
)

// standIn serves a sandbox with some answers changed in ways the API document allows: what a
// real service may do that the sandbox never does.
func standIn(t *testing.T, change func(w http.ResponseWriter, r *http.Request, next http.Handler) bool) (string, string) {
	t.Helper()
	svc, err := sandbox.New(sandbox.Options{DemoToken: "probe-token"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if change == nil || !change(w, r, svc.Handler()) {
			svc.Handler().ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, "probe-token"
}

// rewrite serves r with next and edits the answer's body.
func rewrite(w http.ResponseWriter, r *http.Request, next http.Handler, status int, edit func([]byte) []byte) {
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, r)
	body := edit(rec.Body.Bytes())
	if status == 0 {
		status = rec.Code
	}
	if len(body) > 0 {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func runProbeBinary(t *testing.T, args []string, env ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"probe"}, args...)...)
	cmd.Env = cleanEnv(env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String()+errb.String(), "probe-token") {
		t.Error("the token was printed")
	}
	return out.String() + errb.String(), code
}

func TestProbeSandbox(t *testing.T) {
	t.Parallel()
	out, code := runProbeBinary(t, []string{"--sandbox", "--log-level", "error"})
	if code != 0 || !strings.Contains(out, "No differences") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	// The same through HTTP, against `cardwriter-mcp sandbox`'s API as a stand-in with no change.
	host, token := standIn(t, nil)
	out, code = runProbeBinary(t, []string{"--api-host", host, "--json", "--log-level", "error"}, "CARDWRITER_TOKEN="+token)
	var rep probeReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || rep.Differences != 0 || len(rep.Checks) != 7 {
		t.Errorf("exit %d, %v:\n%s", code, err, out)
	}
}

// TestProbeStandIn: each way the stand-in differs is named, and --contract corrects the method.
func TestProbeStandIn(t *testing.T) {
	t.Parallel()
	host, token := standIn(t, func(w http.ResponseWriter, r *http.Request, next http.Handler) bool {
		switch {
		case r.URL.Path == "/open/v1/me":
			rewrite(w, r, next, 0, func(b []byte) []byte {
				return bytes.Replace(b, []byte(`{`), []byte(`{"plan":"free",`), 1)
			})
		case r.URL.Path == "/open/v1/trial-cards" && r.Method == http.MethodGet:
			rewrite(w, r, next, 0, func(b []byte) []byte {
				var m map[string]any
				_ = json.Unmarshal(b, &m)
				delete(m, "ttlHours")
				out, _ := json.Marshal(m)
				return out
			})
		case strings.HasPrefix(r.URL.Path, "/open/v1/trial-cards/") && r.Method == http.MethodPut:
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		case strings.HasPrefix(r.URL.Path, "/open/v1/trial-cards/") && r.Method == http.MethodPost:
			r2 := r.Clone(r.Context())
			r2.Method = http.MethodPut
			body, _ := io.ReadAll(r.Body)
			r2.Body = io.NopCloser(bytes.NewReader(body))
			rewrite(w, r2, next, http.StatusOK, func(b []byte) []byte { return b })
		case strings.HasPrefix(r.URL.Path, "/open/v1/trial-cards/") && r.Method == http.MethodDelete:
			rewrite(w, r, next, http.StatusNoContent, func([]byte) []byte { return nil })
		default:
			return false
		}
		return true
	})
	out, code := runProbeBinary(t, []string{"--api-host", host, "--log-level", "error"}, "CARDWRITER_TOKEN="+token)
	for _, want := range []string{
		"field /plan is not in the contract",
		"at /: missing property 'ttlHours'",
		"the service does not take PUT /trial-cards/{clientKey}: it answered 405",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}

	// With the upsert corrected to POST, the write round trip runs: the 200 for a new trial and
	// the 204 of the delete are named; the trial is gone afterwards.
	fix := filepath.Join(t.TempDir(), "fix.json")
	if err := os.WriteFile(fix, []byte(readmeContractExample(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = runProbeBinary(t, []string{"--api-host", host, "--contract", fix, "--log-level", "error"}, "CARDWRITER_TOKEN="+token)
	for _, want := range []string{
		"corrected by " + fix,
		"upsertTrialCard        POST",
		"status 204 is not a documented success status of the contract (200)",
		"no body where the contract expects one; cardwriter-mcp takes this",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the corrected report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "does not take") || code != 1 {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestProbeSignInFailure(t *testing.T) {
	t.Parallel()
	host, _ := standIn(t, nil)
	out, code := runProbeBinary(t, []string{"--api-host", host, "--log-level", "error"}, "CARDWRITER_TOKEN=wrong")
	// The credential refused is named, with where it came from.
	if code != 2 || !strings.Contains(out, "refused the token in CARDWRITER_TOKEN") ||
		!strings.Contains(out, "The token in CARDWRITER_TOKEN was refused by "+host) || !strings.Contains(out, "cardwriter-mcp login --api-host "+host) {
		t.Errorf("exit %d:\n%s", code, out)
	}
	// The contract is not at fault when the token is refused.
	if strings.Contains(out, "--contract") {
		t.Errorf("a refused token is blamed on the contract:\n%s", out)
	}
}

// TestProbeUsesSavedSignIn: probe, like stdio, uses the sign-in saved by login when
// CARDWRITER_TOKEN is not set.
func TestProbeUsesSavedSignIn(t *testing.T) {
	t.Parallel()
	sb := startOAuthSandbox(t)
	dir := filepath.Join(t.TempDir(), "config")
	loginWithBinary(t, sb, dir, &secrets{})
	out, code := runProbeBinary(t, []string{"--api-host", sb.URL}, "CARDWRITER_CONFIG_DIR="+dir)
	if code != 0 || !strings.Contains(out, "No differences") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// readmeContractExample returns the override file the README shows (between its markers), so
// that the documented example is the one tested.
func readmeContractExample(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile("../../docs/contract.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	start := strings.Index(s, "<!-- contract-example:begin -->")
	end := strings.Index(s, "<!-- contract-example:end -->")
	if start < 0 || end < start {
		t.Fatal("docs/contract.md has no contract-example section")
	}
	block := s[start:end]
	i := strings.Index(block, "```json\n")
	j := strings.LastIndex(block, "```")
	if i < 0 || j <= i {
		t.Fatal("the contract example has no json block")
	}
	return block[i+len("```json\n") : j]
}

// TestIdentityOperationNamed: a card service whose identity operation is at /account, not the
// guessed /me: probe names the difference and the source of identity; --contract names the
// operation, and then probe finds it; writes over stdio never needed it (revisions are kept).
func TestIdentityOperationNamed(t *testing.T) {
	t.Parallel()
	host, token := standIn(t, func(w http.ResponseWriter, r *http.Request, next http.Handler) bool {
		switch r.URL.Path {
		case "/open/v1/me":
			http.NotFound(w, r)
			return true
		case "/open/v1/account":
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/open/v1/me"
			next.ServeHTTP(w, r2)
			return true
		}
		return false
	})
	out, _ := runProbeBinary(t, []string{"--api-host", host, "--log-level", "error"}, "CARDWRITER_TOKEN="+token)
	for _, want := range []string{"Identity: revisions and exports here are the local profile's", "getMe (GET /me, a guess) answers 404: missing here"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	fix := filepath.Join(t.TempDir(), "identity.json")
	contract := `{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{"/account":{"get":{"operationId":"getMe",
		"responses":{"200":{"description":"me","content":{"application/json":{"schema":{"$ref":"#/components/schemas/Me"}}}}}}}}}`
	if err := os.WriteFile(fix, []byte(contract), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ = runProbeBinary(t, []string{"--api-host", host, "--contract", fix, "--log-level", "error"}, "CARDWRITER_TOKEN="+token)
	if !strings.Contains(out, "getMe (GET /account, corrected by "+fix+") answers: it names the user") {
		t.Errorf("with the identity operation named:\n%s", out)
	}

	// Over stdio without the correction, against the service without /me, writes keep revisions.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs := connectStdio(ctx, t, []string{"CARDWRITER_TOKEN=" + token, "CARDWRITER_CONFIG_DIR=" + t.TempDir()}, "--api-host", host, "--log-level", "error")
	defer cs.Close()
	card := call(ctx, t, cs, "create_card", map[string]any{"roleName": "Nobody asked"}, false)
	res := call(ctx, t, cs, "set_opening_lines", map[string]any{"roleId": card["roleId"], "roleWelcome": "Hello."}, false)
	if rev, _ := res["revision"].(map[string]any); rev["revisionId"] == nil {
		t.Errorf("no revision kept: %v", res)
	}
	list := call(ctx, t, cs, "list_revisions", map[string]any{}, false)
	if len(list["revisions"].([]any)) != 1 {
		t.Errorf("list_revisions: %v", list)
	}
}
