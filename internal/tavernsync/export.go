package tavernsync

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"
	"github.com/cardwriter/cardwriter-mcp/internal/phrase"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

// ExportCardArgs are export_tavern_card's arguments.
type ExportCardArgs struct {
	RoleID string `json:"roleId"`
	Format string `json:"format"`
}

// worldbookUsed is one bound worldbook an export took entries from.
type worldbookUsed struct {
	WorldbookID string `json:"worldbookId"`
	Name        string `json:"name"`
	Format      string `json:"format"`
	Entries     int    `json:"entries"`
}

// exportResult is export_tavern_card's result (tools.json).
type exportResult struct {
	RoleID            string          `json:"roleId"`
	Format            string          `json:"format"`
	Card              json.RawMessage `json:"card"`
	DataBase64        string          `json:"dataBase64,omitempty"`
	MimeType          string          `json:"mimeType,omitempty"`
	KeptAsideRestored []string        `json:"keptAsideRestored"`
	NotRestored       []string        `json:"notRestored"`
	DroppedAssets     []string        `json:"droppedAssets"`
	Worldbooks        []worldbookUsed `json:"worldbooks"`
	Avatar            string          `json:"avatar"`
	Notes             []string        `json:"notes"`
}

// Export formats.
const (
	formatJSON  = "json"
	formatPNG   = "png"
	formatCHARX = "charx"
)

// charxMIME is the media type export_tavern_card gives a CHARX file (a zip).
const charxMIME = "application/zip"

// prefixed returns each name with prefix before it.
func prefixed(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}

// File is an exported file as a tool result's content shows it: Text for a JSON file; otherwise
// DataBase64 of type MIMEType, a resource at URI when URI is set (CHARX), else an image (PNG).
type File struct {
	Text       string
	DataBase64 string
	MIMEType   string
	URI        string
}

// ExportCard exports a card, its document and its bound worldbooks as a Character Card V3
// JSON, PNG or CHARX file, restoring what an import kept aside and naming what it could not; it
// returns export_tavern_card's result object and the file.
func ExportCard(ctx context.Context, c Env, in ExportCardArgs) (json.RawMessage, File, error) {
	var f File
	if in.Format == "" {
		in.Format = formatJSON
	}
	st := &steps{p: c.Progress, total: 3}
	st.start(ctx, "read the card")
	card, err := c.Client.GetCard(ctx, in.RoleID)
	if err != nil {
		return nil, File{}, err
	}
	st.end()
	keys, err := asideKeysFor(ctx, c.Client)
	if err != nil {
		return nil, File{}, err
	}
	var rec cardRecord
	hasRec, err := loadRecord(ctx, c.Aside, keys.card(card.RoleID), &rec)
	if err != nil {
		return nil, File{}, err
	}
	tc := &tavern.Card{
		Name: card.RoleName, Welcome: card.RoleWelcome, Alternates: nilIfEmpty(card.WelcomeAlternates),
		Description: card.RoleDesc, Sections: sectionsOf(card.Sections), Tags: nilIfEmpty(card.Tags),
	}
	out := exportResult{RoleID: card.RoleID, Format: in.Format, Worldbooks: []worldbookUsed{}, Avatar: "none",
		Notes: []string{}, DroppedAssets: []string{}}
	kept := [][]string{rec.KeptAside}
	notRestored := [][]string{prefixed("charx/", rec.AssetsLeftOut)}
	if !hasRec {
		notRestored = append(notRestored, prefixed("data.", tavern.CardFieldsNotHeld))
	}

	st.start(ctx, "read the bound worldbooks")
	book, used, err := exportBook(ctx, c, keys, card.RoleID, rec.WorldbookID)
	if err != nil {
		return nil, File{}, err
	}
	tc.Book = book.book
	out.Worldbooks = used
	kept = append(kept, book.kept)
	notRestored = append(notRestored, book.notRestored)
	st.end()
	st.start(ctx, "write the "+strings.ToUpper(in.Format)+" file")
	if len(used) > 1 {
		out.Notes = append(out.Notes, fmt.Sprintf("The card has %d worldbooks bound; a character card holds one lorebook, so their entries "+
			"are merged into character_book under the first one's name.", len(used)))
	}
	var bookExt map[string]any
	if tc.Book != nil {
		bookExt = tc.Book.Extensions
	}
	tc.Restore(&tavern.Leftovers{Card: rec.Card, Creator: rec.Creator, CharacterVersion: rec.CharacterVersion, Book: bookExt, Assets: rec.Assets})
	out.KeptAsideRestored = unionSorted(kept...)
	out.NotRestored = unionSorted(notRestored...)

	var file []byte
	switch in.Format {
	case formatCHARX:
		var icon []byte
		if card.AvatarImageID != "" {
			img, note := fetchAvatarOr(ctx, c.Client, card.RoleID, card.AvatarImageID, "the CHARX has no icon unless the import kept one")
			if note != "" {
				out.Notes = append(out.Notes, note)
			} else if icon, err = tavern.ToPNG(img); err != nil {
				out.Notes = append(out.Notes, fmt.Sprintf("The card's avatar could not be used (%v); the CHARX has no icon unless the import kept one.", err))
				icon = nil
			} else {
				out.Avatar = "image"
			}
		}
		// Attached here, so that structuredContent.card is the CHARX's card.json.
		out.DroppedAssets = append(out.DroppedAssets, tc.AttachCHARX(icon)...)
		if file, _, err = tavern.WriteCHARX(tc, nil); err != nil {
			return nil, File{}, fmt.Errorf("write the CHARX card: %w", err)
		}
	default:
		out.DroppedAssets = append(out.DroppedAssets, tc.DetachEmbedded()...)
	}
	if len(out.DroppedAssets) > 0 {
		out.Notes = append(out.Notes, fmt.Sprintf("%s of data.assets pointed into a CHARX the file does not carry, so "+
			"%s left out (listed in droppedAssets); the main icon, if any, is the file's own image (ccdefault:).",
			phrase.Count(int64(len(out.DroppedAssets)), "asset", "assets"), phrase.Either(len(out.DroppedAssets) == 1, "it is", "they are")))
	}

	v3, err := tavern.WriteV3JSON(tc)
	if err != nil {
		return nil, File{}, fmt.Errorf("write the V3 card: %w", err)
	}
	obj, err := schema.DecodeJSON(v3)
	if err != nil {
		return nil, File{}, fmt.Errorf("decode the V3 card: %w", err)
	}
	if out.Card, err = jsontext.Marshal(obj); err != nil {
		return nil, File{}, err
	}
	switch in.Format {
	case formatJSON:
		f = File{Text: string(v3)}
		res, err := jsontext.Marshal(out)
		return res, f, err
	case formatCHARX:
		out.DataBase64 = base64.StdEncoding.EncodeToString(file)
		out.MimeType = charxMIME
		f = File{URI: "cardwriter://export/" + card.RoleID + ".charx", MIMEType: charxMIME, DataBase64: out.DataBase64}
		res, err := jsontext.Marshal(out)
		return res, f, err
	}

	var avatar []byte
	out.Avatar = "placeholder"
	if card.AvatarImageID == "" {
		out.Notes = append(out.Notes, "The card has no avatar, so the PNG shows a placeholder image.")
	} else if img, note := FetchAvatar(ctx, c.Client, card.RoleID, card.AvatarImageID); note != "" {
		out.Notes = append(out.Notes, note)
	} else {
		avatar, out.Avatar = img, "image"
	}
	png, err := tavern.WritePNG(tc, avatar)
	if err != nil && avatar != nil {
		out.Notes = append(out.Notes, fmt.Sprintf("The card's avatar could not be used (%v), so the PNG shows a placeholder image.", err))
		out.Avatar = "placeholder"
		png, err = tavern.WritePNG(tc, nil)
	}
	if err != nil {
		return nil, File{}, fmt.Errorf("write the PNG card: %w", err)
	}
	out.DataBase64 = base64.StdEncoding.EncodeToString(png)
	out.MimeType = "image/png"
	f = File{DataBase64: out.DataBase64, MIMEType: out.MimeType}
	res, err := jsontext.Marshal(out)
	return res, f, err
}

