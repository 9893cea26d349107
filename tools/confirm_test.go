package tools

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// answerer is a client's user: it answers every confirmation with res, and keeps the questions.
type answerer struct {
	res *mcp.ElicitationResult

	mu        sync.Mutex
	questions []string
}

func (a *answerer) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.questions = append(a.questions, req.Params.Message)
	return a.res, nil
}

// TestConfirmation: publish_card and delete_trial_card ask the user first when the client can
// be asked; only a yes goes ahead, and a no, a decline or a cancel does nothing and says so.
func TestConfirmation(t *testing.T) {
	t.Parallel()
	yes := &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"confirm": true}}}
	no := &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"confirm": false}}}
	decline := &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}
	cancel := &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionCancel}}
	tests := []struct {
		name   string
		answer *mcp.ElicitationResult // nil: the client declares no elicitation
		done   bool
		says   string
	}{
		{"accepted", yes, true, ""},
		{"answered no", no, false, "did not confirm"},
		{"declined", decline, false, "declined"},
		{"cancelled", cancel, false, "cancelled"},
		{"a client that cannot be asked", nil, true, ""},
	}
	for _, tt := range tests {
		for _, modern := range []bool{false, true} {
			name := tt.name
			if modern {
				name += ", MCP 2026-07-28 (a multi round-trip input request)"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				cfg := tavernEnvConfig{modern: modern}
				a := &answerer{res: tt.answer}
				if tt.answer != nil {
					cfg.elicit = a
				}
				e, _ := newTavernEnv(t, cfg)
				roleID := e.ok("create_card", `{"roleName":"Ready"}`)["roleId"].(string)
				e.ok("set_opening_lines", `{"roleId":"`+roleID+`","roleWelcome":"Hello."}`)
				e.ok("write_card_document", `{"roleId":"`+roleID+`","sections":{"description":"Ready."}}`)
				e.ok("upsert_trial_card", `{"clientKey":"try-1","card":{"roleName":"Try"}}`)

				for _, call := range []struct{ tool, args string }{
					{"publish_card", `{"roleId":"` + roleID + `"}`},
					{"delete_trial_card", `{"clientKey":"try-1"}`},
				} {
					res := e.call(call.tool, call.args)
					if res.IsError == tt.done {
						t.Fatalf("%s: isError %v: %s", call.tool, res.IsError, text(res))
					}
					if !tt.done {
						env, _ := ErrorEnvelope(res)
						if env["error"] != codeDeclined || !strings.Contains(env["message"].(string), tt.says) || !strings.Contains(env["message"].(string), "Nothing was done") {
							t.Errorf("%s: %v", call.tool, env)
						}
					}
				}
				card := e.ok("get_card", `{"roleId":"`+roleID+`"}`)
				if published := card["reviewStatus"] != "draft"; published != tt.done {
					t.Errorf("published = %v, want %v", published, tt.done)
				}
				trials := e.ok("list_trial_cards", `{}`)["list"].([]any)
				if deleted := len(trials) == 0; deleted != tt.done {
					t.Errorf("deleted = %v, want %v", deleted, tt.done)
				}
				a.mu.Lock()
				defer a.mu.Unlock()
				if tt.answer != nil && (len(a.questions) != 2 || !strings.Contains(a.questions[0], roleID) || !strings.Contains(a.questions[1], `"try-1"`)) {
					t.Errorf("questions: %q", a.questions)
				}
			})
		}
	}
}
