package tavern

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// World Info field names and the V3 lorebook field each one corresponds to (SillyTavern's
// originalWIDataKeyMap and convertCharacterBook).
var (
	wiTop = []struct{ wi, cb string }{
		{"key", "keys"}, {"keysecondary", "secondary_keys"}, {"comment", "comment"},
		{"content", "content"}, {"constant", "constant"}, {"selective", "selective"},
		{"order", "insertion_order"},
	}
	wiExt = []struct{ wi, cb string }{
		{"selectiveLogic", "selectiveLogic"}, {"position", "position"}, {"displayIndex", "display_index"},
		{"excludeRecursion", "exclude_recursion"}, {"preventRecursion", "prevent_recursion"},
		{"delayUntilRecursion", "delay_until_recursion"}, {"probability", "probability"},
		{"useProbability", "useProbability"}, {"depth", "depth"}, {"group", "group"},
		{"groupOverride", "group_override"}, {"groupWeight", "group_weight"}, {"scanDepth", "scan_depth"},
		{"caseSensitive", "case_sensitive"}, {"matchWholeWords", "match_whole_words"},
		{"useGroupScoring", "use_group_scoring"}, {"automationId", "automation_id"}, {"role", "role"},
		{"vectorized", "vectorized"}, {"sticky", "sticky"}, {"cooldown", "cooldown"}, {"delay", "delay"},
		{"matchPersonaDescription", "match_persona_description"},
		{"matchCharacterDescription", "match_character_description"},
		{"matchCharacterPersonality", "match_character_personality"},
		{"matchCharacterDepthPrompt", "match_character_depth_prompt"},
		{"matchScenario", "match_scenario"}, {"matchCreatorNotes", "match_creator_notes"},
		{"triggers", "triggers"}, {"ignoreBudget", "ignore_budget"}, {"outletName", "outlet_name"},
	}
	// wiPassthrough are V3 entry fields World Info has no name for; they keep their V3 name.
	wiPassthrough = map[string]bool{"name": true, "priority": true, "use_regex": true, "case_sensitive": true}

	wiTopByWI, wiExtByWI, wiTopByCB, wiExtByCB = map[string]string{}, map[string]string{}, map[string]string{}, map[string]string{}
	wiReserved                                 = map[string]bool{"uid": true, "disable": true, "extensions": true}
)

func init() {
	for _, p := range wiTop {
		wiTopByWI[p.wi], wiTopByCB[p.cb] = p.cb, p.wi
		wiReserved[p.wi] = true
	}
	for _, p := range wiExt {
		wiExtByWI[p.wi], wiExtByCB[p.cb] = p.cb, p.wi
		wiReserved[p.wi] = true
	}
}

// wiToCB converts a World Info entry to the V3 lorebook entry shape.
func wiToCB(w map[string]any, mapKey, path string) (map[string]any, error) {
	cb := map[string]any{}
	ext := map[string]any{}
	if we, ok := w["extensions"]; ok {
		m, err := asObject(we, path+".extensions")
		if err != nil {
			return nil, err
		}
		for k, v := range m {
			ext[k] = v
		}
	}
	for k, v := range w {
		switch {
		case k == "extensions":
		case k == "uid":
			cb["id"] = v
			if n, ok, exact, err := asInt(v, ""); ok && exact && err == nil {
				if _, isBool := v.(bool); !isBool {
					cb["id"] = json.Number(strconv.Itoa(n))
				}
			}
		case k == "disable":
			d, ok, err := asBool(v, path+".disable")
			if err != nil {
				return nil, err
			}
			if ok {
				cb["enabled"] = !d
			}
		case wiTopByWI[k] != "":
			cb[wiTopByWI[k]] = v
		case wiExtByWI[k] != "":
			ext[wiExtByWI[k]] = v
			if k == "position" {
				if n, ok, _, err := asInt(v, ""); ok && err == nil {
					if n == 0 {
						cb["position"] = "before_char"
					} else {
						cb["position"] = "after_char"
					}
				}
			}
		case wiPassthrough[k]:
			cb[k] = v
		default:
			ext[k] = v
		}
	}
	if _, ok := cb["id"]; !ok && mapKey != "" {
		if n, err := strconv.ParseInt(mapKey, 10, 32); err == nil {
			cb["id"] = json.Number(strconv.FormatInt(n, 10))
		} else {
			cb["id"] = mapKey
		}
	}
	if len(ext) > 0 {
		cb["extensions"] = ext
	}
	return cb, nil
}

