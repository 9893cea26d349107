package upstream_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// Contract tests of the worldbook operations: createWorldbook, listWorldbooks, getWorldbook,
// listCardWorldbooks, listWorldbookEntries and writeWorldbookDocument (entry ops, metadata,
// binding, response counts, atomicity, the 500-entry limit).

// ctCreateOp is a create op with the three required fields.
func ctCreateOp(name, content string, keywords ...string) upstream.WorldbookEntryOp {
	if keywords == nil {
		keywords = []string{}
	}
	return upstream.WorldbookEntryOp{Op: upstream.EntryOpCreate, Name: &name, Content: &content, Keywords: keywords}
}

// ctEntries lists a worldbook's entries and returns them with the raw entry objects.
func (e *ctEnv) entries(t *testing.T, c *upstream.Client, worldbookID, category string) ([]upstream.WorldbookEntry, []map[string]any) {
	t.Helper()
	list, err := c.ListWorldbookEntries(e.ctx, worldbookID, category)
	ctOK(t, "listWorldbookEntries", list, err)
	if list.WorldbookID != worldbookID {
		t.Errorf("listWorldbookEntries answered for %q; want %q", list.WorldbookID, worldbookID)
	}
	var raw struct {
		Entries []map[string]any `json:"entries"`
	}
	if err := json.Unmarshal(e.rec.last(t, "listWorldbookEntries").RespBody, &raw); err != nil {
		t.Fatal(err)
	}
	return list.Entries, raw.Entries
}

// getWorldbook returns a worldbook's detail.
func (e *ctEnv) getWorldbook(t *testing.T, c *upstream.Client, worldbookID string) *upstream.Worldbook {
	t.Helper()
	wb, err := c.GetWorldbook(e.ctx, worldbookID)
	ctOK(t, "getWorldbook", wb, err)
	return wb
}

func TestContractCreateAndListWorldbooks(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	empty, err := e.c.ListWorldbooks(e.ctx)
	ctOK(t, "listWorldbooks", empty, err)
	if empty.List == nil || len(empty.List) != 0 {
		t.Errorf("listWorldbooks of a new user %+v; want an empty list", empty)
	}
	tests := []struct {
		in   upstream.WorldbookCreateInput
		want upstream.Worldbook
	}{
		{upstream.WorldbookCreateInput{Name: "Harbor"},
			upstream.Worldbook{Name: "Harbor", Description: "", Tags: []string{}, Format: "native", BoundRoleIDs: []string{}}},
		{upstream.WorldbookCreateInput{Name: "Isles", Description: "Islands <and> & reefs.", Tags: []string{"sea", "map"}, Format: upstream.WorldbookTavern},
			upstream.Worldbook{Name: "Isles", Description: "Islands <and> & reefs.", Tags: []string{"sea", "map"}, Format: "tavern", BoundRoleIDs: []string{}}},
		{upstream.WorldbookCreateInput{Name: "Lore", Format: upstream.WorldbookNative},
			upstream.Worldbook{Name: "Lore", Tags: []string{}, Format: "native", BoundRoleIDs: []string{}}},
	}
	var made []upstream.Worldbook
	for _, tt := range tests {
		out, err := e.c.CreateWorldbook(e.ctx, tt.in)
		ctOK(t, "createWorldbook", out, err)
		if st := e.rec.last(t, "createWorldbook").Status; st != http.StatusCreated || out.WorldbookID == "" {
			t.Errorf("createWorldbook %+v: status %d, id %q; want 201 and an id", tt.in, st, out.WorldbookID)
		}
		want := tt.want
		want.WorldbookID = out.WorldbookID
		if got := e.getWorldbook(t, e.c, out.WorldbookID); !ctSameWorldbook(*got, want) {
			t.Errorf("getWorldbook %+v\nwant %+v", *got, want)
		}
		made = append(made, want)
	}
	list, err := e.c.ListWorldbooks(e.ctx)
	ctOK(t, "listWorldbooks", list, err)
	if !slices.EqualFunc(list.List, made, ctSameWorldbook) {
		t.Errorf("listWorldbooks %+v\nwant %+v (in creation order)", list.List, made)
	}

	refused := []string{
		`{"name":""}`,
		`{"name":"x","format":"lorebook"}`,
		`{"description":"no name"}`,
		`{"name":"x","color":"red"}`,
	}
	for _, body := range refused {
		err := e.c.Call(e.ctx, "createWorldbook", nil, json.RawMessage(body), nil)
		apiErr := ctWantErr(t, err, "createWorldbook", http.StatusBadRequest, "invalid_request")
		if part := ctDetail(t, apiErr, "part"); part != "body" {
			t.Errorf("%s: detail.part %v; want body", body, part)
		}
	}
	if list, _ := e.c.ListWorldbooks(e.ctx); len(list.List) != len(made) {
		t.Errorf("%d worldbooks after the refused creates; want %d", len(list.List), len(made))
	}
	_, err = e.c.GetWorldbook(e.ctx, "wb_missing")
	ctWantErr(t, err, "getWorldbook", http.StatusNotFound, "worldbook_not_found")
}

