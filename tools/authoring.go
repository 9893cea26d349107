package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cardwriter/cardwriter-mcp/internal/phrase"
)

// authoringTools is the authoring toolset: creating a card, writing its parts, validating and
// publishing it, and its images.
func authoringTools() []Tool {
	return []Tool{
		{
			Name:    "create_card",
			Toolset: ToolsetAuthoring,
			Title:   "Create a card",
			Description: "Create a new, empty private card and return its roleId. Fill it with set_opening_lines, write_card_document and update_card_profile, then validate_card. The same idempotencyKey returns the same card (with different fields: conflict); left out, each call makes a new card.\n\n" +
				`Example: {"roleName":"Captain Mira Vale","idempotencyKey":"mira-vale-1"}`,
			Operation: "createCard",
			// Not destructive (it only adds a card). Not idempotent: two calls with the same
			// arguments and no idempotencyKey make two cards (the key picked per call only
			// makes the call's own retries safe).
			Annotations: addHints(),
			Summary: func(out map[string]any) string {
				return fmt.Sprintf("Card %s is ready to write (%s, %s).", str(out, "roleId"), str(out, "roleVisibility"), str(out, "reviewStatus"))
			},
		},
		{
			Name:    "set_opening_lines",
			Toolset: ToolsetAuthoring,
			Title:   "Set a card's opening lines",
			Description: "Set a card's first message (roleWelcome, as the character), its alternates (get_card's welcomeAlternates) and prologue lines, which are for the PLAYER to say and never sent as the character. A list sent replaces the stored one; left out, it is kept; [] clears it.\n\n" +
				`Example: {"roleId":"r_8f2c1a","roleWelcome":"\"You're late, pilot.\"","prologue":["Sorry, Captain."]}`,
			Operation:   "setOpeningLines",
			Annotations: replaceHints(),
			Revise:      reviseOpeningLines,
			Guard:       true,
			Summary: func(out map[string]any) string {
				return fmt.Sprintf("Saved the opening lines of card %s.", str(out, "roleId"))
			},
		},
		{
			Name:    "update_card_profile",
			Toolset: ToolsetAuthoring,
			Title:   "Update a card's profile",
			Description: "Update a card's basic profile and return the card. Fields sent replace the stored ones (tags as a whole list); fields left out are kept; \"\" clears an image. Image ids come from upload_image with the matching purpose.\n\n" +
				`Example: {"roleId":"r_8f2c1a","tags":["sci-fi"]}`,
			Operation:   "updateCardProfile",
			Annotations: replaceHints(),
			Revise:      reviseProfile,
			Guard:       true,
			Summary: func(out map[string]any) string {
				if name := str(out, "roleName"); name != "" {
					return fmt.Sprintf("Updated the profile of card %s %s.", str(out, "roleId"), quoted(name))
				}
				return fmt.Sprintf("Updated the profile of card %s.", str(out, "roleId"))
			},
		},
		{
			Name:    "write_card_document",
			Toolset: ToolsetAuthoring,
			Title:   "Write a card's text sections",
			Description: "Write a card's long text sections in one call. A section sent replaces its text; left out, it is kept; \"\" clears it. validate_card says which sections the service requires.\n\n" +
				`Example: {"roleId":"r_8f2c1a","sections":{"description":"Mira Vale captains the freighter Kestrel."}}`,
			Operation:   "writeCardDocument",
			Annotations: replaceHints(),
			Revise:      reviseDocument,
			Guard:       true,
			Summary: func(out map[string]any) string {
				return fmt.Sprintf("Saved the text sections of card %s.", str(out, "roleId"))
			},
		},
		{
			Name:    "set_card_visibility",
			Toolset: ToolsetAuthoring,
			Title:   "Set a card's visibility",
			Description: "Make a card private again (\"private\" is the only value this API may set). Submitting a card for review is publish_card.\n\n" +
				`Example: {"roleId":"r_8f2c1a","visibility":"private"}`,
			Operation: "setCardVisibility",
			// Not destructive: it changes who may see the card, not what it says.
			Annotations: hints(false, false, true, true),
			Revise:      reviseVisibility,
			Guard:       true,
			Summary: func(out map[string]any) string {
				if v := str(out, "roleVisibility"); v != "" {
					return fmt.Sprintf("Card %s is now %s.", str(out, "roleId"), v)
				}
				return fmt.Sprintf("Set the visibility of card %s.", str(out, "roleId"))
			},
		},
		{
			Name:        "validate_card",
			Toolset:     ToolsetAuthoring,
			Title:       "Validate a card",
			Description: "Check whether a card is ready to publish, without changing it: ready is true when no issue is an error. Fix the errors (and ideally the warnings) with the authoring tools, then validate again.",
			Operation:   "validateCard",
			Cut:         "issues",
			Annotations: readHints(),
			Summary:     summarizeReport,
		},
		{
			Name:        "publish_card",
			Toolset:     ToolsetAuthoring,
			Title:       "Publish a card for review",
			Description: "Submit a card for review, only when the author asks. Refused while validate_card reports errors (validation_failed) or the card awaits review (conflict). The author confirms first.",
			Operation:   "publishCard",
			Check:       "get_card",
			// Not idempotent: a second submission is refused with conflict.
			Annotations: hints(false, false, false, true),
			Handler:     publishCard,
			Summary: func(out map[string]any) string {
				if status := str(out, "reviewStatus"); status != "" {
					return fmt.Sprintf("Submitted card %s for review (reviewStatus %s).", str(out, "roleId"), status)
				}
				return fmt.Sprintf("Submitted card %s for review.", str(out, "roleId"))
			},
		},
		{
			Name:    "upload_image",
			Toolset: ToolsetAuthoring,
			Title:   "Upload an image",
			Description: "Upload an avatar or background image and return its imageId (the service may refuse a file under the 8 MiB limit, and says why). roleId lists it on that card's author page; put it on the card with update_card_profile. Each call stores a new image.\n\n" +
				`Example: {"purpose":"avatar","roleId":"r_8f2c1a","contentType":"image/png","dataBase64":"iVBORw0KGgo..."}`,
			Operation:   "uploadImage",
			Check:       "list_card_assets",
			Annotations: addHints(),
			Summary: func(out map[string]any) string {
				return fmt.Sprintf("Uploaded image %s (%dx%d): %s", str(out, "imageId"), num(out, "width"), num(out, "height"), str(out, "url"))
			},
		},
		{
			Name:    "list_card_assets",
			Toolset: ToolsetAuthoring,
			Title:   "List a card's images",
			Description: "List the images on a card's author page. " +
				"Each has imageId, purpose (avatar or background) and URL. " +
				"Use it to find an uploaded image's id again.",
			Operation:   "listCardAssets",
			Handler:     paged(listing{key: "images", id: "imageId"}),
			Annotations: readHints(),
			Summary: func(out map[string]any) string {
				return fmt.Sprintf("Card %s has %s on its author page.", str(out, "roleId"), phrase.Count(num(out, "total"), "image", "images")) +
					pageSummary(out, "image", "images")
			},
		},
	}
}

