package tavern

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/tokens"
)

// BenchmarkBuildPromptLarge: 2,000 entries (half constant) against a 32k context's budget,
// counted with cl100k_base: the budget counts each admitted entry once.
func BenchmarkBuildPromptLarge(b *testing.B) {
	var es []Entry
	for i := range 2000 {
		es = append(es, Entry{Name: fmt.Sprint(i), Keywords: []string{fmt.Sprintf("k%d", i)}, IsConstant: i%2 == 0, IsEnabled: true, SortOrder: i % 97,
			Content: strings.Repeat(fmt.Sprintf("Lore line %d about the harbour. ", i), 8), MatchOptions: &MatchOptions{}, Extensions: map[string]any{"extensions": map[string]any{}}})
	}
	count := func(s string) int { n, _ := tokens.CountWith(tokens.Encoding, s); return n }
	for b.Loop() {
		p, err := BuildPrompt(context.Background(), PromptInput{Books: []Lorebook{{Name: "b", Source: SourceCharacter, Entries: es}},
			MaxContext: 32768, BudgetPercent: 25, Count: count, Note: DefaultAuthorsNote(),
			Sim: SimOptions{Settings: DefaultSettings(), Chat: []Message{{Text: "k1 k3 k5", User: true}}}})
		if err != nil || len(p.Sim.Activated) == 0 {
			b.Fatal(err)
		}
	}
}