// restoredBook is a lorebook made of worldbooks' entries, with what was kept aside restored.
type restoredBook struct {
	book        *tavern.Book // nil when no worldbook was read
	kept        []string     // what was restored, as the records name it
	notRestored []string     // what had no record, V3 names under the prefix
}

// exportBook builds the card's lorebook from its bound worldbooks: the one it was imported with
// (primary) first, then the others in the service's order, each one's entries in the order of
// the file they came from (then the service's order for entries added later), with the
// leftovers kept aside for each entry restored. Its book is nil when no worldbook is bound.
func exportBook(ctx context.Context, c Env, keys asideKeys, roleID, primary string) (restoredBook, []worldbookUsed, error) {
	bound, err := c.Client.ListCardWorldbooks(ctx, roleID)
	if err != nil {
		return restoredBook{}, nil, err
	}
	list := bound.List
	for i, wb := range list {
		if wb.WorldbookID == primary && i > 0 {
			list = append([]upstream.Worldbook{wb}, append(list[:i:i], list[i+1:]...)...)
			break
		}
	}
	used := []worldbookUsed{}
	var out restoredBook
	for _, wb := range list {
		rb, n, err := restoreWorldbook(ctx, c, keys, wb, "character_book")
		if err != nil {
			return restoredBook{}, nil, err
		}
		out.kept = append(out.kept, rb.kept...)
		out.notRestored = append(out.notRestored, rb.notRestored...)
		if out.book == nil {
			out.book = rb.book
		} else {
			out.book.Entries = append(out.book.Entries, rb.book.Entries...)
		}
		used = append(used, worldbookUsed{WorldbookID: wb.WorldbookID, Name: wb.Name, Format: wb.Format, Entries: n})
	}
	return out, used, nil
}

