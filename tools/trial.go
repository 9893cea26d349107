package tools

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cardwriter/cardwriter-mcp/internal/phrase"
	"github.com/cardwriter/cardwriter-mcp/internal/undo"
)

// trialTools is the trial toolset: temporary cards under a key the client chooses.
func trialTools() []Tool {
	return []Tool{
		{
			Name:        "list_trial_cards",
			Toolset:     ToolsetTrial,
			Title:       "List trial cards",
			Description: "List your live trial cards: temporary cards under keys you choose, for trying an idea before authoring it for real. The service limits how many live at once (slots.used of slots.max) and for how long (ttlHours): read them here rather than assuming numbers.",
			Operation:   "listTrialCards",
			Handler:     paged(listing{key: "list", id: "clientKey"}),
			Annotations: readHints(),
			Summary: func(out map[string]any) string {
				slots := obj(out, "slots")
				return fmt.Sprintf("%s live; %d of %d slots in use; the service reports a lifetime of %dh.",
					phrase.Count(num(out, "total"), "trial card", "trial cards"), num(slots, "used"), num(slots, "max"), num(out, "ttlHours")) +
					pageSummary(out, "trial card", "trial cards")
			},
		},
		{
			Name:        "get_trial_card",
			Toolset:     ToolsetTrial,
			Title:       "Get a trial card",
			Description: "Get one trial card's summary. An expired or unknown key gives trial_not_found; upsert it again to bring it back.",
			Operation:   "getTrialCard",
			Version:     undo.TrialVersionOf,
			Annotations: readHints(),
			Summary:     summarizeTrial,
		},
		{
			Name:    "upsert_trial_card",
			Toolset: ToolsetTrial,
			Title:   "Create or update a trial card",
			Description: "Create or update the trial card of a clientKey you choose. card is a full replacement: send every field to keep; prologue lines are for the PLAYER to say. worldbook.entries, when given, replaces all the trial's entries; left out, they are kept. With every slot used a new key is refused: delete one with delete_trial_card or reuse a key.\n\n" +
				`Example: {"clientKey":"mira-draft","card":{"roleName":"Captain Mira Vale"},"worldbook":{"entries":[{"name":"Kestrel","content":"Mira's freighter.","keywords":["Kestrel"]}]}}`,
			Operation:   "upsertTrialCard",
			Check:       "get_trial_card",
			Annotations: replaceHints(),
			Revise:      reviseUpsertTrial,
			Guard:       true,
			Summary:     summarizeTrial,
		},
		{
			Name:        "delete_trial_card",
			Toolset:     ToolsetTrial,
			Title:       "Delete a trial card",
			Description: "Remove a trial card and its worldbook for good, freeing its slot. The author confirms first.",
			Operation:   "deleteTrialCard",
			Annotations: hints(false, true, true, true),
			Handler: func(ctx context.Context, c *Call) (json.RawMessage, error) {
				key := c.Params["clientKey"]
				if g, err := c.guard(); err != nil || g != (undo.Guard{}) {
					// A dry run asks nothing; a stale one is refused before asking.
					if err := c.beforeWrite(ctx); err != nil {
						return nil, err
					}
				}
				if err := confirm(ctx, c, "Delete the trial card",
					fmt.Sprintf("Delete trial card %q now? Its card and worldbook are gone for good.", key)); err != nil {
					return nil, err
				}
				out, err := generic(ctx, c)
				if err == nil {
					c.forgetDeletedTrial(ctx, key)
				}
				return out, err
			},
			Revise: reviseDeleteTrial,
			Guard:  true,
			Summary: func(out map[string]any) string {
				return fmt.Sprintf("Removed trial card %s.", quoted(str(out, "clientKey")))
			},
		},
	}
}

// summarizeTrial sums up a trial summary.
func summarizeTrial(out map[string]any) string {
	verb := "Trial"
	if boolean(out, "created") {
		verb = "Created trial"
	}
	slots := obj(out, "slots")
	wb := obj(out, "worldbook")
	return fmt.Sprintf("%s %s (card %s) expires at %s; changed: %s; worldbook: %s; %d of %d slots in use.",
		verb, quoted(str(out, "clientKey")), str(out, "roleId"), str(out, "expiresAt"),
		joinOr(stringsOf(list(out, "changed")), "nothing"), phrase.Count(num(wb, "entries"), "entry", "entries"),
		num(slots, "used"), num(slots, "max"))
}
