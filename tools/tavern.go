package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cardwriter/cardwriter-mcp/internal/aside"
	"github.com/cardwriter/cardwriter-mcp/internal/phrase"
	"github.com/cardwriter/cardwriter-mcp/internal/tavernsync"
)

// tavernTools is the tavern toolset: character cards and lorebooks in the community's file
// formats (Character Card V1/V2/V3 as JSON, PNG or CHARX; lorebook_v3; SillyTavern World Info),
// in and out. The formats are package tavern's; the import and export use case (mapping them to
// the card service's operations, keeping aside (AsideStore) what the service cannot hold) is
// package tavernsync's, and these handlers only decode arguments and shape results.
func tavernTools() []Tool {
	return []Tool{
		{
			Name:    "import_tavern_card",
			Toolset: ToolsetTavern,
			Title:   "Import a character card file",
			Description: "Import a character card file (V1/V2/V3 JSON, PNG or CHARX) as a new card with its opening lines, sections, tags, avatar and lorebook (a bound tavern worldbook); what the service cannot hold is kept aside for export_tavern_card. The same file again gives (or finishes) the same card; another clientKey makes a copy. mode trial makes the trial card clientKey instead.\n\n" +
				`Example: {"source":{"path":"/home/me/cards/Vey.png"}}`,
			// Not destructive: it only adds a card, or a trial under a clientKey no other trial holds
			// (refuseOtherTrial). Idempotent: the same file gives the same card, and a repeated
			// import creates nothing more.
			Annotations: hints(false, false, true, true),
			Handler:     importTavernCard,
			Revise:      reviseByUseCase,
			Summary:     summarizeCardImport,
		},
		{
			Name:    "export_tavern_card",
			Toolset: ToolsetTavern,
			Title:   "Export a card as a character card file",
			Description: "Export a card and its bound worldbooks as a Character Card V3 file (json, png or charx). What import_tavern_card kept aside is restored; notRestored names what could not be. A file too large for the result goes to the client's roots over stdio (or path), else to structuredContent.link.\n\n" +
				`Example: {"roleId":"r_8f2c1a","format":"png"}`,
			Annotations: readHints(),
			Handler:     exportTavernCard,
			OwnBudget:   true, // large files: issue 22 item 4
			Summary: func(out map[string]any) string {
				s := fmt.Sprintf("Exported card %s as a Character Card V3 %s", str(out, "roleId"), strings.ToUpper(str(out, "format")))
				if wbs := list(out, "worldbooks"); len(wbs) > 0 {
					var n int64
					for _, w := range wbs {
						n += num(w.(map[string]any), "entries")
					}
					s += fmt.Sprintf(" with %s from %s", phrase.Count(n, "lorebook entry", "lorebook entries"), phrase.Count(int64(len(wbs)), "worldbook", "worldbooks"))
				}
				s += restoredSummary(out)
				if k := list(out, "droppedAssets"); len(k) > 0 {
					s += fmt.Sprintf("; %s left out (droppedAssets)", phrase.Count(int64(len(k)), "embedded asset", "embedded assets"))
				}
				if str(out, "avatar") == "placeholder" {
					s += "; placeholder image"
				}
				return s + "." + deliverySummary(out)
			},
		},
		{
			Name:    "export_tavern_worldbook",
			Toolset: ToolsetTavern,
			Title:   "Export a worldbook as a lorebook file",
			Description: "Export a worldbook's entries as a lorebook file (SillyTavern World Info or lorebook_v3). What import_tavern_worldbook kept aside is restored; notRestored names what could not be. A file too large for the result goes to the client's roots over stdio (or path), else to structuredContent.link.\n\n" +
				`Example: {"worldbookId":"wb_3c9d","format":"lorebook_v3"}`,
			Annotations: readHints(),
			Handler:     exportTavernWorldbook,
			OwnBudget:   true, // large files: issue 22 item 4
			Summary: func(out map[string]any) string {
				s := fmt.Sprintf("Exported worldbook %s %s as %s with %s", str(out, "worldbookId"), quoted(str(out, "name")),
					phrase.Either(str(out, "format") == tavernsync.FormatLorebookV3, "a lorebook_v3 file", "a SillyTavern World Info file"),
					phrase.Count(num(out, "entries"), "entry", "entries"))
				s += restoredSummary(out)
				return s + "." + deliverySummary(out)
			},
		},
		{
			Name:    "import_tavern_worldbook",
			Toolset: ToolsetTavern,
			Title:   "Import a lorebook file",
			Description: "Import a lorebook file (lorebook_v3, SillyTavern World Info, a character_book or a card's lorebook) as entries of a new tavern worldbook, or with worldbookId of that one; roleId binds it to a card. What the service cannot hold is kept aside for the exports. Repeating it is safe.\n\n" +
				`Example: {"source":{"json":{"entries":{"0":{"key":["kraken"],"content":"It hunts."}}}},"roleId":"r_8f2c1a"}`,
			// Adds a worldbook or entries, once per idempotency key; deletes and replaces nothing.
			Annotations: hints(false, false, true, true),
			Check:       "list_worldbook_entries",
			Handler:     importTavernWorldbook,
			Revise:      reviseByUseCase,
			Summary: func(out map[string]any) string {
				if boolean(out, "repeated") {
					return fmt.Sprintf("Imported before under idempotencyKey %s: worldbook %s %s with %s; nothing was added now.",
						quoted(str(out, "idempotencyKey")), str(out, "worldbookId"), quoted(str(out, "name")), phrase.Count(num(out, "entryCount"), "entry", "entries"))
				}
				verb := "Added"
				if boolean(out, "created") {
					verb = "Created worldbook " + str(out, "worldbookId") + " " + quoted(str(out, "name")) + " with"
				} else {
					verb += " to worldbook " + str(out, "worldbookId") + ":"
				}
				s := fmt.Sprintf("%s %s", verb, phrase.Count(num(out, "entryCount"), "entry", "entries"))
				if boolean(out, "bound") {
					s += ", bound to card " + str(out, "roleId")
				}
				if k := list(out, "keptAside"); len(k) > 0 {
					s += fmt.Sprintf("; kept aside: %s", phrase.Count(int64(len(k)), "field", "fields"))
				}
				return s + "."
			},
		},
	}
}

