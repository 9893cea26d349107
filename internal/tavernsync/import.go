package tavernsync

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/cardwriter/cardwriter-mcp/internal/aside"
	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"
	"github.com/cardwriter/cardwriter-mcp/internal/phrase"
	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// Limits of the card service the import works within.
const (
	entriesPerWrite = 500     // entry ops per writeWorldbookDocument call, and entries per trial worldbook
	MaxUploadBytes  = 8 << 20 // uploadImage's limit, decoded: a larger avatar is not uploaded
)

// Import modes.
const (
	modeCard  = "card"
	modeTrial = "trial"
)

// ImportCardArgs are import_tavern_card's arguments.
type ImportCardArgs struct {
	Source    Source `json:"source"`
	Mode      string `json:"mode"`
	ClientKey string `json:"clientKey"`
	// IdempotencyKey names the import: the same key again finishes it or repeats it on the card
	// it made. "" derives one from the file and clientKey.
	IdempotencyKey string `json:"idempotencyKey"`
}

// importCardResult is import_tavern_card's result (tools.json).
type importCardResult struct {
	Mode          string          `json:"mode"`
	Source        tavern.Format   `json:"source"`
	RoleID        string          `json:"roleId"`
	RoleName      string          `json:"roleName"`
	WorldbookID   string          `json:"worldbookId,omitempty"`
	EntryCount    *int            `json:"entryCount,omitempty"`
	AvatarImageID string          `json:"avatarImageId,omitempty"`
	Resumed       bool            `json:"resumed,omitempty"`
	ClientKey     string          `json:"clientKey,omitempty"`
	Trial         json.RawMessage `json:"trial,omitempty"`
	KeptAside     []string        `json:"keptAside"`
	Notes         []string        `json:"notes"`
}

// ImportCard imports a character card file as a card (mode card) or a trial card, and returns
// import_tavern_card's result object.
func ImportCard(ctx context.Context, c Env, in ImportCardArgs) (json.RawMessage, error) {
	if in.Mode == "" {
		in.Mode = modeCard
	}
	if in.Mode == modeTrial && in.ClientKey == "" {
		return nil, &Failure{Code: CodeInvalidArguments, Detail: map[string]any{"argument": "clientKey"},
			Message: "mode trial needs clientKey: the name of the trial card to create or replace (letters, digits, '.', '_' or '-')."}
	}
	data, err := readSource(ctx, c, in.Source)
	if err != nil {
		return nil, err
	}
	card, format, err := tavern.Read(data)
	if err != nil {
		return nil, &Failure{Code: CodeInvalidFile, Message: "The file is not a character card this server can read: " + err.Error() + ".",
			Detail: map[string]any{"argument": "source"}}
	}
	if strings.TrimSpace(card.Name) == "" {
		return nil, &Failure{Code: CodeInvalidFile, Detail: map[string]any{"argument": "source", "field": "data.name"},
			Message: "The card has no name (data.name is empty), and the card service needs one; add a name to the file and import it again."}
	}
	keys, err := asideKeysFor(ctx, c.Client)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	sha := hex.EncodeToString(sum[:])
	live := &liveProgress{p: c.Progress}
	c.Progress = live
	job := keys.job(digest("card", in.Mode, sha, in.ClientKey, in.IdempotencyKey))
	if in.Mode == modeTrial {
		return c.Jobs.do(ctx, job, live, func(ctx context.Context) (json.RawMessage, error) {
			return importTrial(ctx, c, keys, card, format, sha, in.ClientKey)
		})
	}
	if err := checkAside(ctx, c.Aside, keys, card.Leftovers()); err != nil {
		return nil, err
	}
	run := &cardImport{c: c, card: card, format: format, sha: sha, clientKey: in.ClientKey, idem: in.IdempotencyKey, keys: keys}
	return c.Jobs.do(ctx, job, live, run.run)
}

// cardImport is one run of import_tavern_card in mode card.
type cardImport struct {
	c         Env
	card      *tavern.Card
	format    tavern.Format
	sha       string // SHA-256 of the file, hex
	clientKey string
	idem      string // the caller's idempotency key, or ""

	keys        asideKeys
	rec         cardRecord
	roleID      string
	worldbookID string
	steps       steps
	notes       []string
}

