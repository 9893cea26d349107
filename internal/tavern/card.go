package tavern

import (
	"errors"
	"fmt"
	"reflect"
	"sort"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"
)

// cardText maps the V2/V3 text fields held as document sections to the service's section names.
var cardText = []struct{ field, section string }{
	{"description", SectionDescription},
	{"personality", SectionPersonality},
	{"scenario", SectionScenario},
	{"mes_example", SectionExampleDialogue},
	{"system_prompt", SectionSystemPrompt},
	{"post_history_instructions", SectionPostHistoryInstructions},
}

// v1Fields are the fields of a V1 card; V2 writers copy them to the top level beside data.
var v1Fields = []string{"name", "description", "personality", "scenario", "first_mes", "mes_example"}

// ownedDataFields are the data fields the model holds itself; the rest go to Extensions["data"].
var ownedDataFields = map[string]bool{
	"name": true, "first_mes": true, "alternate_greetings": true, "creator_notes": true,
	"description": true, "personality": true, "scenario": true, "mes_example": true,
	"system_prompt": true, "post_history_instructions": true, "character_book": true,
	"tags": true, "creator": true, "character_version": true,
}

// CardFieldsNotHeld names the V3 card fields (under data) the card service has no field for; a card
// with no kept-aside record is written with the empty values the format requires for the ones it
// requires (creator, character_version, extensions, group_only_greetings) and without the others.
var CardFieldsNotHeld = []string{"creator", "character_version", "extensions", "group_only_greetings", "assets",
	"nickname", "source", "creator_notes_multilingual", "creation_date", "modification_date"}

// v3OnlyDataFields are the data fields CCv3 added; they are left out of a V2 backfill.
var v3OnlyDataFields = map[string]bool{
	"assets": true, "nickname": true, "creator_notes_multilingual": true, "source": true,
	"group_only_greetings": true, "creation_date": true, "modification_date": true,
}

// creatorNotesKey is where the service's creatorNotes section is kept in a card's extensions when it
// differs from roleDesc (which creator_notes holds).
const creatorNotesKey = "cardwriter/creatorNotes"

// Extension namespaces of Card.Extensions.
const (
	extData = "data"
	extRoot = "root"
	// extRootCopies lists the top-level fields of the file that were copies of data fields (the
	// V1 fields and creatorcomment SillyTavern writes beside data): an export writes them again,
	// as copies of the data fields then, and adds none the file did not have.
	extRootCopies = "rootCopies"
)

// rootCopyOf is the data field a top-level copy repeats.
func rootCopyOf(k string) string {
	if k == "creatorcomment" {
		return "creator_notes"
	}
	return k
}

// cardFromObject reads a decoded card JSON object of any version and returns the card and its spec.
func cardFromObject(root map[string]any) (*Card, string, error) {
	spec, err := asString(root["spec"], "spec")
	if err != nil {
		return nil, "", err
	}
	dataRaw, hasData := root["data"]
	switch spec {
	case SpecV2, SpecV3:
		data, err := asObject(dataRaw, "data")
		if err != nil {
			return nil, "", err
		}
		if data == nil {
			if !looksLikeV1(root) {
				return nil, "", fmt.Errorf("%s card has no data object", spec)
			}
			// A sloppy writer put the fields at the top level: read it as V1.
			c, err := cardV1(root)
			return c, SpecV1, err
		}
		c, err := cardV2V3(root, data)
		return c, spec, err
	case SpecLorebook:
		return nil, "", errors.New("input is a lorebook (lorebook_v3), not a character card")
	case "":
		if data, ok := dataRaw.(map[string]any); ok && hasData && looksLikeV1(data) {
			// A V2 card whose spec field was lost.
			c, err := cardV2V3(root, data)
			return c, SpecV2, err
		}
		if !looksLikeV1(root) {
			if _, ok := root["entries"]; ok {
				return nil, "", errors.New("input is a lorebook or World Info file, not a character card")
			}
			return nil, "", errors.New("JSON object is not a character card: no spec and none of name, description, first_mes")
		}
		c, err := cardV1(root)
		return c, SpecV1, err
	default:
		return nil, "", fmt.Errorf("unknown spec %q (want %s or %s)", spec, SpecV2, SpecV3)
	}
}

