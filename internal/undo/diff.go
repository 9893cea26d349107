package undo

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/cardwriter/cardwriter-mcp/internal/linediff"
	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
)

// Labels name the two sides of a diff in its fields: the state then and the state now.
type Labels struct{ Old, New string }

var (
	// RevisionLabels are diff_revision's: what the revision kept, what the object holds now.
	RevisionLabels = Labels{Old: "revision", New: "current"}
	// PlanLabels are a dry run's: what the object holds now, what the write would make it.
	PlanLabels = Labels{Old: "current", New: "after"}
)

// Change is what differs between two states of one object, as diff_revision shows it.
type Change struct {
	Kind     string           `json:"kind"`
	ObjectID string           `json:"objectId"`
	Same     bool             `json:"same"`
	Fields   []map[string]any `json:"fields"`
	Entries  EntryChanges     `json:"entries"`
	Notes    []string         `json:"notes,omitempty"`
}

// EntryChanges are the worldbook entries added, changed and deleted between two states.
// TextOmitted counts the changed entries whose old and new text did not fit the budget: they
// name their changed fields only.
type EntryChanges struct {
	Added       []map[string]any `json:"added"`
	Changed     []map[string]any `json:"changed"`
	Deleted     []map[string]any `json:"deleted"`
	TextOmitted int              `json:"textOmitted,omitempty"`
}

func newChange(kind, id string) Change {
	return Change{Kind: kind, ObjectID: id, Fields: []map[string]any{},
		Entries: EntryChanges{Added: []map[string]any{}, Changed: []map[string]any{}, Deleted: []map[string]any{}}}
}

// settle sets Same.
func (c *Change) settle() {
	c.Same = len(c.Fields) == 0 && len(c.Entries.Added)+len(c.Entries.Changed)+len(c.Entries.Deleted) == 0 && len(c.Notes) == 0
}

// comparisons counts the entry comparisons and keys computed (pairing, diffing): the guard that
// keeps pairing linear (TestPairingLinear).
var comparisons atomic.Int64

// equalJSON reports whether two JSON values are equal as values (a missing one is null).
func equalJSON(a, b json.RawMessage) bool {
	if string(a) == string(b) {
		return true
	}
	return reflect.DeepEqual(decodeRaw(orNull(a)), decodeRaw(orNull(b)))
}

// changedFields returns the entry fields in which a and b differ.
func changedFields(a, b map[string]json.RawMessage) []string {
	comparisons.Add(1)
	var out []string
	for _, f := range EntryFields {
		if !equalJSON(a[f], b[f]) {
			out = append(out, f)
		}
	}
	return out
}

// entryKey is the content of an entry (the fields a write sets) as one string: equal keys,
// equal entries.
func entryKey(e map[string]json.RawMessage) string {
	comparisons.Add(1)
	var buf []byte
	for _, f := range EntryFields {
		buf = append(appendCanonical(buf, decodeRaw(e[f])), 0) // canonical JSON holds no NUL
	}
	return string(buf)
}

func entryBrief(e map[string]json.RawMessage) map[string]any {
	var name string
	_ = json.Unmarshal(e["name"], &name) // an entry without a string name shows ""
	return map[string]any{"entryId": EntryID(e), "name": name}
}

// fieldDiff is one field of a diff: the values, or a line diff for long text.
func fieldDiff(name string, old, now json.RawMessage, l Labels) map[string]any {
	a, b := decodeRaw(orNull(old)), decodeRaw(orNull(now))
	sa, okA := a.(string)
	sb, okB := b.(string)
	if okA && okB && (len(sa)+len(sb) > 400 || strings.Contains(sa+sb, "\n")) {
		return map[string]any{"field": name, "diff": linediff.Diff(sa, sb)}
	}
	return map[string]any{"field": name, l.Old: a, l.New: b}
}

// cardFields returns the field diffs of two card states over the fields and sections old holds.
func cardFields(old, now CardState, l Labels) []map[string]any {
	out := []map[string]any{}
	for _, f := range slices.Sorted(maps.Keys(old.Fields)) {
		if !equalJSON(old.Fields[f], now.Fields[f]) {
			out = append(out, fieldDiff(f, old.Fields[f], now.Fields[f], l))
		}
	}
	for _, s := range slices.Sorted(maps.Keys(old.Sections)) {
		if !equalJSON(old.Sections[s], now.Sections[s]) {
			out = append(out, fieldDiff("sections."+s, old.Sections[s], now.Sections[s], l))
		}
	}
	return out
}

