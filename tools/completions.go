package tools

import (
	"context"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// Completions (completion/complete) for the prompts' arguments and the resource templates'
// parameters: the ids of the caller's worldbooks and trial cards, and of the cards it can see
// (the card service lists no cards: those bound to a worldbook and those of trial cards), read
// from the card service with the caller's token; fixed values where the argument has them. A
// value matches by prefix of the id, or by words of the name (a worldbook's); at most 100 are
// given, with total and hasMore.

// maxCompletions is the most values one answer gives (the protocol's limit).
const maxCompletions = 100

// completer answers completion/complete for both kinds of reference.
type completer struct{ client *upstream.Client }

// completionOptions returns the server options that declare and serve completions.
func completionOptions(client *upstream.Client) []server.ServerOption {
	c := &completer{client: client}
	return []server.ServerOption{server.WithCompletions(), server.WithPromptCompletionProvider(c), server.WithResourceCompletionProvider(c)}
}

// CompletePromptArgument completes a prompt's argument.
func (c *completer) CompletePromptArgument(ctx context.Context, prompt string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	switch arg.Name {
	case "roleId":
		return c.roles(ctx, arg.Value)
	case "worldbookId":
		return c.worldbooks(ctx, arg.Value)
	case "clientKey":
		return c.trials(ctx, arg.Value)
	case "withWorldbook":
		return complete(arg.Value, []candidate{{id: "yes"}, {id: "no"}}), nil
	case "language":
		return complete(arg.Value, languages), nil
	}
	return &mcp.Completion{Values: []string{}}, nil
}

// CompleteResourceArgument completes a resource template's parameter.
func (c *completer) CompleteResourceArgument(ctx context.Context, uri string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	switch {
	case strings.HasPrefix(uri, "card://"):
		return c.roles(ctx, arg.Value)
	case strings.HasPrefix(uri, "worldbook://"):
		return c.worldbooks(ctx, arg.Value)
	case strings.HasPrefix(uri, "trial://"):
		return c.trials(ctx, arg.Value)
	}
	return &mcp.Completion{Values: []string{}}, nil
}

// candidate is a value that may complete an argument, with a name to match words against.
type candidate struct{ id, name string }

// languages are the language argument's suggestions (BCP 47 tags).
var languages = []candidate{{"en", "English"}, {"zh", "Chinese"}, {"ja", "Japanese"}, {"ko", "Korean"}, {"es", "Spanish"},
	{"fr", "French"}, {"de", "German"}, {"pt", "Portuguese"}, {"ru", "Russian"}, {"it", "Italian"}}

func (c *completer) worldbooks(ctx context.Context, value string) (*mcp.Completion, error) {
	list, err := c.client.ListWorldbooks(ctx)
	if err != nil {
		return nil, err
	}
	var out []candidate
	for _, w := range list.List {
		out = append(out, candidate{id: w.WorldbookID, name: w.Name})
	}
	return complete(value, out), nil
}

func (c *completer) trials(ctx context.Context, value string) (*mcp.Completion, error) {
	list, err := c.client.ListTrialCards(ctx)
	if err != nil {
		return nil, err
	}
	var out []candidate
	for _, t := range list.List {
		out = append(out, candidate{id: t.ClientKey})
	}
	return complete(value, out), nil
}

// roles completes a roleId from the cards the server can see: those bound to the caller's
// worldbooks (named by the worldbook) and those of its trial cards (named by the trial's key).
func (c *completer) roles(ctx context.Context, value string) (*mcp.Completion, error) {
	wbs, err := c.client.ListWorldbooks(ctx)
	if err != nil {
		return nil, err
	}
	trials, err := c.client.ListTrialCards(ctx)
	if err != nil {
		return nil, err
	}
	var out []candidate
	for _, w := range wbs.List {
		for _, id := range w.BoundRoleIDs {
			out = append(out, candidate{id: id, name: w.Name})
		}
	}
	for _, t := range trials.List {
		out = append(out, candidate{id: t.RoleID, name: t.ClientKey})
	}
	return complete(value, out), nil
}

// complete returns the ids of the candidates that value matches (a prefix of the id, or a word
// that starts a word of the name, case-insensitively), each once, in order, at most
// maxCompletions of them.
func complete(value string, cands []candidate) *mcp.Completion {
	v := strings.ToLower(strings.TrimSpace(value))
	var values []string
	for _, c := range cands {
		if c.id == "" || slices.Contains(values, c.id) || !matches(v, c) {
			continue
		}
		values = append(values, c.id)
	}
	out := &mcp.Completion{Values: values, Total: len(values)}
	if len(values) > maxCompletions {
		out.Values, out.HasMore = values[:maxCompletions], true
	}
	if out.Values == nil {
		out.Values = []string{}
	}
	return out
}

func matches(v string, c candidate) bool {
	if v == "" || strings.HasPrefix(strings.ToLower(c.id), v) {
		return true
	}
	for _, w := range strings.Fields(strings.ToLower(c.name)) {
		if strings.HasPrefix(w, v) {
			return true
		}
	}
	return false
}
