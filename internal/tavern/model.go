// Package tavern reads and writes the file formats authors keep their
// characters and lore in (Character Card V1/V2/V3 as JSON, PNG or CHARX,
// standalone lorebook_v3 and SillyTavern World Info) and simulates which
// worldbook entries a passage of text would trigger.
//
// The package is pure: it knows file formats and matching rules, and nothing
// about the network or the card service's client. Its model (Card, Book,
// Entry, MatchOptions) uses the card service's field names, so a caller maps
// it to the service's JSON trivially. Everything a file carries that the
// service has no field for is kept in the Extensions maps of the model, under
// the field names of the V3 format, so that an import followed by an export
// loses nothing.
package tavern

import (
	"encoding/json"
	"fmt"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"
)

// Service section names of a card's document, as the card service names them.
const (
	// SectionDescription holds the V2/V3 description.
	SectionDescription = "description"
	// SectionPersonality holds the V2/V3 personality.
	SectionPersonality = "personality"
	// SectionScenario holds the V2/V3 scenario.
	SectionScenario = "scenario"
	// SectionExampleDialogue holds the V2/V3 mes_example.
	SectionExampleDialogue = "exampleDialogue"
	// SectionSystemPrompt holds the V2/V3 system_prompt.
	SectionSystemPrompt = "systemPrompt"
	// SectionPostHistoryInstructions holds the V2/V3 post_history_instructions.
	SectionPostHistoryInstructions = "postHistoryInstructions"
	// SectionCreatorNotes is the service's creator notes section; export uses it for creator_notes when Description is empty.
	SectionCreatorNotes = "creatorNotes"
)

// Card is the neutral model of a character card: what the card service holds, plus everything it
// cannot hold in Extensions. Its JSON is a view with the service's names; entry Extensions are not
// in it (use Leftovers to carry them).
type Card struct {
	// Name is the character's name (V2/V3 name, service roleName).
	Name string `json:"roleName"`
	// Welcome is the first message (first_mes, service roleWelcome).
	Welcome string `json:"roleWelcome"`
	// Alternates are the alternate greetings in order (alternate_greetings, service welcomeAlternates).
	Alternates []string `json:"welcomeAlternates,omitempty"`
	// Description is the creator's notes shown to players (creator_notes, service roleDesc).
	Description string `json:"roleDesc"`
	// Sections maps service document section names to their text; only non-empty sections are present.
	Sections map[string]string `json:"sections,omitempty"`
	// Tags are the card's tags.
	Tags []string `json:"tags,omitempty"`
	// Creator is the card's creator (not held by the service).
	Creator string `json:"creator,omitempty"`
	// CharacterVersion is the card's own version string (not held by the service).
	CharacterVersion string `json:"characterVersion,omitempty"`
	// Book is the card's embedded lorebook (character_book), bound to the card as a tavern-format worldbook.
	Book *Book `json:"book,omitempty"`
	// Extensions holds everything of the source the model has no place for, namespaced by where it came
	// from: "data" (fields of the V2/V3 data object, e.g. extensions, nickname, assets, source) and
	// "root" (top-level fields beside spec, spec_version and data). Export writes them back there.
	Extensions map[string]any `json:"extensions,omitempty"`
	// Avatar is the card's PNG image without its card chunks when it was read from a PNG or CHARX.
	Avatar []byte `json:"-"`
	// Assets are the members of the CHARX the card was read from, other than card.json, in zip
	// order (at most MaxKeptAssetBytes of them); WriteCHARX writes them back.
	Assets []Asset `json:"-"`
	// AssetsLeftOut names the CHARX members Read did not keep (past MaxKeptAssetBytes or
	// MaxKeptAssets, or unreadable).
	AssetsLeftOut []string `json:"-"`
}

// Book is the neutral model of a lorebook (character_book, lorebook_v3 or World Info).
type Book struct {
	// Name is the book's name.
	Name string `json:"name"`
	// Description is the book's description.
	Description string `json:"description"`
	// Entries are the book's entries in file order.
	Entries []Entry `json:"entries"`
	// Extensions holds the lorebook fields the model has no place for under their V3 names
	// (scan_depth, token_budget, recursive_scanning, extensions, ...).
	Extensions map[string]any `json:"extensions,omitempty"`
}

