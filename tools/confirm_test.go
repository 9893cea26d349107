package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/auth/authtest"
	"github.com/cardwriter/cardwriter-mcp/internal/store"

	"github.com/mark3labs/mcp-go/mcp"
)

// answerer is a client's user: it answers every confirmation with res after think (on the
// server's clock: a person reads first, a headless host does not), and keeps the questions.
type answerer struct {
	res   *mcp.ElicitationResult
	clock *authtest.Clock
	think time.Duration

	mu        sync.Mutex
	questions []string
}

func (a *answerer) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.questions = append(a.questions, req.Params.Message)
	if a.clock != nil {
		a.clock.Advance(a.think)
	}
	return a.res, nil
}

// confirmEnv is an env whose server and answerer share a clock, with a card ready to publish
// and a trial card.
func confirmEnv(t *testing.T, cfg tavernEnvConfig, a *answerer) (*env, string) {
	t.Helper()
	clk := authtest.NewClock(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	if cfg.opts.now == nil || a != nil {
		cfg.opts.now = clk.Now
	}
	if a != nil {
		a.clock = clk
		cfg.elicit = a
	}
	e, _ := newTavernEnv(t, cfg)
	roleID := e.ok("create_card", `{"roleName":"Ready"}`)["roleId"].(string)
	e.ok("set_opening_lines", `{"roleId":"`+roleID+`","roleWelcome":"Hello."}`)
	e.ok("write_card_document", `{"roleId":"`+roleID+`","sections":{"description":"Ready."}}`)
	e.ok("upsert_trial_card", `{"clientKey":"try-1","card":{"roleName":"Try"}}`)
	return e, roleID
}

// confirmCalls are the calls that confirm, for a card roleID.
func confirmCalls(roleID string) []struct{ tool, args string } {
	return []struct{ tool, args string }{
		{"publish_card", `{"roleId":"` + roleID + `"}`},
		{"delete_trial_card", `{"clientKey":"try-1"}`},
	}
}

// checkDone checks whether the card was published and the trial deleted, as done says.
func checkDone(t *testing.T, e *env, roleID string, done bool) {
	t.Helper()
	card := e.ok("get_card", `{"roleId":"`+roleID+`"}`)
	if published := card["reviewStatus"] != "draft"; published != done {
		t.Errorf("published = %v, want %v", published, done)
	}
	trials := e.ok("list_trial_cards", `{}`)["list"].([]any)
	if deleted := len(trials) == 0; deleted != done {
		t.Errorf("deleted = %v, want %v", deleted, done)
	}
}

// withToken returns args with confirmationToken set.
func withToken(t *testing.T, args, token string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(args), &m); err != nil {
		t.Fatal(err)
	}
	m["confirmationToken"] = token
	return jsonArg(t, m)
}

// TestConfirmation: publish_card and delete_trial_card ask the user first when the client can
// show a form; only a yes goes ahead, and a no, a decline or a cancel does nothing and says so.
// A cancel sooner than a person can read is the host's (headless), reported as such, with a
// confirmationToken to ask in the conversation instead.
func TestConfirmation(t *testing.T) {
	t.Parallel()
	yes := &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"confirm": true}}}
	no := &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"confirm": false}}}
	decline := &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}
	cancel := &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionCancel}}
	person := 3 * time.Second
	tests := []struct {
		name   string
		answer *mcp.ElicitationResult // nil: the client declares no elicitation
		think  time.Duration
		done   bool
		code   string
		says   string
	}{
		{"accepted", yes, person, true, "", ""},
		{"accepted at once", yes, 0, true, "", ""},
		{"answered no", no, person, false, codeDeclined, "did not confirm"},
		{"declined", decline, person, false, codeDeclined, "declined"},
		{"cancelled by the author", cancel, person, false, codeDeclined, "cancelled"},
		{"cancelled by a headless host, unseen", cancel, 10 * time.Millisecond, false, codeConfirmationRequired, "was not shown"},
		{"a client that cannot be asked", nil, 0, true, "", ""},
	}
	for _, tt := range tests {
		for _, modern := range []bool{false, true} {
			name := tt.name
			if modern {
				name += ", MCP 2026-07-28 (a multi round-trip input request)"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				var a *answerer
				if tt.answer != nil {
					a = &answerer{res: tt.answer, think: tt.think}
				}
				e, roleID := confirmEnv(t, tavernEnvConfig{modern: modern}, a)
				for _, call := range confirmCalls(roleID) {
					res := e.call(call.tool, call.args)
					if res.IsError == tt.done {
						t.Fatalf("%s: isError %v: %s", call.tool, res.IsError, text(res))
					}
					if tt.done {
						continue
					}
					env, _ := ErrorEnvelope(res)
					if env["error"] != tt.code || !strings.Contains(env["message"].(string), tt.says) || !strings.Contains(env["message"].(string), "Nothing was done") {
						t.Errorf("%s: %v", call.tool, env)
					}
					if tt.code == codeConfirmationRequired {
						if strings.Contains(env["message"].(string), "the user cancelled") {
							t.Errorf("%s: a host's cancel reported as the user's: %v", call.tool, env["message"])
						}
						token, _ := env["detail"].(map[string]any)["confirmationToken"].(string)
						if token == "" || !strings.Contains(env["message"].(string), token) {
							t.Fatalf("%s: no confirmationToken in the message and detail: %v", call.tool, env)
						}
						e.ok(call.tool, withToken(t, call.args, token))
					}
				}
				checkDone(t, e, roleID, tt.done || tt.code == codeConfirmationRequired)
				if a == nil {
					return
				}
				a.mu.Lock()
				defer a.mu.Unlock()
				if len(a.questions) != 2 || !strings.Contains(a.questions[0], roleID) || !strings.Contains(a.questions[1], `"try-1"`) {
					t.Errorf("questions: %q", a.questions)
				}
			})
		}
	}
}

