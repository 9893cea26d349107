package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"
)

const (
	formatNative = "native"
	formatTavern = "tavern"
)

// worldbook is a stored worldbook; Entries are kept in creation order.
type worldbook struct {
	ID           string   `json:"id"`
	Owner        string   `json:"owner"`
	Seq          int64    `json:"seq"`
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Tags         []string `json:"tags"`
	Format       string   `json:"format"`
	BoundRoleIDs []string `json:"boundRoleIds"`
	Entries      []*entry `json:"entries"`
}

type matchOptions struct {
	CaseSensitive   bool    `json:"caseSensitive"`
	MatchWholeWords bool    `json:"matchWholeWords"`
	SelectiveLogic  jsonInt `json:"selectiveLogic"`
}

// jsonInt is an integer that, like JSON Schema, also accepts a number with an integral value such as 1.0.
type jsonInt int64

// UnmarshalJSON decodes an integral JSON number that fits in 64 bits.
func (n *jsonInt) UnmarshalJSON(b []byte) error {
	var num json.Number
	if err := json.Unmarshal(b, &num); err != nil {
		return err
	}
	if i, err := num.Int64(); err == nil {
		*n = jsonInt(i)
		return nil
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return fmt.Errorf("%s is not a 64-bit integer", num)
	}
	*n = jsonInt(f)
	return nil
}

// entry is a stored worldbook entry.
type entry struct {
	ID                string        `json:"id"`
	Name              string        `json:"name"`
	Content           string        `json:"content"`
	Keywords          []string      `json:"keywords"`
	SecondaryKeywords []string      `json:"secondaryKeywords"`
	MatchOptions      *matchOptions `json:"matchOptions"`
	Category          string        `json:"category"`
	IsEnabled         bool          `json:"isEnabled"`
	IsConstant        bool          `json:"isConstant"`
	Priority          int64         `json:"priority"`
	SortOrder         int64         `json:"sortOrder"`
	LastUpdate        time.Time     `json:"lastUpdate"`
}

// entryFields is WorldbookEntryFields as a request carries it: absent fields are nil.
type entryFields struct {
	Name              *string         `json:"name"`
	Content           *string         `json:"content"`
	Keywords          *[]string       `json:"keywords"`
	SecondaryKeywords *[]string       `json:"secondaryKeywords"`
	MatchOptions      json.RawMessage `json:"matchOptions"` // absent: nil; null: "null"
	Category          *string         `json:"category"`
	IsEnabled         *bool           `json:"isEnabled"`
	IsConstant        *bool           `json:"isConstant"`
	Priority          *jsonInt        `json:"priority"`
	SortOrder         *jsonInt        `json:"sortOrder"`
}

// entryOp is one WorldbookEntryOp of the worldbook document.
type entryOp struct {
	entryFields
	Op      string `json:"op"`
	EntryID string `json:"entryId"`
}

// matchOptionsFor reads matchOptions for a worldbook of format: present reports whether the field was given;
// ok is false when the value does not fit the format (non-null for native, null for tavern).
func (f *entryFields) matchOptionsFor(format string) (mo *matchOptions, present, ok bool) {
	if len(f.MatchOptions) == 0 {
		return nil, false, true
	}
	if bytes.Equal(bytes.TrimSpace(f.MatchOptions), []byte("null")) {
		return nil, true, format != formatTavern
	}
	mo = &matchOptions{}
	if err := json.Unmarshal(f.MatchOptions, mo); err != nil {
		return nil, true, false
	}
	return mo, true, format == formatTavern
}

// applyTo replaces the entry's fields that f carries; matchOptions is passed in already checked.
func (f *entryFields) applyTo(e *entry, mo *matchOptions, moPresent bool) {
	set(&e.Name, f.Name)
	set(&e.Content, f.Content)
	if f.Keywords != nil {
		e.Keywords = orEmpty(*f.Keywords)
	}
	if f.SecondaryKeywords != nil {
		e.SecondaryKeywords = orEmpty(*f.SecondaryKeywords)
	}
	if moPresent {
		e.MatchOptions = mo
	}
	set(&e.Category, f.Category)
	set(&e.IsEnabled, f.IsEnabled)
	set(&e.IsConstant, f.IsConstant)
	if f.Priority != nil {
		e.Priority = int64(*f.Priority)
	}
	if f.SortOrder != nil {
		e.SortOrder = int64(*f.SortOrder)
	}
}

// newEntry builds an entry from create fields with the documented defaults.
func newEntry(f *entryFields, format string, sortOrder int64, now time.Time) (*entry, bool) {
	mo, present, ok := f.matchOptionsFor(format)
	if !ok {
		return nil, false
	}
	e := &entry{ID: newID("e_"), Keywords: []string{}, SecondaryKeywords: []string{}, IsEnabled: true,
		SortOrder: sortOrder, LastUpdate: now}
	if format == formatTavern {
		e.MatchOptions = &matchOptions{}
	}
	f.applyTo(e, mo, present)
	return e, true
}

