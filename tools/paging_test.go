package tools

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cardwriter/cardwriter-mcp/internal/tokens"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

// loreWords make generated entries read like a worldbook's (and tokenize like one).
var loreWords = strings.Fields("the old harbour keeps a lantern for every ship lost at sea and the keepers " +
	"say the light answers when a name is spoken aloud beneath the cliffs where salt wind carves the stone " +
	"into faces that the fishermen greet each morning before the tide turns toward the northern reefs")

// loreEntry returns the create op of generated entry i: about 800 characters of content.
func loreEntry(i int) map[string]any {
	var b strings.Builder
	for w := 0; b.Len() < 800; w++ {
		b.WriteString(loreWords[(i*7+w*3)%len(loreWords)])
		b.WriteByte(' ')
	}
	return map[string]any{"op": "create", "name": fmt.Sprintf("Place %04d", i), "content": strings.TrimSpace(b.String()),
		"keywords": []string{fmt.Sprintf("place%04d", i), fmt.Sprintf("%s-%d", loreWords[i%len(loreWords)], i%97)}, "secondaryKeywords": []string{"harbour"}, "category": "places"}
}

// bigWorldbook creates a worldbook of n generated entries (plant, when set, replaces entry
// plantAt) and returns its id and the created entry ids.
func bigWorldbook(t *testing.T, e *env, n, plantAt int, plant map[string]any) (string, []string) {
	t.Helper()
	id := e.ok("create_worldbook", `{"name":"Generated"}`)["worldbookId"].(string)
	var ids []string
	for start := 0; start < n; start += 500 {
		var ops []any
		for i := start; i < min(start+500, n); i++ {
			op := loreEntry(i)
			if plant != nil && i == plantAt {
				op = plant
			}
			ops = append(ops, op)
		}
		out := e.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": id, "entries": ops}))
		ids = append(ids, stringsOf(list(out, "createdEntryIds"))...)
	}
	return id, ids
}

// resultTokens returns the cl100k tokens of a result's text and of its structuredContent.
func resultTokens(t *testing.T, res *mcp.CallToolResult) (text_, structured_ int) {
	t.Helper()
	tt, err := tokens.Count(text(res))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	st, err := tokens.Count(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	return tt, st
}

// TestPagingEveryEntryOnce pages a worldbook on two servers over one card service, turn about,
// with entries added and deleted between pages: every entry that stayed is listed exactly
// once, and the change is said in the text and in structuredContent.
func TestPagingEveryEntryOnce(t *testing.T) {
	t.Parallel()
	a := newEnv(t, Options{})
	b, _ := newTavernEnv(t, tavernEnvConfig{svc: a.svc})
	wb, ids := bigWorldbook(t, a, 120, -1, nil)
	deleted := map[string]bool{ids[5]: true, ids[60]: true, ids[119]: true}
	seen := map[string]int{}
	cursor := ""
	changedSaid := false
	var listedBefore map[string]int // what was listed when the entries were deleted
	for page := 0; ; page++ {
		if page > 50 {
			t.Fatal("paging does not end")
		}
		e := []*env{a, b}[page%2]
		args := map[string]any{"worldbookId": wb, "limit": 17}
		if cursor != "" {
			args["cursor"] = cursor
		}
		res := e.call("list_worldbook_entries", jsonArg(t, args))
		if res.IsError {
			t.Fatalf("page %d: %s", page, text(res))
		}
		out := structured(t, res).(map[string]any)
		for _, v := range list(out, "entries") {
			seen[str(v.(map[string]any), "entryId")]++
		}
		if str(out, "changed") != "" {
			changedSaid = true
			if !strings.Contains(firstText(res), "changed") {
				t.Errorf("page %d: the change is not in the text: %s", page, firstText(res))
			}
		}
		if page == 1 {
			// Between pages: delete three (one already listed), add two.
			var ops []any
			for id := range deleted {
				ops = append(ops, map[string]any{"op": "delete", "entryId": id})
			}
			ops = append(ops, loreEntry(900), loreEntry(901))
			listedBefore = maps.Clone(seen)
			a.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wb, "entries": ops}))
		}
		cursor = str(out, "nextCursor")
		if cursor == "" {
			if str(out, "next") != "" {
				t.Errorf("the last page says how to ask for a next one: %v", out["next"])
			}
			break
		}
		if !strings.Contains(firstText(res), "cursor") || !strings.Contains(str(out, "next"), "cursor") {
			t.Errorf("page %d does not say how to ask for the next page: %q / %q", page, firstText(res), str(out, "next"))
		}
	}
	if !changedSaid {
		t.Error("no page said that the list changed")
	}
	for i, id := range ids {
		switch {
		case deleted[id] && seen[id] != listedBefore[id]:
			t.Errorf("deleted entry %s listed after it was deleted", id)
		case !deleted[id] && seen[id] != 1:
			t.Errorf("entry %d (%s) listed %d times", i, id, seen[id])
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s listed %d times", id, n)
		}
	}
}