// Entry is one worldbook entry; it marshals to exactly the card service's entry fields.
type Entry struct {
	// EntryID is the service's entry identifier (empty for entries read from files).
	EntryID string `json:"entryId,omitempty"`
	// Name is the entry's title (V3 name, or comment when name is empty).
	Name string `json:"name"`
	// Content is the text inserted when the entry fires.
	Content string `json:"content"`
	// Keywords are the main keys (keys, World Info key).
	Keywords []string `json:"keywords"`
	// SecondaryKeywords are the secondary keys when the entry is selective; empty means no gate.
	SecondaryKeywords []string `json:"secondaryKeywords"`
	// MatchOptions are the tavern matching rules; nil means the service's native rules.
	MatchOptions *MatchOptions `json:"matchOptions"`
	// Category is the service's entry category (kept in the entry's extensions in tavern files).
	Category string `json:"category"`
	// IsEnabled reports whether the entry can fire at all (enabled, World Info !disable).
	IsEnabled bool `json:"isEnabled"`
	// IsConstant reports whether the entry always fires (constant).
	IsConstant bool `json:"isConstant"`
	// Priority is the entry's priority.
	Priority int `json:"priority"`
	// SortOrder is the insertion order (insertion_order, World Info order).
	SortOrder int `json:"sortOrder"`
	// Extensions holds the entry fields the model has no place for, under their V3 lorebook names
	// (id, position, use_regex, extensions with depth, probability, group, ...). Entries read from a
	// file always have a non-nil map; nil marks an entry that never came from a file, and export then
	// writes every matching option explicitly.
	Extensions map[string]any `json:"-"`
}

// MarshalJSON writes the service's entry JSON, with [] rather than null for empty keyword lists.
func (e Entry) MarshalJSON() ([]byte, error) {
	type plain Entry
	p := plain(e)
	p.Keywords = jsontext.NonNil(p.Keywords)
	p.SecondaryKeywords = jsontext.NonNil(p.SecondaryKeywords)
	return json.Marshal(p)
}

// MatchOptions are the tavern-format matching rules of an entry, as the service stores them.
type MatchOptions struct {
	// CaseSensitive makes keyword matching case-sensitive.
	CaseSensitive bool `json:"caseSensitive"`
	// MatchWholeWords makes single-word keywords match whole words only.
	MatchWholeWords bool `json:"matchWholeWords"`
	// SelectiveLogic combines the secondary keywords: 0 any, 1 not all, 2 none, 3 all.
	SelectiveLogic int `json:"selectiveLogic"`
}

// Selective logic values of MatchOptions.SelectiveLogic (SillyTavern's world_info_logic).
const (
	// LogicAndAny fires when any secondary keyword appears (AND ANY).
	LogicAndAny = 0
	// LogicNotAll fires when at least one secondary keyword is missing (NOT ALL).
	LogicNotAll = 1
	// LogicNotAny fires when no secondary keyword appears (NOT ANY).
	LogicNotAny = 2
	// LogicAndAll fires when every secondary keyword appears (AND ALL).
	LogicAndAll = 3
)

// Format says what Read found: the container and the card spec inside it.
type Format struct {
	// Container is "json", "png" or "charx".
	Container string `json:"container"`
	// Spec is "chara_card_v1", "chara_card_v2" or "chara_card_v3".
	Spec string `json:"spec"`
	// Chunk is the PNG text chunk the card was read from ("ccv3" or "chara"); empty otherwise.
	Chunk string `json:"chunk,omitempty"`
}

// String renders the format as container/spec, e.g. "png/chara_card_v3".
func (f Format) String() string {
	if f.Chunk != "" {
		return fmt.Sprintf("%s/%s (%s chunk)", f.Container, f.Spec, f.Chunk)
	}
	return f.Container + "/" + f.Spec
}

// Spec names of the card and lorebook formats.
const (
	// SpecV1 names a V1 card (no spec field; the fields at the top level).
	SpecV1 = "chara_card_v1"
	// SpecV2 is the spec of a Character Card V2.
	SpecV2 = "chara_card_v2"
	// SpecV3 is the spec of a Character Card V3.
	SpecV3 = "chara_card_v3"
	// SpecLorebook is the spec of a standalone CCv3 lorebook.
	SpecLorebook = "lorebook_v3"
)