// idempotencyKey makes the same file (and clientKey, and the caller's idempotency key) create
// the same card.
func (r *cardImport) idempotencyKey() string {
	parts := []string{r.sha, r.clientKey}
	if r.idem != "" {
		parts = append(parts, r.idem)
	}
	return "tavern-import-" + digest(parts...)[:40]
}

// fail turns the error of a step into the call's error: before the card exists it is returned as
// it is; after, it names what was created and what failed, so that nothing is lost or duplicated.
func (r *cardImport) fail(ctx context.Context, err error) error {
	if r.roleID == "" {
		return err
	}
	env, code, internal := r.c.outcome(ctx, err)
	if internal {
		r.c.Log.LogAttrs(ctx, slog.LevelError, "tavern import step failed", slog.String("step", r.steps.doing), slog.String("err", err.Error()))
	}
	created := "card " + r.roleID
	detail := map[string]any{"roleId": r.roleID, "failedStep": r.steps.doing, "cause": env}
	if r.worldbookID != "" {
		created += " and worldbook " + r.worldbookID
		detail["worldbookId"] = r.worldbookID
	}
	msg, _ := env["message"].(string)
	retryable, _ := env["retryable"].(bool)
	return &Failure{
		Code:      code,
		Retryable: retryable,
		Detail:    detail,
		Message: fmt.Sprintf("The import stopped while trying to %s: %s Created so far: %s. Run the same import again to finish it: "+
			"it continues with what was created instead of making it twice.", r.steps.doing, strings.TrimSpace(msg), created),
	}
}

func (r *cardImport) run(ctx context.Context) (json.RawMessage, error) {
	c, card := r.c, r.card
	book := card.Book
	r.steps = steps{p: c.Progress, total: 4} // create, opening lines, profile, text
	if len(card.Avatar) > 0 && len(card.Avatar) <= MaxUploadBytes {
		r.steps.total++
	}
	if book != nil {
		r.steps.total += 1 + max(1, (len(book.Entries)+entriesPerWrite-1)/entriesPerWrite)
	}

	r.steps.start(ctx, "create the card")
	created, _, err := c.Client.CreateCard(ctx, upstream.CardCreateInput{RoleName: card.Name, IdempotencyKey: r.idempotencyKey()})
	if err != nil {
		return nil, r.fail(ctx, err)
	}
	r.roleID = created.RoleID
	r.steps.end()

	// What an earlier run of the same import did (the same file gives the same card).
	r.steps.aside()
	resumed, err := c.Jobs.load(ctx, c.Aside, r.keys.card(r.roleID), &r.rec)
	if err != nil {
		return nil, r.fail(ctx, err)
	}
	r.worldbookID = r.rec.WorldbookID
	left := card.Leftovers()
	r.rec.Version = recordVersion
	r.rec.Source.SHA256, r.rec.Source.Format = r.sha, r.format
	r.rec.Card, r.rec.Creator, r.rec.CharacterVersion = left.Card, left.Creator, left.CharacterVersion
	r.rec.Assets, r.rec.AssetsLeftOut = left.Assets, card.AssetsLeftOut
	if n := len(card.AssetsLeftOut); n > 0 {
		them := phrase.Either(n == 1, "it", "them")
		r.notes = append(r.notes, fmt.Sprintf("Not kept of the CHARX: %s (cardwriter-mcp keeps at most %d MiB and %d members of a "+
			"card's assets, and none it cannot read), so a CHARX export will not carry %s and drops what refers to %s.",
			strings.Join(card.AssetsLeftOut[:min(n, 5)], ", ")+phrase.Either(n > 5, ", ...", ""),
			tavern.MaxKeptAssetBytes>>20, tavern.MaxKeptAssets, them, them))
	}
	r.rec.KeptAside = cardKeptAside(left)
	if book != nil {
		r.rec.KeptAside = unionSorted(r.rec.KeptAside, bookKeptAside("character_book", book))
	}
	r.rec.Complete = false
	if err := c.Jobs.save(ctx, c.Aside, r.keys.card(r.roleID), &r.rec); err != nil {
		return nil, r.fail(ctx, err)
	}

	if resumed {
		// The same file imported again writes over the card (and its worldbook) as it is now.
		if err := c.revise(ctx, "card", r.roleID, nil); err != nil {
			return nil, r.fail(ctx, err)
		}
		if r.worldbookID != "" {
			if err := c.revise(ctx, "worldbook", r.worldbookID, nil); err != nil {
				return nil, r.fail(ctx, err)
			}
		}
	}
	r.steps.start(ctx, "set the opening lines")
	if _, err := c.Client.SetOpeningLines(ctx, r.roleID, upstream.OpeningLinesInput{
		RoleWelcome: card.Welcome, Alternates: jsontext.NonNil(card.Alternates),
	}); err != nil {
		return nil, r.fail(ctx, err)
	}
	r.steps.end()

	if err := r.avatar(ctx); err != nil {
		return nil, r.fail(ctx, err)
	}

	r.steps.start(ctx, "update the card's profile")
	profile := upstream.CardProfileInput{RoleDesc: &card.Description, Tags: jsontext.NonNil(card.Tags)}
	if r.rec.AvatarImageID != "" {
		profile.AvatarImageID = &r.rec.AvatarImageID
	}
	if _, err := c.Client.UpdateCardProfile(ctx, r.roleID, profile); err != nil {
		return nil, r.fail(ctx, err)
	}
	r.steps.end()

	r.steps.start(ctx, "write the card's text sections")
	if _, err := c.Client.WriteCardDocument(ctx, r.roleID, upstream.CardDocumentInput{Sections: allSections(card.Sections)}); err != nil {
		return nil, r.fail(ctx, err)
	}
	r.steps.end()

	var entryCount *int
	if book != nil {
		n, err := r.worldbook(ctx)
		if err != nil {
			return nil, r.fail(ctx, err)
		}
		entryCount = &n
	}

	r.steps.aside()
	r.rec.Complete = true
	if err := c.Jobs.save(ctx, c.Aside, r.keys.card(r.roleID), &r.rec); err != nil {
		return nil, r.fail(ctx, err)
	}
	return json.Marshal(importCardResult{
		Mode: modeCard, Source: r.format, RoleID: r.roleID, RoleName: card.Name,
		WorldbookID: r.worldbookID, EntryCount: entryCount, AvatarImageID: r.rec.AvatarImageID,
		Resumed: resumed, ClientKey: r.clientKey, KeptAside: jsontext.NonNil(r.rec.KeptAside), Notes: jsontext.NonNil(r.notes),
	})
}