// looksLikeV1 reports whether an object has any of the V1 card fields.
func looksLikeV1(m map[string]any) bool {
	for _, k := range []string{"name", "description", "first_mes", "personality", "scenario", "mes_example"} {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// cardV1 reads a V1 card: its fields sit at the top level, and so do its leftovers.
func cardV1(root map[string]any) (*Card, error) {
	c, rest, err := cardFields(root, "")
	if err != nil {
		return nil, err
	}
	// What a V3 export writes at the top level itself cannot be kept there.
	delete(rest, "spec")
	delete(rest, "spec_version")
	delete(rest, "data")
	if len(rest) > 0 {
		c.Extensions = map[string]any{extRoot: rest}
	}
	return c, nil
}

// cardV2V3 reads a V2 or V3 card from its root and data objects.
func cardV2V3(root, data map[string]any) (*Card, error) {
	c, rest, err := cardFields(data, "data.")
	if err != nil {
		return nil, err
	}
	top := map[string]any{}
	var copies []string
	for k, v := range root {
		switch k {
		case "spec", "spec_version", "data":
			continue
		}
		if isV1Copy(k, v, data) {
			copies = append(copies, k)
			continue
		}
		top[k] = v
	}
	ext := map[string]any{}
	if len(copies) > 0 {
		sort.Strings(copies)
		list := make([]any, len(copies))
		for i, k := range copies {
			list[i] = k
		}
		ext[extRootCopies] = list
	}
	if len(rest) > 0 {
		ext[extData] = rest
	}
	if len(top) > 0 {
		ext[extRoot] = top
	}
	if len(ext) > 0 {
		c.Extensions = ext
	}
	return c, nil
}

// isV1Copy reports whether a top-level field of a V2/V3 card is only a copy of a data field
// (SillyTavern writes the V1 fields, tags and creatorcomment beside data).
func isV1Copy(k string, v any, data map[string]any) bool {
	switch k {
	case "name", "description", "personality", "scenario", "first_mes", "mes_example", "tags":
		return reflect.DeepEqual(v, data[k])
	case "creatorcomment":
		return reflect.DeepEqual(v, data[rootCopyOf(k)])
	}
	return false
}

// cardFields reads the card fields of a V1 root or a V2/V3 data object and returns the fields the
// model has no place for.
func cardFields(m map[string]any, prefix string) (*Card, map[string]any, error) {
	c := &Card{}
	var err error
	str := func(field string) string {
		if err != nil {
			return ""
		}
		var s string
		s, err = asString(m[field], prefix+field)
		return s
	}
	c.Name = str("name")
	c.Welcome = str("first_mes")
	c.Description = str("creator_notes")
	c.Creator = str("creator")
	c.CharacterVersion = str("character_version")
	for _, t := range cardText {
		if s := str(t.field); s != "" {
			if c.Sections == nil {
				c.Sections = map[string]string{}
			}
			c.Sections[t.section] = s
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if c.Alternates, err = asStrings(m["alternate_greetings"], prefix+"alternate_greetings", false); err != nil {
		return nil, nil, err
	}
	if c.Tags, err = asStrings(m["tags"], prefix+"tags", true); err != nil {
		return nil, nil, err
	}
	if bookRaw := m["character_book"]; bookRaw != nil {
		bm, err := asObject(bookRaw, prefix+"character_book")
		if err != nil {
			return nil, nil, err
		}
		if bm != nil {
			if c.Book, err = bookFromCB(bm, prefix+"character_book"); err != nil {
				return nil, nil, err
			}
		}
	}
	rest := map[string]any{}
	for k, v := range m {
		if ownedDataFields[k] {
			continue
		}
		rest[k] = v
	}
	// The service's creatorNotes section, when it said something else than roleDesc.
	if ext, ok := rest["extensions"].(map[string]any); ok {
		if v, ok := ext[creatorNotesKey]; ok {
			s, err := asString(v, prefix+"extensions."+creatorNotesKey)
			if err != nil {
				return nil, nil, err
			}
			if s != "" {
				if c.Sections == nil {
					c.Sections = map[string]string{}
				}
				c.Sections[SectionCreatorNotes] = s
			}
			ext = deepCopyMap(ext)
			delete(ext, creatorNotesKey)
			rest["extensions"] = ext
		}
	}
	// A V3 export always writes these; empty ones carry nothing.
	for _, k := range []string{"extensions", "group_only_greetings"} {
		if v, ok := rest[k]; ok {
			if isEmptyValue(v) {
				delete(rest, k)
			} else if k == "extensions" {
				if _, err := asObject(v, prefix+k); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	return c, rest, nil
}

// extMap returns Extensions[ns] as an object, or nil.
func extMap(ext map[string]any, ns string) map[string]any {
	m, _ := ext[ns].(map[string]any)
	return m
}

// cardObject builds the JSON object of a V2 or V3 card.
func cardObject(c *Card, spec string) (*obj, error) {
	data := newObj()
	sections := c.Sections
	for name := range sections {
		switch name {
		case SectionDescription, SectionPersonality, SectionScenario, SectionExampleDialogue,
			SectionSystemPrompt, SectionPostHistoryInstructions, SectionCreatorNotes:
		default:
			return nil, fmt.Errorf("section %q has no place in a character card", name)
		}
	}
	creatorNotes := c.Description
	if creatorNotes == "" {
		creatorNotes = sections[SectionCreatorNotes]
	}
	data.set("name", c.Name)
	data.set("description", sections[SectionDescription])
	data.set("personality", sections[SectionPersonality])
	data.set("scenario", sections[SectionScenario])
	data.set("first_mes", c.Welcome)
	data.set("mes_example", sections[SectionExampleDialogue])
	data.set("creator_notes", creatorNotes)
	data.set("system_prompt", sections[SectionSystemPrompt])
	data.set("post_history_instructions", sections[SectionPostHistoryInstructions])
	data.set("alternate_greetings", jsontext.NonNil(c.Alternates))
	if c.Book != nil {
		b, err := bookObject(c.Book)
		if err != nil {
			return nil, fmt.Errorf("character_book: %w", err)
		}
		data.set("character_book", b)
	}
	data.set("tags", jsontext.NonNil(c.Tags))
	data.set("creator", c.Creator)
	data.set("character_version", c.CharacterVersion)
	rest := extMap(c.Extensions, extData)
	ext, _ := rest["extensions"].(map[string]any)
	if notes := sections[SectionCreatorNotes]; notes != "" && notes != creatorNotes {
		ext = deepCopyMap(ext)
		if ext == nil {
			ext = map[string]any{}
		}
		ext[creatorNotesKey] = notes
	}
	if ext == nil {
		ext = map[string]any{}
	}
	data.set("extensions", ext)
	if spec == SpecV3 {
		if g, ok := rest["group_only_greetings"]; ok {
			data.set("group_only_greetings", g)
		} else {
			data.set("group_only_greetings", []string{})
		}
	}
	keys := make([]string, 0, len(rest))
	for k := range rest {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if ownedDataFields[k] || data.has(k) || (spec == SpecV2 && v3OnlyDataFields[k]) {
			continue
		}
		data.set(k, rest[k])
	}

	root := newObj()
	root.set("spec", spec)
	if spec == SpecV3 {
		root.set("spec_version", "3.0")
	} else {
		root.set("spec_version", "2.0")
	}
	root.set("data", data)
	if spec == SpecV2 {
		// A V2 chara chunk also carries the V1 fields at its root, as SillyTavern writes it,
		// so that readers of V1 cards see the card too.
		for _, k := range v1Fields {
			v, _ := data.get(k)
			root.set(k, v)
		}
	}
	// The copies the file had at its top level, as the data fields are now.
	copies, _ := c.Extensions[extRootCopies].([]any)
	for _, k := range copies {
		if k, ok := k.(string); ok && !root.has(k) {
			if v, ok := data.get(rootCopyOf(k)); ok {
				root.set(k, v)
			}
		}
	}
	// setRest skips spec, spec_version and data: they are set already.
	root.setRest(extMap(c.Extensions, extRoot))
	return root, nil
}

// WriteV3JSON renders a card as a Character Card V3 JSON file. creator_notes is the card's
// Description, or its creatorNotes section when Description is empty (a creatorNotes section that
// differs from a non-empty Description is kept in data.extensions under "cardwriter/creatorNotes").
func WriteV3JSON(c *Card) ([]byte, error) {
	if c == nil {
		return nil, errors.New("no card")
	}
	o, err := cardObject(c, SpecV3)
	if err != nil {
		return nil, err
	}
	return encodeIndented(o)
}

// writeCompactCard renders a card of the given spec as compact JSON, for PNG chunks.
func writeCompactCard(c *Card, spec string) ([]byte, error) {
	o, err := cardObject(c, spec)
	if err != nil {
		return nil, err
	}
	return jsontext.Marshal(o)
}
