package upstream

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"time"
)

// The request and response types mirror the contract's component schemas field for field
// (json names = contract names). Where the contract gives "omitted keeps, present replaces",
// scalars are pointers with omitempty and slices use omitzero (nil omitted, empty sent as []).

// Me is the signed-in user (schema Me).
type Me struct {
	UserID   string   `json:"userId"`   // the user's identifier
	Nickname string   `json:"nickname"` // the user's display name
	Scopes   []string `json:"scopes"`   // the scopes the token carries
}

// CardCreateInput is the body of createCard (schema CardCreateInput).
type CardCreateInput struct {
	RoleName            string `json:"roleName"`                      // the card's name, required
	Language            string `json:"language,omitempty"`            // the card's language
	CardType            string `json:"cardType,omitempty"`            // the card's type
	ContentRatingIntent string `json:"contentRatingIntent,omitempty"` // the intended content rating
	IdempotencyKey      string `json:"idempotencyKey,omitempty"`      // repeats return the same card; filled when empty
}

// CardCreated is the answer of createCard (schema CardCreated).
type CardCreated struct {
	RoleID         string `json:"roleId"`         // the new card's identifier
	RoleVisibility string `json:"roleVisibility"` // its visibility, private at first
	ReviewStatus   string `json:"reviewStatus"`   // its review status
}

// CardSections is the card's text by section (schema CardSections); nil keeps, "" clears.
type CardSections struct {
	Description             *string `json:"description,omitempty"`             // the character description
	Personality             *string `json:"personality,omitempty"`             // the personality summary
	Scenario                *string `json:"scenario,omitempty"`                // the scenario
	ExampleDialogue         *string `json:"exampleDialogue,omitempty"`         // example dialogue
	SystemPrompt            *string `json:"systemPrompt,omitempty"`            // the system prompt
	PostHistoryInstructions *string `json:"postHistoryInstructions,omitempty"` // instructions after the history
	CreatorNotes            *string `json:"creatorNotes,omitempty"`            // notes for people, not the model
}

// Card is the card detail (schema Card); fields the contract does not name are kept in Extra.
type Card struct {
	RoleID              string        `json:"roleId"`                        // the card's identifier
	RoleName            string        `json:"roleName"`                      // the card's name
	RoleDesc            string        `json:"roleDesc"`                      // the card's description
	RoleWelcome         string        `json:"roleWelcome"`                   // the character's first message
	WelcomeAlternates   []string      `json:"welcomeAlternates"`             // alternate first messages
	Prologue            []string      `json:"prologue"`                      // suggested first lines for the player
	RoleVisibility      string        `json:"roleVisibility,omitempty"`      // the card's visibility
	ReviewStatus        string        `json:"reviewStatus,omitempty"`        // the card's review status
	Tags                []string      `json:"tags,omitempty"`                // the card's tags
	Language            string        `json:"language,omitempty"`            // the card's language
	CardType            string        `json:"cardType,omitempty"`            // the card's type
	ContentRatingIntent string        `json:"contentRatingIntent,omitempty"` // the intended content rating
	AvatarImageID       string        `json:"avatarImageId,omitempty"`       // the avatar image
	BackgroundImageID   string        `json:"backgroundImageId,omitempty"`   // the background image
	Sections            *CardSections `json:"sections,omitempty"`            // the card's text sections
	LastUpdateTime      string        `json:"lastUpdateTime,omitempty"`      // when the card last changed (date-time)

	// Extra holds the fields the contract does not name, as the service sent them.
	Extra map[string]json.RawMessage `json:"-"`
}

// cardFields is Card without its methods, for the default encoding of the named fields.
type cardFields Card

// UnmarshalJSON decodes the named fields and keeps every other field in Extra.
func (c *Card) UnmarshalJSON(data []byte) error {
	var f cardFields
	if err := json.Unmarshal(data, &f); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return err
	}
	for name := range jsonNames(reflect.TypeFor[Card]()) {
		delete(all, name)
	}
	f.Extra = nil
	if len(all) > 0 {
		f.Extra = all
	}
	*c = Card(f)
	return nil
}

