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
			Description: "Import a character card file (Character Card V1, V2 or V3 as JSON, a PNG card with a chara or ccv3 chunk, " +
				"or a CHARX zip) as a new card with its opening lines, text sections, tags, avatar and lorebook. " +
				"source is exactly one of: path (a file on the user's machine; only when cardwriter-mcp runs over stdio, and only " +
				"inside a root the client declared or a folder given with --allow-dir; refused over HTTP), dataBase64 (the " +
				"file's bytes) or json (the card's JSON); at most 32 MiB. " +
				"Mapping: name -> roleName, first_mes -> roleWelcome, alternate_greetings -> welcomeAlternates (order kept), " +
				"creator_notes -> roleDesc, description/personality/scenario/mes_example/system_prompt/post_history_instructions -> " +
				"the document sections description/personality/scenario/exampleDialogue/systemPrompt/postHistoryInstructions, " +
				"tags -> tags, the PNG's image -> the avatar, character_book -> a tavern-format worldbook bound to the card " +
				"(its entries keep their SillyTavern matching rules). " +
				"What the service has no field for (extensions, creator, character_version, lorebook settings, entries' extra " +
				"fields) is kept aside by cardwriter-mcp, per card service, user and card, and listed in keptAside; " +
				"export_tavern_card puts it back, so an import followed by an export loses nothing. " +
				"mode card (the default) runs createCard, setOpeningLines, uploadImage and updateCardProfile, writeCardDocument, " +
				"createWorldbook and writeWorldbookDocument (500 entries per call), reporting progress after each step. " +
				"Importing the same file again returns the same card (the card's idempotency key is a hash of the file; give " +
				"another clientKey to make a separate copy). If a step fails after the card was created, the error names what " +
				"was created (detail.roleId, detail.worldbookId) and the step that failed; run the same import again to finish " +
				"it, nothing is created twice. " +
				"mode trial creates the trial card named clientKey (required then) instead: trial worldbooks are " +
				"native, so the entries' tavern matchOptions cannot be held there and are kept aside too. A live trial of that " +
				"clientKey is replaced only when it was imported from the same file; any other is refused with conflict " +
				"(delete it with delete_trial_card first, or pick another clientKey).\n\n" +
				`Example: {"source":{"path":"/home/me/cards/Captain Vey.png"}}`,
			// Not destructive: it only adds a card, or a trial under a clientKey no other trial holds
			// (refuseOtherTrial). Idempotent: the same file gives the same card, and a repeated
			// import creates nothing more.
			Annotations: hints(false, false, true, true),
			Handler:     importTavernCard,
			Summary:     summarizeCardImport,
		},
		{
			Name:    "export_tavern_card",
			Toolset: ToolsetTavern,
			Title:   "Export a card as a character card file",
			Description: "Export a card, its text sections and its bound worldbooks as a Character Card V3 file, without changing " +
				"anything. format json (the default) returns the V3 JSON as text and as structuredContent.card; format png " +
				"returns a PNG (the card's avatar, or a placeholder when it has none) carrying the card in a ccv3 chunk (V3) " +
				"and a chara chunk (V2), as image content; format charx returns a zip of card.json and the card's assets " +
				"(every member of the CHARX it was imported from; the avatar as main icon), as a resource; both also as " +
				"structuredContent.dataBase64. " +
				"The mapping is import_tavern_card's, reversed: the bound worldbooks' entries make up character_book (the " +
				"worldbook the card was imported with first, entries in the file's order), and what import_tavern_card kept " +
				"aside for the card and its worldbooks is restored (listed in keptAsideRestored), so a card imported from a " +
				"file exports to the same file. Where nothing was kept aside (the card was imported with another server's " +
				"store, or written with the tools), the file holds what the card service holds and no guessed value; the " +
				"fields it could not restore are listed in notRestored. json and png carry no CHARX members: assets that " +
				"point into one are left out (droppedAssets). Use it to hand a card to another app or to back it up.\n\n" +
				`Example: {"roleId":"r_8f2c1a","format":"png"}`,
			Annotations: readHints(),
			Handler:     exportTavernCard,
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
			Description: "Export one worldbook's entries as a lorebook file, without changing anything: format worldinfo (the default) " +
				"is a SillyTavern World Info JSON (entries keyed by uid), format lorebook_v3 a Character Card V3 lorebook " +
				"(spec lorebook_v3); the file is returned as text and as structuredContent.lorebook. The mapping is " +
				"import_tavern_worldbook's, reversed, entries in the order of the file they came from; what an import kept aside " +
				"for the worldbook (entry ids, depth, probability, groups, the book's scan_depth, token_budget, ...) is restored " +
				"(keptAsideRestored). Where nothing was kept aside (the worldbook was imported with another server's store, or " +
				"written with the tools), the file holds what the card service holds and no guessed value, and notRestored " +
				"lists the fields it could not restore. Use it to take a worldbook to SillyTavern or another app, or to back it up.\n\n" +
				`Example: {"worldbookId":"wb_3c9d","format":"lorebook_v3"}`,
			Annotations: readHints(),
			Handler:     exportTavernWorldbook,
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
			Description: "Import a lorebook file (a lorebook_v3 JSON, a SillyTavern World Info file, a character_book object, " +
				"or the lorebook of a character card file) as worldbook entries. " +
				"source is as in import_tavern_card (path over stdio only, inside the client's roots or an --allow-dir folder; " +
				"dataBase64; or json). Without worldbookId a new tavern-format worldbook is created, named name (default: the " +
				"lorebook's own name); with worldbookId the entries are added to that worldbook (a native worldbook cannot hold " +
				"their tavern matchOptions, which are then kept aside). roleId binds the worldbook to that card. " +
				"Entries map name/comment -> name, keys -> keywords, secondary_keys (when selective) -> secondaryKeywords, " +
				"case_sensitive, match_whole_words and selectiveLogic -> matchOptions, enabled -> isEnabled, constant -> " +
				"isConstant, insertion_order -> sortOrder, priority -> priority; the rest is kept aside for export_tavern_card " +
				"(listed in keptAside). Entries are written 500 per call, with progress after each; each call adds the " +
				"entries again, so do not repeat it after a success.\n\n" +
				`Example: {"source":{"json":{"entries":{"0":{"uid":0,"key":["kraken"],"content":"A kraken haunts the Shoals.","comment":"Kraken"}},"name":"Shoals"}},"roleId":"r_8f2c1a"}`,
			// Adds a worldbook or entries each time; deletes and replaces nothing.
			Annotations: addHints(),
			Check:       "list_worldbook_entries",
			Handler:     importTavernWorldbook,
			Summary: func(out map[string]any) string {
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
		const shown = 8
		names := strings.Join(k[:min(len(k), shown)], ", ")
		if len(k) > shown {
			names += fmt.Sprintf(" and %d more", len(k)-shown)
		}
		s += "; kept aside (restored on export): " + names
	}
	return s + "."
}

