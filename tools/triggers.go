package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cardwriter/cardwriter-mcp/tavern"
	"github.com/cardwriter/cardwriter-mcp/upstream"
)

// triggerTools is test_worldbook_triggers, of the worldbook toolset: which entries a passage
// would activate. Its schemas are in schema/tools.json (it is no single contract operation).
func triggerTools() []Tool {
	return []Tool{
		{
			Name:    "test_worldbook_triggers",
			Toolset: ToolsetWorldbook,
			Title:   "Test which worldbook entries a passage triggers",
			Description: "Show which worldbook entries a passage of text would activate, and why, without changing anything. " +
				"Give text and either worldbookId (the worldbook's entries are read from the card service) or entries (in the " +
				"service's entry shape, e.g. drafts not written yet, or list_worldbook_entries output). " +
				"Entries whose matchOptions is null follow the card service's native rules: keywords match case-insensitively " +
				"as substrings, and secondaryKeywords are an AND gate (a main keyword and one of them must both appear). " +
				"Entries with matchOptions (tavern-format worldbooks) follow SillyTavern's rules: caseSensitive; matchWholeWords " +
				"(keys with spaces, and CJK keys, still match as substrings); keys written /pattern/flags are regular " +
				"expressions; selectiveLogic combines the secondaryKeywords (0 any, 1 not all, 2 none, 3 all). Disabled entries " +
				"never fire and constant ones always do. With entries, format tavern makes entries without matchOptions follow " +
				"SillyTavern's rules with default options. Returns fired and notFired, each entry with its index, the keywords " +
				"that matched and the reason; use it to check keywords before or after writing a worldbook.\n\n" +
				`Example: {"worldbookId":"wb_41d0e7","text":"The Kestrel drops out of the jump gate into a storm."}`,
			Annotations: readHints(),
			Handler:     testWorldbookTriggers,
			Summary: func(out map[string]any) string {
				var names []string
				for _, r := range list(out, "fired") {
					if m, ok := r.(map[string]any); ok {
						names = append(names, quoted(str(m, "name")))
					}
				}
				s := fmt.Sprintf("%s of %d fire", plural(int64(len(names)), "entry", "entries"), num(out, "entryCount"))
				if len(names) > 0 {
					s += ": " + strings.Join(names, ", ")
				}
				return s + "."
			},
		},
	}
}

type triggerArgs struct {
	WorldbookID string         `json:"worldbookId"`
	Entries     []triggerEntry `json:"entries"`
	Text        string         `json:"text"`
	Format      string         `json:"format"`
}

// triggerEntry is an entry as the tool takes it: the service's shape, every field but keywords
// optional (isEnabled defaults to true, as on create).
type triggerEntry struct {
	EntryID           string               `json:"entryId"`
	Name              string               `json:"name"`
	Content           string               `json:"content"`
	Keywords          []string             `json:"keywords"`
	SecondaryKeywords []string             `json:"secondaryKeywords"`
	MatchOptions      *tavern.MatchOptions `json:"matchOptions"`
	IsEnabled         *bool                `json:"isEnabled"`
	IsConstant        bool                 `json:"isConstant"`
}

// triggerResult is one entry of the report, with its position.
type triggerResult struct {
	EntryID string   `json:"entryId"`
	Name    string   `json:"name"`
	Index   int      `json:"index"`
	Matched []string `json:"matched"`
	Reason  string   `json:"reason"`
}

// triggerReport is test_worldbook_triggers' result (tools.json).
type triggerReport struct {
	WorldbookID string          `json:"worldbookId,omitempty"`
	Format      string          `json:"format"`
	EntryCount  int             `json:"entryCount"`
	Fired       []triggerResult `json:"fired"`
	NotFired    []triggerResult `json:"notFired"`
}

// testWorldbookTriggers runs tavern.Triggers over a worldbook's entries or the given ones.
func testWorldbookTriggers(ctx context.Context, c *Call) (json.RawMessage, error) {
	var in triggerArgs
	if err := json.Unmarshal(c.Body, &in); err != nil {
		return nil, fmt.Errorf("decode the arguments: %w", err)
	}
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(c.Body, &fields)
	_, hasEntries := fields["entries"]
	if (in.WorldbookID != "") == hasEntries {
		msg := "Give worldbookId (to test a stored worldbook) or entries (to test entries you pass), not both."
		if !hasEntries {
			msg = "Give worldbookId (to test a stored worldbook) or entries (to test entries you pass); neither was given."
		}
		return nil, &Failure{Code: codeInvalidArguments, Message: msg, Detail: map[string]any{"arguments": []any{"worldbookId", "entries"}}}
	}
	out := triggerReport{Fired: []triggerResult{}, NotFired: []triggerResult{}}
	var entries []tavern.Entry
	if in.WorldbookID != "" {
		wb, err := c.Client.GetWorldbook(ctx, in.WorldbookID)
		if err != nil {
			return nil, err
		}
		if in.Format != "" && in.Format != wb.Format {
			return nil, &Failure{Code: codeInvalidArguments, Detail: map[string]any{"argument": "format"},
				Message: fmt.Sprintf("format %s does not apply to worldbook %s, which is %s; leave format out (it is for entries).", in.Format, wb.WorldbookID, wb.Format)}
		}
		list, err := c.Client.ListWorldbookEntries(ctx, in.WorldbookID, "")
		if err != nil {
			return nil, err
		}
		out.WorldbookID, out.Format = wb.WorldbookID, wb.Format
		entries = tavernEntries(list.Entries)
	} else {
		out.Format = in.Format
		if out.Format == "" {
			out.Format = upstream.WorldbookNative
		}
		for _, e := range in.Entries {
			te := tavern.Entry{EntryID: e.EntryID, Name: e.Name, Content: e.Content, Keywords: e.Keywords,
				SecondaryKeywords: e.SecondaryKeywords, MatchOptions: e.MatchOptions, IsEnabled: e.IsEnabled == nil || *e.IsEnabled,
				IsConstant: e.IsConstant}
			if te.MatchOptions == nil && out.Format == upstream.WorldbookTavern {
				te.MatchOptions = &tavern.MatchOptions{}
			}
			entries = append(entries, te)
		}
	}
	out.EntryCount = len(entries)
	// The zero MatchOptions are the service's native rules, for entries without their own.
	report := tavern.Triggers(entries, in.Text, tavern.MatchOptions{})
	for _, r := range report.Fired {
		out.Fired = append(out.Fired, triggerResult{EntryID: r.EntryID, Name: r.Name, Index: r.Index, Matched: nonNilStrings(r.Matched), Reason: r.Reason})
	}
	for _, r := range report.NotFired {
		out.NotFired = append(out.NotFired, triggerResult{EntryID: r.EntryID, Name: r.Name, Index: r.Index, Matched: nonNilStrings(r.Matched), Reason: r.Reason})
	}
	return marshalNoEscape(out)
}