// MarshalJSON encodes the named fields and the Extra ones; a named field wins over an Extra one.
func (c Card) MarshalJSON() ([]byte, error) {
	data, err := json.Marshal(cardFields(c))
	if err != nil || len(c.Extra) == 0 {
		return data, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, err
	}
	for k, v := range c.Extra {
		if _, named := all[k]; !named && !jsonNames(reflect.TypeFor[Card]())[k] {
			all[k] = v
		}
	}
	return json.Marshal(all)
}

var jsonNamesCache sync.Map // reflect.Type -> map[string]bool

// jsonNames returns the JSON names of a struct type's encoded fields.
func jsonNames(t reflect.Type) map[string]bool {
	if v, ok := jsonNamesCache.Load(t); ok {
		return v.(map[string]bool)
	}
	names := map[string]bool{}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		names[name] = true
	}
	jsonNamesCache.Store(t, names)
	return names
}

// OpeningLinesInput is the body of setOpeningLines (schema OpeningLinesInput); a nil slice
// keeps the stored value and an empty one clears it.
type OpeningLinesInput struct {
	RoleWelcome string   `json:"roleWelcome"`         // the first message, required
	Alternates  []string `json:"alternates,omitzero"` // alternate first messages, full replacement
	Prologue    []string `json:"prologue,omitzero"`   // suggested first lines, full replacement
}

// RoleSaved is the answer of an operation that only saves (schema RoleSaved).
type RoleSaved struct {
	RoleID string `json:"roleId"` // the card saved
	OK     bool   `json:"ok"`     // always true
}

// CardProfileInput is the body of updateCardProfile (schema CardProfileInput); nil keeps.
type CardProfileInput struct {
	RoleName            *string  `json:"roleName,omitempty"`            // the card's name, not empty
	RoleDesc            *string  `json:"roleDesc,omitempty"`            // the card's description
	Tags                []string `json:"tags,omitzero"`                 // the tags, full replacement; empty clears
	Language            *string  `json:"language,omitempty"`            // the card's language
	ContentRatingIntent *string  `json:"contentRatingIntent,omitempty"` // the intended content rating
	AvatarImageID       *string  `json:"avatarImageId,omitempty"`       // an avatar image; "" clears
	BackgroundImageID   *string  `json:"backgroundImageId,omitempty"`   // a background image; "" clears
}

// CardDocumentInput is the body of writeCardDocument (schema CardDocumentInput).
type CardDocumentInput struct {
	Sections CardSections `json:"sections"` // the sections to write; omitted ones keep their text
}

// VisibilityPrivate is the only visibility this API may set.
const VisibilityPrivate = "private"

// VisibilityInput is the body of setCardVisibility (schema VisibilityInput).
type VisibilityInput struct {
	Visibility string `json:"visibility"` // VisibilityPrivate
}

// VisibilityResult is the answer of setCardVisibility (schema VisibilityResult).
type VisibilityResult struct {
	RoleID         string `json:"roleId"`         // the card
	RoleVisibility string `json:"roleVisibility"` // the visibility now stored
}

// ValidationIssue is one finding of validateCard (schema ValidationIssue).
type ValidationIssue struct {
	Field    string `json:"field"`    // the card field concerned
	Severity string `json:"severity"` // "error" or "warning"
	Message  string `json:"message"`  // what is wrong, for a person
}

// ValidationReport is the answer of validateCard (schema ValidationReport).
type ValidationReport struct {
	RoleID string            `json:"roleId"` // the card
	Ready  bool              `json:"ready"`  // true when no issue has severity error
	Issues []ValidationIssue `json:"issues"` // the findings
}

// PublishInput is the body of publishCard (schema PublishInput): always {}.
type PublishInput struct{}

// PublishResult is the answer of publishCard (schema PublishResult).
type PublishResult struct {
	RoleID       string `json:"roleId"`       // the card
	ReviewStatus string `json:"reviewStatus"` // the review status after submission
}

