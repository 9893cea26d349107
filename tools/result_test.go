package tools

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern/taverntest"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// variant is one answer of a stand-in card service that differs from the sandbox in a way the
// API document allows: requests whose method and path match go to the sandbox first (so that a
// write is applied), and the answer is then replaced.
type variant struct {
	method string
	path   *regexp.Regexp // matched against the URL path
	status int
	body   string                      // "" sends no body
	edit   func(sandbox []byte) []byte // when set, the sandbox's answer edited instead of body
	once   bool                        // replace only the first matching answer
}

// standIn is the stand-in service: the sandbox behind a transport that replaces answers once
// armed (so that a test can set up with the sandbox's own answers).
type standIn struct {
	next     http.RoundTripper
	variants []variant
	armed    atomic.Bool

	mu       sync.Mutex
	replaced [][]byte // the sandbox's answers that were replaced, in order
}

func (s *standIn) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(r)
	if err != nil || !s.armed.Load() {
		return resp, err
	}
	for _, v := range s.variants {
		if r.Method != v.method || !v.path.MatchString(r.URL.Path) || resp.StatusCode >= 300 {
			continue
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.replaced = append(s.replaced, data)
		s.mu.Unlock()
		if v.once {
			s.armed.Store(false)
		}
		body := []byte(v.body)
		if v.edit != nil {
			body = v.edit(data)
		}
		resp.StatusCode = v.status
		resp.Status = http.StatusText(v.status)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header = http.Header{}
		if len(body) > 0 {
			resp.Header.Set("Content-Type", "application/json")
		}
		return resp, nil
	}
	return resp, nil
}

func newStandInEnv(t *testing.T, variants ...variant) (*env, *standIn) {
	t.Helper()
	si := &standIn{variants: variants}
	e, _ := newTavernEnv(t, tavernEnvConfig{wrap: func(rt http.RoundTripper) http.RoundTripper {
		si.next = rt
		return si
	}})
	return e, si
}

