package undo

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

// A version names the state of an object as the revision pre-read sees it: the first
// versionDigest bytes of a SHA-256 over the canonical JSON (RFC 8785) of each of its parts, in a
// fixed order, then the first partDigest bytes of each part's own SHA-256, so that a refused
// write can name the parts that changed (one byte each named the wrong ones once in 256);
// base64url without padding. The same state gives the same version on every
// replica and after a restart. A worldbook entry's version has no part bytes: only its id is
// named when it changed.
const (
	versionDigest = 6
	partDigest    = 2
)

// Absent is the version of a trial card that does not exist.
const Absent = "none"

// version returns the version of parts (decoded JSON values); withParts adds each part's
// digest. One buffer encodes every part.
func version(parts []any, withParts bool) string {
	h := sha256.New()
	out := make([]byte, versionDigest, versionDigest+partDigest*len(parts))
	var buf []byte
	for _, p := range parts {
		buf = appendCanonical(buf[:0], p)
		sum := sha256.Sum256(buf)
		h.Write(sum[:])
		if withParts {
			out = append(out, sum[:partDigest]...)
		}
	}
	copy(out[:versionDigest], h.Sum(nil))
	return base64.RawURLEncoding.EncodeToString(out)
}

// appendCanonical appends the canonical JSON (RFC 8785: sorted keys, no whitespace, strings
// escaped only where they must be) of a decoded JSON value: nil, bool, string, json.Number (as
// written), []any, map[string]any; any other value through encoding/json.
func appendCanonical(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return strconv.AppendBool(dst, x)
	case string:
		return appendString(dst, x)
	case json.Number:
		return append(dst, x...)
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCanonical(dst, e)
		}
		return append(dst, ']')
	case map[string]any:
		dst = append(dst, '{')
		for i, k := range slices.Sorted(maps.Keys(x)) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(appendString(dst, k), ':')
			dst = appendCanonical(dst, x[k])
		}
		return append(dst, '}')
	}
	data, err := jsontext.Canonical(v)
	if err != nil {
		return append(dst, "null"...) // decoded JSON always encodes
	}
	return append(dst, data...)
}

// appendString appends s as a JSON string: ", \ and control characters escaped, nothing else.
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	return append(append(dst, s[start:]...), '"')
}

// decodeRaw decodes a JSON value as the tools decode the service's answers (schema.DecodeJSON:
// numbers as written); nil for none or bad JSON.
func decodeRaw(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	v, err := schema.DecodeJSON(raw)
	if err != nil {
		return nil
	}
	return v
}

// versionedFields are the card fields of a card's version, in order; its sections follow.
var versionedFields = slices.Concat(OpeningFields, ProfileFields, []string{visibilityField})

// cardParts are the parts of a card's version, in order: its fields, then its sections.
var cardParts = func() []string {
	parts := slices.Clone(versionedFields)
	for _, s := range SectionNames {
		parts = append(parts, "sections."+s)
	}
	return parts
}()

// Version returns the card's version.
func (c Card) Version() string {
	fields := make(map[string]any, len(versionedFields))
	for _, f := range versionedFields {
		fields[f] = decodeRaw(c.Fields[f])
	}
	sections := make(map[string]any, len(SectionNames))
	for _, s := range SectionNames {
		sections[s] = decodeRaw(c.Sections[s])
	}
	return cardVersion(fields, sections)
}

// CardVersion returns the version of a card as get_card decodes it.
func CardVersion(card map[string]any) string {
	sections, _ := card["sections"].(map[string]any)
	return cardVersion(card, sections)
}

func cardVersion(fields, sections map[string]any) string {
	parts := make([]any, 0, len(cardParts))
	for _, f := range versionedFields {
		parts = append(parts, fields[f])
	}
	for _, s := range SectionNames {
		parts = append(parts, sections[s])
	}
	return version(parts, true)
}

// metaParts are the parts of a worldbook's metadata version.
var metaParts = []string{"name", "description", "tags", "boundRoleIds"}