// avatar uploads the card's image as its avatar, once.
func (r *cardImport) avatar(ctx context.Context) error {
	img := r.card.Avatar
	switch {
	case len(img) == 0:
		return nil
	case len(img) > MaxUploadBytes:
		r.notes = append(r.notes, fmt.Sprintf("The card's image (%d bytes) is larger than the 8 MiB cardwriter-mcp uploads, so the card has no avatar; "+
			"an export uses a placeholder image.", len(img)))
		return nil
	case r.rec.AvatarImageID != "":
		r.steps.skip()
		return nil
	}
	r.steps.start(ctx, "upload the avatar")
	up, err := r.c.Client.UploadImage(ctx, upstream.ImageUploadInput{Purpose: "avatar", RoleID: r.roleID,
		ContentType: "image/png", DataBase64: base64.StdEncoding.EncodeToString(img)})
	if err != nil {
		var apiErr *upstream.Error
		if errors.As(err, &apiErr) && (apiErr.Code == "invalid_request" || apiErr.Code == "payload_too_large") {
			// The image is the service's to refuse; the card is still worth having.
			r.notes = append(r.notes, "The card service refused the card's image as an avatar ("+apiErr.Message+"); the card has no avatar.")
			r.steps.end()
			return nil
		}
		return err
	}
	r.rec.AvatarImageID = up.ImageID
	r.steps.end()
	r.steps.aside()
	return r.c.Jobs.save(ctx, r.c.Aside, r.keys.card(r.roleID), &r.rec)
}