// TestTolerantReading drives tools against a stand-in service that answers in ways the API
// document allows but the sandbox never does: every answer is read, or, when it truly cannot
// be, reported as an answer that may have applied the write (never as "could not be reached").
func TestTolerantReading(t *testing.T) {
	t.Parallel()
	replace := func(old, new string) func([]byte) []byte {
		return func(b []byte) []byte { return bytes.ReplaceAll(b, []byte(old), []byte(new)) }
	}
	tests := []struct {
		name    string
		variant variant
		run     func(t *testing.T, e *env, si *standIn, roleID string)
	}{
		{"a saved write answered 204", variant{method: "PATCH", path: regexp.MustCompile(`/welcome$`), status: http.StatusNoContent},
			func(t *testing.T, e *env, _ *standIn, roleID string) {
				res := e.call("set_opening_lines", `{"roleId":"`+roleID+`","roleWelcome":"Hello."}`)
				out := e.ok("set_opening_lines", `{"roleId":"`+roleID+`","roleWelcome":"Hello."}`)
				if out["roleId"] != roleID || out["ok"] != true || !strings.Contains(firstText(res), roleID) {
					t.Errorf("result %v, text %q", out, firstText(res))
				}
				if card := e.ok("get_card", `{"roleId":"`+roleID+`"}`); card["roleWelcome"] != "Hello." {
					t.Errorf("the write was not applied: %v", card)
				}
			}},
		{"a saved write answered {saved: true}", variant{method: "POST", path: regexp.MustCompile(`/document$`), status: http.StatusOK, body: `{"saved":true}`},
			func(t *testing.T, e *env, _ *standIn, roleID string) {
				res := e.call("write_card_document", `{"roleId":"`+roleID+`","sections":{"description":"A keeper."}}`)
				out := e.ok("write_card_document", `{"roleId":"`+roleID+`","sections":{"description":"A keeper."}}`)
				if out["roleId"] != roleID || out["ok"] != true || out["saved"] != true {
					t.Errorf("result %v", out)
				}
				if !strings.Contains(firstText(res), "card "+roleID+".") {
					t.Errorf("summary %q does not name the card", firstText(res))
				}
			}},
		{"a saved write answered with fields of other types", variant{method: "PATCH", path: regexp.MustCompile(`/role/[^/]+$`), status: http.StatusOK, body: `{"roleId":7,"roleName":["x"]}`},
			func(t *testing.T, e *env, _ *standIn, roleID string) {
				out := e.ok("update_card_profile", `{"roleId":"`+roleID+`","roleDesc":"Short."}`)
				if out["roleId"] != roleID || out["ok"] != true || out["roleName"] != nil {
					t.Errorf("result %v", out)
				}
			}},
		{"a card with another visibility and unknown fields", variant{method: "GET", path: regexp.MustCompile(`/role/detail$`), status: http.StatusOK,
			edit: replace(`"roleVisibility":"private"`, `"roleVisibility":"unlisted","moderation":{"state":7},"likes":3`)},
			func(t *testing.T, e *env, _ *standIn, roleID string) {
				out := e.ok("get_card", `{"roleId":"`+roleID+`"}`)
				if out["roleVisibility"] != "unlisted" || out["likes"] == nil {
					t.Errorf("result %v", out)
				}
			}},
		{"an entry with a field more", variant{method: "GET", path: regexp.MustCompile(`/worldbook/entry/list$`), status: http.StatusOK,
			edit: replace(`"activationCount":`, `"embedding":[0.1,0.2],"activationCount":`)},
			func(t *testing.T, e *env, _ *standIn, roleID string) {
				wb := e.ok("create_worldbook", `{"name":"Shoals"}`)
				id := wb["worldbookId"].(string)
				e.ok("write_worldbook_document", `{"worldbookId":"`+id+`","entries":[{"op":"create","name":"Kraken","content":"It waits.","keywords":["kraken"]}]}`)
				out := e.ok("list_worldbook_entries", `{"worldbookId":"`+id+`","detail":"full"}`)
				if entries := list(out, "entries"); len(entries) != 1 || entries[0].(map[string]any)["embedding"] == nil {
					t.Errorf("result %v", out)
				}
			}},
		{"trial digests in another encoding", variant{method: "PUT", path: regexp.MustCompile(`/trial-cards/`), status: http.StatusOK,
			edit: func(b []byte) []byte {
				return regexp.MustCompile(`"[0-9a-f]{64}"`).ReplaceAll(b, []byte(`"sha256:q83vEjRWeJA="`))
			}},
			func(t *testing.T, e *env, _ *standIn, _ string) {
				out := e.ok("upsert_trial_card", `{"clientKey":"try-1","card":{"roleName":"Mira"}}`)
				if !strings.HasPrefix(out["sections"].(map[string]any)["roleName"].(string), "sha256:") {
					t.Errorf("result %v", out)
				}
			}},
		{"a create whose answer is unreadable", variant{method: "POST", path: regexp.MustCompile(`/role$`), status: http.StatusOK, body: `<html>ok</html>`, once: true},
			func(t *testing.T, e *env, si *standIn, _ string) {
				env, msg := e.fail("create_card", `{"roleName":"Twice?"}`)
				key, _ := env["detail"].(map[string]any)["idempotencyKey"].(string)
				if env["error"] != codeUnexpectedResponse || env["retryable"] != false || key == "" ||
					!strings.Contains(msg, "may have been applied") || strings.Contains(msg, "reached") {
					t.Fatalf("envelope %v", env)
				}
				// The card was made; repeating with the key the error names returns it instead
				// of making a second one.
				again := e.ok("create_card", `{"roleName":"Twice?","idempotencyKey":"`+key+`"}`)
				si.mu.Lock()
				first := string(si.replaced[0])
				si.mu.Unlock()
				if !strings.Contains(first, `"roleId":"`+again["roleId"].(string)+`"`) {
					t.Errorf("the repeat made another card: %v, first answer %s", again, first)
				}
			}},
		{"an upload answered without its imageId", variant{method: "POST", path: regexp.MustCompile(`/image/upload$`), status: http.StatusCreated, body: `{}`},
			func(t *testing.T, e *env, _ *standIn, roleID string) {
				env, msg := e.fail("upload_image", jsonArg(t, map[string]any{"purpose": "avatar", "roleId": roleID, "contentType": "image/png", "dataBase64": b64(taverntest.Image(t, 4, 4))}))
				if env["error"] != codeUnexpectedResponse || !strings.Contains(msg, "imageId") || !strings.Contains(msg, "list_card_assets") {
					t.Errorf("envelope %v", env)
				}
			}},
		{"a read answered 204", variant{method: "GET", path: regexp.MustCompile(`/trial-cards$`), status: http.StatusNoContent},
			func(t *testing.T, e *env, _ *standIn, _ string) {
				env, msg := e.fail("list_trial_cards", `{}`)
				if env["error"] != codeUnexpectedResponse || !strings.Contains(msg, "empty") || strings.Contains(msg, "applied") {
					t.Errorf("envelope %v", env)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, si := newStandInEnv(t, tt.variant)
			card := e.ok("create_card", `{"roleName":"Mira"}`)
			si.armed.Store(true)
			tt.run(t, e, si, card["roleId"].(string))
		})
	}
}

// TestTrialKeysOfOthers: the read and the delete take any key (the document restricts none);
// only the upsert, which names a trial of ours, keeps its pattern.
func TestTrialKeysOfOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	for _, tool := range []string{"get_trial_card", "delete_trial_card"} {
		if env, _ := e.fail(tool, `{"clientKey":"a b"}`); env["error"] != "trial_not_found" {
			t.Errorf("%s of \"a b\": %v", tool, env)
		}
	}
	if env, _ := e.fail("upsert_trial_card", `{"clientKey":"a b","card":{"roleName":"X"}}`); env["error"] != codeInvalidArguments {
		t.Errorf("upsert of \"a b\": %v", env)
	}
}

