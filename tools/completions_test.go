package tools

import (
	"context"
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestCompletions: completion/complete gives the caller's worldbook ids (by id prefix or a word
// of the name), trial keys, the cards it can see for card://{roleId} and roleId, and the fixed
// values of the other arguments; the server declares the capability.
func TestCompletions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	if e.client.GetServerCapabilities().Completions == nil {
		t.Fatal("the server does not declare completions")
	}
	roleID := e.ok("create_card", `{"roleName":"Vey"}`)["roleId"].(string)
	harbor := e.ok("create_worldbook", `{"name":"Harbor lore"}`)["worldbookId"].(string)
	e.ok("create_worldbook", `{"name":"Sky pirates"}`)
	e.ok("write_worldbook_document", `{"worldbookId":"`+harbor+`","binding":{"roleId":"`+roleID+`"},"entries":[]}`)
	trial := e.ok("upsert_trial_card", `{"clientKey":"try-1","card":{"roleName":"Mira"}}`)["roleId"].(string)

	ask := func(ref any, arg, value string) []string {
		t.Helper()
		req := mcp.CompleteRequest{}
		req.Params.Ref = ref
		req.Params.Argument = mcp.CompleteArgument{Name: arg, Value: value}
		res, err := e.client.Complete(context.Background(), req)
		if err != nil {
			t.Fatalf("complete %s=%q: %v", arg, value, err)
		}
		return res.Completion.Values
	}
	prompt := func(name string) any { return mcp.PromptReference{Type: "ref/prompt", Name: name} }
	for _, tt := range []struct {
		name       string
		ref        any
		arg, value string
		want       []string
	}{
		{"a worldbook by a word of its name", prompt("build_worldbook"), "worldbookId", "harb", []string{harbor}},
		{"a worldbook by its id", prompt("build_worldbook"), "worldbookId", harbor[:len(harbor)-2], []string{harbor}},
		{"a card bound to a worldbook, and a trial's", prompt("build_worldbook"), "roleId", "", []string{roleID, trial}},
		{"card://{roleId}", mcp.ResourceReference{Type: "ref/resource", URI: "card://{roleId}"}, "roleId", "", []string{roleID, trial}},
		{"trial://{clientKey}", mcp.ResourceReference{Type: "ref/resource", URI: "trial://{clientKey}"}, "clientKey", "tr", []string{"try-1"}},
		{"a trial key for the prompt", prompt("try_card_as_trial"), "clientKey", "", []string{"try-1"}},
		{"withWorldbook", prompt("author_card"), "withWorldbook", "y", []string{"yes"}},
		{"language by name", prompt("author_card"), "language", "fre", []string{"fr"}},
		{"nothing matches", prompt("build_worldbook"), "worldbookId", "zzz", []string{}},
	} {
		if got := ask(tt.ref, tt.arg, tt.value); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