// nextSortOrder is one more than the largest sortOrder of entries, or 0 when there is none.
func nextSortOrder(entries []*entry) int64 {
	var next int64
	for _, e := range entries {
		if e != nil && e.SortOrder >= next {
			next = e.SortOrder
			if next < math.MaxInt64 {
				next++
			}
		}
	}
	return next
}

type worldbookView struct {
	WorldbookID  string   `json:"worldbookId"`
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Tags         []string `json:"tags"`
	Format       string   `json:"format"`
	EntryCount   int      `json:"entryCount"`
	BoundRoleIDs []string `json:"boundRoleIds"`
}

func (wb *worldbook) view() worldbookView {
	return worldbookView{wb.ID, wb.Name, wb.Description, orEmpty(wb.Tags), wb.Format, len(wb.Entries), orEmpty(wb.BoundRoleIDs)}
}

type entryView struct {
	EntryID           string        `json:"entryId"`
	Name              string        `json:"name"`
	Content           string        `json:"content"`
	Keywords          []string      `json:"keywords"`
	SecondaryKeywords []string      `json:"secondaryKeywords"`
	MatchOptions      *matchOptions `json:"matchOptions"`
	Category          string        `json:"category"`
	IsEnabled         bool          `json:"isEnabled"`
	IsConstant        bool          `json:"isConstant"`
	Priority          int64         `json:"priority"`
	SortOrder         int64         `json:"sortOrder"`
	LastUpdateTime    string        `json:"lastUpdateTime"`
	ActivationCount   int           `json:"activationCount"`
}

func (e *entry) view() entryView {
	return entryView{e.ID, e.Name, e.Content, orEmpty(e.Keywords), orEmpty(e.SecondaryKeywords), e.MatchOptions,
		e.Category, e.IsEnabled, e.IsConstant, e.Priority, e.SortOrder, rfc3339(e.LastUpdate), 0}
}

// worldbookOf returns the user's worldbook; another user's worldbook is reported exactly like a missing one.
func (s *Service) worldbookOf(userID, id string) (*worldbook, error) {
	wb := s.st.Worldbooks[id]
	if wb == nil || wb.Owner != userID {
		return nil, errWorldbookNotFound()
	}
	return wb, nil
}

func (s *Service) worldbooksOf(userID string, keep func(*worldbook) bool) []worldbookView {
	list := sortedBySeq(s.st.Worldbooks, func(wb *worldbook) bool {
		return wb.Owner == userID && keep(wb)
	}, func(wb *worldbook) int64 { return wb.Seq })
	out := make([]worldbookView, len(list))
	for i, wb := range list {
		out[i] = wb.view()
	}
	return out
}

func (s *Service) listWorldbooks(rq *request) (int, any, error) {
	return 0, struct {
		List []worldbookView `json:"list"`
	}{s.worldbooksOf(rq.userID, func(*worldbook) bool { return true })}, nil
}

func (s *Service) createWorldbook(rq *request) (int, any, error) {
	var in struct {
		Name        string   `json:"name"`
		Description string   `json:"description"`
		Tags        []string `json:"tags"`
		Format      string   `json:"format"`
	}
	if err := decodeBody(rq, &in); err != nil {
		return 0, nil, err
	}
	if in.Format == "" {
		in.Format = formatNative
	}
	id := newID("wb_")
	for s.st.Worldbooks[id] != nil {
		id = newID("wb_")
	}
	s.st.Worldbooks[id] = &worldbook{ID: id, Owner: rq.userID, Seq: s.st.nextSeq(), Name: in.Name,
		Description: in.Description, Tags: orEmpty(in.Tags), Format: in.Format, BoundRoleIDs: []string{}, Entries: []*entry{}}
	s.changed()
	return http.StatusCreated, struct {
		WorldbookID string `json:"worldbookId"`
	}{id}, nil
}

func (s *Service) getWorldbook(rq *request) (int, any, error) {
	wb, err := s.worldbookOf(rq.userID, rq.query["worldbookId"])
	if err != nil {
		return 0, nil, err
	}
	return 0, wb.view(), nil
}

func (s *Service) listCardWorldbooks(rq *request) (int, any, error) {
	c, err := s.cardOf(rq.userID, rq.query["roleId"], nil)
	if err != nil {
		return 0, nil, err
	}
	return 0, struct {
		RoleID string          `json:"roleId"`
		List   []worldbookView `json:"list"`
	}{c.ID, s.worldbooksOf(rq.userID, func(wb *worldbook) bool { return slices.Contains(wb.BoundRoleIDs, c.ID) })}, nil
}

