package tools

import (
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestFitBudget: what a result over the budget or the character cap becomes, for a read, a
// write, an error and a tool with its own budget.
func TestFitBudget(t *testing.T) {
	t.Parallel()
	byName := map[string]*Tool{}
	for _, tool := range All() {
		byName[tool.Name] = &tool
	}
	words := strings.Repeat("lighthouse keeper ", 3000) // ~6,000 tokens, 54,000 characters
	short := strings.Repeat("lighthouse keeper ", 600)  // ~1,200 tokens, 10,800 characters
	aaaa := strings.Repeat("a", MaxResultChars+1)       // few tokens, over the character cap
	ok := func(s string) *mcp.CallToolResult {
		return successResult("summary", map[string]any{"x": s}, []byte(`{"x":"`+s+`"}`))
	}
	for _, tc := range []struct {
		name, tool string
		res        *mcp.CallToolResult
		budget     int
		want       string // "" kept as is, "error" result_too_large, "summary" the text cut to the summary
	}{
		{"small", "get_card", ok("hello"), DefaultResultBudget, ""},
		{"within", "get_card", ok(short), DefaultResultBudget, ""},
		{"over tokens", "get_card", ok(short), MinResultBudget, "error"},
		{"over characters", "get_card", ok(aaaa), DefaultResultBudget, "error"},
		{"over characters, few tokens", "get_card", ok(words), DefaultResultBudget, "error"},
		{"a write", "write_card_document", ok(short), MinResultBudget, "summary"},
		{"an export", "export_tavern_card", ok(words), MinResultBudget, ""},
		{"an error", "get_card", errorResult(map[string]any{"error": "x", "message": short, "retryable": false, "detail": map[string]any{"a": short}}), MinResultBudget, "cut"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			before := text(tc.res)
			got, code, err := fitBudget(byName[tc.tool], tc.res, tc.budget)
			if err != nil {
				t.Fatal(err)
			}
			switch env, isErr := ErrorEnvelope(got); tc.want {
			case "":
				if text(got) != before || code != "" {
					t.Errorf("changed: %.200s", text(got))
				}
			case "error":
				if !isErr || env["error"] != codeResultTooLarge || code != codeResultTooLarge {
					t.Errorf("got %.300s", text(got))
				}
			case "summary":
				if got.IsError || len(got.Content) != 1 || !strings.Contains(text(got), "left out of this text") || got.StructuredContent == nil {
					t.Errorf("got %.300s", text(got))
				}
			case "cut":
				if !isErr || len(env["message"].(string)) > maxErrorMessage+100 || env["detail"].(map[string]any)["omitted"] == nil {
					t.Errorf("got %.300s", text(got))
				}
			}
		})
	}
}
