package tools

import (
	"context"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// TestPromptsFromWordSplittingHosts: a host that hands a prompt's arguments the words the user
// typed, one by one (Claude Code), gets the words back in order as the prompt's free text, with
// a note to ask for the rest when words may have been dropped; other hosts' named arguments
// keep their meaning.
func TestPromptsFromWordSplittingHosts(t *testing.T) {
	t.Parallel()
	c, err := upstream.New("http://127.0.0.1:1", upstream.StaticToken("t"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	get := func(clientName, prompt string, args map[string]string) string {
		t.Helper()
		cl := initializedClient(t, srv, clientName)
		ctx := context.Background()
		req := mcp.GetPromptRequest{}
		req.Params.Name = prompt
		req.Params.Arguments = args
		res, err := cl.GetPrompt(ctx, req)
		if err != nil {
			t.Fatalf("%s from %s: %v", prompt, clientName, err)
		}
		return res.Messages[0].Content.(mcp.TextContent).Text
	}
	tests := []struct {
		client, prompt string
		args           map[string]string
		has, lacks     []string
	}{
		// "/author_card a grumpy dwarf blacksmith" in Claude Code: three words, three arguments,
		// the fourth word dropped by the host.
		{"claude-code", "author_card", map[string]string{"idea": "a", "language": "grumpy", "withWorldbook": "dwarf"},
			[]string{"from this idea:\n\na grumpy dwarf\n", "ask the user for the whole of it"}, []string{"in this language: grumpy"}},
		// Fewer words than arguments: nothing was dropped, no note.
		{"claude-code", "try_card_as_trial", map[string]string{"idea": "pirates"},
			[]string{"pirates"}, []string{"ask the user for the whole"}},
		{"claude-code", "build_worldbook", map[string]string{"topic": "the", "roleId": "drowned", "worldbookId": "city"},
			[]string{"the drowned city", "ask the user for the whole of it"}, []string{"r_", "drowned`"}},
		// A host that sends named arguments: as they came.
		{"claude-ai", "author_card", map[string]string{"idea": "a grumpy dwarf blacksmith", "language": "fr"},
			[]string{"a grumpy dwarf blacksmith", "in this language: fr"}, []string{"ask the user for the whole"}},
	}
	for _, tt := range tests {
		got := get(tt.client, tt.prompt, tt.args)
		for _, w := range tt.has {
			if !strings.Contains(got, w) {
				t.Errorf("%s from %s lacks %q:\n%s", tt.prompt, tt.client, w, got)
			}
		}
		for _, w := range tt.lacks {
			if strings.Contains(got, w) {
				t.Errorf("%s from %s says %q:\n%s", tt.prompt, tt.client, w, got)
			}
		}
	}
}