// summarizeCardImport sums up an import_tavern_card result.
func summarizeCardImport(out map[string]any) string {
	src := obj(out, "source")
	from := str(src, "container") + "/" + str(src, "spec")
	var s string
	if str(out, "mode") == "trial" {
		s = fmt.Sprintf("Imported %s (%s) as trial card %s (card %s)", quoted(str(out, "roleName")), from,
			quoted(str(out, "clientKey")), str(out, "roleId"))
	} else {
		s = fmt.Sprintf("Imported %s (%s) as card %s", quoted(str(out, "roleName")), from, str(out, "roleId"))
		if boolean(out, "resumed") {
			s += " (imported before: the same card, now complete)"
		}
	}
	if wb := str(out, "worldbookId"); wb != "" {
		s += fmt.Sprintf("; worldbook %s with %s bound to it", wb, phrase.Count(num(out, "entryCount"), "entry", "entries"))
	} else if n := num(out, "entryCount"); n > 0 {
		s += fmt.Sprintf(" with %s", phrase.Count(n, "worldbook entry", "worldbook entries"))
	}
	if id := str(out, "avatarImageId"); id != "" {
		s += "; avatar " + id
	}
	if k := stringsOf(list(out, "keptAside")); len(k) > 0 {
		s += "; kept aside (restored on export): " + firstNames(k)
	}
	return s + "."
}

// firstNames names the first few of names, and how many more there are.
func firstNames(names []string) string {
	const shown = 8
	s := strings.Join(names[:min(len(names), shown)], ", ")
	if len(names) > shown {
		s += fmt.Sprintf(" and %d more", len(names)-shown)
	}
	return s
}

// restoredSummary sums up an export's keptAsideRestored and notRestored, "" when both are empty.
func restoredSummary(out map[string]any) string {
	var s string
	if k := list(out, "keptAsideRestored"); len(k) > 0 {
		s += fmt.Sprintf("; restored %s kept aside at import", phrase.Count(int64(len(k)), "field", "fields"))
	}
	if k := stringsOf(list(out, "notRestored")); len(k) > 0 {
		s += fmt.Sprintf("; %s the card service does not hold could not be restored (notRestored): %s", phrase.Count(int64(len(k)), "field", "fields"), firstNames(k))
	}
	return s
}

// deliverySummary says where an export's file went when it is not in the result: "" inline.
func deliverySummary(out map[string]any) string {
	if w := obj(out, "written"); w != nil {
		return fmt.Sprintf(" Written to %s (%d bytes).", str(w, "path"), num(w, "size"))
	}
	if l := obj(out, "link"); l != nil {
		s := fmt.Sprintf(" The file (%s, %d bytes) is too large for this result: read it with resources/read at %s (only you, until %s)",
			str(l, "mimeType"), num(l, "size"), str(l, "uri"), str(l, "expiresAt"))
		if u := str(l, "downloadUrl"); u != "" {
			s += ", or give the author its downloadUrl to open in a browser"
		}
		return s + "."
	}
	return ""
}

