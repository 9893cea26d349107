package tools

import (
	"strings"
)

// MarkdownTable renders the tools as a README table: tool, toolset, whether it is read-only,
// and what it does (the first sentence of its description).
func MarkdownTable(tools []Tool) string {
	var b strings.Builder
	b.WriteString("| Tool | Toolset | Read-only | What it does |\n")
	b.WriteString("|---|---|---|---|\n")
	for _, t := range tools {
		ro := "no"
		if t.ReadOnly() {
			ro = "yes"
		}
		b.WriteString("| `" + t.Name + "` | " + t.Toolset + " | " + ro + " | " + cell(firstSentence(t.Description)) + " |\n")
	}
	return b.String()
}

// firstSentence returns the description up to and including its first ". " (or its first line).
func firstSentence(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return strings.TrimSpace(s)
}

// cell escapes text for a Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}
