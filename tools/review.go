package tools

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"
	"github.com/cardwriter/cardwriter-mcp/internal/phrase"

	"github.com/cardwriter/cardwriter-mcp/internal/review"
	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
	"github.com/cardwriter/cardwriter-mcp/internal/tavernsync"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// reviewTool is review_card: the card author's review of a card and its bound worldbooks.
func reviewTool() Tool {
	return Tool{
		Name:        "review_card",
		Toolset:     ToolsetAuthoring,
		Title:       "Review a card",
		Description: "Review a card and its bound worldbooks as an editor would, without changing anything: token counts (cl100k_base, with what goes with every message) and findings with a fix each (missing parts, weak first messages, macro mistakes, prologue lines written as the character, entries that never or always fire). validate_card says what the service requires; this, what makes the card read well.",
		Annotations: readHints(),
		Handler:     reviewCard,
		Cut:         "findings",
		Preview:     previewOfCard, // replaced by the handler's fuller preview
		Summary: func(out map[string]any) string {
			counts := map[string]int64{}
			for _, f := range list(out, "findings") {
				if m, ok := f.(map[string]any); ok {
					counts[str(m, "severity")]++
				}
			}
			tokens := obj(out, "tokens")
			return fmt.Sprintf("Card %s: %s, %s, %s; %d tokens, %d with every message (%s).", str(out, "roleId"),
				phrase.Count(counts["error"], "error", "errors"), phrase.Count(counts["warning"], "warning", "warnings"), phrase.Count(counts["info"], "note", "notes"),
				num(tokens, "total"), num(tokens, "permanent"), str(out, "encoding")) + omittedSummary(out)
		},
	}
}

func reviewCard(ctx context.Context, c *Call) (json.RawMessage, error) {
	var in struct {
		RoleID string `json:"roleId"`
	}
	if err := json.Unmarshal(c.Body, &in); err != nil {
		return nil, fmt.Errorf("decode the arguments: %w", err)
	}
	card, err := c.Client.GetCard(ctx, in.RoleID)
	if err != nil {
		return nil, err
	}
	rc := review.Card{RoleID: card.RoleID, RoleName: card.RoleName, RoleDesc: card.RoleDesc, RoleWelcome: card.RoleWelcome,
		Alternates: card.WelcomeAlternates, Prologue: card.Prologue, Sections: map[string]string{}}
	if s := card.Sections; s != nil {
		for name, v := range map[string]*string{"description": s.Description, "personality": s.Personality, "scenario": s.Scenario,
			"exampleDialogue": s.ExampleDialogue, "systemPrompt": s.SystemPrompt, "postHistoryInstructions": s.PostHistoryInstructions,
			"creatorNotes": s.CreatorNotes} {
			if v != nil {
				rc.Sections[name] = *v
			}
		}
	}
	bound, err := c.Client.ListCardWorldbooks(ctx, in.RoleID)
	if err != nil {
		return nil, err
	}
	var wbs []review.Worldbook
	budget := c.matchBudget(ctx) // the preview's and the review's /regex/ keys together
	preview := cardPreview{RoleName: card.RoleName, Greetings: append([]string{card.RoleWelcome}, card.WelcomeAlternates...),
		Prologue: append([]string{}, card.Prologue...), Worldbooks: []previewWorldbook{}}
	for _, wb := range bound.List {
		entries, err := c.Client.ListWorldbookEntries(ctx, wb.WorldbookID, "")
		if err != nil {
			return nil, err
		}
		te := tavernEntries(entries.Entries)
		wbs = append(wbs, review.Worldbook{ID: wb.WorldbookID, Name: wb.Name, Entries: te})
		pw, err := previewWorldbookOf(wb.Name, te, preview.Greetings, card.RoleName, budget)
		if err != nil {
			return nil, budgetFailure(err)
		}
		preview.Worldbooks = append(preview.Worldbooks, pw)
	}
	if card.AvatarImageID != "" {
		if img, note := tavernsync.FetchAvatar(ctx, c.Client, card.RoleID, card.AvatarImageID); note == "" {
			preview.Avatar = avatarThumbnail(img)
		}
	}
	c.Meta = map[string]any{previewKey: preview}
	report, err := review.ReviewWithin(rc, wbs, budget)
	if err != nil {
		return nil, budgetFailure(err)
	}
	return jsontext.Marshal(report)
}

// tavernEntries turns stored entries into the simulator's.
func tavernEntries(list []upstream.WorldbookEntry) []tavern.Entry {
	out := make([]tavern.Entry, 0, len(list))
	for _, e := range list {
		te := tavern.Entry{EntryID: e.EntryID, Name: e.Name, Content: e.Content, Keywords: e.Keywords,
			SecondaryKeywords: e.SecondaryKeywords, IsEnabled: e.IsEnabled, IsConstant: e.IsConstant, SortOrder: e.SortOrder}
		if e.MatchOptions != nil {
			mo := tavern.MatchOptions(*e.MatchOptions)
			te.MatchOptions = &mo
		}
		out = append(out, te)
	}
	return out
}