// TestPagingLists pages the other list tools: total, count and nextCursor, every item once.
func TestPagingLists(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	role := e.ok("create_card", `{"roleName":"Pager"}`)["roleId"].(string)
	for i := range 5 {
		id := e.ok("create_worldbook", fmt.Sprintf(`{"name":"Book %d"}`, i))["worldbookId"].(string)
		e.ok("write_worldbook_document", fmt.Sprintf(`{"worldbookId":%q,"binding":{"roleId":%q}}`, id, role))
	}
	for i := range 3 {
		e.ok("upsert_trial_card", fmt.Sprintf(`{"clientKey":"trial-%d","card":{"roleName":"T%d"}}`, i, i))
	}
	for _, tc := range []struct {
		tool, args, key, id string
		total               int
	}{
		{"list_worldbooks", `{"limit":2}`, "list", "worldbookId", 5},
		{"list_card_worldbooks", `{"roleId":"` + role + `","limit":2}`, "list", "worldbookId", 5},
		{"list_trial_cards", `{"limit":2}`, "list", "clientKey", 3},
	} {
		seen := map[string]bool{}
		args := tc.args
		for page := 0; ; page++ {
			out := e.ok(tc.tool, args)
			if num(out, "total") != int64(tc.total) || num(out, "count") != int64(len(list(out, tc.key))) {
				t.Fatalf("%s page %d: total %v count %v, %d items", tc.tool, page, out["total"], out["count"], len(list(out, tc.key)))
			}
			for _, v := range list(out, tc.key) {
				id := str(v.(map[string]any), tc.id)
				if seen[id] {
					t.Errorf("%s: %s listed twice", tc.tool, id)
				}
				seen[id] = true
			}
			next := str(out, "nextCursor")
			if next == "" {
				break
			}
			args = strings.TrimSuffix(tc.args, "}") + `,"cursor":"` + next + `"}`
		}
		if len(seen) != tc.total {
			t.Errorf("%s: %d of %d listed", tc.tool, len(seen), tc.total)
		}
	}
	// A trial list's other fields stay on every page.
	if out := e.ok("list_trial_cards", `{"limit":1}`); obj(out, "slots") == nil || out["ttlHours"] == nil {
		t.Errorf("list_trial_cards page lost slots or ttlHours: %v", out)
	}
}

// TestPagingBadCursor: a cut, edited or foreign cursor is a tool error that says what to do.
func TestPagingBadCursor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	wb, _ := bigWorldbook(t, e, 5, -1, nil)
	other, _ := bigWorldbook(t, e, 5, -1, nil)
	next := str(e.ok("list_worldbook_entries", jsonArg(t, map[string]any{"worldbookId": wb, "limit": 2})), "nextCursor")
	for _, tc := range []struct{ name, args string }{
		{"cut", jsonArg(t, map[string]any{"worldbookId": wb, "cursor": next[:len(next)-4]})},
		{"garbage", jsonArg(t, map[string]any{"worldbookId": wb, "cursor": "%%%"})},
		{"another worldbook", jsonArg(t, map[string]any{"worldbookId": other, "cursor": next})},
		{"another query", jsonArg(t, map[string]any{"worldbookId": wb, "cursor": next, "query": "harbour"})},
		{"another tool", jsonArg(t, map[string]any{"cursor": next})},
	} {
		tool := "list_worldbook_entries"
		if tc.name == "another tool" {
			tool = "list_worldbooks"
		}
		env, _ := e.fail(tool, tc.args)
		if env["error"] != codeInvalidCursor || !strings.Contains(env["message"].(string), "leave cursor out") {
			t.Errorf("%s: %v", tc.name, env)
		}
	}
}