func ctSameWorldbook(a, b upstream.Worldbook) bool {
	return a.WorldbookID == b.WorldbookID && a.Name == b.Name && a.Description == b.Description &&
		slices.Equal(a.Tags, b.Tags) && a.Format == b.Format && a.EntryCount == b.EntryCount &&
		slices.Equal(a.BoundRoleIDs, b.BoundRoleIDs)
}

func TestContractWorldbookBinding(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	mira := e.card(t, e.c, "Mira")
	nox := e.card(t, e.c, "Nox")
	harbor := e.worldbook(t, e.c, "Harbor", "")
	isles := e.worldbook(t, e.c, "Isles", upstream.WorldbookTavern)

	bound, err := e.c.ListCardWorldbooks(e.ctx, mira)
	ctOK(t, "listCardWorldbooks", bound, err)
	if bound.RoleID != mira || bound.List == nil || len(bound.List) != 0 {
		t.Errorf("bound worldbooks of a new card %+v; want an empty list", bound)
	}
	bind := func(worldbookID, roleID string) {
		t.Helper()
		out, err := e.c.WriteWorldbookDocument(e.ctx, worldbookID, upstream.WorldbookDocumentInput{Binding: &upstream.WorldbookBinding{RoleID: roleID}})
		ctOK(t, "writeWorldbookDocument", out, err)
		if !out.Bound || len(out.CreatedEntryIDs) != 0 || out.UpdatedCount != 0 || out.DeletedCount != 0 {
			t.Errorf("binding %s to %s: %+v; want bound and no entry counts", worldbookID, roleID, out)
		}
	}
	bind(isles, mira)
	bind(harbor, mira)
	bind(harbor, nox)
	bind(harbor, mira) // again: no duplicate

	tests := []struct {
		roleID string
		want   []string
	}{
		{mira, []string{harbor, isles}}, // in the worldbooks' creation order
		{nox, []string{harbor}},
	}
	for _, tt := range tests {
		out, err := e.c.ListCardWorldbooks(e.ctx, tt.roleID)
		ctOK(t, "listCardWorldbooks", out, err)
		var ids []string
		for _, wb := range out.List {
			ids = append(ids, wb.WorldbookID)
		}
		if out.RoleID != tt.roleID || !slices.Equal(ids, tt.want) {
			t.Errorf("worldbooks bound to %s: %v; want %v", tt.roleID, ids, tt.want)
		}
	}
	if got := e.getWorldbook(t, e.c, harbor).BoundRoleIDs; !slices.Equal(got, []string{mira, nox}) {
		t.Errorf("harbor boundRoleIds %v; want [%s %s] once each", got, mira, nox)
	}

	// Binding an unknown card is role_not_found, and nothing of the document is applied.
	_, err = e.c.WriteWorldbookDocument(e.ctx, isles, upstream.WorldbookDocumentInput{
		Metadata: &upstream.WorldbookMetadata{Name: ctPtr("Renamed")},
		Entries:  []upstream.WorldbookEntryOp{ctCreateOp("Reef", "A reef.", "reef")},
		Binding:  &upstream.WorldbookBinding{RoleID: "r_missing"},
	})
	apiErr := ctWantErr(t, err, "writeWorldbookDocument", http.StatusNotFound, "role_not_found")
	if f := ctDetail(t, apiErr, "field"); f != "binding.roleId" {
		t.Errorf("detail.field %v; want binding.roleId", f)
	}
	if wb := e.getWorldbook(t, e.c, isles); wb.Name != "Isles" || wb.EntryCount != 0 || !slices.Equal(wb.BoundRoleIDs, []string{mira}) {
		t.Errorf("isles after the refused document %+v; want it unchanged", wb)
	}
	_, err = e.c.ListCardWorldbooks(e.ctx, "r_missing")
	ctWantErr(t, err, "listCardWorldbooks", http.StatusNotFound, "role_not_found")
}

