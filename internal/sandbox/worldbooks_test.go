package sandbox_test

import (
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
)

func TestWorldbookCRUD(t *testing.T) {
	t.Parallel()
	c := inProcess(t, newService(t, sandbox.Options{}))
	if got := c.call("GET", "/worldbook/list", nil, http.StatusOK); len(got["list"].([]any)) != 0 {
		t.Fatalf("list %v", got)
	}
	a := c.newWorldbook("Lore", "")
	if !strings.HasPrefix(a, "wb_") {
		t.Fatalf("id %s", a)
	}
	created := c.call("POST", "/worldbook", map[string]any{"name": "Tavern lore", "description": "D", "tags": []string{"x"}, "format": "tavern"}, http.StatusCreated)
	b := created["worldbookId"].(string)
	got := c.call("GET", "/worldbook/detail?worldbookId="+a, nil, http.StatusOK)
	want := map[string]any{"worldbookId": a, "name": "Lore", "description": "", "tags": []any{}, "format": "native",
		"entryCount": 0.0, "boundRoleIds": []any{}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("detail %v, want %v", got, want)
	}
	got = c.call("GET", "/worldbook/detail?worldbookId="+b, nil, http.StatusOK)
	if got["format"] != "tavern" || got["description"] != "D" || !slices.Equal(strs(got["tags"]), []string{"x"}) {
		t.Fatalf("detail %v", got)
	}
	list := c.call("GET", "/worldbook/list", nil, http.StatusOK)["list"].([]any)
	if len(list) != 2 || list[0].(map[string]any)["worldbookId"] != a || list[1].(map[string]any)["worldbookId"] != b {
		t.Fatalf("list %v", list)
	}
	c.fail("GET", "/worldbook/detail?worldbookId=wb_nope", nil, http.StatusNotFound, "worldbook_not_found")
	c.fail("GET", "/worldbook/entry/list?worldbookId=wb_nope", nil, http.StatusNotFound, "worldbook_not_found")
	c.fail("POST", "/worldbook/wb_nope/document", map[string]any{}, http.StatusNotFound, "worldbook_not_found")
	c.fail("POST", "/worldbook", map[string]any{"name": "x", "format": "yaml"}, http.StatusBadRequest, "invalid_request")
	c.fail("POST", "/worldbook", map[string]any{"name": ""}, http.StatusBadRequest, "invalid_request")
}

func entries(t testing.TB, c *client, wb, query string) []map[string]any {
	t.Helper()
	got := c.call("GET", "/worldbook/entry/list?worldbookId="+wb+query, nil, http.StatusOK)
	if got["worldbookId"] != wb {
		t.Fatalf("list %v", got)
	}
	var out []map[string]any
	for _, e := range got["entries"].([]any) {
		out = append(out, e.(map[string]any))
	}
	return out
}

