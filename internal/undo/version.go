package undo

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"
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

// version returns the version of parts (canonical JSON each); withParts adds the byte of each.
func version(parts [][]byte, withParts bool) string {
	h := sha256.New()
	out := make([]byte, versionDigest, versionDigest+partDigest*len(parts))
	for _, p := range parts {
		sum := sha256.Sum256(p)
		h.Write(sum[:])
		if withParts {
			out = append(out, sum[:partDigest]...)
		}
	}
	copy(out[:versionDigest], h.Sum(nil))
	return base64.RawURLEncoding.EncodeToString(out)
}

// canonical returns the canonical JSON of a decoded JSON value (numbers as json.Number).
func canonical(v any) []byte {
	data, err := jsontext.Canonical(v)
	if err != nil {
		return []byte("null") // decoded JSON always encodes; never a version of nothing
	}
	return data
}

// decodeRaw decodes a JSON value keeping its numbers as written; nil for none or bad JSON.
func decodeRaw(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}

// cardParts are the parts of a card's version, in order: its fields, then its sections.
var cardParts = func() []string {
	parts := slices.Concat(OpeningFields, ProfileFields, []string{visibilityField})
	for _, s := range SectionNames {
		parts = append(parts, "sections."+s)
	}
	return parts
}()

// Version returns the card's version.
func (c Card) Version() string {
	parts := make([][]byte, 0, len(cardParts))
	for _, f := range slices.Concat(OpeningFields, ProfileFields, []string{visibilityField}) {
		parts = append(parts, canonical(decodeRaw(c.Fields[f])))
	}
	for _, s := range SectionNames {
		parts = append(parts, canonical(decodeRaw(c.Sections[s])))
	}
	return version(parts, true)
}

// metaParts are the parts of a worldbook's metadata version.
var metaParts = []string{"name", "description", "tags", "boundRoleIds"}

// MetaVersion returns the version of a worldbook's metadata and bindings (not its entries,
// which have their own).
func MetaVersion(name, description string, tags, bound []string) string {
	return version([][]byte{canonical(name), canonical(description), canonical(jsontext.NonNil(tags)),
		canonical(jsontext.NonNil(bound))}, true)
}

// MetaVersion returns the version of the worldbook's metadata and bindings.
func (s WorldbookState) MetaVersion() string {
	return MetaVersion(s.Name, s.Description, s.Tags, s.BoundRoleIDs)
}

// EntryVersion returns the version of a worldbook entry as list_worldbook_entries decodes it
// (the fields a write sets).
func EntryVersion(e map[string]any) string {
	m := make(map[string]any, len(EntryFields))
	for _, f := range EntryFields {
		m[f] = e[f]
	}
	return version([][]byte{canonical(m)}, false)
}

// rawEntryVersion is EntryVersion of an entry as a snapshot holds it.
func rawEntryVersion(e map[string]json.RawMessage) string {
	m := make(map[string]any, len(EntryFields))
	for _, f := range EntryFields {
		m[f] = decodeRaw(e[f])
	}
	return version([][]byte{canonical(m)}, false)
}

// trialParts are the parts of a trial card's version: its digested fields, sorted, then the
// count of its worldbook's entries.
var trialParts = func() []string {
	parts := make([]string, 0, len(TrialFields)+1)
	for f := range TrialFields {
		parts = append(parts, f)
	}
	slices.Sort(parts)
	return append(parts, "worldbook entries")
}()

// TrialVersion returns the version of a trial card (Absent for none): the card service's
// digests of its fields and the count of its entries.
func TrialVersion(t *Trial) string {
	if t == nil {
		return Absent
	}
	parts := make([][]byte, 0, len(trialParts))
	for _, f := range trialParts[:len(trialParts)-1] {
		parts = append(parts, []byte(t.Sections[f]))
	}
	return version(append(parts, []byte(strconv.Itoa(t.Worldbook.Entries))), true)
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