// TestContractWorldbookDocumentOps applies create, update and delete ops and metadata writes
// in turn, checking the response counts and the stored entries after each.
func TestContractWorldbookDocumentOps(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	wbID := e.worldbook(t, e.c, "Harbor", "")

	e.clock.Advance(time.Hour)
	created, err := e.c.WriteWorldbookDocument(e.ctx, wbID, upstream.WorldbookDocumentInput{Entries: []upstream.WorldbookEntryOp{
		ctCreateOp("Lighthouse", "The lighthouse on the cliff.", "lighthouse", "beacon"),
		{Op: upstream.EntryOpCreate, Name: ctPtr("Harbor"), Content: ctPtr("The old harbor."), Keywords: []string{"harbor"},
			SecondaryKeywords: []string{"night"}, Category: ctPtr("places"), IsEnabled: ctPtr(false), IsConstant: ctPtr(true),
			Priority: ctPtr(7), SortOrder: ctPtr(40)},
		ctCreateOp("Keeper", "Mira keeps the light.", "mira"),
	}})
	ctOK(t, "writeWorldbookDocument", created, err)
	if len(created.CreatedEntryIDs) != 3 || created.UpdatedCount != 0 || created.DeletedCount != 0 || created.Bound {
		t.Fatalf("create result %+v; want 3 created ids and nothing else", created)
	}
	light, harbor, keeper := created.CreatedEntryIDs[0], created.CreatedEntryIDs[1], created.CreatedEntryIDs[2]
	stamp := e.clock.Now().Format(time.RFC3339)
	entries, _ := e.entries(t, e.c, wbID, "")
	want := []upstream.WorldbookEntry{
		// Defaults: enabled, not constant, priority 0, sortOrder appended after the largest, no category.
		{EntryID: light, Name: "Lighthouse", Content: "The lighthouse on the cliff.", Keywords: []string{"lighthouse", "beacon"},
			SecondaryKeywords: []string{}, IsEnabled: true, SortOrder: 0, LastUpdateTime: stamp},
		{EntryID: harbor, Name: "Harbor", Content: "The old harbor.", Keywords: []string{"harbor"}, SecondaryKeywords: []string{"night"},
			Category: "places", IsConstant: true, Priority: 7, SortOrder: 40, LastUpdateTime: stamp},
		{EntryID: keeper, Name: "Keeper", Content: "Mira keeps the light.", Keywords: []string{"mira"}, SecondaryKeywords: []string{},
			IsEnabled: true, SortOrder: 41, LastUpdateTime: stamp},
	}
	ctCompareEntries(t, "after create", entries, want)
	if n := e.getWorldbook(t, e.c, wbID).EntryCount; n != 3 {
		t.Errorf("entryCount %d; want 3", n)
	}

	// Update replaces the fields present and keeps the rest; delete removes; metadata merges.
	e.clock.Advance(time.Hour)
	res, err := e.c.WriteWorldbookDocument(e.ctx, wbID, upstream.WorldbookDocumentInput{
		Metadata: &upstream.WorldbookMetadata{Description: ctPtr("The harbor town."), Tags: []string{"town"}},
		Entries: []upstream.WorldbookEntryOp{
			{Op: upstream.EntryOpUpdate, EntryID: light, Content: ctPtr("The lighthouse, dark for years."), Keywords: []string{"light"}, SortOrder: ctPtr(50)},
			{Op: upstream.EntryOpDelete, EntryID: harbor},
			{Op: upstream.EntryOpUpdate, EntryID: keeper, SecondaryKeywords: []string{}, IsEnabled: ctPtr(false)},
			ctCreateOp("Storm", "A storm rises.", "storm"),
		},
	})
	ctOK(t, "writeWorldbookDocument", res, err)
	if len(res.CreatedEntryIDs) != 1 || res.UpdatedCount != 2 || res.DeletedCount != 1 || res.Bound {
		t.Fatalf("mixed result %+v; want 1 created, 2 updated, 1 deleted", res)
	}
	stamp2 := e.clock.Now().Format(time.RFC3339)
	entries, _ = e.entries(t, e.c, wbID, "")
	want = []upstream.WorldbookEntry{
		{EntryID: keeper, Name: "Keeper", Content: "Mira keeps the light.", Keywords: []string{"mira"}, SecondaryKeywords: []string{},
			SortOrder: 41, LastUpdateTime: stamp2},
		{EntryID: light, Name: "Lighthouse", Content: "The lighthouse, dark for years.", Keywords: []string{"light"},
			SecondaryKeywords: []string{}, IsEnabled: true, SortOrder: 50, LastUpdateTime: stamp2},
		{EntryID: res.CreatedEntryIDs[0], Name: "Storm", Content: "A storm rises.", Keywords: []string{"storm"}, SecondaryKeywords: []string{},
			IsEnabled: true, SortOrder: 51, LastUpdateTime: stamp2}, // appended after the largest, the updated 50
	}
	slices.SortStableFunc(want, func(a, b upstream.WorldbookEntry) int { return a.SortOrder - b.SortOrder })
	ctCompareEntries(t, "after update and delete", entries, want)
	wb := e.getWorldbook(t, e.c, wbID)
	if wb.Name != "Harbor" || wb.Description != "The harbor town." || !slices.Equal(wb.Tags, []string{"town"}) || wb.EntryCount != 3 {
		t.Errorf("worldbook %+v; want name kept, description and tags written, 3 entries", wb)
	}

	// Metadata only: [] clears the tags, the rest keeps; nothing else counted.
	res, err = e.c.WriteWorldbookDocument(e.ctx, wbID, upstream.WorldbookDocumentInput{Metadata: &upstream.WorldbookMetadata{Name: ctPtr("Harbor Town"), Tags: []string{}}})
	ctOK(t, "writeWorldbookDocument", res, err)
	if len(res.CreatedEntryIDs) != 0 || res.UpdatedCount != 0 || res.DeletedCount != 0 || res.Bound {
		t.Errorf("metadata-only result %+v; want all counts zero", res)
	}
	if raw := ctRaw(t, e.rec.last(t, "writeWorldbookDocument").RespBody); raw["createdEntryIds"] == nil {
		t.Errorf("createdEntryIds is %v; want []", raw["createdEntryIds"])
	}
	wb = e.getWorldbook(t, e.c, wbID)
	if wb.Name != "Harbor Town" || wb.Description != "The harbor town." || len(wb.Tags) != 0 || wb.EntryCount != 3 {
		t.Errorf("worldbook %+v; want renamed, tags cleared, the rest kept", wb)
	}

	// An empty document changes nothing.
	res, err = e.c.WriteWorldbookDocument(e.ctx, wbID, upstream.WorldbookDocumentInput{})
	ctOK(t, "writeWorldbookDocument", res, err)
	if got, _ := e.entries(t, e.c, wbID, ""); len(got) != 3 {
		t.Errorf("%d entries after an empty document; want 3", len(got))
	}
	_, err = e.c.WriteWorldbookDocument(e.ctx, "wb_missing", upstream.WorldbookDocumentInput{})
	ctWantErr(t, err, "writeWorldbookDocument", http.StatusNotFound, "worldbook_not_found")
}

