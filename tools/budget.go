package tools

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cardwriter/cardwriter-mcp/internal/tokens"
)

// The result budget: hosts cap what a tool may return (Claude Code refuses a result over 25,000
// tokens, files away one over 50,000 characters and gives the model only structuredContent when
// there is one; Gemini CLI gives it only the text), so every result, its text and its
// structuredContent each, fits a budget in cl100k tokens and a cap in characters.

// DefaultResultBudget is the result budget when Options.ResultBudget is 0, in cl100k tokens:
// well under the 25,000 a host refuses, so a few results fit a model's context side by side.
const DefaultResultBudget = 10_000

// The result budgets a server accepts: a page must hold a few items, and hosts refuse a result
// over 25,000 tokens.
const (
	MinResultBudget = 1_000
	MaxResultBudget = 25_000
)

// MaxResultChars is the most characters a result's text, or its structuredContent as JSON,
// may hold whatever the budget (a host files away a longer result).
const MaxResultChars = 50_000

// maxProblems is how many problems an error names before it says how many more there are.
const maxProblems = 10

// maxErrorMessage is the most characters of an error's message (Claude Code cuts error text at
// about 11,000).
const maxErrorMessage = 4000

// uncounted is the token count of a part over the character cap: not tokenized.
const uncounted = -1

// codeResultTooLarge is the error of a result that does not fit the budget.
const codeResultTooLarge = "result_too_large"

// resultBudget returns the budget Options asks for, the default for 0.
func (o Options) resultBudget() int {
	if o.ResultBudget > 0 {
		return o.ResultBudget
	}
	return DefaultResultBudget
}

// resultSize measures what a host gives the model of a result: its text blocks and its
// structuredContent as JSON, in characters, and in tokens counted only as far as the budget (a
// count over the budget is where counting stopped; uncounted for a part over the character cap).
type resultSize struct {
	textTokens, structTokens int
	textChars, structChars   int
}

// measure returns the size of res against budget; over reports whether either part is over
// the budget or the character cap. A token and a character are at least one byte each, so a part
// no longer in bytes than both is within them unmeasured: most results are never tokenized nor
// copied.
func measure(res *mcp.CallToolResult, budget int) (size resultSize, over bool, err error) {
	within := min(budget, MaxResultChars)
	textLen := 0
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			textLen += len(tc.Text)
		}
	}
	structured := []byte(res.RawStructuredContent)
	if structured == nil && res.StructuredContent != nil {
		if structured, err = json.Marshal(res.StructuredContent); err != nil {
			return size, false, fmt.Errorf("encode structured content: %w", err)
		}
	}
	if textLen <= within && len(structured) <= within {
		return resultSize{textTokens: textLen, structTokens: len(structured), textChars: textLen, structChars: len(structured)}, false, nil
	}
	var text strings.Builder
	text.Grow(textLen)
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	for _, part := range []struct {
		s      string
		tokens *int
		chars  *int
	}{{text.String(), &size.textTokens, &size.textChars}, {string(structured), &size.structTokens, &size.structChars}} {
		// The character cap decides first, at the cost of a pass over the bytes; tokens are
		// counted only for a part within it, and only until past the budget: a 4 MB section
		// is never tokenized.
		*part.chars = utf8.RuneCountInString(part.s)
		if *part.chars > MaxResultChars {
			*part.tokens = uncounted
			over = true
			continue
		}
		*part.tokens = len(part.s) // an upper bound: a token is at least one byte
		if len(part.s) > budget {
			if *part.tokens, err = tokens.CountUpTo(part.s, budget); err != nil {
				return size, false, err
			}
		}
		if *part.tokens > budget {
			over = true
		}
	}
	return size, over, nil
}