// TestEntriesQueryAndBudget: on a generated 1,000-entry worldbook, the first page and a full
// page fit the budget (text and structuredContent), a query finds the planted entry first, and
// a small budget makes smaller pages.
func TestEntriesQueryAndBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	plant := map[string]any{"op": "create", "name": "Ilse", "content": "The blind cartographer of the old harbour draws the reefs by the sound of the waves.",
		"keywords": []string{"Ilse", "mapmaker"}}
	wb, ids := bigWorldbook(t, e, 1000, 637, plant)
	for _, tc := range []struct {
		name string
		args map[string]any
	}{
		{"first page", map[string]any{"worldbookId": wb}},
		{"full detail", map[string]any{"worldbookId": wb, "detail": "full", "limit": 500}},
		{"query", map[string]any{"worldbookId": wb, "query": "harbour", "limit": 500}},
	} {
		res := e.call("list_worldbook_entries", jsonArg(t, tc.args))
		out := structured(t, res).(map[string]any)
		tt, st := resultTokens(t, res)
		if res.IsError || tt > DefaultResultBudget || st > DefaultResultBudget || len(text(res)) > MaxResultChars {
			t.Errorf("%s: %d tokens of text, %d of structuredContent (budget %d); error %v", tc.name, tt, st, DefaultResultBudget, res.IsError)
		}
		if str(out, "nextCursor") == "" || num(out, "total") < 2 {
			t.Errorf("%s: one page for %v entries", tc.name, out["total"])
		}
		t.Logf("%s: %d of %v entries, %d tokens of text, %d of structuredContent", tc.name, num(out, "count"), out["total"], tt, st)
	}
	out := e.ok("list_worldbook_entries", jsonArg(t, map[string]any{"worldbookId": wb, "query": "Blind Cartographer"}))
	found := list(out, "entries")
	if len(found) == 0 || str(found[0].(map[string]any), "entryId") != ids[637] || num(out, "total") != 1 {
		t.Fatalf("query: %v", out)
	}
	if e := found[0].(map[string]any); e["score"] == nil || e["matchOptions"] != nil {
		t.Errorf("a brief entry: %v", e)
	}

	small := newEnvOn(t, e, Options{ResultBudget: MinResultBudget})
	res := small.call("list_worldbook_entries", jsonArg(t, map[string]any{"worldbookId": wb, "detail": "full"}))
	out = structured(t, res).(map[string]any)
	if tt, st := resultTokens(t, res); tt > MinResultBudget || st > MinResultBudget || num(out, "count") >= defaultLimit {
		t.Errorf("budget %d: %d entries, %d tokens of text, %d of structuredContent", MinResultBudget, num(out, "count"), tt, st)
	}
}

// newEnvOn returns a second server with opts on e's card service.
func newEnvOn(t *testing.T, e *env, opts Options) *env {
	t.Helper()
	o, _ := newTavernEnv(t, tavernEnvConfig{svc: e.svc, opts: opts})
	return o
}

// TestResultBudget: a result over the budget becomes an error that says how large it was and
// how to ask for less; under it, results are untouched.
func TestResultBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{ResultBudget: MinResultBudget})
	role := e.ok("create_card", `{"roleName":"Verbose"}`)["roleId"].(string)
	long := strings.Repeat("A long and winding description of the keeper's lighthouse. ", 200)
	e.ok("write_card_document", jsonArg(t, map[string]any{"roleId": role, "sections": map[string]any{"description": long}}))
	env, _ := e.fail("get_card", jsonArg(t, map[string]any{"roleId": role}))
	msg, _ := env["message"].(string)
	if env["error"] != codeResultTooLarge || !strings.Contains(msg, "budget is 1000 tokens") {
		t.Errorf("get_card over the budget: %v", env)
	}
	wide := newEnvOn(t, e, Options{})
	wide.ok("get_card", jsonArg(t, map[string]any{"roleId": role}))
}

// TestManyProblemsNameTheFirst: an error naming many problems names the first ten and says
// how many more there are.
func TestManyProblemsNameTheFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	var ops []any
	for range 25 {
		ops = append(ops, map[string]any{"op": "create"}) // no name, content or keywords
	}
	env, _ := e.fail("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": "wb_1", "entries": ops}))
	msg, _ := env["message"].(string)
	detail, _ := env["detail"].(map[string]any)
	if !strings.Contains(msg, "more") || len(list(detail, "problems")) != maxProblems || num(detail, "more") == 0 {
		t.Errorf("envelope %v", env)
	}
}

