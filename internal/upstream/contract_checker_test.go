package upstream_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/schema"
)

// The contract tests are only as good as their checks: these tests show that the recording
// transport's matcher and response checker find what they must.

func TestContractMatcher(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method, path, want string
	}{
		{"GET", "/open/v1/me", "getMe"},
		{"POST", "/open/v1/role", "createCard"},
		{"GET", "/open/v1/role/detail", "getCard"},
		{"PATCH", "/open/v1/role/detail", "updateCardProfile"}, // a roleId that reads "detail"
		{"PATCH", "/open/v1/role/r%2F1", "updateCardProfile"},
		{"PATCH", "/open/v1/role/r1/welcome", "setOpeningLines"},
		{"POST", "/open/v1/role/r1/document", "writeCardDocument"},
		{"GET", "/open/v1/role/validate", "validateCard"},
		{"GET", "/open/v1/worldbook/entry/list", "listWorldbookEntries"},
		{"POST", "/open/v1/worldbook/wb1/document", "writeWorldbookDocument"},
		{"GET", "/open/v1/trial-cards", "listTrialCards"},
		{"PUT", "/open/v1/trial-cards/k.1", "upsertTrialCard"},
		{"DELETE", "/open/v1/trial-cards/k.1", "deleteTrialCard"},
		{"GET", "/open/v1/role", ""},
		{"GET", "/open/v1/nothing", ""},
		{"GET", "/images/img_1", ""},
		{"POST", "/oauth/token", ""},
	}
	for _, tt := range tests {
		op, ok := ctMatch(tt.method, tt.path)
		if got := op.ID; ok != (tt.want != "") || got != tt.want {
			t.Errorf("ctMatch(%s %s) = %q, %v; want %q", tt.method, tt.path, got, ok, tt.want)
		}
	}
}

func TestContractChecker(t *testing.T) {
	t.Parallel()
	const card = `{"roleId":"r1","roleName":"Mira","roleDesc":"","roleWelcome":"","welcomeAlternates":[],"prologue":[]}`
	digest := strings.Repeat("ab", 32)
	trial := `{"clientKey":"k","roleId":"tr_1","created":true,"expiresAt":"2030-01-02T03:04:05Z","slots":{"used":1,"max":5},` +
		`"sections":{"roleName":"` + digest + `"},"changed":[],"worldbook":{"worldbookId":"wb","entries":0,"created":0,"deleted":0}}`
	json := http.Header{"Content-Type": {"application/json"}}
	bearer := http.Header{"Content-Type": {"application/json"}, "Www-Authenticate": {"Bearer"}}
	tests := []struct {
		name   string
		op     string
		status int
		header http.Header
		body   string
		want   string // a problem's text, "" for none
	}{
		{"valid card", "getCard", 200, json, card, ""},
		{"extra card fields are allowed", "getCard", 200, json, strings.TrimSuffix(card, "}") + `,"anything":{"x":1}}`, ""},
		{"missing prologue", "getCard", 200, json, strings.Replace(card, `,"prologue":[]`, "", 1), "body:"},
		{"null welcomeAlternates", "getCard", 200, json, strings.Replace(card, `"welcomeAlternates":[]`, `"welcomeAlternates":null`, 1), "body:"},
		{"undocumented success status", "getCard", 201, json, card, "success status 201"},
		{"not JSON", "getCard", 200, json, `<html>`, "body:"},
		{"wrong content type", "getCard", 200, http.Header{"Content-Type": {"text/plain"}}, card, "Content-Type"},
		{"replayed create", "createCard", 200, json, `{"roleId":"r","roleVisibility":"private","reviewStatus":"draft"}`, ""},
		{"valid trial", "getTrialCard", 200, json, trial, ""},
		{"uppercase digest", "getTrialCard", 200, json, strings.Replace(trial, digest, strings.ToUpper(digest), 1), "body:"},
		{"bad expiresAt", "getTrialCard", 200, json, strings.Replace(trial, "2030-01-02T03:04:05Z", "tomorrow", 1), "body:"},
		{"trial ttlHours 0", "listTrialCards", 200, json, `{"list":[],"slots":{"used":0,"max":5},"ttlHours":0}`, "body:"},
		{"selectiveLogic 4", "listWorldbookEntries", 200, json, `{"worldbookId":"w","entries":[{"entryId":"e","name":"n","content":"c","keywords":[],` +
			`"secondaryKeywords":[],"matchOptions":{"caseSensitive":false,"matchWholeWords":false,"selectiveLogic":4},"category":"","isEnabled":true,` +
			`"isConstant":false,"priority":0,"sortOrder":0,"lastUpdateTime":"t","activationCount":0}]}`, "body:"},
		{"entry with op", "listWorldbookEntries", 200, json, `{"worldbookId":"w","entries":[{"entryId":"e","name":"n","content":"c","keywords":[],` +
			`"secondaryKeywords":[],"matchOptions":null,"category":"","isEnabled":true,"isConstant":false,"priority":0,"sortOrder":0,` +
			`"lastUpdateTime":"t","activationCount":0,"op":"create"}]}`, "body:"},
		{"role_not_found", "getCard", 404, json, `{"error":"role_not_found","message":"No card."}`, ""},
		{"code of another status", "getCard", 404, json, `{"error":"conflict","message":"No card."}`, "does not go with status 404"},
		{"unknown code", "getCard", 400, json, `{"error":"oops","message":"Bad."}`, "does not go with status 400"},
		{"no message", "getCard", 404, json, `{"error":"role_not_found","message":""}`, "message is empty"},
		{"envelope without message", "getCard", 404, json, `{"error":"role_not_found"}`, "body:"},
		{"retryable 4xx", "getCard", 400, json, `{"error":"invalid_request","message":"Bad.","retryable":true}`, "says retryable"},
		{"detail not an object", "getCard", 400, json, `{"error":"invalid_request","message":"Bad.","detail":[1]}`, "body:"},
		{"401 with a challenge", "getMe", 401, bearer, `{"error":"unauthorized","message":"Sign in."}`, ""},
		{"401 without a challenge", "getMe", 401, json, `{"error":"unauthorized","message":"Sign in."}`, "WWW-Authenticate"},
		{"retryable 500", "getMe", 500, json, `{"error":"internal","message":"Try again.","retryable":true}`, ""},
	}
	for _, tt := range tests {
		op, ok := schema.Lookup(tt.op)
		if !ok {
			t.Fatalf("no operation %s", tt.op)
		}
		problems := strings.Join(ctCheckResponse(op, tt.status, tt.header, []byte(tt.body)), "; ")
		switch {
		case tt.want == "" && problems != "":
			t.Errorf("%s: problems %q; want none", tt.name, problems)
		case tt.want != "" && !strings.Contains(problems, tt.want):
			t.Errorf("%s: problems %q; want one with %q", tt.name, problems, tt.want)
		}
	}
}