// restoredSummary sums up an export's keptAsideRestored and notRestored, "" when both are empty.
func restoredSummary(out map[string]any) string {
	var s string
	if k := list(out, "keptAsideRestored"); len(k) > 0 {
		s += fmt.Sprintf("; restored %s kept aside at import", phrase.Count(int64(len(k)), "field", "fields"))
	}
	if k := list(out, "notRestored"); len(k) > 0 {
		s += fmt.Sprintf("; %s the card service does not hold could not be restored (notRestored)", phrase.Count(int64(len(k)), "field", "fields"))
	}
	return s
}

// deliverySummary says where an export's file went when it is not in the result: "" inline.
func deliverySummary(out map[string]any) string {
	if w := obj(out, "written"); w != nil {
		return fmt.Sprintf(" Written to %s (%d bytes).", str(w, "path"), num(w, "size"))
	}
	if l := obj(out, "link"); l != nil {
		return fmt.Sprintf(" The file (%s, %d bytes) is too large for this result: read it with resources/read at %s (only you, until %s).",
			str(l, "mimeType"), num(l, "size"), str(l, "uri"), str(l, "expiresAt"))
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
	return tavernsync.Env{Client: c.Client, Aside: c.Aside, LocalFiles: c.LocalFiles, Progress: c.Progress, Log: c.Log,
		Outcome: outcome, Roots: func(ctx context.Context) ([]string, error) { return clientRootURIs(ctx, c) }}
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
