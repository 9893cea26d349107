package tools

import (
	"fmt"

	"github.com/cardwriter/cardwriter-mcp/internal/phrase"
	"github.com/cardwriter/cardwriter-mcp/internal/undo"
)

// cardTools is the cards toolset: reading a card and the signed-in identity.
func cardTools() []Tool {
	return []Tool{
		{
			Name:        "get_card",
			Toolset:     ToolsetCards,
			Title:       "Get a card",
			Description: "Get one card's full detail by roleId. prologue lines are for the PLAYER to say, never sent as the character. Use it before changing a card, or to check a write.",
			Operation:   "getCard",
			Version:     undo.CardVersion,
			Preview:     previewOfCard,
			Annotations: readHints(),
			Summary: func(out map[string]any) string {
				first := "no first message yet"
				if str(out, "roleWelcome") != "" {
					first = "first message set"
				}
				return fmt.Sprintf("Card %s %s (%s, %s): %s, %s, %s.", str(out, "roleId"), quoted(str(out, "roleName")),
					str(out, "roleVisibility"), str(out, "reviewStatus"), first,
					phrase.Count(int64(len(list(out, "welcomeAlternates"))), "alternate first message", "alternate first messages"),
					phrase.Count(int64(len(list(out, "prologue"))), "prologue line", "prologue lines"))
			},
		},
		{
			Name:        "whoami",
			Toolset:     ToolsetCards,
			Title:       "Who is signed in",
			Description: "Show who is signed in to the card service and the scopes the token grants (authoring needs mcp:card-writer). Use it to check the sign-in before authoring.",
			Operation:   "getMe",
			Annotations: readHints(),
			Summary: func(out map[string]any) string {
				return fmt.Sprintf("Signed in as %s (userId %s); scopes: %s.", quoted(str(out, "nickname")), str(out, "userId"),
					joinOr(stringsOf(list(out, "scopes")), "none"))
			},
		},
	}
}