// wiObject converts an exported V3 lorebook entry to a World Info entry with the given uid.
func wiObject(cb *obj, uid int) *obj {
	w := newObj()
	w.set("uid", uid)
	extra := map[string]any{}
	put := func(k string, v any) {
		if wiReserved[k] || w.has(k) {
			extra[k] = v
			return
		}
		w.set(k, v)
	}
	for _, p := range wiTop {
		if v, ok := cb.get(p.cb); ok {
			w.set(p.wi, v)
		}
	}
	enabled, _ := cb.get("enabled")
	w.set("disable", enabled == false)
	ext, _ := cb.get("extensions")
	extMap, _ := ext.(map[string]any)
	if _, ok := extMap["position"]; !ok {
		if p, ok := cb.get("position"); ok {
			switch p {
			case "before_char":
				w.set("position", 0)
			case "after_char":
				w.set("position", 1)
			}
		}
	}
	for _, p := range wiExt {
		if v, ok := extMap[p.cb]; ok {
			w.set(p.wi, v)
		}
	}
	keys := make([]string, 0, len(extMap))
	for k := range extMap {
		if wiExtByCB[k] == "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	comment, _ := cb.get("comment")
	for _, k := range cb.keys {
		v := cb.vals[k]
		switch {
		case k == "id" || k == "enabled" || k == "extensions" || k == "position" || wiTopByCB[k] != "":
		case k == "name" && v == comment:
		default:
			put(k, v)
		}
	}
	for _, k := range keys {
		put(k, extMap[k])
	}
	if len(extra) > 0 {
		w.set("extensions", extra)
	}
	return w
}

// WriteWorldInfo renders a book as a SillyTavern World Info JSON file (entries keyed by uid).
func WriteWorldInfo(b *Book) ([]byte, error) {
	if b == nil {
		return nil, errors.New("no book")
	}
	cbs := make([]*obj, len(b.Entries))
	used := map[int]bool{}
	uids := make([]int, len(b.Entries))
	for i := range b.Entries {
		eo, err := entryObject(&b.Entries[i], targetWI)
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		cbs[i] = eo
		uids[i] = -1
		if id, ok := eo.get("id"); ok {
			if n, ok, exact, err := asInt(id, ""); ok && exact && err == nil && n >= 0 && !used[n] {
				if _, isBool := id.(bool); !isBool {
					uids[i], used[n] = n, true
				}
			}
		}
	}
	next := 0
	entries := newObj()
	for i, eo := range cbs {
		if uids[i] < 0 {
			for used[next] {
				next++
			}
			uids[i], used[next] = next, true
		}
		entries.set(strconv.Itoa(uids[i]), wiObject(eo, uids[i]))
	}
	root := newObj()
	root.set("entries", entries)
	if b.Name != "" {
		root.set("name", b.Name)
	}
	if b.Description != "" {
		root.set("description", b.Description)
	}
	rest := map[string]any{}
	for k, v := range b.Extensions {
		if k != "originalData" && !ownedBookFields[k] {
			rest[k] = v
		}
	}
	root.setRest(rest)
	return encodeIndented(root)
}

// bookFromWI reads a SillyTavern World Info object; order lists the entries' keys in file order.
func bookFromWI(root map[string]any, order []string) (*Book, error) {
	entries, _ := root["entries"].(map[string]any)
	b := &Book{}
	var err error
	if b.Name, err = asString(root["name"], "name"); err != nil {
		return nil, err
	}
	if b.Description, err = asString(root["description"], "description"); err != nil {
		return nil, err
	}
	if len(order) != len(entries) {
		order = order[:0]
		for k := range entries {
			order = append(order, k)
		}
		sortUIDKeys(order)
	}
	for _, k := range order {
		p := fmt.Sprintf("entries[%q]", k)
		em, err := asObject(entries[k], p)
		if err != nil {
			return nil, err
		}
		if em == nil {
			continue
		}
		cb, err := wiToCB(em, k, p)
		if err != nil {
			return nil, err
		}
		e, err := entryFromCB(cb, p)
		if err != nil {
			return nil, err
		}
		b.Entries = append(b.Entries, e)
	}
	rest := map[string]any{}
	for k, v := range root {
		if k != "originalData" && !ownedBookFields[k] {
			rest[k] = v
		}
	}
	// SillyTavern keeps the lorebook a character's book came from in originalData; its book-level
	// fields are taken where the file has none (its entries are a stale copy of the ones above).
	if od, ok := root["originalData"].(map[string]any); ok {
		if b.Name == "" {
			b.Name, _ = od["name"].(string)
		}
		if b.Description == "" {
			b.Description, _ = od["description"].(string)
		}
		for k, v := range od {
			if _, ok := rest[k]; !ok && !ownedBookFields[k] {
				rest[k] = v
			}
		}
	}
	if err := dropEmptyExtensions(rest, "World Info"); err != nil {
		return nil, err
	}
	v3BookSettings(rest)
	if len(rest) > 0 {
		b.Extensions = rest
	}
	return b, nil
}

// objectKeyOrder returns the keys of the object under field of a JSON object, in file order.
func objectKeyOrder(data []byte, field string) []string {
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimPrefix(data, utf8BOM)))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		key, _ := t.(string)
		if key != field {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return nil
		}
		var keys []string
		seen := map[string]bool{}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return nil
			}
			k, _ := t.(string)
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		return keys
	}
	return nil
}