// AsideKey names a record of the kept-aside store: card service (API base URL), user (userId from
// GET /me), and the card (aside.KindCard, roleId), worldbook (aside.KindWorldbook, worldbookId) or
// trial (aside.KindTrial, clientKey) it belongs to.
type AsideKey = aside.Key

// AsideStore keeps what the card service has no field for beside the card, so that
// import_tavern_card followed by export_tavern_card loses nothing (tavernsync.AsideStore).
type AsideStore = tavernsync.AsideStore

// LocalFiles lets the import tools read files on the machine the server runs on, named by
// source.path: only a server speaking stdio to its user's own host should set it
// (tavernsync.LocalFiles).
type LocalFiles = tavernsync.LocalFiles

// The tavern use case's error codes and limits, under the names the tools' tests know.
const (
	codeInvalidFile    = tavernsync.CodeInvalidFile
	codePathNotAllowed = tavernsync.CodePathNotAllowed
	maxUploadBytes     = tavernsync.MaxUploadBytes
	defaultBookName    = tavernsync.DefaultBookName
)

// tavernEnv is what the tavern use case runs with for one call.
func tavernEnv(c *Call) tavernsync.Env {
	env := tavernsync.Env{Client: c.Client, Aside: c.Aside, LocalFiles: c.LocalFiles, Progress: c.Progress, Log: c.Log,
		Outcome: outcome, Jobs: c.jobs, Roots: func(ctx context.Context) ([]string, error) { return clientRootURIs(ctx, c) }}
	if c.keeping() {
		env.Revise = c.revs.BeforeImport
	}
	return env
}

// importTavernCard imports a character card file as a card or a trial card.
func importTavernCard(ctx context.Context, c *Call) (json.RawMessage, error) {
	var in tavernsync.ImportCardArgs
	if err := json.Unmarshal(c.Body, &in); err != nil {
		return nil, fmt.Errorf("decode the arguments: %w", err)
	}
	return tavernsync.ImportCard(ctx, tavernEnv(c), in)
}

// importTavernWorldbook imports a lorebook file as worldbook entries.
func importTavernWorldbook(ctx context.Context, c *Call) (json.RawMessage, error) {
	var in tavernsync.ImportWorldbookArgs
	if err := json.Unmarshal(c.Body, &in); err != nil {
		return nil, fmt.Errorf("decode the arguments: %w", err)
	}
	return tavernsync.ImportWorldbook(ctx, tavernEnv(c), in)
}

// exportTavernCard exports a card as a Character Card V3 JSON, PNG or CHARX file.
func exportTavernCard(ctx context.Context, c *Call) (json.RawMessage, error) {
	var in tavernsync.ExportCardArgs
	if err := json.Unmarshal(c.Body, &in); err != nil {
		return nil, fmt.Errorf("decode the arguments: %w", err)
	}
	out, file, err := tavernsync.ExportCard(ctx, tavernEnv(c), in)
	if err != nil {
		return nil, err
	}
	ext := in.Format
	if ext == "" {
		ext = "json"
	}
	return deliverExport(ctx, c, out, file, in.RoleID+"."+ext, "card", "dataBase64")
}

// exportTavernWorldbook exports a worldbook as a World Info or lorebook_v3 file.
func exportTavernWorldbook(ctx context.Context, c *Call) (json.RawMessage, error) {
	var in tavernsync.ExportWorldbookArgs
	if err := json.Unmarshal(c.Body, &in); err != nil {
		return nil, fmt.Errorf("decode the arguments: %w", err)
	}
	out, file, err := tavernsync.ExportWorldbook(ctx, tavernEnv(c), in)
	if err != nil {
		return nil, err
	}
	return deliverExport(ctx, c, out, file, in.WorldbookID+".json", "lorebook")
}

// fileContent is an exported file as the result's content: text, a resource or an image.
func fileContent(f tavernsync.File) mcp.Content {
	switch {
	case f.DataBase64 == "":
		return mcp.NewTextContent(f.Text)
	case f.URI != "":
		return mcp.NewEmbeddedResource(mcp.BlobResourceContents{URI: f.URI, MIMEType: f.MIMEType, Blob: f.DataBase64})
	}
	return mcp.NewImageContent(f.DataBase64, f.MIMEType)
}
