package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cardwriter/cardwriter-mcp/internal/phrase"
	"github.com/cardwriter/cardwriter-mcp/internal/undo"
)

// worldbookTools is the worldbook toolset: keyword-triggered lore entries, bindable to cards.
func worldbookTools() []Tool {
	return []Tool{
		{
			Name:        "list_worldbooks",
			Toolset:     ToolsetWorldbook,
			Title:       "List your worldbooks",
			Description: "List your worldbooks. Use it to find a worldbook to reuse before creating one.",
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
			Description: "Create an empty worldbook and return its worldbookId. format native (the default; entries' matchOptions null) or tavern (SillyTavern-style matchOptions) never changes. Add entries and bind it to a card with write_worldbook_document. Each call creates a new worldbook.\n\n" +
				`Example: {"name":"The Kestrel's Sector","tags":["sci-fi"]}`,
			Operation:   "createWorldbook",
			Check:       "list_worldbooks",
			Annotations: addHints(),
			Summary: func(out map[string]any) string {
				return fmt.Sprintf("Created worldbook %s.", str(out, "worldbookId"))
			},
		},
		{
			Name:        "get_worldbook",
			Toolset:     ToolsetWorldbook,
			Title:       "Get a worldbook",
			Description: "Get one worldbook's metadata; its entries are list_worldbook_entries'.",
			Operation:   "getWorldbook",
			Version:     undo.MetaVersion,
			Annotations: readHints(),
			Summary: func(out map[string]any) string {
				return fmt.Sprintf("Worldbook %s %s (%s): %s, bound to %s.", str(out, "worldbookId"), quoted(str(out, "name")),
					str(out, "format"), phrase.Count(num(out, "entryCount"), "entry", "entries"),
					phrase.Count(int64(len(list(out, "boundRoleIds"))), "card", "cards"))
			},
		},
		{
			Name:        "list_card_worldbooks",
			Toolset:     ToolsetWorldbook,
			Title:       "List a card's worldbooks",
			Description: "List the worldbooks bound to a card. Bind one with write_worldbook_document (binding).",
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
			Description: "List or search a worldbook's entries a page at a time, optionally of one category. Update or delete them by entryId with write_worldbook_document.\n\n" +
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
			Description: "Write a worldbook's metadata, entries and card binding in one call; metadata replaces the fields sent. entries are ops, at most 500 per call: create needs name, content and keywords; update needs entryId and replaces the fields sent; delete takes entryId. binding {roleId} binds the worldbook to a card. A refused call applies nothing and names the failing op when it can; check list_worldbook_entries before sending again.\n\n" +
				`Example: {"worldbookId":"wb_41d0e7","entries":[{"op":"create","name":"The Kestrel","content":"Mira's freighter.","keywords":["Kestrel"]},{"op":"delete","entryId":"e_77a1"}],"binding":{"roleId":"r_8f2c1a"}}`,
			Operation: "writeWorldbookDocument",
			Check:     "list_worldbook_entries",
			// Destructive (delete ops, replaced fields); not idempotent (create ops add entries each time).
			Annotations: hints(false, true, false, true),
			Revise:      reviseWorldbook,
			Guard:       true,
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