func TestWorldbookDocumentEntries(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	c := inProcess(t, newService(t, sandbox.Options{Clock: clock.Now}))
	wb := c.newWorldbook("Lore", "native")
	res := c.call("POST", "/worldbook/"+wb+"/document", map[string]any{"entries": []map[string]any{
		{"op": "create", "name": "Castle", "content": "A castle.", "keywords": []string{"castle"}},
		{"op": "create", "name": "King", "content": "The king.", "keywords": []string{"king"}, "category": "people",
			"secondaryKeywords": []string{"crown"}, "isEnabled": false, "isConstant": true, "priority": 7, "matchOptions": nil},
		{"op": "create", "name": "Queen", "content": "The queen.", "keywords": []string{}, "category": "people", "sortOrder": 10},
		{"op": "create", "name": "Moat", "content": "Water.", "keywords": []string{"moat"}},
	}}, http.StatusOK)
	ids := strs(res["createdEntryIds"])
	if len(ids) != 4 || num(res["updatedCount"]) != 0 || num(res["deletedCount"]) != 0 || res["bound"] != false {
		t.Fatalf("result %v", res)
	}
	list := entries(t, c, wb, "")
	stamp := clock.Now().Format(time.RFC3339)
	wantCastle := map[string]any{"entryId": ids[0], "name": "Castle", "content": "A castle.", "keywords": []any{"castle"},
		"secondaryKeywords": []any{}, "matchOptions": nil, "category": "", "isEnabled": true, "isConstant": false,
		"priority": 0.0, "sortOrder": 0.0, "lastUpdateTime": stamp, "activationCount": 0.0}
	if !reflect.DeepEqual(list[0], wantCastle) {
		t.Fatalf("castle\n got %v\nwant %v", list[0], wantCastle)
	}
	king := list[1]
	if king["entryId"] != ids[1] || king["isEnabled"] != false || king["isConstant"] != true || num(king["priority"]) != 7 ||
		num(king["sortOrder"]) != 1 || !slices.Equal(strs(king["secondaryKeywords"]), []string{"crown"}) {
		t.Fatalf("king %v", king)
	}
	// sortOrder defaults count entries created earlier in the same call: Moat follows Queen's 10.
	order := []string{}
	for _, e := range list {
		order = append(order, fmt.Sprint(e["name"], "=", e["sortOrder"]))
	}
	if strings.Join(order, " ") != "Castle=0 King=1 Queen=10 Moat=11" {
		t.Fatalf("order %v", order)
	}
	// Category filter: exact match; empty means none.
	people := entries(t, c, wb, "&category=people")
	if len(people) != 2 || people[0]["name"] != "King" || people[1]["name"] != "Queen" {
		t.Fatalf("people %v", people)
	}
	if got := entries(t, c, wb, "&category=Peop"); len(got) != 0 {
		t.Fatalf("prefix matched %v", got)
	}
	if got := entries(t, c, wb, "&category="); len(got) != 4 {
		t.Fatalf("empty filter %v", got)
	}
	// Update replaces present fields only; delete removes.
	clock.Advance(time.Minute)
	res = c.call("POST", "/worldbook/"+wb+"/document", map[string]any{"entries": []map[string]any{
		{"op": "update", "entryId": ids[0], "content": "A ruined castle.", "sortOrder": 20},
		{"op": "delete", "entryId": ids[3]},
		{"op": "create", "name": "Tower", "content": "Tall.", "keywords": []string{"tower"}},
	}}, http.StatusOK)
	if num(res["updatedCount"]) != 1 || num(res["deletedCount"]) != 1 || len(strs(res["createdEntryIds"])) != 1 {
		t.Fatalf("result %v", res)
	}
	list = entries(t, c, wb, "")
	order = order[:0]
	for _, e := range list {
		order = append(order, fmt.Sprint(e["name"], "=", e["sortOrder"]))
	}
	if strings.Join(order, " ") != "King=1 Queen=10 Castle=20 Tower=21" {
		t.Fatalf("order %v", order)
	}
	castle := list[2]
	if castle["content"] != "A ruined castle." || castle["name"] != "Castle" || !slices.Equal(strs(castle["keywords"]), []string{"castle"}) ||
		castle["lastUpdateTime"] != clock.Now().Format(time.RFC3339) || list[0]["lastUpdateTime"] != stamp {
		t.Fatalf("castle %v / king %v", castle, list[0])
	}
	if got := c.call("GET", "/worldbook/detail?worldbookId="+wb, nil, http.StatusOK); num(got["entryCount"]) != 4 {
		t.Fatalf("detail %v", got)
	}
}

