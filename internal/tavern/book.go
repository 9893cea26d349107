package tavern

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"
)

// categoryKey is where an entry's service category is kept in a tavern entry's extensions.
const categoryKey = "cardwriter/category"

// ownedEntryFields are the lorebook entry fields the model holds itself.
var ownedEntryFields = map[string]bool{
	"keys": true, "secondary_keys": true, "selective": true, "content": true, "enabled": true,
	"constant": true, "insertion_order": true, "priority": true, "name": true, "comment": true,
}

// ownedBookFields are the lorebook fields the model holds itself.
var ownedBookFields = map[string]bool{"name": true, "description": true, "entries": true}

// bookFromCB reads a V2/V3 lorebook object (character_book or lorebook_v3 data).
func bookFromCB(m map[string]any, path string) (*Book, error) {
	b := &Book{}
	var err error
	if b.Name, err = asString(m["name"], path+".name"); err != nil {
		return nil, err
	}
	if b.Description, err = asString(m["description"], path+".description"); err != nil {
		return nil, err
	}
	switch entries := m["entries"].(type) {
	case nil:
	case []any:
		for i, x := range entries {
			p := fmt.Sprintf("%s.entries[%d]", path, i)
			em, err := asObject(x, p)
			if err != nil {
				return nil, err
			}
			if em == nil {
				continue
			}
			e, err := entryFromAny(em, "", p)
			if err != nil {
				return nil, err
			}
			b.Entries = append(b.Entries, e)
		}
	case map[string]any:
		// Entries keyed by id, as SillyTavern keeps them.
		keys := make([]string, 0, len(entries))
		for k := range entries {
			keys = append(keys, k)
		}
		sortUIDKeys(keys)
		for _, k := range keys {
			p := fmt.Sprintf("%s.entries[%q]", path, k)
			em, err := asObject(entries[k], p)
			if err != nil {
				return nil, err
			}
			if em == nil {
				continue
			}
			e, err := entryFromAny(em, k, p)
			if err != nil {
				return nil, err
			}
			b.Entries = append(b.Entries, e)
		}
	default:
		return nil, pathError(path+".entries", "%s where an array was expected", kind(entries))
	}
	rest := map[string]any{}
	for k, v := range m {
		if !ownedBookFields[k] {
			rest[k] = v
		}
	}
	if err := dropEmptyExtensions(rest, path); err != nil {
		return nil, err
	}
	v3BookSettings(rest)
	if len(rest) > 0 {
		b.Extensions = rest
	}
	return b, nil
}

// v3BookSettings renames the book settings an editor wrote in camelCase to their V3 names (where
// the V3 name is not set too), so that they are kept, listed and written under those names.
func v3BookSettings(m map[string]any) {
	for _, s := range bookSettings {
		v, ok := m[s.camel]
		if !ok {
			continue
		}
		if _, both := m[s.v3]; !both {
			m[s.v3] = v
			delete(m, s.camel)
		}
	}
}

// BookFieldsNotHeld names the lorebook fields (V3 names) the card service has no field for.
var BookFieldsNotHeld = []string{"scan_depth", "token_budget", "recursive_scanning", "extensions"}

// dropEmptyExtensions removes an empty "extensions" (writers always write one) and refuses a
// non-object one.
func dropEmptyExtensions(m map[string]any, path string) error {
	v, ok := m["extensions"]
	if !ok {
		return nil
	}
	if isEmptyValue(v) {
		delete(m, "extensions")
		return nil
	}
	if _, err := asObject(v, path+".extensions"); err != nil {
		return err
	}
	return nil
}

// sortUIDKeys sorts entry keys numerically where they are numbers, numbers first.
func sortUIDKeys(keys []string) {
	sort.SliceStable(keys, func(i, j int) bool {
		a, aerr := strconv.ParseInt(keys[i], 10, 64)
		b, berr := strconv.ParseInt(keys[j], 10, 64)
		switch {
		case aerr == nil && berr == nil:
			return a < b
		case aerr == nil:
			return true
		case berr == nil:
			return false
		}
		return keys[i] < keys[j]
	})
}