// worldbook creates the tavern-format worldbook of the card's character_book (or finds the one an
// earlier run created), writes the entries that are not there yet and binds it; it returns the
// number of entries the worldbook holds from the book.
func (r *cardImport) worldbook(ctx context.Context) (int, error) {
	c, book := r.c, r.card.Book
	var wbRec worldbookRecord
	if r.worldbookID != "" {
		r.steps.doing = "find the worldbook of an earlier run"
		if _, err := c.Client.GetWorldbook(ctx, r.worldbookID); err != nil {
			var apiErr *upstream.Error
			if !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
				return 0, err
			}
			r.worldbookID = "" // gone: make it again
		} else if _, err := c.Jobs.load(ctx, c.Aside, r.keys.worldbook(r.worldbookID), &wbRec); err != nil {
			return 0, err
		}
	}
	if r.worldbookID == "" {
		r.steps.start(ctx, "create the worldbook")
		name, generated := book.Name, ""
		if strings.TrimSpace(name) == "" {
			generated = r.card.Name + " (lorebook)"
			name = generated
		}
		wb, err := c.Client.CreateWorldbook(ctx, upstream.WorldbookCreateInput{Name: name, Description: book.Description, Format: upstream.WorldbookTavern})
		if err != nil {
			return 0, err
		}
		r.worldbookID = wb.WorldbookID
		r.steps.end()
		wbRec = worldbookRecord{Name: book.Name, GeneratedName: generated}
		r.rec.WorldbookID = r.worldbookID
		r.steps.aside()
		if err := c.Jobs.save(ctx, c.Aside, r.keys.card(r.roleID), &r.rec); err != nil {
			return 0, err
		}
	} else {
		r.steps.skip()
	}
	wbRec.Version = recordVersion
	wbRec.Book = book.Extensions
	wbRec.KeptAside = bookKeptAside("character_book", book)
	if wbRec.Entries == nil {
		wbRec.Entries = map[string]entryAside{}
	}
	if err := r.reconcile(ctx, &wbRec); err != nil {
		return 0, err
	}
	w := &entryWriter{c: c, worldbookID: r.worldbookID, roleID: r.roleID, format: upstream.WorldbookTavern,
		rec: &wbRec, key: r.keys.worldbook(r.worldbookID), steps: &r.steps}
	if err := w.write(ctx, book.Entries[min(len(wbRec.Order), len(book.Entries)):]); err != nil {
		return 0, err
	}
	return len(wbRec.Order), nil
}

// reconcile makes the record's entry list agree with the worldbook after an interrupted run: an
// entry write whose answer was lost still created its entries, which are matched to the book's
// next entries by name and content.
func (r *cardImport) reconcile(ctx context.Context, rec *worldbookRecord) error {
	r.steps.doing = "check the worldbook's entries"
	wb, err := r.c.Client.GetWorldbook(ctx, r.worldbookID)
	if err != nil {
		return err
	}
	if wb.EntryCount == len(rec.Order) {
		return nil
	}
	list, err := r.c.Client.ListWorldbookEntries(ctx, r.worldbookID, "")
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, id := range rec.Order {
		known[id] = true
	}
	var unknown []upstream.WorldbookEntry
	for _, e := range list.Entries {
		if !known[e.EntryID] {
			unknown = append(unknown, e)
		}
	}
	entries := r.card.Book.Entries
	for i := len(rec.Order); i < len(entries) && len(unknown) > 0; i++ {
		j := -1
		for k, u := range unknown {
			if u.Name == entries[i].Name && u.Content == entries[i].Content {
				j = k
				break
			}
		}
		if j < 0 {
			break
		}
		rec.Order = append(rec.Order, unknown[j].EntryID)
		rec.Entries[unknown[j].EntryID] = entryAside{Extensions: extensionsOf(entries[i])}
		unknown = append(unknown[:j], unknown[j+1:]...)
	}
	return nil
}

// entryWriter writes a lorebook's entries to a worldbook, 500 per call, binding it to a card
// when roleID is set (at least one call is made then), recording each written entry's leftovers.
type entryWriter struct {
	c           Env
	worldbookID string
	roleID      string
	format      string // the worldbook's format: native entries cannot hold matchOptions
	rec         *worldbookRecord
	key         aside.Key
	steps       *steps
	created     []string
}