// restoreWorldbook reads one worldbook's entries as a lorebook, in the order of the file they came
// from, with the book's and each entry's kept-aside fields restored; without a record, the
// fields the service does not hold are named under prefix in notRestored. It returns the number
// of entries too.
func restoreWorldbook(ctx context.Context, c Env, keys asideKeys, wb upstream.Worldbook, prefix string) (restoredBook, int, error) {
	entries, err := c.Client.ListWorldbookEntries(ctx, wb.WorldbookID, "")
	if err != nil {
		return restoredBook{}, 0, err
	}
	var rec worldbookRecord
	hasRec, err := loadRecord(ctx, c.Aside, keys.worldbook(wb.WorldbookID), &rec)
	if err != nil {
		return restoredBook{}, 0, err
	}
	name := wb.Name
	if rec.GeneratedName != "" && wb.Name == rec.GeneratedName {
		name = rec.Name
	}
	out := restoredBook{book: &tavern.Book{Name: name, Description: wb.Description, Extensions: rec.Book}, kept: rec.KeptAside}
	if !hasRec {
		out.notRestored = prefixed(prefix+".", tavern.BookFieldsNotHeld)
		if len(entries.Entries) > 0 {
			out.notRestored = append(out.notRestored, prefixed(prefix+".entries[].", tavern.EntryFieldsNotHeld)...)
		}
	}
	ordered := orderEntries(entries.Entries, rec.Order)
	for _, e := range ordered {
		te := tavern.Entry{
			EntryID: e.EntryID, Name: e.Name, Content: e.Content, Keywords: nilIfEmpty(e.Keywords),
			SecondaryKeywords: nilIfEmpty(e.SecondaryKeywords), Category: e.Category, IsEnabled: e.IsEnabled,
			IsConstant: e.IsConstant, Priority: e.Priority, SortOrder: e.SortOrder,
		}
		if e.MatchOptions != nil {
			mo := tavern.MatchOptions(*e.MatchOptions)
			te.MatchOptions = &mo
		}
		if a, ok := rec.Entries[e.EntryID]; ok {
			te.Extensions = maps.Clone(a.Extensions)
			if te.Extensions == nil {
				te.Extensions = map[string]any{}
			}
			if te.MatchOptions == nil && a.MatchOptions != nil {
				mo := *a.MatchOptions
				te.MatchOptions = &mo
			}
		}
		out.book.Entries = append(out.book.Entries, te)
	}
	return out, len(ordered), nil
}

// orderEntries orders a worldbook's entries for export: the service lists them by sortOrder; the
// entries an import made (order, in the file's order) stay together in that order, where the
// first of them is listed, and the others keep their place.
func orderEntries(entries []upstream.WorldbookEntry, order []string) []upstream.WorldbookEntry {
	byID := make(map[string]int, len(entries))
	for i, e := range entries {
		byID[e.EntryID] = i
	}
	recorded := make([]bool, len(entries))
	var block []upstream.WorldbookEntry
	for _, id := range order {
		if i, ok := byID[id]; ok && !recorded[i] {
			recorded[i] = true
			block = append(block, entries[i])
		}
	}
	out := make([]upstream.WorldbookEntry, 0, len(entries))
	for i, e := range entries {
		switch {
		case !recorded[i]:
			out = append(out, e)
		case block != nil:
			out = append(out, block...)
			block = nil
		}
	}
	return out
}

// FetchAvatar downloads the card's avatar image; note says why it could not, "" when it could.
func FetchAvatar(ctx context.Context, client *upstream.Client, roleID, imageID string) ([]byte, string) {
	return fetchAvatarOr(ctx, client, roleID, imageID, "the PNG shows a placeholder image")
}

// fetchAvatarOr is fetchAvatar whose note ends with what happens instead (instead).
func fetchAvatarOr(ctx context.Context, client *upstream.Client, roleID, imageID, instead string) ([]byte, string) {
	assets, err := client.ListCardAssets(ctx, roleID)
	if err != nil {
		return nil, fmt.Sprintf("The card's avatar could not be found (%v), so %s.", err, instead)
	}
	for _, im := range assets.Images {
		if im.ImageID != imageID {
			continue
		}
		data, _, err := client.FetchAsset(ctx, im.URL, tavern.MaxInputSize)
		if err != nil {
			return nil, fmt.Sprintf("The card's avatar could not be downloaded (%v), so %s.", err, instead)
		}
		return data, ""
	}
	return nil, "The card's avatar is not among the images on its author page, so " + instead + "."
}

// sectionsOf returns the card's non-empty document sections by name, nil when there is none.
func sectionsOf(s *upstream.CardSections) map[string]string {
	if s == nil {
		return nil
	}
	out := map[string]string{}
	for name, v := range map[string]*string{
		tavern.SectionDescription: s.Description, tavern.SectionPersonality: s.Personality, tavern.SectionScenario: s.Scenario,
		tavern.SectionExampleDialogue: s.ExampleDialogue, tavern.SectionSystemPrompt: s.SystemPrompt,
		tavern.SectionPostHistoryInstructions: s.PostHistoryInstructions, tavern.SectionCreatorNotes: s.CreatorNotes,
	} {
		if v != nil && *v != "" {
			out[name] = *v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}