// ImageUploadInput is the body of uploadImage (schema ImageUploadInput).
type ImageUploadInput struct {
	Purpose     string `json:"purpose"`          // "avatar" or "background"
	RoleID      string `json:"roleId,omitempty"` // the card whose author's page lists the image
	ContentType string `json:"contentType"`      // image/png, image/jpeg, image/gif or image/webp
	DataBase64  string `json:"dataBase64"`       // the image bytes in standard base64
}

// ImageUploaded is the answer of uploadImage (schema ImageUploaded).
type ImageUploaded struct {
	ImageID string `json:"imageId"` // the stored image
	URL     string `json:"url"`     // where it is served
	Width   int    `json:"width"`   // its width in pixels
	Height  int    `json:"height"`  // its height in pixels
}

// CardImage is one image of CardAssets.
type CardImage struct {
	ImageID string `json:"imageId"` // the image
	Purpose string `json:"purpose"` // "avatar" or "background"
	URL     string `json:"url"`     // where it is served
}

// CardAssets is the answer of listCardAssets (schema CardAssets).
type CardAssets struct {
	RoleID string      `json:"roleId"` // the card
	Images []CardImage `json:"images"` // its images
}

// Worldbook formats (schema WorldbookFormat).
const (
	WorldbookNative = "native" // entries have matchOptions null
	WorldbookTavern = "tavern" // entries carry a full matchOptions object
)

// Worldbook is a worldbook's metadata (schema Worldbook).
type Worldbook struct {
	WorldbookID  string   `json:"worldbookId"`  // the worldbook
	Name         string   `json:"name"`         // its name
	Description  string   `json:"description"`  // its description
	Tags         []string `json:"tags"`         // its tags
	Format       string   `json:"format"`       // WorldbookNative or WorldbookTavern
	EntryCount   int      `json:"entryCount"`   // how many entries it has
	BoundRoleIDs []string `json:"boundRoleIds"` // the cards it is bound to
}

// WorldbookList is the answer of listWorldbooks (schema WorldbookList).
type WorldbookList struct {
	List []Worldbook `json:"list"` // the author's worldbooks
}

// BoundWorldbooks is the answer of listCardWorldbooks (schema BoundWorldbooks).
type BoundWorldbooks struct {
	RoleID string      `json:"roleId"` // the card
	List   []Worldbook `json:"list"`   // the worldbooks bound to it
}

// WorldbookCreateInput is the body of createWorldbook (schema WorldbookCreateInput).
type WorldbookCreateInput struct {
	Name        string   `json:"name"`                  // the name, required
	Description string   `json:"description,omitempty"` // the description
	Tags        []string `json:"tags,omitempty"`        // the tags
	Format      string   `json:"format,omitempty"`      // WorldbookNative (the default) or WorldbookTavern
}

// WorldbookCreated is the answer of createWorldbook (schema WorldbookCreated).
type WorldbookCreated struct {
	WorldbookID string `json:"worldbookId"` // the new worldbook
}

// MatchOptions are a tavern entry's matching rules (schema MatchOptions).
type MatchOptions struct {
	CaseSensitive   bool `json:"caseSensitive"`   // keywords match case-sensitively
	MatchWholeWords bool `json:"matchWholeWords"` // keywords match whole words only
	SelectiveLogic  int  `json:"selectiveLogic"`  // 0 any, 1 not all, 2 none, 3 all of secondaryKeywords
}

// WorldbookEntry is a stored entry as listed (schema WorldbookEntry).
type WorldbookEntry struct {
	EntryID           string        `json:"entryId"`           // the entry
	Name              string        `json:"name"`              // its name
	Content           string        `json:"content"`           // the text it injects
	Keywords          []string      `json:"keywords"`          // main keywords
	SecondaryKeywords []string      `json:"secondaryKeywords"` // the AND gate
	MatchOptions      *MatchOptions `json:"matchOptions"`      // nil (null) for native worldbooks
	Category          string        `json:"category"`          // its category
	IsEnabled         bool          `json:"isEnabled"`         // whether it can fire
	IsConstant        bool          `json:"isConstant"`        // whether it always fires
	Priority          int           `json:"priority"`          // its priority
	SortOrder         int           `json:"sortOrder"`         // its position
	LastUpdateTime    string        `json:"lastUpdateTime"`    // when it last changed
	ActivationCount   int           `json:"activationCount"`   // how often it fired
}