// MetaVersion returns the version of a worldbook's metadata and bindings (not its entries,
// which have their own) as get_worldbook decodes it.
func MetaVersion(wb map[string]any) string {
	return version([]any{wb["name"], wb["description"], listOrEmpty(wb["tags"]), listOrEmpty(wb["boundRoleIds"])}, true)
}

// listOrEmpty is a list, or an empty one for none.
func listOrEmpty(v any) any {
	if v == nil {
		return []any{}
	}
	return v
}

// MetaVersion returns the version of the worldbook's metadata and bindings.
func (s WorldbookState) MetaVersion() string {
	return version([]any{s.Name, s.Description, anyList(s.Tags), anyList(s.BoundRoleIDs)}, true)
}

// anyList is a list of strings as decoded JSON holds it ([] for none).
func anyList(l []string) []any {
	out := make([]any, len(l))
	for i, v := range l {
		out[i] = v
	}
	return out
}

// EntryVersion returns the version of a worldbook entry as list_worldbook_entries decodes it
// (the fields a write sets).
func EntryVersion(e map[string]any) string {
	parts := make([]any, len(EntryFields))
	for i, f := range EntryFields {
		parts[i] = e[f]
	}
	return version(parts, false)
}

// rawEntryVersion is EntryVersion of an entry as a snapshot holds it.
func rawEntryVersion(e map[string]json.RawMessage) string {
	parts := make([]any, len(EntryFields))
	for i, f := range EntryFields {
		parts[i] = decodeRaw(e[f])
	}
	return version(parts, false)
}

// trialParts are the parts of a trial card's version: its digested fields, sorted, then the
// count of its worldbook's entries.
var trialParts = func() []string {
	parts := slices.Sorted(maps.Keys(TrialFields))
	return append(parts, "worldbook entries")
}()

// TrialVersion returns the version of a trial card (Absent for none): the card service's
// digests of its fields and the count of its entries.
func TrialVersion(t *Trial) string {
	if t == nil {
		return Absent
	}
	sections := make(map[string]any, len(t.Sections))
	for k, v := range t.Sections {
		sections[k] = v
	}
	return trialVersion(sections, json.Number(strconv.Itoa(t.Worldbook.Entries)))
}

// TrialVersionOf returns the version of a trial card as get_trial_card decodes it.
func TrialVersionOf(trial map[string]any) string {
	sections, _ := trial["sections"].(map[string]any)
	wb, _ := trial["worldbook"].(map[string]any)
	return trialVersion(sections, wb["entries"])
}

func trialVersion(sections map[string]any, entries any) string {
	parts := make([]any, 0, len(trialParts))
	for _, f := range trialParts[:len(trialParts)-1] {
		parts = append(parts, sections[f])
	}
	return version(append(parts, entries), true)
}

// changedParts returns the names of the parts in which the version then differs from now:
// ok is false when then is no version of this shape (not one this server gave for it). A
// version whose digest differs though no part's byte does names every part ("" parts
// unknown).
func changedParts(then, now string, names []string) (changed []string, ok bool) {
	a, err := base64.RawURLEncoding.DecodeString(then)
	if err != nil || len(a) != versionDigest+partDigest*len(names) {
		return nil, false
	}
	b, _ := base64.RawURLEncoding.DecodeString(now)
	if bytes.Equal(a, b) {
		return nil, true
	}
	for i, n := range names {
		at := versionDigest + partDigest*i
		if !bytes.Equal(a[at:at+partDigest], b[at:at+partDigest]) {
			changed = append(changed, n)
		}
	}
	if len(changed) == 0 {
		changed = slices.Clone(names)
	}
	return changed, true
}

// validEntryVersion reports whether v has the shape of an entry's version.
func validEntryVersion(v string) bool {
	b, err := base64.RawURLEncoding.DecodeString(v)
	return err == nil && len(b) == versionDigest
}

// badVersion is the failure of an ifVersion that is no version this server gave for the object.
func badVersion(arg, kind, id string) *Failure {
	return &Failure{Code: "invalid_arguments", Detail: map[string]any{"argument": arg},
		Message: fmt.Sprintf("%s is not a version of %s %s: send the version a read of it gave, or leave %s out.", arg, kind, id, arg)}
}