func TestWorldbookDocumentAtomicAndErrors(t *testing.T) {
	t.Parallel()
	c := inProcess(t, newService(t, sandbox.Options{}))
	wb := c.newWorldbook("Lore", "")
	tavern := c.newWorldbook("Tavern", "tavern")
	ids := strs(c.call("POST", "/worldbook/"+wb+"/document", map[string]any{"entries": []map[string]any{
		{"op": "create", "name": "A", "content": "a", "keywords": []string{"a"}},
		{"op": "create", "name": "B", "content": "b", "keywords": []string{"b"}},
	}}, http.StatusOK)["createdEntryIds"])
	before := entries(t, c, wb, "")
	beforeDetail := c.call("GET", "/worldbook/detail?worldbookId="+wb, nil, http.StatusOK)
	roleID := c.newCard("Mira")
	create := map[string]any{"op": "create", "name": "C", "content": "c", "keywords": []string{"c"}}
	tests := []struct {
		name   string
		wb     string
		body   map[string]any
		status int
		code   string
		detail map[string]any
	}{
		{"unknown entryId", wb, map[string]any{"metadata": map[string]any{"name": "Renamed"}, "entries": []map[string]any{
			create, {"op": "update", "entryId": ids[0], "content": "changed"}, {"op": "delete", "entryId": "e_nope"},
		}, "binding": map[string]any{"roleId": roleID}}, 404, "not_found", map[string]any{"index": 2.0, "entryId": "e_nope"}},
		{"duplicate entryId", wb, map[string]any{"entries": []map[string]any{
			{"op": "update", "entryId": ids[0], "content": "x"}, create, {"op": "delete", "entryId": ids[0]},
		}}, 400, "invalid_request", map[string]any{"index": 2.0, "entryId": ids[0]}},
		{"native given matchOptions", wb, map[string]any{"entries": []map[string]any{
			create, {"op": "update", "entryId": ids[1], "matchOptions": map[string]any{"caseSensitive": true, "matchWholeWords": false, "selectiveLogic": 0}},
		}}, 400, "invalid_request", map[string]any{"index": 1.0, "field": "matchOptions"}},
		{"native create given matchOptions", wb, map[string]any{"entries": []map[string]any{
			{"op": "create", "name": "C", "content": "c", "keywords": []string{}, "matchOptions": map[string]any{"caseSensitive": true, "matchWholeWords": false, "selectiveLogic": 0}},
		}}, 400, "invalid_request", map[string]any{"index": 0.0, "field": "matchOptions"}},
		{"tavern given null", tavern, map[string]any{"entries": []map[string]any{
			{"op": "create", "name": "C", "content": "c", "keywords": []string{}, "matchOptions": nil},
		}}, 400, "invalid_request", map[string]any{"index": 0.0, "field": "matchOptions"}},
		{"unknown binding card", wb, map[string]any{"entries": []map[string]any{create}, "binding": map[string]any{"roleId": "r_nope"}},
			404, "role_not_found", map[string]any{"field": "binding.roleId"}},
		{"create without keywords", wb, map[string]any{"entries": []map[string]any{{"op": "create", "name": "C", "content": "c"}}},
			400, "invalid_request", nil},
		{"create with entryId", wb, map[string]any{"entries": []map[string]any{{"op": "create", "entryId": "e_x", "name": "C", "content": "c", "keywords": []string{}}}},
			400, "invalid_request", nil},
		{"delete with fields", wb, map[string]any{"entries": []map[string]any{{"op": "delete", "entryId": ids[0], "name": "x"}}},
			400, "invalid_request", nil},
		{"update without entryId", wb, map[string]any{"entries": []map[string]any{{"op": "update", "name": "x"}}},
			400, "invalid_request", nil},
		{"bad op", wb, map[string]any{"entries": []map[string]any{{"op": "upsert", "entryId": ids[0]}}},
			400, "invalid_request", nil},
		{"selectiveLogic above 3", tavern, map[string]any{"entries": []map[string]any{
			{"op": "create", "name": "C", "content": "c", "keywords": []string{}, "matchOptions": map[string]any{"caseSensitive": true, "matchWholeWords": false, "selectiveLogic": 4}},
		}}, 400, "invalid_request", nil},
		{"entry op field unknown", wb, map[string]any{"entries": []map[string]any{{"op": "create", "name": "C", "content": "c", "keywords": []string{}, "weight": 1}}},
			400, "invalid_request", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := c.on(t).fail("POST", "/worldbook/"+tt.wb+"/document", tt.body, tt.status, tt.code)
			for k, v := range tt.detail {
				if got := detail(t, obj)[k]; got != v {
					t.Errorf("detail.%s = %v, want %v (%v)", k, got, v, obj)
				}
			}
		})
	}
	// Nothing of any failed call was applied.
	if after := entries(t, c, wb, ""); !reflect.DeepEqual(after, before) {
		t.Fatalf("entries changed:\n%v\n%v", before, after)
	}
	if got := c.call("GET", "/worldbook/detail?worldbookId="+wb, nil, http.StatusOK); !reflect.DeepEqual(got, beforeDetail) {
		t.Fatalf("worldbook changed: %v", got)
	}
	if got := entries(t, c, tavern, ""); len(got) != 0 {
		t.Fatalf("tavern entries %v", got)
	}
}