// TestConfirmationPolicy: --confirm conversation returns a one-time token bound to the tool
// and its arguments instead of acting; never asks nobody; a client that declared only URL-mode
// elicitation is never sent a form.
func TestConfirmationPolicy(t *testing.T) {
	t.Parallel()
	yes := &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"confirm": true}}}
	urlOnly := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{URL: &struct{}{}}}
	tests := []struct {
		name   string
		policy ConfirmPolicy
		caps   *mcp.ClientCapabilities
		token  bool // the first call asks for a token
	}{
		{"conversation", ConfirmConversation, nil, true},
		{"never", ConfirmNever, nil, false},
		{"elicit, a client declaring only URL mode", ConfirmElicit, urlOnly, true},
	}
	for _, tt := range tests {
		for _, modern := range []bool{false, true} {
			name := tt.name
			if modern {
				name += ", MCP 2026-07-28"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				a := &answerer{res: yes, think: 3 * time.Second}
				e, roleID := confirmEnv(t, tavernEnvConfig{modern: modern, caps: tt.caps, opts: Options{Confirm: tt.policy}}, a)
				other := e.ok("create_card", `{"roleName":"Other"}`)["roleId"].(string)
				e.ok("set_opening_lines", `{"roleId":"`+other+`","roleWelcome":"Hi."}`)
				e.ok("write_card_document", `{"roleId":"`+other+`","sections":{"description":"Other."}}`)
				for _, call := range confirmCalls(roleID) {
					res := e.call(call.tool, call.args)
					if !tt.token {
						if res.IsError {
							t.Fatalf("%s: %s", call.tool, text(res))
						}
						continue
					}
					env, _ := ErrorEnvelope(res)
					if env["error"] != codeConfirmationRequired {
						t.Fatalf("%s: %v", call.tool, env)
					}
					token := env["detail"].(map[string]any)["confirmationToken"].(string)
					if call.tool == "publish_card" {
						// Bound to the arguments: another card's publish refuses it, and
						// spends nothing.
						bad := e.call(call.tool, withToken(t, `{"roleId":"`+other+`"}`, token))
						if env, _ := ErrorEnvelope(bad); env["error"] != codeConfirmationInvalid {
							t.Fatalf("a token for another card: %v", env)
						}
					}
					e.ok(call.tool, withToken(t, call.args, token))
					again := e.call(call.tool, withToken(t, call.args, token))
					if env, _ := ErrorEnvelope(again); env["error"] != codeConfirmationInvalid || !strings.Contains(env["message"].(string), "already used") {
						t.Errorf("%s: the token used twice: %v", call.tool, env)
					}
				}
				checkDone(t, e, roleID, true)
				a.mu.Lock()
				defer a.mu.Unlock()
				if len(a.questions) != 0 {
					t.Errorf("a form was sent: %q", a.questions)
				}
			})
		}
	}
}