func ctCompareEntries(t *testing.T, what string, got, want []upstream.WorldbookEntry) {
	t.Helper()
	same := func(a, b upstream.WorldbookEntry) bool {
		return a.EntryID == b.EntryID && a.Name == b.Name && a.Content == b.Content && slices.Equal(a.Keywords, b.Keywords) &&
			slices.Equal(a.SecondaryKeywords, b.SecondaryKeywords) && (a.MatchOptions == nil) == (b.MatchOptions == nil) &&
			(a.MatchOptions == nil || *a.MatchOptions == *b.MatchOptions) && a.Category == b.Category &&
			a.IsEnabled == b.IsEnabled && a.IsConstant == b.IsConstant && a.Priority == b.Priority &&
			a.SortOrder == b.SortOrder && a.LastUpdateTime == b.LastUpdateTime && a.ActivationCount == b.ActivationCount
	}
	if !slices.EqualFunc(got, want, same) {
		t.Errorf("%s: entries\n got %+v\nwant %+v", what, got, want)
	}
}

// TestContractWorldbookDocumentAtomic sends documents with one bad op among good ones: the
// call is refused, detail names the bad op's index, and nothing of it is applied (neither
// the other ops nor the metadata nor the binding).
func TestContractWorldbookDocumentAtomic(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	roleID := e.card(t, e.c, "Mira")
	native := e.worldbook(t, e.c, "Harbor", upstream.WorldbookNative)
	tavern := e.worldbook(t, e.c, "Isles", upstream.WorldbookTavern)
	seed := func(wbID string, ops ...upstream.WorldbookEntryOp) []string {
		t.Helper()
		out, err := e.c.WriteWorldbookDocument(e.ctx, wbID, upstream.WorldbookDocumentInput{Entries: ops})
		ctOK(t, "writeWorldbookDocument", out, err)
		return out.CreatedEntryIDs
	}
	n := seed(native, ctCreateOp("A", "a", "a"), ctCreateOp("B", "b", "b"))
	mo := &upstream.MatchOptions{CaseSensitive: true, SelectiveLogic: 3}
	tv := seed(tavern, upstream.WorldbookEntryOp{Op: "create", Name: ctPtr("T"), Content: ctPtr("t"), Keywords: []string{"t"}, MatchOptions: mo})

	tests := []struct {
		name   string
		wbID   string
		ops    []upstream.WorldbookEntryOp
		status int
		code   string
		index  int // -1: the body schema refused it, detail names the part instead
		extra  map[string]any
	}{
		{"unknown entryId in an update", native, []upstream.WorldbookEntryOp{
			ctCreateOp("C", "c", "c"),
			{Op: "update", EntryID: n[0], Content: ctPtr("changed")},
			{Op: "update", EntryID: "e_missing", Content: ctPtr("x")},
		}, 404, "not_found", 2, map[string]any{"entryId": "e_missing"}},
		{"unknown entryId in a delete", native, []upstream.WorldbookEntryOp{
			{Op: "delete", EntryID: n[1]},
			{Op: "delete", EntryID: "e_missing"},
		}, 404, "not_found", 1, map[string]any{"entryId": "e_missing"}},
		{"an entry of another worldbook", native, []upstream.WorldbookEntryOp{
			{Op: "delete", EntryID: tv[0]},
		}, 404, "not_found", 0, map[string]any{"entryId": tv[0]}},
		{"the same entryId twice", native, []upstream.WorldbookEntryOp{
			{Op: "update", EntryID: n[0], Name: ctPtr("A2")},
			{Op: "delete", EntryID: n[0]},
		}, 400, "invalid_request", 1, map[string]any{"entryId": n[0]}},
		{"matchOptions on a native entry", native, []upstream.WorldbookEntryOp{
			ctCreateOp("C", "c", "c"),
			{Op: "create", Name: ctPtr("D"), Content: ctPtr("d"), Keywords: []string{"d"}, MatchOptions: mo},
		}, 400, "invalid_request", 1, map[string]any{"field": "matchOptions"}},
		{"matchOptions on a native update", native, []upstream.WorldbookEntryOp{
			{Op: "update", EntryID: n[0], MatchOptions: mo},
		}, 400, "invalid_request", 0, map[string]any{"field": "matchOptions"}},
		{"create without keywords", native, []upstream.WorldbookEntryOp{
			ctCreateOp("C", "c", "c"),
			{Op: "create", Name: ctPtr("D"), Content: ctPtr("d")},
		}, 400, "invalid_request", -1, nil},
		{"update without entryId", tavern, []upstream.WorldbookEntryOp{
			{Op: "update", Name: ctPtr("x")},
		}, 400, "invalid_request", -1, nil},
		{"delete with fields", tavern, []upstream.WorldbookEntryOp{
			{Op: "delete", EntryID: tv[0], Name: ctPtr("x")},
		}, 400, "invalid_request", -1, nil},
		{"unknown op", tavern, []upstream.WorldbookEntryOp{
			{Op: "upsert", EntryID: tv[0]},
		}, 400, "invalid_request", -1, nil},
		{"selectiveLogic above 3", tavern, []upstream.WorldbookEntryOp{
			{Op: "update", EntryID: tv[0], MatchOptions: &upstream.MatchOptions{SelectiveLogic: 4}},
		}, 400, "invalid_request", -1, nil},
		{"selectiveLogic below 0", tavern, []upstream.WorldbookEntryOp{
			{Op: "update", EntryID: tv[0], MatchOptions: &upstream.MatchOptions{SelectiveLogic: -1}},
		}, 400, "invalid_request", -1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := e.entries(t, e.c, tt.wbID, "")
			wbBefore := e.getWorldbook(t, e.c, tt.wbID)
			_, err := e.c.WriteWorldbookDocument(e.ctx, tt.wbID, upstream.WorldbookDocumentInput{
				Metadata: &upstream.WorldbookMetadata{Name: ctPtr("Renamed"), Tags: []string{"changed"}},
				Entries:  tt.ops,
				Binding:  &upstream.WorldbookBinding{RoleID: roleID},
			})
			apiErr := ctWantErr(t, err, "writeWorldbookDocument", tt.status, tt.code)
			if tt.index >= 0 {
				if got := ctDetail(t, apiErr, "index"); got != tt.index {
					t.Errorf("detail.index %v; want %d", got, tt.index)
				}
			} else if part := ctDetail(t, apiErr, "part"); part != "body" {
				t.Errorf("detail.part %v; want body", part)
			}
			for k, want := range tt.extra {
				if got := ctDetail(t, apiErr, k); got != want {
					t.Errorf("detail.%s %v; want %v", k, got, want)
				}
			}
			after, _ := e.entries(t, e.c, tt.wbID, "")
			ctCompareEntries(t, "after the refused document", after, before)
			if wb := e.getWorldbook(t, e.c, tt.wbID); !ctSameWorldbook(*wb, *wbBefore) {
				t.Errorf("worldbook %+v after the refused document; want %+v", wb, wbBefore)
			}
		})
	}
}