// summarizeReport sums up a validation report.
func summarizeReport(out map[string]any) string {
	var errs, warns int64
	for _, is := range list(out, "issues") {
		if m, ok := is.(map[string]any); ok {
			if str(m, "severity") == "error" {
				errs++
			} else {
				warns++
			}
		}
	}
	if boolean(out, "ready") {
		return fmt.Sprintf("Card %s is ready to publish (%s).", str(out, "roleId"), phrase.Count(warns, "warning", "warnings")) + omittedSummary(out)
	}
	return fmt.Sprintf("Card %s is not ready to publish: %s, %s.", str(out, "roleId"),
		phrase.Count(errs, "error", "errors"), phrase.Count(warns, "warning", "warnings")) + omittedSummary(out)
}

// publishCard validates the card first and submits it only when the report is ready, so that
// the model gets the full list of issues rather than a bare refusal.
func publishCard(ctx context.Context, c *Call) (json.RawMessage, error) {
	const steps = 2
	roleID := c.Params["roleId"]
	var report struct {
		RoleID string `json:"roleId"`
		Ready  bool   `json:"ready"`
		Issues []struct {
			Field    string `json:"field"`
			Severity string `json:"severity"`
			Message  string `json:"message"`
		} `json:"issues"`
	}
	// Progress is reported as each step starts, never as the last act before returning: over
	// streamable HTTP a notification still queued when the response is written can be lost,
	// and the response itself says the work is done.
	c.Progress.Report(ctx, 0, steps, "Validating the card.")
	var raw json.RawMessage
	if err := c.Client.Call(ctx, "validateCard", map[string]string{"roleId": roleID}, nil, &raw); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &report); err != nil {
		return nil, fmt.Errorf("decode the validation report: %w", err)
	}
	if !report.Ready {
		var lines []string
		var issues []any
		for _, is := range report.Issues {
			issues = append(issues, map[string]any{"field": is.Field, "severity": is.Severity, "message": is.Message})
			if is.Severity == "error" {
				lines = append(lines, is.Field+": "+is.Message)
			}
		}
		if issues == nil {
			issues = []any{}
		}
		msg := "The card was not submitted for review: its validation report is not ready."
		if len(lines) > 0 {
			msg = "The card was not submitted for review; fix these errors first: " + strings.Join(lines, "; ")
		}
		return nil, &Failure{Code: codeValidationFailed, Message: msg, Detail: map[string]any{"issues": issues}}
	}
	if err := confirm(ctx, c, "Submit for review",
		fmt.Sprintf("Submit card %s for review? It goes to the card service's review, and the card's review status changes.", roleID)); err != nil {
		return nil, err
	}
	c.Progress.Report(ctx, 1, steps, "The card is ready; submitting it for review.")
	return generic(ctx, c)
}