// TestConfirmationForgedAnswer: a 2026-07-28 answer counts only with the request state the
// server sent with its question: a yes sent before being asked, with a state made up, or with
// a state already used, is no yes: the question is asked again.
func TestConfirmationForgedAnswer(t *testing.T) {
	t.Parallel()
	e, roleID := confirmEnv(t, tavernEnvConfig{modern: true}, nil)
	send := func(state string, answer bool) map[string]any {
		t.Helper()
		params := map[string]any{
			"name":      "publish_card",
			"arguments": map[string]any{"roleId": roleID},
			"_meta": map[string]any{
				mcp.MetaKeyProtocolVersion:    mcp.LATEST_PROTOCOL_VERSION,
				mcp.MetaKeyClientInfo:         map[string]any{"name": "forger", "version": "1"},
				mcp.MetaKeyClientCapabilities: map[string]any{"elicitation": map[string]any{}},
			},
		}
		if answer {
			params["inputResponses"] = map[string]any{confirmInputID: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}
			params["requestState"] = state
		}
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
		raw, _ := json.Marshal(e.srv.HandleMessage(context.Background(), msg))
		var resp struct {
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal(raw, &resp); err != nil || resp.Result == nil {
			t.Fatalf("tools/call: %s", raw)
		}
		return resp.Result
	}
	asked := func(res map[string]any) bool { return res["resultType"] == string(mcp.ResultTypeInputRequired) }
	first := send("", false)
	if !asked(first) {
		t.Fatalf("no question: %v", first)
	}
	state, _ := first["requestState"].(string)
	for _, forged := range []string{"", "cs1_" + strings.Repeat("A", 41), "anything"} {
		if res := send(forged, true); !asked(res) {
			t.Errorf("state %q: an answer with no state of the server's counted: %v", forged, res)
		}
	}
	checkDone(t, e, roleID, false)
	if res := send(state, true); asked(res) || res["isError"] == true {
		t.Fatalf("the answer to the server's question did not count: %v", res)
	}
	if res := send(state, true); !asked(res) {
		t.Errorf("a request state used twice counted: %v", res)
	}
}

// failingElicit is a host that answers every elicitation with an error.
type failingElicit struct{}

func (failingElicit) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return nil, errors.New("elicitation is not supported in this mode")
}

// TestConfirmationHostError: a host that answers the form with an error showed nothing: the
// call is not reported as the author's no, and the conversation's token works.
func TestConfirmationHostError(t *testing.T) {
	t.Parallel()
	e, roleID := confirmEnv(t, tavernEnvConfig{elicit: failingElicit{}}, nil)
	res := e.call("publish_card", `{"roleId":"`+roleID+`"}`)
	env, _ := ErrorEnvelope(res)
	if env["error"] != codeConfirmationRequired || !strings.Contains(env["message"].(string), "could not show") {
		t.Fatalf("%v", env)
	}
	e.ok("publish_card", withToken(t, `{"roleId":"`+roleID+`"}`, env["detail"].(map[string]any)["confirmationToken"].(string)))
}

// FuzzParseSeal: a confirmationToken or request state from outside never panics the parser,
// and what it accepts is exactly a seal's length.
func FuzzParseSeal(f *testing.F) {
	f.Add(tokenPrefix + strings.Repeat("A", 42))
	f.Add(statePrefix + "x")
	f.Add("")
	f.Add(tokenPrefix + "!!!")
	f.Fuzz(func(t *testing.T, s string) {
		for _, kind := range []string{tokenPrefix, statePrefix} {
			buf, _, ok := parseSeal(kind, s)
			if ok && (len(buf) != sealLen || !strings.HasPrefix(s, kind)) {
				t.Fatalf("accepted %q: %d bytes", s, len(buf))
			}
		}
	})
}

// TestConfirmationAcrossReplicas: replicas on one store sign with one key and agree on spent
// tokens: a token one replica gave is good once on another, then refused everywhere.
func TestConfirmationAcrossReplicas(t *testing.T) {
	t.Parallel()
	clk := authtest.NewClock(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	opts := Options{Confirm: ConfirmConversation, State: store.NewMemory(), now: clk.Now}
	a, roleID := confirmEnv(t, tavernEnvConfig{opts: opts}, nil)
	b, _ := newTavernEnv(t, tavernEnvConfig{svc: a.svc, opts: opts})
	args := `{"roleId":"` + roleID + `"}`
	first, _ := ErrorEnvelope(a.call("publish_card", args))
	token, _ := first["detail"].(map[string]any)["confirmationToken"].(string)
	b.ok("publish_card", withToken(t, args, token))
	for name, e := range map[string]*env{"the replica that gave it": a, "the one that took it": b} {
		if env, _ := ErrorEnvelope(e.call("publish_card", withToken(t, args, token))); env["error"] != codeConfirmationInvalid {
			t.Errorf("%s: a spent token: %v", name, env)
		}
	}
	// A token expires: the author's yes is for now, not for later.
	e2, _ := ErrorEnvelope(a.call("delete_trial_card", `{"clientKey":"try-1"}`))
	late := e2["detail"].(map[string]any)["confirmationToken"].(string)
	clk.Advance(confirmTokenTTL)
	if env, _ := ErrorEnvelope(b.call("delete_trial_card", withToken(t, `{"clientKey":"try-1"}`, late))); env["error"] != codeConfirmationInvalid || !strings.Contains(env["message"].(string), "expired") {
		t.Errorf("an expired token: %v", env)
	}
}