// isWIEntry reports whether an entry object uses SillyTavern's World Info field names.
func isWIEntry(m map[string]any) bool {
	if _, ok := m["keys"]; ok {
		return false
	}
	for _, k := range []string{"key", "keysecondary", "uid", "disable", "order"} {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// entryFromAny reads an entry in either lorebook or World Info shape.
func entryFromAny(m map[string]any, mapKey, path string) (Entry, error) {
	if isWIEntry(m) {
		cb, err := wiToCB(m, mapKey, path)
		if err != nil {
			return Entry{}, err
		}
		return entryFromCB(cb, path)
	}
	return entryFromCB(m, path)
}

// entryFromCB reads a V2/V3 lorebook entry.
func entryFromCB(m map[string]any, path string) (Entry, error) {
	e := Entry{Extensions: map[string]any{}}
	rest := e.Extensions
	for k, v := range m {
		if !ownedEntryFields[k] {
			rest[k] = v
		}
	}
	var err error
	if e.Keywords, err = asStrings(m["keys"], path+".keys", true); err != nil {
		return Entry{}, err
	}
	if e.Content, err = asString(m["content"], path+".content"); err != nil {
		return Entry{}, err
	}
	enabled, ok, err := asBool(m["enabled"], path+".enabled")
	if err != nil {
		return Entry{}, err
	}
	e.IsEnabled = enabled || !ok
	if e.IsConstant, _, err = asBool(m["constant"], path+".constant"); err != nil {
		return Entry{}, err
	}
	for _, f := range []struct {
		key string
		dst *int
	}{{"insertion_order", &e.SortOrder}, {"priority", &e.Priority}} {
		n, _, exact, err := asInt(m[f.key], path+"."+f.key)
		if err != nil {
			return Entry{}, err
		}
		*f.dst = n
		if !exact {
			rest[f.key] = m[f.key]
		}
	}

	// name, or comment when name is empty; the other is kept when it says something else.
	name, err := asString(m["name"], path+".name")
	if err != nil {
		return Entry{}, err
	}
	comment, err := asString(m["comment"], path+".comment")
	if err != nil {
		return Entry{}, err
	}
	e.Name = name
	if name == "" {
		e.Name = comment
	} else if c, ok := m["comment"]; ok && comment != name {
		rest["comment"] = c
	}

	// secondary_keys count only when selective; otherwise they are kept for export.
	selective, selOK, err := asBool(m["selective"], path+".selective")
	if err != nil {
		return Entry{}, err
	}
	secondary, err := asStrings(m["secondary_keys"], path+".secondary_keys", true)
	if err != nil {
		return Entry{}, err
	}
	if selective && len(secondary) > 0 {
		e.SecondaryKeywords = secondary
	} else {
		if len(secondary) > 0 {
			rest["secondary_keys"] = stringsToAny(secondary)
		}
		if selOK {
			rest["selective"] = selective
		}
	}

	if ext, ok := rest["extensions"]; ok {
		em, err := asObject(ext, path+".extensions")
		if err != nil {
			return Entry{}, err
		}
		if cat, ok := em[categoryKey]; ok {
			if e.Category, err = asString(cat, path+".extensions."+categoryKey); err != nil {
				return Entry{}, err
			}
			em = deepCopyMap(em)
			delete(em, categoryKey)
		}
		if len(em) == 0 {
			delete(rest, "extensions")
		} else {
			rest["extensions"] = em
		}
	}
	mo := deriveMatch(rest)
	e.MatchOptions = &mo
	return e, nil
}

// deriveMatch computes an entry's complete matching options from its lorebook fields: V3's
// case_sensitive, else extensions.case_sensitive; extensions.match_whole_words; extensions.selectiveLogic.
// SillyTavern's null ("use the global setting") becomes its global default, false.
func deriveMatch(rest map[string]any) MatchOptions {
	var mo MatchOptions
	ext, _ := rest["extensions"].(map[string]any)
	if b, ok, err := asBool(rest["case_sensitive"], ""); ok && err == nil {
		mo.CaseSensitive = b
	} else if b, ok, err := asBool(ext["case_sensitive"], ""); ok && err == nil {
		mo.CaseSensitive = b
	}
	if b, ok, err := asBool(ext["match_whole_words"], ""); ok && err == nil {
		mo.MatchWholeWords = b
	}
	if n, ok, exact, err := asInt(ext["selectiveLogic"], ""); ok && exact && err == nil && n >= 0 && n <= 3 {
		mo.SelectiveLogic = n
	}
	return mo
}

// keepRawInt returns the raw value when it still means n, else n.
func keepRawInt(raw any, present bool, n int) any {
	if present {
		if m, ok, _, err := asInt(raw, ""); ok && err == nil && m == n {
			return raw
		}
	}
	return n
}

// target of an entry export: the two formats place new match options differently.
type target int

const (
	targetCB target = iota // V2/V3 lorebook entry
	targetWI               // SillyTavern World Info entry
)

// EntryFieldsNotHeld names the lorebook entry fields (V3 names) the card service has no field for.
// An entry with no Extensions (no kept-aside record: authored on the service, or imported with
// another store) is written without them, except position (see entryObject).
var EntryFieldsNotHeld = []string{"id", "position", "use_regex", "selective", "secondary_keys", "comment", "extensions"}

// entryObject builds a V2/V3 lorebook entry from an entry, restoring the fields kept in its Extensions.
func entryObject(e *Entry, t target) (*obj, error) {
	if e.MatchOptions != nil && (e.MatchOptions.SelectiveLogic < 0 || e.MatchOptions.SelectiveLogic > 3) {
		return nil, fmt.Errorf("selectiveLogic %d is not 0-3", e.MatchOptions.SelectiveLogic)
	}
	if e.Extensions == nil {
		return heldEntryObject(e, t), nil
	}
	return restoredEntryObject(e, t), nil
}

// heldEntryObject builds the entry of an entry that has no kept-aside fields: only what the card
// service holds, and nothing it does not (no id, depth, probability, useProbability, ...; a
// reader applies its own defaults to them). Matching options equal to SillyTavern's defaults
// (case-insensitive, any word boundary, AND ANY) are left out too, so that none of its "use the
// global setting" values turns into a fixed one. selective is written only when the entry has
// secondary keywords (they gate it). position is the exception: SillyTavern reads a missing one
// as after_char, while its own default for an entry is before_char, which is written.
func heldEntryObject(e *Entry, t target) *obj {
	mo := MatchOptions{}
	if e.MatchOptions != nil {
		mo = *e.MatchOptions
	}
	o := newObj()
	o.set("keys", jsontext.NonNil(e.Keywords))
	if len(e.SecondaryKeywords) > 0 {
		o.set("secondary_keys", e.SecondaryKeywords)
	}
	o.set("comment", e.Name)
	o.set("content", e.Content)
	o.set("constant", e.IsConstant)
	if len(e.SecondaryKeywords) > 0 {
		o.set("selective", true)
	}
	o.set("insertion_order", e.SortOrder)
	o.set("enabled", e.IsEnabled)
	o.set("position", "before_char")
	ext := map[string]any{}
	if mo.CaseSensitive {
		ext["case_sensitive"] = true
	}
	if mo.MatchWholeWords {
		ext["match_whole_words"] = true
	}
	if mo.SelectiveLogic != LogicAndAny {
		ext["selectiveLogic"] = mo.SelectiveLogic
	}
	if e.Category != "" {
		ext[categoryKey] = e.Category
	}
	o.set("extensions", ext)
	if e.Name != "" {
		o.set("name", e.Name)
	}
	if e.Priority != 0 {
		o.set("priority", e.Priority)
	}
	if mo.CaseSensitive && t == targetCB {
		o.set("case_sensitive", true)
	}
	return o
}

// restoredEntryObject builds the entry of an entry read from a file (or restored from what was
// kept aside of it): its Extensions go back where they were, and the matching options the
// service holds are written where the file kept them when they changed.
func restoredEntryObject(e *Entry, t target) *obj {
	res := e.Extensions
	want := MatchOptions{}
	if e.MatchOptions != nil {
		want = *e.MatchOptions
	}
	o := newObj()
	if id, ok := res["id"]; ok {
		o.set("id", id)
	}
	o.set("keys", jsontext.NonNil(e.Keywords))
	if len(e.SecondaryKeywords) > 0 {
		o.set("secondary_keys", e.SecondaryKeywords)
	} else if sk, ok := res["secondary_keys"]; ok {
		o.set("secondary_keys", sk)
	} else {
		o.set("secondary_keys", []string{})
	}
	if c, ok := res["comment"]; ok {
		o.set("comment", c)
	} else {
		o.set("comment", e.Name)
	}
	o.set("content", e.Content)
	o.set("constant", e.IsConstant)
	if len(e.SecondaryKeywords) > 0 {
		o.set("selective", true)
	} else if s, ok := res["selective"]; ok {
		if _, hasSK := res["secondary_keys"]; hasSK {
			s = false // kept secondary keys were inactive and stay so
		}
		o.set("selective", s)
	}
	ord, hasOrd := res["insertion_order"]
	o.set("insertion_order", keepRawInt(ord, hasOrd, e.SortOrder))
	o.set("enabled", e.IsEnabled)
	if p, ok := res["position"]; ok {
		o.set("position", p)
	}
	if u, ok := res["use_regex"]; ok {
		o.set("use_regex", u)
	}

	ext := map[string]any{}
	if m, ok := res["extensions"].(map[string]any); ok {
		ext = deepCopyMap(m)
	}
	topCS, hasTopCS := res["case_sensitive"]
	cur := deriveMatch(res)
	if want.CaseSensitive != cur.CaseSensitive {
		wrote := false
		if hasTopCS && topCS != nil {
			topCS, wrote = want.CaseSensitive, true
		}
		if v, ok := ext["case_sensitive"]; ok && v != nil {
			ext["case_sensitive"], wrote = want.CaseSensitive, true
		}
		if !wrote {
			ext["case_sensitive"] = want.CaseSensitive
			if t == targetCB {
				topCS, hasTopCS = want.CaseSensitive, true
			}
		}
	}
	if want.MatchWholeWords != cur.MatchWholeWords {
		ext["match_whole_words"] = want.MatchWholeWords
	}
	if want.SelectiveLogic != cur.SelectiveLogic {
		ext["selectiveLogic"] = want.SelectiveLogic
	}
	if e.Category != "" {
		ext[categoryKey] = e.Category
	}
	o.set("extensions", ext)
	// SillyTavern writes comment and no name: an empty name the comment stands for is not added.
	if _, hasComment := res["comment"]; e.Name != "" || hasComment {
		o.set("name", e.Name)
	}
	// priority is optional in both formats: a zero the source did not have is not added.
	if pri, hasPri := res["priority"]; hasPri || e.Priority != 0 {
		o.set("priority", keepRawInt(pri, hasPri, e.Priority))
	}
	if hasTopCS {
		o.set("case_sensitive", topCS)
	}
	rest := map[string]any{}
	for k, v := range res {
		if !ownedEntryFields[k] && !o.has(k) {
			rest[k] = v
		}
	}
	o.setRest(rest)
	return o
}

// bookObject builds a V2/V3 lorebook object.
func bookObject(b *Book) (*obj, error) {
	o := newObj()
	o.set("name", b.Name)
	o.set("description", b.Description)
	for _, k := range bookSettings {
		if v, ok := b.Extensions[k.v3]; ok {
			o.set(k.v3, v)
		} else if v, ok := b.Extensions[k.camel]; ok {
			o.set(k.v3, v) // a non-standard camelCase setting goes out under its V3 name
		}
	}
	if ext, ok := b.Extensions["extensions"].(map[string]any); ok {
		o.set("extensions", ext)
	} else {
		o.set("extensions", map[string]any{})
	}
	entries := make([]any, 0, len(b.Entries))
	for i := range b.Entries {
		eo, err := entryObject(&b.Entries[i], targetCB)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		entries = append(entries, eo)
	}
	o.set("entries", entries)
	rest := map[string]any{}
	for k, v := range b.Extensions {
		if !ownedBookFields[k] && !writtenAsV3(b.Extensions, k) {
			rest[k] = v
		}
	}
	o.setRest(rest)
	return o, nil
}

// bookSettings are the lorebook settings of the V3 spec, with the camelCase spelling some
// editors write instead.
var bookSettings = []struct{ v3, camel string }{
	{"scan_depth", "scanDepth"}, {"token_budget", "tokenBudget"}, {"recursive_scanning", "recursiveScanning"},
}

// writtenAsV3 reports whether k is a camelCase setting bookObject wrote under its V3 name (it
// does so when the V3 name is not set too; else both are kept as they are).
func writtenAsV3(ext map[string]any, k string) bool {
	for _, s := range bookSettings {
		if s.camel == k {
			_, both := ext[s.v3]
			return !both
		}
	}
	return false
}

// WriteLorebookV3 renders a book as a standalone lorebook_v3 JSON file.
func WriteLorebookV3(b *Book) ([]byte, error) {
	if b == nil {
		return nil, errors.New("no book")
	}
	bo, err := bookObject(b)
	if err != nil {
		return nil, err
	}
	root := newObj()
	root.set("spec", SpecLorebook)
	root.set("data", bo)
	return encodeIndented(root)
}

// ReadBook reads a lorebook: a standalone lorebook_v3, a V2/V3 character_book object, a SillyTavern
// World Info file (entries keyed by uid), or the character_book of a card in any format Read accepts.
func ReadBook(data []byte) (b *Book, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("unreadable lorebook: %v", r)
		}
	}()
	return readBook(data)
}