func (w *entryWriter) write(ctx context.Context, entries []tavern.Entry) error {
	for start := 0; start < len(entries) || (start == 0 && w.roleID != ""); start += entriesPerWrite {
		end := min(start+entriesPerWrite, len(entries))
		chunk := entries[start:end]
		doc := upstream.WorldbookDocumentInput{}
		for i := range chunk {
			doc.Entries = append(doc.Entries, createOp(&chunk[i], w.format))
		}
		if w.roleID != "" {
			doc.Binding = &upstream.WorldbookBinding{RoleID: w.roleID}
		}
		if len(chunk) == 0 {
			w.steps.start(ctx, "bind the worldbook to the card")
		} else {
			w.steps.start(ctx, fmt.Sprintf("write worldbook entries %d-%d of %d", start+1, end, len(entries)))
		}
		res, err := w.c.Client.WriteWorldbookDocument(ctx, w.worldbookID, doc)
		if err != nil {
			return err
		}
		if len(res.CreatedEntryIDs) != len(chunk) {
			return fmt.Errorf("writeWorldbookDocument created %d entries for %d create ops", len(res.CreatedEntryIDs), len(chunk))
		}
		for i, id := range res.CreatedEntryIDs {
			a := entryAside{Extensions: extensionsOf(chunk[i])}
			if w.format == upstream.WorldbookNative {
				a.MatchOptions = chunk[i].MatchOptions
			}
			w.rec.Order = append(w.rec.Order, id)
			w.rec.Entries[id] = a
		}
		w.created = append(w.created, res.CreatedEntryIDs...)
		w.steps.end()
		w.steps.aside()
		if err := w.c.Jobs.save(ctx, w.c.Aside, w.key, w.rec); err != nil {
			return err
		}
	}
	return nil
}

// createOp is the create op of an entry; a native worldbook gets matchOptions null.
func createOp(e *tavern.Entry, format string) upstream.WorldbookEntryOp {
	op := upstream.WorldbookEntryOp{
		Op: upstream.EntryOpCreate, Name: &e.Name, Content: &e.Content,
		Keywords: jsontext.NonNil(e.Keywords), SecondaryKeywords: jsontext.NonNil(e.SecondaryKeywords),
		Category: &e.Category, IsEnabled: &e.IsEnabled, IsConstant: &e.IsConstant, Priority: &e.Priority, SortOrder: &e.SortOrder,
	}
	if format == upstream.WorldbookTavern {
		mo := upstream.MatchOptions{}
		if e.MatchOptions != nil {
			mo = upstream.MatchOptions(*e.MatchOptions)
		}
		op.MatchOptions = &mo
	}
	return op
}

// extensionsOf returns an entry's Extensions, never nil (an entry from a file has some).
func extensionsOf(e tavern.Entry) map[string]any {
	if e.Extensions == nil {
		return map[string]any{}
	}
	return e.Extensions
}

// allSections returns every document section with the card's text ("" for the ones it lacks),
// so that an import replaces all of them.
func allSections(s map[string]string) upstream.CardSections {
	str := func(name string) *string { v := s[name]; return &v }
	return upstream.CardSections{
		Description: str(tavern.SectionDescription), Personality: str(tavern.SectionPersonality),
		Scenario: str(tavern.SectionScenario), ExampleDialogue: str(tavern.SectionExampleDialogue),
		SystemPrompt: str(tavern.SectionSystemPrompt), PostHistoryInstructions: str(tavern.SectionPostHistoryInstructions),
		CreatorNotes: str(tavern.SectionCreatorNotes),
	}
}

// someSections returns the card's non-empty sections, nil when there is none.
func someSections(s map[string]string) *upstream.CardSections {
	all := allSections(s)
	var some bool
	for _, p := range []**string{&all.Description, &all.Personality, &all.Scenario, &all.ExampleDialogue,
		&all.SystemPrompt, &all.PostHistoryInstructions, &all.CreatorNotes} {
		if **p == "" {
			*p = nil
		} else {
			some = true
		}
	}
	if !some {
		return nil
	}
	return &all
}

// refuseOtherTrial keeps a trial import additive: it refuses to replace a live trial card named
// clientKey unless that trial is this same file's earlier import (so a repeated import finishes
// or repeats it, and changes nothing else).
func refuseOtherTrial(ctx context.Context, c Env, keys asideKeys, clientKey, sha string) error {
	_, err := c.Client.GetTrialCard(ctx, clientKey)
	var apiErr *upstream.Error
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	var rec trialRecord
	ok, err := loadRecord(ctx, c.Aside, keys.trial(clientKey), &rec)
	if err != nil {
		return err
	}
	if ok && rec.Source.SHA256 == sha {
		return nil
	}
	return &Failure{Code: CodeConflict, Detail: map[string]any{"argument": "clientKey", "clientKey": clientKey},
		Message: fmt.Sprintf("A trial card named %q already exists and was not imported from this file; "+
			"delete it with delete_trial_card first, or import under another clientKey.", clientKey)}
}