// fitBudget returns res, or, when it is over the budget, what the model gets instead: an error
// result that says how large the answer was and how to ask for less (an error result itself too
// large keeps its message, shortened, and loses its detail). Tools that send large files their
// own way (OwnBudget) are left alone.
func fitBudget(t *Tool, res *mcp.CallToolResult, budget int) (*mcp.CallToolResult, string, error) {
	if t.OwnBudget || res == nil {
		return res, "", nil
	}
	size, over, err := measure(res, budget)
	if err != nil || !over {
		return res, "", err
	}
	if env, ok := ErrorEnvelope(res); ok {
		msg, _ := env["message"].(string)
		env["message"] = cutMessage(msg, maxErrorMessage)
		if _, had := env["detail"]; had {
			env["detail"] = map[string]any{"omitted": "over the result budget"}
		}
		return errorResult(env), "", nil
	}
	larger := max(size.textTokens, size.structTokens)
	chars := max(size.textChars, size.structChars)
	if !t.ReadOnly() && len(res.Content) > 1 {
		// A write was applied: its result is never replaced by an error. The text keeps the
		// summary and leaves the JSON to structuredContent.
		if summary, ok := res.Content[0].(mcp.TextContent); ok {
			res.Content = []mcp.Content{mcp.NewTextContent(cutMessage(summary.Text, maxErrorMessage) +
				fmt.Sprintf(" (The result's JSON, %s, is over this server's result budget of %d tokens: it is left out of this text.)", sizeText(size.structTokens, size.structChars, budget), budget))}
			return res, "", nil
		}
	}
	detail := map[string]any{"characters": chars, "budget": budget}
	if larger != uncounted {
		detail["tokens"] = larger
	}
	f := &Failure{Code: codeResultTooLarge, Detail: detail,
		Message: fmt.Sprintf("The result of %s is too large for a model to read (%s; this server's budget is %d tokens and %d characters). "+
			"Ask for less: a page (limit), a search (query), brief detail; or export the card or worldbook as a file.",
			t.Name, sizeText(larger, chars, budget), budget, MaxResultChars)}
	return errorResult(f.Envelope()), codeResultTooLarge, nil
}

// sizeText says how large a part is: its characters, and its tokens as far as they were counted.
func sizeText(toks, chars, budget int) string {
	switch {
	case toks == uncounted:
		return fmt.Sprintf("%d characters", chars)
	case toks > budget:
		return fmt.Sprintf("over %d tokens, %d characters", budget, chars)
	}
	return fmt.Sprintf("%d tokens, %d characters", toks, chars)
}

// cutMessage cuts a message to at most n characters, saying so.
func cutMessage(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "… (cut: too long to show whole)"
}

// firstOf joins the first maxProblems parts with sep and says how many more there are.
func firstOf(parts []string, sep string) string {
	if len(parts) <= maxProblems {
		return strings.Join(parts, sep)
	}
	return strings.Join(parts[:maxProblems], sep) + fmt.Sprintf("%s… and %d more", sep, len(parts)-maxProblems)
}

// cutList keeps of out[key] the first items whose JSON fits budget tokens (one at least), and
// sets omitted to how many more there were; it returns out's JSON, data when nothing was cut.
func cutList(out map[string]any, key string, data json.RawMessage, budget int) (json.RawMessage, error) {
	if len(data) <= budget {
		return data, nil // within the budget in bytes, so in tokens
	}
	items := list(out, key)
	used := 0
	for i, it := range items {
		raw, err := json.Marshal(it)
		if err != nil {
			return nil, fmt.Errorf("encode %s[%d]: %w", key, i, err)
		}
		n, err := tokens.Count(string(raw))
		if err != nil {
			return nil, err
		}
		if used += n + 1; used > budget && i > 0 {
			out[key] = items[:i]
			out["omitted"] = len(items) - i
			return json.Marshal(out)
		}
	}
	return data, nil
}

// omittedSummary is what a summary adds when Cut left items out.
func omittedSummary(out map[string]any) string {
	n := num(out, "omitted")
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" %d more are not listed (over the result budget).", n)
}