// TestNonTextRefused: a lone UTF-16 surrogate in an argument is refused with its location, not
// replaced without a word.
func TestNonTextRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	env, msg := e.fail("create_card", `{"roleName":"Mira \ud800"}`)
	if env["error"] != codeInvalidArguments || !strings.Contains(msg, "/roleName") || !strings.Contains(msg, "surrogate") {
		t.Errorf("envelope %v", env)
	}
	if n := e.requests.n.Load(); n != 0 {
		t.Errorf("%d requests reached the card service", n)
	}
}

// lostAnswers is a stand-in whose answers to matching requests are lost after the sandbox
// applied them: the connection breaks before the answer arrives.
type lostAnswers struct {
	next   http.RoundTripper
	method string
	path   *regexp.Regexp
	armed  atomic.Bool

	mu   sync.Mutex
	lost []byte // the last answer lost
}

func (l *lostAnswers) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(r)
	if err != nil || !l.armed.Load() || r.Method != l.method || !l.path.MatchString(r.URL.Path) {
		return resp, err
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	l.mu.Lock()
	l.lost = data
	l.mu.Unlock()
	return nil, io.ErrUnexpectedEOF
}

// TestLostAnswers: a write that is not safe to repeat and whose answer was lost is not
// answered "try again" (which could apply it twice) but with how to settle it.
func TestLostAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, path, tool, args, want string
		retryable                            bool
	}{
		{"create_worldbook", "POST", `/worldbook$`, "create_worldbook", `{"name":"Shoals"}`, "check with list_worldbooks", false},
		{"create_card with a key picked for the call", "POST", `/role$`, "create_card", `{"roleName":"Once"}`, "repeat the call with idempotencyKey", false},
		{"an idempotent write: safe to repeat", "PATCH", `/welcome$`, "set_opening_lines", `{"roleId":"ROLE","roleWelcome":"Hi."}`, "repeating the same call is safe", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			la := &lostAnswers{method: tt.method, path: regexp.MustCompile(tt.path)}
			e, _ := newTavernEnv(t, tavernEnvConfig{wrap: func(rt http.RoundTripper) http.RoundTripper {
				la.next = rt
				return la
			}})
			roleID := e.ok("create_card", `{"roleName":"Mira"}`)["roleId"].(string)
			la.armed.Store(true)
			env, msg := e.fail(tt.tool, strings.ReplaceAll(tt.args, "ROLE", roleID))
			if env["error"] != codeUnavailable || env["retryable"] != tt.retryable || !strings.Contains(msg, tt.want) {
				t.Fatalf("envelope %v", env)
			}
			if tt.tool == "create_card" {
				la.armed.Store(false)
				key := env["detail"].(map[string]any)["idempotencyKey"].(string)
				again := e.ok("create_card", `{"roleName":"Once","idempotencyKey":"`+key+`"}`)
				la.mu.Lock()
				lost := string(la.lost)
				la.mu.Unlock()
				if !strings.Contains(lost, `"roleId":"`+again["roleId"].(string)+`"`) {
					t.Errorf("the repeat with the named key made another card: %v; the lost answer: %s", again, lost)
				}
			}
		})
	}
}