// importTrial imports a card as the trial card named clientKey: one upsertTrialCard, with the
// entries' matchOptions stripped (trial worldbooks are native) and kept aside with the rest.
func importTrial(ctx context.Context, c Env, keys asideKeys, card *tavern.Card, format tavern.Format, sha, clientKey string) (json.RawMessage, error) {
	book := card.Book
	if book != nil && len(book.Entries) > entriesPerWrite {
		return nil, &Failure{Code: CodeInvalidFile, Detail: map[string]any{"argument": "source", "entries": len(book.Entries), "limit": entriesPerWrite},
			Message: fmt.Sprintf("A trial card's worldbook holds at most %d entries and this card's lorebook has %d; import it with mode card instead.",
				entriesPerWrite, len(book.Entries))}
	}
	if err := refuseOtherTrial(ctx, c, keys, clientKey, sha); err != nil {
		return nil, err
	}
	left := card.Leftovers()
	if err := checkAside(ctx, c.Aside, keys, left); err != nil {
		return nil, err
	}
	rec := trialRecord{cardRecord: cardRecord{Version: recordVersion, Card: left.Card, Creator: left.Creator,
		CharacterVersion: left.CharacterVersion, Tags: card.Tags}}
	rec.Source.SHA256, rec.Source.Format = sha, format
	kept := cardKeptAside(left)
	if len(card.Tags) > 0 {
		kept = append(kept, "data.tags")
	}
	in := upstream.TrialUpsertInput{
		Card: upstream.TrialCardInput{RoleName: card.Name, RoleDesc: card.Description, RoleWelcome: card.Welcome,
			WelcomeAlternates: card.Alternates, Sections: someSections(card.Sections)},
		Worldbook: &upstream.TrialWorldbookInput{},
	}
	var notes []string
	if len(card.Avatar) > 0 {
		notes = append(notes, "The card's image was not imported: trial cards have no avatar.")
	}
	if book != nil {
		rec.Book = book.Extensions
		kept = append(kept, bookKeptAside("character_book", book)...)
		for i := range book.Entries {
			e := &book.Entries[i]
			in.Worldbook.Entries = append(in.Worldbook.Entries, upstream.TrialEntryInput{
				Name: e.Name, Content: e.Content, Keywords: jsontext.NonNil(e.Keywords), SecondaryKeywords: e.SecondaryKeywords,
				Category: &e.Category, IsEnabled: &e.IsEnabled, IsConstant: &e.IsConstant, Priority: &e.Priority, SortOrder: &e.SortOrder,
			})
			rec.Entries = append(rec.Entries, trialEntry{Name: e.Name, Extensions: extensionsOf(*e), MatchOptions: e.MatchOptions})
			if e.MatchOptions != nil {
				kept = append(kept, "character_book.entries[].matchOptions")
			}
		}
		if len(book.Entries) > 0 {
			notes = append(notes, "Trial worldbooks are native: the entries follow the card service's matching rules, "+
				"not their SillyTavern matchOptions (kept aside).")
		}
	}
	rec.KeptAside = unionSorted(kept)
	var raw json.RawMessage
	if err := c.revise(ctx, "trial", clientKey, in); err != nil {
		return nil, err
	}
	(&steps{p: c.Progress, total: 1}).start(ctx, "create or replace the trial card")
	if err := c.Client.Call(ctx, "upsertTrialCard", map[string]string{"clientKey": clientKey}, in, &raw); err != nil {
		return nil, err
	}
	var summary struct {
		RoleID    string `json:"roleId"`
		Worldbook struct {
			Entries int `json:"entries"`
		} `json:"worldbook"`
	}
	if err := json.Unmarshal(raw, &summary); err != nil {
		return nil, fmt.Errorf("decode the trial summary: %w", err)
	}
	if err := saveRecord(ctx, c.Aside, keys.trial(clientKey), &rec); err != nil {
		return nil, err
	}
	n := summary.Worldbook.Entries
	return json.Marshal(importCardResult{
		Mode: modeTrial, Source: format, RoleID: summary.RoleID, RoleName: card.Name, EntryCount: &n,
		ClientKey: clientKey, Trial: raw, KeptAside: rec.KeptAside, Notes: jsontext.NonNil(notes),
	})
}