// TestReviewFindingsCut: review_card on a card whose worldbook has many findings lists the
// first ones within the budget and says how many more.
func TestReviewFindingsCut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{ResultBudget: MinResultBudget})
	role := e.ok("create_card", `{"roleName":"Keeper"}`)["roleId"].(string)
	wb := e.ok("create_worldbook", `{"name":"Disabled"}`)["worldbookId"].(string)
	var ops []any
	for i := range 60 {
		op := loreEntry(i)
		op["isEnabled"] = false // one finding each
		ops = append(ops, op)
	}
	e.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wb, "entries": ops, "binding": map[string]any{"roleId": role}}))
	res := e.call("review_card", jsonArg(t, map[string]any{"roleId": role}))
	out := structured(t, res).(map[string]any)
	if res.IsError || num(out, "omitted") == 0 || !strings.Contains(firstText(res), "more are not listed") {
		t.Fatalf("review_card: %s", text(res))
	}
	if tt, st := resultTokens(t, res); tt > MinResultBudget || st > MinResultBudget {
		t.Errorf("review_card: %d tokens of text, %d of structuredContent", tt, st)
	}
}

// TestTriggersConcise: on a 1,000-entry worldbook, test_worldbook_triggers names what fired and
// the entries a keyword matched, and counts the rest instead of listing them; detail full
// lists every entry.
func TestTriggersConcise(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	wb, ids := bigWorldbook(t, e, 1000, -1, nil)
	args := map[string]any{"worldbookId": wb, "text": "We reach place0500 by the harbour."}
	res := e.call("test_worldbook_triggers", jsonArg(t, args))
	if res.IsError {
		t.Fatalf("brief: %s", firstText(res))
	}
	out := structured(t, res).(map[string]any)
	fired := list(out, "fired")
	if res.IsError || len(fired) == 0 || num(out, "quiet") < 900 || len(list(out, "notFired"))+len(fired)+int(num(out, "quiet")) != 1000 {
		t.Fatalf("brief: %d fired, %d not fired, %v quiet: %s", len(fired), len(list(out, "notFired")), out["quiet"], firstText(res))
	}
	found := false
	for _, f := range fired {
		found = found || str(f.(map[string]any), "entryId") == ids[500]
	}
	if !found || !strings.Contains(firstText(res), "matched no keyword") {
		t.Errorf("place 0500 did not fire, or the text does not say what was left out: %s", firstText(res))
	}
	tt, st := resultTokens(t, res)
	t.Logf("brief: %d fired; %d tokens of text, %d of structuredContent", len(fired), tt, st)
	if tt > 5000 || st > 5000 {
		t.Errorf("brief: %d tokens of text, %d of structuredContent", tt, st)
	}
	args["detail"] = "full" // every entry: as many as fit, and how many more
	out = e.ok("test_worldbook_triggers", jsonArg(t, args))
	if n := len(list(out, "notFired")) + len(list(out, "fired")) + int(num(out, "omitted")); n != 1000 || out["quiet"] != nil || num(out, "omitted") == 0 {
		t.Errorf("full: %d fired, %d not fired, %v omitted", len(list(out, "fired")), len(list(out, "notFired")), out["omitted"])
	}
}

// TestExtensionsExtendOperations: every tool tools.json extends is a tool of the registry that
// calls one contract operation, and advertises the extension's arguments.
func TestExtensionsExtendOperations(t *testing.T) {
	t.Parallel()
	names, err := schema.ExtendedTools()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Tool{}
	for _, tool := range All() {
		byName[tool.Name] = tool
	}
	for _, name := range names {
		tool, ok := byName[name]
		if !ok || tool.Operation == "" {
			t.Errorf("tools.json extends %s, which is no tool calling a contract operation", name)
			continue
		}
		for _, arg := range tool.extra {
			if !strings.Contains(string(tool.InputSchema()), `"`+arg+`"`) {
				t.Errorf("%s does not advertise %s", name, arg)
			}
		}
	}
	if len(names) < 6 {
		t.Errorf("extended tools %v: want the five list tools and validate_card", names)
	}
}

func TestWithCounts(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{}`:                     `{"count":2,"total":2}`,
		` { "list":[1,2]} `:      `{"count":2,"total":2,"list":[1,2]}`,
		"{\n}":                   `{"count":2,"total":2}`,
		`{"list":[1,2],"x":"}"}`: `{"count":2,"total":2,"list":[1,2],"x":"}"}`,
	} {
		if got := string(withCounts(json.RawMessage(in), 2)); got != want {
			t.Errorf("withCounts(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestLimitDefaultsAdvertised: the default page size a list tool's limit argument states is the
// one the code uses (the schema says it in words, the code as a number: one must follow the
// other).
func TestLimitDefaultsAdvertised(t *testing.T) {
	t.Parallel()
	for _, tool := range All() {
		var in struct {
			Properties map[string]struct {
				Description string `json:"description"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(tool.InputSchema(), &in); err != nil {
			t.Fatal(err)
		}
		limit, ok := in.Properties["limit"]
		if !ok {
			continue
		}
		want := defaultLimit
		if tool.Name == "list_revisions" {
			want = defaultRevisionLimit
		}
		if !strings.Contains(limit.Description, fmt.Sprintf("Default %d.", want)) {
			t.Errorf("%s: limit says %q, the code's default is %d", tool.Name, limit.Description, want)
		}
	}
}