// Leftovers is everything a card carries that the card service has no field for, gathered into one
// JSON-ready value so a caller can keep it beside the service's card and restore it before export.
type Leftovers struct {
	// Card is the card's Extensions.
	Card map[string]any `json:"card,omitempty"`
	// Creator is the card's creator.
	Creator string `json:"creator,omitempty"`
	// CharacterVersion is the card's version string.
	CharacterVersion string `json:"characterVersion,omitempty"`
	// Book is the book's Extensions.
	Book map[string]any `json:"book,omitempty"`
	// Entries are the entries' Extensions, in book order, with the name and keywords that identify them.
	Entries []EntryLeftovers `json:"entries,omitempty"`
	// Assets are the card's CHARX members.
	Assets []Asset `json:"assets,omitempty"`
}

// EntryLeftovers is one entry's Extensions with what identifies the entry again after a trip through the service.
type EntryLeftovers struct {
	// Name is the entry's name when its leftovers were taken.
	Name string `json:"name"`
	// Keywords are the entry's keywords when its leftovers were taken.
	Keywords []string `json:"keywords,omitempty"`
	// Extensions are the entry's Extensions.
	Extensions map[string]any `json:"extensions"`
}

// Leftovers gathers the card's, its book's and every entry's Extensions (and the creator and version
// string, which the service does not hold) into one value.
func (c *Card) Leftovers() *Leftovers {
	l := &Leftovers{
		Card:             deepCopyMap(c.Extensions),
		Creator:          c.Creator,
		CharacterVersion: c.CharacterVersion,
		Assets:           c.Assets,
	}
	if c.Book != nil {
		l.Book = deepCopyMap(c.Book.Extensions)
		for _, e := range c.Book.Entries {
			ext := deepCopyMap(e.Extensions)
			if ext == nil {
				ext = map[string]any{}
			}
			l.Entries = append(l.Entries, EntryLeftovers{Name: e.Name, Keywords: append([]string(nil), e.Keywords...), Extensions: ext})
		}
	}
	return l
}

// Restore puts back what Leftovers gathered onto a card rebuilt from the service. Entries are matched
// by position when the name agrees, otherwise by name, otherwise by keywords; an entry that matches
// nothing is treated as new.
func (c *Card) Restore(l *Leftovers) {
	if l == nil {
		return
	}
	if l.Card != nil {
		c.Extensions = deepCopyMap(l.Card)
	}
	if c.Creator == "" {
		c.Creator = l.Creator
	}
	if c.CharacterVersion == "" {
		c.CharacterVersion = l.CharacterVersion
	}
	if c.Assets == nil {
		c.Assets = l.Assets
	}
	if c.Book == nil {
		return
	}
	if l.Book != nil {
		c.Book.Extensions = deepCopyMap(l.Book)
	}
	used := make([]bool, len(l.Entries))
	take := func(j int) map[string]any {
		used[j] = true
		ext := deepCopyMap(l.Entries[j].Extensions)
		if ext == nil {
			ext = map[string]any{}
		}
		return ext
	}
	var pending []int
	for i := range c.Book.Entries {
		e := &c.Book.Entries[i]
		if i < len(l.Entries) && !used[i] && l.Entries[i].Name == e.Name {
			e.Extensions = take(i)
			continue
		}
		pending = append(pending, i)
	}
	for _, i := range pending {
		e := &c.Book.Entries[i]
		found := -1
		for j := range l.Entries {
			if !used[j] && l.Entries[j].Name == e.Name {
				found = j
				break
			}
		}
		if found < 0 {
			for j := range l.Entries {
				if !used[j] && len(e.Keywords) > 0 && equalStrings(l.Entries[j].Keywords, e.Keywords) {
					found = j
					break
				}
			}
		}
		if found >= 0 {
			e.Extensions = take(found)
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// deepCopyMap copies a JSON-shaped map so callers cannot alias the model's data.
func deepCopyMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = deepCopy(v)
	}
	return out
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return deepCopyMap(t)
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = deepCopy(x)
		}
		return out
	case []string:
		return append([]string(nil), t...)
	default:
		return v
	}
}