// WorldbookEntryList is the answer of listWorldbookEntries (schema WorldbookEntryList).
type WorldbookEntryList struct {
	WorldbookID string           `json:"worldbookId"` // the worldbook
	Entries     []WorldbookEntry `json:"entries"`     // its entries
}

// Entry operations of the worldbook document (schema WorldbookEntryOp, field op).
const (
	EntryOpCreate = "create" // name, content and keywords required; no entryId
	EntryOpUpdate = "update" // entryId required; fields present replace the stored ones
	EntryOpDelete = "delete" // entryId only
)

// WorldbookEntryOp is one entry operation of writeWorldbookDocument (schema WorldbookEntryOp);
// nil fields are omitted (kept on update, defaulted on create).
type WorldbookEntryOp struct {
	Op                string        `json:"op"`                         // EntryOpCreate, EntryOpUpdate or EntryOpDelete
	EntryID           string        `json:"entryId,omitempty"`          // the entry, for update and delete
	Name              *string       `json:"name,omitempty"`             // its name
	Content           *string       `json:"content,omitempty"`          // the text it injects
	Keywords          []string      `json:"keywords,omitzero"`          // main keywords, full replacement
	SecondaryKeywords []string      `json:"secondaryKeywords,omitzero"` // the AND gate, full replacement
	MatchOptions      *MatchOptions `json:"matchOptions,omitempty"`     // matching rules (tavern worldbooks)
	Category          *string       `json:"category,omitempty"`         // its category
	IsEnabled         *bool         `json:"isEnabled,omitempty"`        // whether it can fire
	IsConstant        *bool         `json:"isConstant,omitempty"`       // whether it always fires
	Priority          *int          `json:"priority,omitempty"`         // its priority
	SortOrder         *int          `json:"sortOrder,omitempty"`        // its position
}

// WorldbookMetadata is the metadata part of a worldbook document; nil keeps.
type WorldbookMetadata struct {
	Name        *string  `json:"name,omitempty"`        // the name, not empty
	Description *string  `json:"description,omitempty"` // the description
	Tags        []string `json:"tags,omitzero"`         // the tags, full replacement; empty clears
}

// WorldbookBinding names the card a worldbook document binds the worldbook to.
type WorldbookBinding struct {
	RoleID string `json:"roleId"` // the card
}

// WorldbookDocumentInput is the body of writeWorldbookDocument (schema WorldbookDocumentInput).
type WorldbookDocumentInput struct {
	Metadata *WorldbookMetadata `json:"metadata,omitempty"` // metadata to write
	Entries  []WorldbookEntryOp `json:"entries,omitempty"`  // at most 500 entry operations
	Binding  *WorldbookBinding  `json:"binding,omitempty"`  // a card to bind to
}

// WorldbookDocumentResult is the answer of writeWorldbookDocument (schema WorldbookDocumentResult).
type WorldbookDocumentResult struct {
	CreatedEntryIDs []string `json:"createdEntryIds"` // the new entries, in the order of their ops
	UpdatedCount    int      `json:"updatedCount"`    // entries updated
	DeletedCount    int      `json:"deletedCount"`    // entries deleted
	Bound           bool     `json:"bound"`           // whether a binding was made
}