// TestContractWorldbookDocumentNullMatchOptions sends matchOptions null, which the typed op
// cannot: it is refused on a tavern worldbook (whose entries need the full object), with the
// op's index, and accepted on a native one.
func TestContractWorldbookDocumentNullMatchOptions(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	for _, tt := range []struct {
		format string
		ok     bool
	}{{upstream.WorldbookTavern, false}, {upstream.WorldbookNative, true}} {
		wbID := e.worldbook(t, e.c, "Book", tt.format)
		body := `{"entries":[{"op":"create","name":"a","content":"a","keywords":["a"]},` +
			`{"op":"create","name":"b","content":"b","keywords":["b"],"matchOptions":null}]}`
		var out upstream.WorldbookDocumentResult
		err := e.c.Call(e.ctx, "writeWorldbookDocument", map[string]string{"worldbookId": wbID}, json.RawMessage(body), &out)
		if tt.ok {
			ctOK(t, "writeWorldbookDocument", &out, err)
			if len(out.CreatedEntryIDs) != 2 {
				t.Errorf("%s: %+v; want two entries created", tt.format, out)
			}
			continue
		}
		apiErr := ctWantErr(t, err, "writeWorldbookDocument", http.StatusBadRequest, "invalid_request")
		if idx, f := ctDetail(t, apiErr, "index"), ctDetail(t, apiErr, "field"); idx != 1 || f != "matchOptions" {
			t.Errorf("%s: detail index %v, field %v; want 1, matchOptions", tt.format, idx, f)
		}
		if n := e.getWorldbook(t, e.c, wbID).EntryCount; n != 0 {
			t.Errorf("%s: %d entries after the refused document; want 0", tt.format, n)
		}
	}
}