func readBook(data []byte) (*Book, error) {
	if len(data) > MaxInputSize {
		return nil, fmt.Errorf("input is %d bytes; the limit is %d", len(data), MaxInputSize)
	}
	if !looksLikeJSON(data) {
		c, _, err := read(data)
		if err != nil {
			return nil, err
		}
		if c.Book == nil {
			return nil, errors.New("card has no character_book")
		}
		return c.Book, nil
	}
	root, err := decodeJSONObject(data)
	if err != nil {
		return nil, err
	}
	spec, _ := root["spec"].(string)
	switch spec {
	case SpecLorebook:
		d, err := asObject(root["data"], "data")
		if err != nil {
			return nil, err
		}
		if d == nil {
			return nil, errors.New("lorebook_v3 has no data object")
		}
		return bookFromCB(d, "data")
	case SpecV2, SpecV3:
		c, _, err := cardFromObject(root)
		if err != nil {
			return nil, err
		}
		if c.Book == nil {
			return nil, errors.New("card has no character_book")
		}
		return c.Book, nil
	case "":
	default:
		return nil, fmt.Errorf("unknown spec %q (want %s)", spec, SpecLorebook)
	}
	switch root["entries"].(type) {
	case map[string]any:
		return bookFromWI(root, objectKeyOrder(data, "entries"))
	case []any:
		return bookFromCB(root, "book")
	case nil:
		if d, ok := root["data"].(map[string]any); ok {
			if _, ok := d["entries"]; ok {
				return bookFromCB(d, "data")
			}
		}
		if _, ok := root["character_book"]; ok {
			c, _, err := cardFromObject(root)
			if err != nil {
				return nil, err
			}
			if c.Book != nil {
				return c.Book, nil
			}
		}
		return nil, errors.New("not a lorebook: no entries")
	default:
		return nil, pathError("entries", "%s where an object or array was expected", kind(root["entries"]))
	}
}

// looksLikeJSON reports whether data starts (after a BOM and whitespace) like a JSON object.
func looksLikeJSON(data []byte) bool {
	t := bytes.TrimLeft(bytes.TrimPrefix(data, utf8BOM), " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}