// TrialEntryInput is one entry of a trial worldbook (schema TrialEntryInput); nil fields are defaulted.
type TrialEntryInput struct {
	Name              string        `json:"name"`                        // its name, required
	Content           string        `json:"content"`                     // the text it injects, required
	Keywords          []string      `json:"keywords"`                    // main keywords, required
	SecondaryKeywords []string      `json:"secondaryKeywords,omitempty"` // the AND gate
	MatchOptions      *MatchOptions `json:"matchOptions,omitempty"`      // matching rules
	Category          *string       `json:"category,omitempty"`          // its category
	IsEnabled         *bool         `json:"isEnabled,omitempty"`         // whether it can fire (default true)
	IsConstant        *bool         `json:"isConstant,omitempty"`        // whether it always fires
	Priority          *int          `json:"priority,omitempty"`          // its priority
	SortOrder         *int          `json:"sortOrder,omitempty"`         // its position (default appended)
}

// MarshalJSON sends nil keywords as [] (the field is required).
func (e TrialEntryInput) MarshalJSON() ([]byte, error) {
	type plain TrialEntryInput
	if e.Keywords == nil {
		e.Keywords = []string{}
	}
	return json.Marshal(plain(e))
}

// TrialCardInput is the card of a trial (schema TrialCardInput); it replaces the stored one.
type TrialCardInput struct {
	RoleName          string        `json:"roleName"`                    // the card's name, required
	RoleDesc          string        `json:"roleDesc,omitempty"`          // the card's description
	RoleWelcome       string        `json:"roleWelcome,omitempty"`       // the first message
	WelcomeAlternates []string      `json:"welcomeAlternates,omitempty"` // alternate first messages
	Prologue          []string      `json:"prologue,omitempty"`          // suggested first lines
	Sections          *CardSections `json:"sections,omitempty"`          // the card's text sections
}

// TrialWorldbookInput replaces a trial's worldbook entries.
type TrialWorldbookInput struct {
	Entries []TrialEntryInput `json:"entries"` // the entries, at most 500; nil sends []
}

// MarshalJSON sends nil entries as [] (the field is required).
func (w TrialWorldbookInput) MarshalJSON() ([]byte, error) {
	type plain TrialWorldbookInput
	if w.Entries == nil {
		w.Entries = []TrialEntryInput{}
	}
	return json.Marshal(plain(w))
}

// TrialUpsertInput is the body of upsertTrialCard (schema TrialUpsertInput).
type TrialUpsertInput struct {
	Card      TrialCardInput       `json:"card"`                // the card, full replacement
	Worldbook *TrialWorldbookInput `json:"worldbook,omitempty"` // when given, replaces the entries
}

// Slots counts trial slots (schema Slots).
type Slots struct {
	Used int `json:"used"` // slots in use
	Max  int `json:"max"`  // slots in all
}

// TrialWorldbookSummary is the worldbook part of a trial summary.
type TrialWorldbookSummary struct {
	WorldbookID string `json:"worldbookId"` // the trial's worldbook
	Entries     int    `json:"entries"`     // entries now stored
	Created     int    `json:"created"`     // entries created by the last upsert
	Deleted     int    `json:"deleted"`     // entries deleted by the last upsert
}

// TrialSummary is one trial card (schema TrialSummary).
type TrialSummary struct {
	ClientKey string                `json:"clientKey"` // the client-chosen name of the trial
	RoleID    string                `json:"roleId"`    // its card
	Created   bool                  `json:"created"`   // whether the last upsert created it
	ExpiresAt time.Time             `json:"expiresAt"` // the earliest expiry
	Slots     Slots                 `json:"slots"`     // the client's trial slots
	Sections  map[string]string     `json:"sections"`  // SHA-256 (hex) per card field
	Changed   []string              `json:"changed"`   // the fields changed by the last upsert
	Worldbook TrialWorldbookSummary `json:"worldbook"` // its worldbook
}

// TrialList is the answer of listTrialCards (schema TrialList).
type TrialList struct {
	List     []TrialSummary `json:"list"`     // the live trials
	Slots    Slots          `json:"slots"`    // the client's trial slots
	TTLHours int            `json:"ttlHours"` // a trial's lifetime
}

// TrialRemoved is the answer of deleteTrialCard (schema TrialRemoved).
type TrialRemoved struct {
	ClientKey string `json:"clientKey"` // the trial removed
	Removed   bool   `json:"removed"`   // always true
}