// TestEntriesSearchTrusted: a query that many entries match weakly returns the clear winner
// alone (in a few hundred tokens), says how many weaker matches it left out and how to list
// them; a query's page holds at most defaultQueryLimit; brief content shows the passage around
// the match; entryIds reads entries whole, in the order asked, naming the ids that are not there.
func TestEntriesSearchTrusted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	long := strings.Repeat("Salt wind carves the cliffs into faces. ", 10) + "Only the blind cartographer hears the reefs sing."
	plant := map[string]any{"op": "create", "name": "Ilse, the blind cartographer", "content": long, "keywords": []string{"Ilse"}}
	wb, ids := bigWorldbook(t, e, 1000, 637, plant)
	var weak []any
	for i := range 30 {
		weak = append(weak, map[string]any{"op": "create", "name": fmt.Sprintf("Chart %d", i), "content": "A chart a cartographer left behind.", "keywords": []string{fmt.Sprintf("chart%d", i)}})
	}
	e.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wb, "entries": weak}))

	res := e.call("list_worldbook_entries", jsonArg(t, map[string]any{"worldbookId": wb, "query": "blind cartographer"}))
	out := structured(t, res).(map[string]any)
	found := list(out, "entries")
	if len(found) != 1 || str(found[0].(map[string]any), "entryId") != ids[637] {
		t.Fatalf("the clear winner is not alone: %v", out)
	}
	if w := str(out, "weaker"); !strings.Contains(w, "30 weaker matches") || !strings.Contains(w, "limit") || !strings.Contains(firstText(res), w) {
		t.Errorf("weaker: %q; text: %s", w, firstText(res))
	}
	if c := str(found[0].(map[string]any), "content"); !strings.HasPrefix(c, "…") || !strings.Contains(c, "blind cartographer") {
		t.Errorf("brief content is not the passage around the match: %q", c)
	}
	tt, st := resultTokens(t, res)
	if st > 300 {
		t.Errorf("the clear winner costs %d tokens of structuredContent", st)
	}
	t.Logf("a clear winner of 31 matches: %d tokens of structuredContent, %d of text", st, tt)

	out = e.ok("list_worldbook_entries", jsonArg(t, map[string]any{"worldbookId": wb, "query": "blind cartographer", "limit": 50}))
	found = list(out, "entries")
	if len(found) != 31 || str(found[0].(map[string]any), "entryId") != ids[637] || out["weaker"] != nil {
		t.Errorf("with limit: %d entries, weaker %v", len(found), out["weaker"])
	}
	for i := 1; i < len(found); i++ {
		if num(found[i].(map[string]any), "score") > num(found[i-1].(map[string]any), "score") {
			t.Fatalf("not best first at %d", i)
		}
	}

	out = e.ok("list_worldbook_entries", jsonArg(t, map[string]any{"worldbookId": wb, "query": "chart"}))
	if n := len(list(out, "entries")); n != defaultQueryLimit || str(out, "nextCursor") == "" || num(out, "total") != 30 {
		t.Errorf("a query's default page: %d entries of %v", n, out["total"])
	}

	out = e.ok("list_worldbook_entries", jsonArg(t, map[string]any{"worldbookId": wb, "entryIds": []string{ids[3], "e_none", ids[1]}}))
	found = list(out, "entries")
	if len(found) != 2 || str(found[0].(map[string]any), "entryId") != ids[3] || str(found[1].(map[string]any), "entryId") != ids[1] {
		t.Fatalf("entryIds: %v", found)
	}
	if c := str(found[0].(map[string]any), "content"); len(c) < 700 || found[0].(map[string]any)["category"] != "places" {
		t.Errorf("entryIds: not whole: %v", found[0])
	}
	if m := stringsOf(list(out, "missing")); len(m) != 1 || m[0] != "e_none" {
		t.Errorf("missing: %v", out["missing"])
	}
}
