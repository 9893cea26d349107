package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cardwriter/cardwriter-mcp/internal/phrase"
)

// worldbookTools is the worldbook toolset: keyword-triggered lore entries, bindable to cards.
func worldbookTools() []Tool {
	return []Tool{
		{
			Name:    "list_worldbooks",
			Toolset: ToolsetWorldbook,
			Title:   "List your worldbooks",
			Description: "List your worldbooks. " +
				"Each has worldbookId, name, description, tags, format, entryCount and boundRoleIds (the cards it is " +
				"bound to). Use it to find a worldbook to reuse before creating a new one.\n\n" +
				`Example: {}`,
			Operation:   "listWorldbooks",
			Handler:     paged(listing{key: "list", id: "worldbookId"}),
			Annotations: readHints(),
			Summary: func(out map[string]any) string {
				return fmt.Sprintf("You have %s.", phrase.Count(num(out, "total"), "worldbook", "worldbooks")) + pageSummary(out, "worldbook", "worldbooks")
			},
		},
		{
			Name:    "create_worldbook",
			Toolset: ToolsetWorldbook,
			Title:   "Create a worldbook",
			Description: "Create an empty worldbook and return its worldbookId. format is native (the default; entries have " +
				"matchOptions null) or tavern (SillyTavern-style; every entry has a full matchOptions object), and stays " +
				"as created. Add entries and bind it to a card with write_worldbook_document. Each call creates a new " +
				"worldbook.\n\n" +
				`Example: {"name":"The Kestrel's Sector","description":"Places, factions and ships around the Kestrel.","tags":["sci-fi"]}`,
			Operation:   "createWorldbook",
			Check:       "list_worldbooks",
			Annotations: addHints(),
			Summary: func(out map[string]any) string {
				return fmt.Sprintf("Created worldbook %s.", str(out, "worldbookId"))
			},
		},
		{
			Name:    "get_worldbook",
			Toolset: ToolsetWorldbook,
			Title:   "Get a worldbook",
			Description: "Get one worldbook's metadata by worldbookId. " +
				"Returns name, description, tags, format, entryCount and boundRoleIds (the cards it is bound to). " +
				"Use list_worldbook_entries for the entries themselves. An unknown worldbookId gives a not-found error.\n\n" +
				`Example: {"worldbookId":"wb_41d0e7"}`,
			Operation:   "getWorldbook",
			Annotations: readHints(),
			Summary: func(out map[string]any) string {
				return fmt.Sprintf("Worldbook %s %s (%s): %s, bound to %s.", str(out, "worldbookId"), quoted(str(out, "name")),
					str(out, "format"), phrase.Count(num(out, "entryCount"), "entry", "entries"),
					phrase.Count(int64(len(list(out, "boundRoleIds"))), "card", "cards"))
			},
		},
		{
			Name:    "list_card_worldbooks",
			Toolset: ToolsetWorldbook,
			Title:   "List a card's worldbooks",
			Description: "List the worldbooks bound to a card, with the same fields as list_worldbooks. " +
				"Bind a worldbook to a card with write_worldbook_document (binding).\n\n" +
				`Example: {"roleId":"r_8f2c1a"}`,
			Operation:   "listCardWorldbooks",
			Handler:     paged(listing{key: "list", id: "worldbookId"}),
			Annotations: readHints(),
			Summary: func(out map[string]any) string {
				return fmt.Sprintf("Card %s has %s bound.", str(out, "roleId"), phrase.Count(num(out, "total"), "worldbook", "worldbooks")) +
					pageSummary(out, "worldbook", "worldbooks")
			},
		},
		{
			Name:    "list_worldbook_entries",
			Toolset: ToolsetWorldbook,
			Title:   "List a worldbook's entries",
			Description: "List or search a worldbook's entries, a page at a time, optionally only those of one category. " +
				"query finds entries by words in their name, keywords or content, best first. detail full gives every field " +
				"(content, secondaryKeywords, matchOptions, category, isEnabled, isConstant, priority, sortOrder, ...). Use the " +
				"entryIds with write_worldbook_document to update or delete entries.\n\n" +
				`Example: {"worldbookId":"wb_41d0e7","query":"blind cartographer"}`,
			Operation: "listWorldbookEntries",
			Handler: func(ctx context.Context, c *Call) (json.RawMessage, error) {
				data, err := generic(ctx, c)
				if err != nil {
					return nil, err
				}
				return pageResult(c, data, listing{key: "entries", id: "entryId"}, entryShapes)
			},
			Annotations: readHints(),
			Summary: func(out map[string]any) string {
				return fmt.Sprintf("Worldbook %s: %s.", str(out, "worldbookId"), phrase.Count(num(out, "total"), "entry", "entries")) +
					pageSummary(out, "entry", "entries")
			},
		},
		{
			Name:    "write_worldbook_document",
			Toolset: ToolsetWorldbook,
			Title:   "Write a worldbook",
			Description: "Write a worldbook's metadata, entries and card binding in one call. metadata replaces the fields you " +
				"send. entries are operations, at most 500 per call: create needs name, content and keywords, the rest " +
				"takes the service's defaults (matchOptions null for a native worldbook, {caseSensitive, matchWholeWords, " +
				"selectiveLogic} for a tavern one); update needs entryId and replaces only the fields you send; delete " +
				"takes entryId only. keywords trigger an entry; secondaryKeywords are an AND gate (a main keyword and one " +
				"of these must both appear). binding {roleId} binds the worldbook to a card. A refusal names the failing " +
				"op when the service says which; check list_worldbook_entries before sending again. Returns " +
				"createdEntryIds (in the order of the create ops) and counts.\n\n" +
				`Example: {"worldbookId":"wb_41d0e7","entries":[{"op":"create","name":"The Kestrel",` +
				`"content":"A battered freighter, Mira's ship and home.","keywords":["Kestrel","the ship"]},` +
				`{"op":"update","entryId":"e_2b9c","priority":5},{"op":"delete","entryId":"e_77a1"}],"binding":{"roleId":"r_8f2c1a"}}`,
			Operation: "writeWorldbookDocument",
			Check:     "list_worldbook_entries",
			// Destructive (delete ops, replaced fields); not idempotent (create ops add entries each time).
			Annotations: hints(false, true, false, true),
			Revise:      reviseWorldbook,
			Summary: func(out map[string]any) string {
				created := stringsOf(list(out, "createdEntryIds"))
				s := fmt.Sprintf("Worldbook written: %s created", phrase.Count(int64(len(created)), "entry", "entries"))
				switch {
				case len(created) > 3: // the JSON's createdEntryIds has them all, in order
					s += " (createdEntryIds)"
				case len(created) > 0:
					s += " (" + strings.Join(created, ", ") + ")"
				}
				s += fmt.Sprintf(", %d updated, %d deleted", num(out, "updatedCount"), num(out, "deletedCount"))
				if boolean(out, "bound") {
					s += "; bound to the card"
				}
				return s + "."
			},
		},
	}
}