// TestContractWorldbookDocumentLimit checks the limit of 500 entry ops per call: 500 are
// applied, 501 are refused with invalid_request before anything is applied.
func TestContractWorldbookDocumentLimit(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	roleID := e.card(t, e.c, "Mira")
	wbID := e.worldbook(t, e.c, "Big", "")
	ops := func(n int) []upstream.WorldbookEntryOp {
		out := make([]upstream.WorldbookEntryOp, n)
		for i := range out {
			out[i] = ctCreateOp(fmt.Sprintf("E%03d", i), "content", fmt.Sprintf("k%d", i))
		}
		return out
	}
	_, err := e.c.WriteWorldbookDocument(e.ctx, wbID, upstream.WorldbookDocumentInput{
		Metadata: &upstream.WorldbookMetadata{Name: ctPtr("Too big")},
		Entries:  ops(501),
		Binding:  &upstream.WorldbookBinding{RoleID: roleID},
	})
	apiErr := ctWantErr(t, err, "writeWorldbookDocument", http.StatusBadRequest, "invalid_request")
	if part := ctDetail(t, apiErr, "part"); part != "body" {
		t.Errorf("detail.part %v; want body", part)
	}
	if wb := e.getWorldbook(t, e.c, wbID); wb.EntryCount != 0 || wb.Name != "Big" || len(wb.BoundRoleIDs) != 0 {
		t.Fatalf("worldbook %+v after 501 ops; want nothing applied", wb)
	}
	if n := e.rec.count("writeWorldbookDocument"); n != 1 {
		t.Errorf("%d writeWorldbookDocument requests; want 1 (not retried)", n)
	}

	out, err := e.c.WriteWorldbookDocument(e.ctx, wbID, upstream.WorldbookDocumentInput{Entries: ops(500)})
	ctOK(t, "writeWorldbookDocument", out, err)
	if len(out.CreatedEntryIDs) != 500 || len(slices.Compact(slices.Sorted(slices.Values(out.CreatedEntryIDs)))) != 500 {
		t.Fatalf("%d created ids; want 500 distinct", len(out.CreatedEntryIDs))
	}
	entries, _ := e.entries(t, e.c, wbID, "")
	if len(entries) != 500 || e.getWorldbook(t, e.c, wbID).EntryCount != 500 {
		t.Fatalf("%d entries listed; want 500", len(entries))
	}
	for i, en := range entries {
		if en.EntryID != out.CreatedEntryIDs[i] || en.SortOrder != i {
			t.Fatalf("entry %d is %s with sortOrder %d; want %s, %d (the order of the ops)", i, en.EntryID, en.SortOrder, out.CreatedEntryIDs[i], i)
		}
	}
	// The limit is per call, not per worldbook: 500 more deletes and creates in one call.
	mixed := ops(250)
	for _, id := range out.CreatedEntryIDs[:250] {
		mixed = append(mixed, upstream.WorldbookEntryOp{Op: upstream.EntryOpDelete, EntryID: id})
	}
	res, err := e.c.WriteWorldbookDocument(e.ctx, wbID, upstream.WorldbookDocumentInput{Entries: mixed})
	ctOK(t, "writeWorldbookDocument", res, err)
	if len(res.CreatedEntryIDs) != 250 || res.DeletedCount != 250 || e.getWorldbook(t, e.c, wbID).EntryCount != 500 {
		t.Errorf("mixed 500 ops: %d created, %d deleted; want 250 and 250, 500 entries", len(res.CreatedEntryIDs), res.DeletedCount)
	}
}