func (s *Service) listWorldbookEntries(rq *request) (int, any, error) {
	wb, err := s.worldbookOf(rq.userID, rq.query["worldbookId"])
	if err != nil {
		return 0, nil, err
	}
	category := rq.query["category"]
	list := slices.Clone(wb.Entries)
	slices.SortStableFunc(list, func(a, b *entry) int {
		switch {
		case a.SortOrder < b.SortOrder:
			return -1
		case a.SortOrder > b.SortOrder:
			return 1
		}
		return 0
	})
	out := []entryView{}
	for _, e := range list {
		if category == "" || e.Category == category {
			out = append(out, e.view())
		}
	}
	return 0, struct {
		WorldbookID string      `json:"worldbookId"`
		Entries     []entryView `json:"entries"`
	}{wb.ID, out}, nil
}

func (s *Service) writeWorldbookDocument(rq *request) (int, any, error) {
	var in struct {
		Metadata *struct {
			Name        *string   `json:"name"`
			Description *string   `json:"description"`
			Tags        *[]string `json:"tags"`
		} `json:"metadata"`
		Entries []entryOp `json:"entries"`
		Binding *struct {
			RoleID string `json:"roleId"`
		} `json:"binding"`
	}
	if err := decodeBody(rq, &in); err != nil {
		return 0, nil, err
	}
	wb, err := s.worldbookOf(rq.userID, rq.path["worldbookId"])
	if err != nil {
		return 0, nil, err
	}
	// Validate and apply every op to a working copy; the worldbook changes only if all succeed.
	now := s.now()
	work := make([]*entry, len(wb.Entries))
	pos := map[string]int{}
	for i, e := range wb.Entries {
		c := *e
		work[i] = &c
		pos[e.ID] = i
	}
	seen := map[string]bool{}
	created := []string{}
	updated, deleted := 0, 0
	for i := range in.Entries {
		op := &in.Entries[i]
		if op.Op == "create" {
			e, ok := newEntry(&op.entryFields, wb.Format, nextSortOrder(work), now)
			if !ok {
				return 0, nil, errMatchOptions(i, wb.Format)
			}
			for _, taken := pos[e.ID]; taken; _, taken = pos[e.ID] {
				e.ID = newID("e_")
			}
			pos[e.ID] = len(work)
			work = append(work, e)
			created = append(created, e.ID)
			continue
		}
		if seen[op.EntryID] {
			return 0, nil, newError(codeInvalidRequest, "The same entryId appears in more than one entry op.",
				map[string]any{"index": i, "entryId": op.EntryID})
		}
		seen[op.EntryID] = true
		p, ok := pos[op.EntryID]
		if !ok || work[p] == nil {
			return 0, nil, newError(codeNotFound, "No entry with this entryId exists in the worldbook.",
				map[string]any{"index": i, "entryId": op.EntryID})
		}
		if op.Op == "delete" {
			work[p] = nil
			deleted++
			continue
		}
		mo, present, ok := op.matchOptionsFor(wb.Format)
		if !ok {
			return 0, nil, errMatchOptions(i, wb.Format)
		}
		op.applyTo(work[p], mo, present)
		work[p].LastUpdate = now
		updated++
	}
	if in.Binding != nil {
		if _, err := s.cardOf(rq.userID, in.Binding.RoleID, map[string]any{"field": "binding.roleId"}); err != nil {
			return 0, nil, err
		}
	}
	// Commit.
	if m := in.Metadata; m != nil {
		set(&wb.Name, m.Name)
		set(&wb.Description, m.Description)
		if m.Tags != nil {
			wb.Tags = orEmpty(*m.Tags)
		}
	}
	if len(in.Entries) > 0 {
		wb.Entries = slices.DeleteFunc(work, func(e *entry) bool { return e == nil })
	}
	if in.Binding != nil && !slices.Contains(wb.BoundRoleIDs, in.Binding.RoleID) {
		wb.BoundRoleIDs = append(slices.Clone(wb.BoundRoleIDs), in.Binding.RoleID)
	}
	if in.Metadata != nil || len(in.Entries) > 0 || in.Binding != nil {
		s.changed()
	}
	return 0, struct {
		CreatedEntryIDs []string `json:"createdEntryIds"`
		UpdatedCount    int      `json:"updatedCount"`
		DeletedCount    int      `json:"deletedCount"`
		Bound           bool     `json:"bound"`
	}{created, updated, deleted, in.Binding != nil}, nil
}

func errMatchOptions(index int, format string) *apiError {
	msg := "A native worldbook's entries take matchOptions null."
	if format == formatTavern {
		msg = "A tavern worldbook's entries need a full matchOptions object, not null."
	}
	return newError(codeInvalidRequest, msg, map[string]any{"index": index, "field": "matchOptions"})
}