// worldbookFields compares a worldbook's metadata and bindings.
func worldbookFields(old, now WorldbookState, l Labels) []map[string]any {
	out := []map[string]any{}
	pairs := []struct {
		name      string
		kept, now any
	}{{"name", old.Name, now.Name}, {"description", old.Description, now.Description}, {"tags", old.Tags, now.Tags},
		{"boundRoleIds", old.BoundRoleIDs, now.BoundRoleIDs}}
	for _, p := range pairs {
		a, _ := json.Marshal(p.kept) // strings and lists of strings: cannot fail
		b, _ := json.Marshal(p.now)
		if !equalJSON(a, b) {
			out = append(out, fieldDiff(p.name, a, b, l))
		}
	}
	return out
}

// pairEntries pairs each entry now with the old entry it is: the one of the same id, or, for an
// entry whose id old does not hold, an old entry of the same content whose id is gone (a deleted
// entry a restore created anew), the first such in order. It returns, for each entry now, the
// index of its old entry or -1. Linear: one key per unpaired entry, looked up in a map.
func pairEntries(old, now []map[string]json.RawMessage) []int {
	oldByID := make(map[string]int, len(old))
	for i, e := range old {
		if id := EntryID(e); id != "" {
			oldByID[id] = i
		}
	}
	pair := make([]int, len(now))
	taken := make([]bool, len(old))
	for i, e := range now {
		pair[i] = -1
		if k, ok := oldByID[EntryID(e)]; ok && !taken[k] {
			pair[i], taken[k] = k, true
		}
	}
	var byContent map[string][]int // old entries not paired by id, by content, in order
	for i := range now {
		if pair[i] >= 0 {
			continue
		}
		if byContent == nil {
			byContent = map[string][]int{}
			for k, e := range old {
				if !taken[k] {
					key := entryKey(e)
					byContent[key] = append(byContent[key], k)
				}
			}
		}
		key := entryKey(now[i])
		if ks := byContent[key]; len(ks) > 0 {
			pair[i], taken[ks[0]] = ks[0], true
			byContent[key] = ks[1:]
		}
	}
	return pair
}

// entryDiff returns the entries added since old, changed, and deleted; a changed entry carries
// its fields' old and new values while their JSON fits textBudget bytes in all.
func entryDiff(old, now []map[string]json.RawMessage, l Labels, textBudget int) EntryChanges {
	out := EntryChanges{Added: []map[string]any{}, Changed: []map[string]any{}, Deleted: []map[string]any{}}
	pair := pairEntries(old, now)
	taken := make([]bool, len(old))
	for i, e := range now {
		k := pair[i]
		if k < 0 {
			out.Added = append(out.Added, entryBrief(e))
			continue
		}
		taken[k] = true
		f := changedFields(old[k], e)
		if len(f) == 0 {
			continue
		}
		b := entryBrief(e)
		b["fields"] = f
		var changes []map[string]any
		size := 0
		for _, name := range f {
			d := fieldDiff(name, old[k][name], e[name], l)
			raw, _ := json.Marshal(d) // decoded JSON: cannot fail
			size += len(raw)
			changes = append(changes, d)
		}
		if size <= textBudget {
			b["changes"] = changes
			textBudget -= size
		} else {
			out.TextOmitted++
		}
		out.Changed = append(out.Changed, b)
	}
	for k, e := range old {
		if !taken[k] {
			out.Deleted = append(out.Deleted, entryBrief(e))
		}
	}
	return out
}

// CardChange returns what differs between two states of card id (over the fields old holds).
func CardChange(id string, old, now CardState, l Labels) Change {
	c := newChange(revisions.KindCard, id)
	c.Fields = cardFields(old, now, l)
	c.settle()
	return c
}

// WorldbookChange returns what differs between two states of worldbook id; the old and new text
// of changed entries is shown within textBudget bytes.
func WorldbookChange(id string, old, now WorldbookState, l Labels, textBudget int) Change {
	c := newChange(revisions.KindWorldbook, id)
	c.Fields = worldbookFields(old, now, l)
	c.Entries = entryDiff(old.Entries, now.Entries, l, textBudget)
	c.settle()
	return c
}

// TrialChange returns what differs between a trial card's digests then and now (nil: gone). The
// card service shows only digests of a trial's fields: the fields that differ are named, not
// shown.
func TrialChange(key string, then map[string]string, now *Trial, gone string) Change {
	c := newChange(revisions.KindTrial, key)
	if now == nil {
		c.Notes = append(c.Notes, gone)
		c.settle()
		return c
	}
	for _, f := range slices.Sorted(maps.Keys(TrialFields)) {
		if then[f] != now.Sections[f] {
			c.Fields = append(c.Fields, map[string]any{"field": f})
		}
	}
	if len(c.Fields) > 0 {
		c.Notes = append(c.Notes, "The card service shows only digests of a trial card's fields: the fields that differ are named, not shown.")
	}
	c.settle()
	return c
}