// TestContractWorldbookDocumentNotRetried checks that a worldbook document whose response is
// lost is not sent again: it may have been applied, and it carries no idempotency key.
func TestContractWorldbookDocumentNotRetried(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	wbID := e.worldbook(t, e.c, "Harbor", "")
	e.rec.drop = func(ex ctExchange) bool { return ex.Op == "writeWorldbookDocument" }
	_, err := e.c.WriteWorldbookDocument(e.ctx, wbID, upstream.WorldbookDocumentInput{Entries: []upstream.WorldbookEntryOp{ctCreateOp("A", "a", "a")}})
	if err == nil {
		t.Fatal("the lost response was reported as a success")
	}
	if n := e.rec.count("writeWorldbookDocument"); n != 1 {
		t.Errorf("%d writeWorldbookDocument requests; want 1: it must not be repeated blindly", n)
	}
	e.rec.drop = nil
	if got := e.getWorldbook(t, e.c, wbID).EntryCount; got != 1 {
		t.Errorf("entryCount %d; the one request was applied once", got)
	}
}

// TestContractListWorldbookEntries checks the listing: keyword fields are always arrays, op is
// absent, category filters, and matchOptions is null for native worldbooks and a full object
// for tavern ones.
func TestContractListWorldbookEntries(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	category := "places & people"
	for _, format := range []string{upstream.WorldbookNative, upstream.WorldbookTavern} {
		t.Run(format, func(t *testing.T) {
			wbID := e.worldbook(t, e.c, "Book "+format, format)
			ops := []upstream.WorldbookEntryOp{
				ctCreateOp("No keywords", "Fires only as a constant."),
				{Op: "create", Name: ctPtr("Harbor"), Content: ctPtr("The harbor."), Keywords: []string{"harbor"}, Category: &category},
				{Op: "create", Name: ctPtr("Mira"), Content: ctPtr("The keeper."), Keywords: []string{"mira"}, SecondaryKeywords: []string{"light"}, Category: &category},
				{Op: "create", Name: ctPtr("Storm"), Content: ctPtr("Weather."), Keywords: []string{"storm"}, Category: ctPtr("weather")},
			}
			var explicit *upstream.MatchOptions
			if format == upstream.WorldbookTavern {
				explicit = &upstream.MatchOptions{CaseSensitive: true, MatchWholeWords: true, SelectiveLogic: 2}
				ops[3].MatchOptions = explicit
			}
			res, err := e.c.WriteWorldbookDocument(e.ctx, wbID, upstream.WorldbookDocumentInput{Entries: ops})
			ctOK(t, "writeWorldbookDocument", res, err)

			entries, raw := e.entries(t, e.c, wbID, "")
			if len(entries) != 4 {
				t.Fatalf("%d entries; want 4", len(entries))
			}
			for i, obj := range raw {
				for _, key := range []string{"keywords", "secondaryKeywords"} {
					if _, isList := obj[key].([]any); !isList {
						t.Errorf("entry %d: %s is %v; want an array", i, key, obj[key])
					}
				}
				if _, has := obj["op"]; has {
					t.Errorf("entry %d carries op: %v", i, obj)
				}
				mo, present := obj["matchOptions"]
				switch {
				case !present:
					t.Errorf("entry %d has no matchOptions", i)
				case format == upstream.WorldbookNative && mo != nil:
					t.Errorf("native entry %d: matchOptions %v; want null", i, mo)
				case format == upstream.WorldbookTavern:
					m, ok := mo.(map[string]any)
					if !ok || len(m) != 3 || m["caseSensitive"] == nil || m["matchWholeWords"] == nil || m["selectiveLogic"] == nil {
						t.Errorf("tavern entry %d: matchOptions %v; want {caseSensitive, matchWholeWords, selectiveLogic}", i, mo)
					}
				}
			}
			if format == upstream.WorldbookTavern {
				if got := entries[0].MatchOptions; got == nil || *got != (upstream.MatchOptions{}) {
					t.Errorf("a tavern entry created without matchOptions has %+v; want the default object", got)
				}
				if got := entries[3].MatchOptions; got == nil || *got != *explicit {
					t.Errorf("matchOptions %+v; want %+v", got, explicit)
				}
			}
			if en := entries[0]; len(en.Keywords) != 0 || en.Keywords == nil {
				t.Errorf("keywords %#v; want []", en.Keywords)
			}

			filters := []struct {
				category string
				names    []string
			}{
				{category, []string{"Harbor", "Mira"}},
				{"weather", []string{"Storm"}},
				{"Weather", nil}, // exact match
				{"nothing here", nil},
			}
			for _, f := range filters {
				got, _ := e.entries(t, e.c, wbID, f.category)
				var names []string
				for _, en := range got {
					names = append(names, en.Name)
				}
				if !slices.Equal(names, f.names) {
					t.Errorf("category %q: %v; want %v", f.category, names, f.names)
				}
				if q := e.rec.last(t, "listWorldbookEntries").Query.Get("category"); q != f.category {
					t.Errorf("the query carried category %q; want %q", q, f.category)
				}
				if raw := ctRaw(t, e.rec.last(t, "listWorldbookEntries").RespBody); raw["entries"] == nil {
					t.Errorf("category %q: entries is null; want []", f.category)
				}
			}
		})
	}
	_, err := e.c.ListWorldbookEntries(e.ctx, "wb_missing", "")
	ctWantErr(t, err, "listWorldbookEntries", http.StatusNotFound, "worldbook_not_found")
}