// TestAckSummaries: a write the service answers with no body still gets a summary that reads
// well (no empty fields).
func TestAckSummaries(t *testing.T) {
	t.Parallel()
	tests := []struct{ tool, want string }{
		{"update_card_profile", "Updated the profile of card r_1."},
		{"publish_card", "Submitted card r_1 for review."},
		{"set_card_visibility", "Set the visibility of card r_1."},
		{"set_opening_lines", "Saved the opening lines of card r_1."},
		{"write_card_document", "Saved the text sections of card r_1."},
	}
	tools := map[string]Tool{}
	for _, tool := range All() {
		tools[tool.Name] = tool
	}
	for _, tt := range tests {
		tool := tools[tt.tool]
		out, _, err := tool.ackResult(nil, map[string]string{"roleId": "r_1"})
		if err != nil {
			t.Fatal(err)
		}
		if got := tool.Summary(out); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.tool, got, tt.want)
		}
	}
}

// TestLimitedCallIsAResult: a call over the server's limits is a retryable tool result that
// says why, and sends nothing upstream.
func TestLimitedCallIsAResult(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{client: []upstream.Option{upstream.WithLimits(upstream.Limits{UserRate: 0.001, UserBurst: 1})}})
	e.ok("list_trial_cards", `{}`)
	before := e.requests.n.Load()
	env, msg := e.fail("list_trial_cards", `{}`)
	if env["error"] != "rate_limited" || env["retryable"] != true || !strings.Contains(msg, "per second") {
		t.Errorf("envelope %v", env)
	}
	if e.requests.n.Load() != before {
		t.Error("the limited call reached the card service")
	}
}

// TestAuditLog: one line per write, naming who (the card service's user id, never the token), the tool, the ids
// and the outcome, without the content; none for reads.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return buf.Write(p) })
	e, _ := newTavernEnv(t, tavernEnvConfig{opts: Options{Audit: slog.New(slog.NewJSONHandler(w, nil))}})
	roleID := e.ok("create_card", `{"roleName":"Secret Name"}`)["roleId"].(string)
	revID := e.ok("set_opening_lines", `{"roleId":"`+roleID+`","roleWelcome":"A secret first line."}`)["revision"].(map[string]any)["revisionId"].(string)
	e.ok("get_card", `{"roleId":"`+roleID+`"}`)
	e.fail("get_card", `{"roleId":"nope"}`)
	e.fail("set_opening_lines", `{"roleId":"nope","roleWelcome":"x"}`)
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d audit lines, want 3 (the writes):\n%s", len(lines), out)
	}
	for i, want := range []string{`"tool":"create_card"`, `"tool":"set_opening_lines"`, `"tool":"set_opening_lines"`} {
		if !strings.Contains(lines[i], want) || !strings.Contains(lines[i], `"user":"u_demo"`) || !strings.Contains(lines[i], `"durationMs":`) {
			t.Errorf("line %d: %s", i, lines[i])
		}
	}
	if !strings.Contains(lines[0], `"roleId":"`+roleID+`"`) || !strings.Contains(lines[1], `"outcome":"ok"`) || !strings.Contains(lines[2], `"outcome":"role_not_found"`) {
		t.Errorf("ids or outcomes missing:\n%s", out)
	}
	// The revision the write kept is named, never its content.
	if !strings.Contains(lines[1], `"revisionKept":"`+revID+`"`) {
		t.Errorf("the write's line does not name revision %s: %s", revID, lines[1])
	}
	if strings.Contains(out, "Secret") || strings.Contains(out, "secret") || strings.Contains(out, demoToken) {
		t.Errorf("the audit log holds content or the token:\n%s", out)
	}
}