func TestWorldbookDocumentTavern(t *testing.T) {
	t.Parallel()
	c := inProcess(t, newService(t, sandbox.Options{}))
	wb := c.newWorldbook("Tavern", "tavern")
	mo := map[string]any{"caseSensitive": true, "matchWholeWords": true, "selectiveLogic": 3.0}
	ids := strs(c.call("POST", "/worldbook/"+wb+"/document", map[string]any{"entries": []map[string]any{
		{"op": "create", "name": "A", "content": "a", "keywords": []string{"a"}},
		{"op": "create", "name": "B", "content": "b", "keywords": []string{"b"}, "matchOptions": mo},
	}}, http.StatusOK)["createdEntryIds"])
	list := entries(t, c, wb, "")
	def := map[string]any{"caseSensitive": false, "matchWholeWords": false, "selectiveLogic": 0.0}
	if !reflect.DeepEqual(list[0]["matchOptions"], def) || !reflect.DeepEqual(list[1]["matchOptions"], mo) {
		t.Fatalf("matchOptions %v / %v", list[0]["matchOptions"], list[1]["matchOptions"])
	}
	c.call("POST", "/worldbook/"+wb+"/document", map[string]any{"entries": []map[string]any{
		{"op": "update", "entryId": ids[0], "matchOptions": mo},
		{"op": "update", "entryId": ids[1], "name": "B2"},
	}}, http.StatusOK)
	list = entries(t, c, wb, "")
	if !reflect.DeepEqual(list[0]["matchOptions"], mo) || !reflect.DeepEqual(list[1]["matchOptions"], mo) || list[1]["name"] != "B2" {
		t.Fatalf("after update %v", list)
	}
}

func TestWorldbookDocumentMetadataAndBinding(t *testing.T) {
	t.Parallel()
	c := inProcess(t, newService(t, sandbox.Options{}))
	wb := c.newWorldbook("Lore", "")
	other := c.newWorldbook("Other", "")
	roleID := c.newCard("Mira")
	if got := c.call("GET", "/worldbook/bound?roleId="+roleID, nil, http.StatusOK); got["roleId"] != roleID || len(got["list"].([]any)) != 0 {
		t.Fatalf("bound %v", got)
	}
	res := c.call("POST", "/worldbook/"+wb+"/document", map[string]any{
		"metadata": map[string]any{"description": "All the lore.", "tags": []string{"fantasy"}},
		"binding":  map[string]any{"roleId": roleID},
	}, http.StatusOK)
	if res["bound"] != true || len(strs(res["createdEntryIds"])) != 0 {
		t.Fatalf("result %v", res)
	}
	c.call("POST", "/worldbook/"+wb+"/document", map[string]any{"metadata": map[string]any{"name": "Lore II"}, "binding": map[string]any{"roleId": roleID}}, http.StatusOK)
	got := c.call("GET", "/worldbook/detail?worldbookId="+wb, nil, http.StatusOK)
	if got["name"] != "Lore II" || got["description"] != "All the lore." || !slices.Equal(strs(got["tags"]), []string{"fantasy"}) ||
		!slices.Equal(strs(got["boundRoleIds"]), []string{roleID}) {
		t.Fatalf("detail %v", got)
	}
	bound := c.call("GET", "/worldbook/bound?roleId="+roleID, nil, http.StatusOK)["list"].([]any)
	if len(bound) != 1 || bound[0].(map[string]any)["worldbookId"] != wb {
		t.Fatalf("bound %v", bound)
	}
	if got := c.call("GET", "/worldbook/detail?worldbookId="+other, nil, http.StatusOK); len(strs(got["boundRoleIds"])) != 0 {
		t.Fatalf("other %v", got)
	}
	if res := c.call("POST", "/worldbook/"+wb+"/document", map[string]any{}, http.StatusOK); res["bound"] != false {
		t.Fatalf("empty document %v", res)
	}
	c.fail("GET", "/worldbook/bound?roleId=r_nope", nil, http.StatusNotFound, "role_not_found")
	c.fail("POST", "/worldbook/"+wb+"/document", map[string]any{"metadata": map[string]any{"name": ""}}, http.StatusBadRequest, "invalid_request")
	c.fail("POST", "/worldbook/"+wb+"/document", map[string]any{"binding": map[string]any{}}, http.StatusBadRequest, "invalid_request")
}

func TestWorldbookDocumentLimit(t *testing.T) {
	t.Parallel()
	c := inProcess(t, newService(t, sandbox.Options{}))
	wb := c.newWorldbook("Big", "")
	ops := func(n int) []map[string]any {
		out := make([]map[string]any, n)
		for i := range out {
			out[i] = map[string]any{"op": "create", "name": fmt.Sprint("E", i), "content": "c", "keywords": []string{"k"}}
		}
		return out
	}
	obj := c.fail("POST", "/worldbook/"+wb+"/document", map[string]any{"entries": ops(501)}, http.StatusBadRequest, "invalid_request")
	if detail(t, obj)["part"] != "body" {
		t.Fatalf("detail %v", obj["detail"])
	}
	res := c.call("POST", "/worldbook/"+wb+"/document", map[string]any{"entries": ops(500)}, http.StatusOK)
	if len(strs(res["createdEntryIds"])) != 500 {
		t.Fatalf("created %d", len(strs(res["createdEntryIds"])))
	}
	list := entries(t, c, wb, "")
	if len(list) != 500 || num(list[499]["sortOrder"]) != 499 {
		t.Fatalf("%d entries", len(list))
	}
}

func TestWorldbookIntegers(t *testing.T) {
	t.Parallel()
	c := inProcess(t, newService(t, sandbox.Options{}))
	wb := c.newWorldbook("Ints", "tavern")
	// JSON Schema integers include 2.0 and 1e2.
	c.call("POST", "/worldbook/"+wb+"/document", `{"entries":[{"op":"create","name":"a","content":"b","keywords":[],
		"priority":2.0,"sortOrder":1e2,"matchOptions":{"caseSensitive":false,"matchWholeWords":false,"selectiveLogic":3.0}}]}`, http.StatusOK)
	c.call("POST", "/worldbook/"+wb+"/document", `{"entries":[{"op":"create","name":"max","content":"b","keywords":[],"sortOrder":9223372036854775807}]}`, http.StatusOK)
	c.call("POST", "/worldbook/"+wb+"/document", `{"entries":[{"op":"create","name":"next","content":"b","keywords":[]}]}`, http.StatusOK)
	list := entries(t, c, wb, "")
	if num(list[0]["priority"]) != 2 || num(list[0]["sortOrder"]) != 100 || num(list[0]["matchOptions"].(map[string]any)["selectiveLogic"]) != 3 {
		t.Fatalf("entry %v", list[0])
	}
	for _, body := range []string{
		`{"entries":[{"op":"create","name":"a","content":"b","keywords":[],"priority":1.5}]}`,
		`{"entries":[{"op":"create","name":"a","content":"b","keywords":[],"priority":1e40}]}`,
		`{"entries":[{"op":"create","name":"a","content":"b","keywords":[],"sortOrder":9223372036854775808}]}`,
	} {
		c.fail("POST", "/worldbook/"+wb+"/document", body, http.StatusBadRequest, "invalid_request")
	}
}
