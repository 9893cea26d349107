package tools

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// pngBase64 returns a small PNG image, base64-encoded.
func pngBase64(t *testing.T) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// TestEveryToolAgainstTheSandbox authors a card, a worldbook and a trial through the MCP layer,
// calling every tool of the registry successfully at least once; every result validates
// against the tool's output schema (see env.ok).
func TestEveryToolAgainstTheSandbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	used := map[string]bool{}
	ok := func(name, args string) map[string]any {
		t.Helper()
		used[name] = true
		return e.ok(name, args)
	}

	me := ok("whoami", `{}`)
	if me["userId"] == "" {
		t.Errorf("whoami: %v", me)
	}

	created := ok("create_card", `{"roleName":"Captain Mira Vale","language":"en"}`)
	roleID := created["roleId"].(string)
	if created["roleVisibility"] != "private" || created["reviewStatus"] != "draft" {
		t.Errorf("create_card: %v", created)
	}
	// The same idempotencyKey twice gives the same card.
	k1 := ok("create_card", `{"roleName":"Twice","idempotencyKey":"k-1"}`)
	k2 := ok("create_card", `{"roleName":"Twice","idempotencyKey":"k-1"}`)
	if k1["roleId"] != k2["roleId"] {
		t.Errorf("create_card with one idempotencyKey made two cards: %v, %v", k1, k2)
	}

	rep := ok("validate_card", jsonArg(t, map[string]any{"roleId": roleID}))
	if rep["ready"] != false {
		t.Errorf("an empty card is ready: %v", rep)
	}

	ok("set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "You're late, pilot.",
		"alternates": []string{"Another stowaway?"}, "prologue": []string{"Sorry, Captain.", "Who are you?"}}))
	// Omitting alternates keeps them; [] clears the prologue.
	ok("set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "You're late again.", "prologue": []string{}}))
	card := ok("get_card", jsonArg(t, map[string]any{"roleId": roleID}))
	if card["roleWelcome"] != "You're late again." || len(card["welcomeAlternates"].([]any)) != 1 || len(card["prologue"].([]any)) != 0 {
		t.Errorf("set_opening_lines did not keep/clear as documented: %v", card)
	}
	ok("set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "You're late, pilot.", "prologue": []string{"Sorry, Captain."}}))

	ok("write_card_document", jsonArg(t, map[string]any{"roleId": roleID,
		"sections": map[string]string{"description": "Mira captains the Kestrel.", "personality": "Dry."}}))

	img := ok("upload_image", jsonArg(t, map[string]any{"purpose": "avatar", "roleId": roleID, "contentType": "image/png", "dataBase64": pngBase64(t)}))
	if img["width"] != json.Number("3") || img["height"] != json.Number("2") {
		t.Errorf("upload_image: %v", img)
	}
	assets := ok("list_card_assets", jsonArg(t, map[string]any{"roleId": roleID}))
	if n := len(assets["images"].([]any)); n != 1 {
		t.Errorf("list_card_assets: %d images, want 1", n)
	}

	prof := ok("update_card_profile", jsonArg(t, map[string]any{"roleId": roleID, "roleDesc": "A smuggler captain.",
		"tags": []string{"sci-fi"}, "avatarImageId": img["imageId"]}))
	if prof["avatarImageId"] != img["imageId"] || prof["roleName"] != "Captain Mira Vale" {
		t.Errorf("update_card_profile: %v", prof)
	}
	vis := ok("set_card_visibility", jsonArg(t, map[string]any{"roleId": roleID, "visibility": "private"}))
	if vis["roleVisibility"] != "private" {
		t.Errorf("set_card_visibility: %v", vis)
	}
	rep = ok("validate_card", jsonArg(t, map[string]any{"roleId": roleID}))
	if rep["ready"] != true {
		t.Errorf("a complete card is not ready: %v", rep)
	}
	review := ok("review_card", jsonArg(t, map[string]any{"roleId": roleID}))
	if review["encoding"] != "cl100k_base" || review["tokens"].(map[string]any)["total"] == json.Number("0") {
		t.Errorf("review_card: %v", review)
	}

	wb := ok("create_worldbook", `{"name":"The Kestrel's Sector","tags":["sci-fi"]}`)
	wbID := wb["worldbookId"].(string)
	doc := ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID,
		"metadata": map[string]any{"description": "Places and ships."},
		"entries": []any{
			map[string]any{"op": "create", "name": "The Kestrel", "content": "Mira's freighter.", "keywords": []string{"Kestrel"}, "category": "ships"},
			map[string]any{"op": "create", "name": "Vale Gate", "content": "A jump gate.", "keywords": []string{"gate"}},
		},
		"binding": map[string]any{"roleId": roleID}}))
	ids := doc["createdEntryIds"].([]any)
	if len(ids) != 2 || doc["bound"] != true {
		t.Fatalf("write_worldbook_document: %v", doc)
	}
	doc = ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "entries": []any{
		map[string]any{"op": "update", "entryId": ids[0], "priority": 5},
		map[string]any{"op": "delete", "entryId": ids[1]},
	}}))
	if doc["updatedCount"] != json.Number("1") || doc["deletedCount"] != json.Number("1") {
		t.Errorf("write_worldbook_document update/delete: %v", doc)
	}
	got := ok("get_worldbook", jsonArg(t, map[string]any{"worldbookId": wbID}))
	if got["entryCount"] != json.Number("1") || got["description"] != "Places and ships." {
		t.Errorf("get_worldbook: %v", got)
	}
	// The revisions toolset (revisions_test.go tests it in depth): the update/delete undone.
	revs := ok("list_revisions", jsonArg(t, map[string]any{"worldbookId": wbID}))["revisions"].([]any)
	if len(revs) != 2 || revs[0].(map[string]any)["revisionId"] != doc["revision"].(map[string]any)["revisionId"] {
		t.Fatalf("list_revisions: %v (the last write: %v)", revs, doc["revision"])
	}
	last := revs[0].(map[string]any)["revisionId"]
	if d := ok("diff_revision", jsonArg(t, map[string]any{"revisionId": last})); len(d["entries"].(map[string]any)["deleted"].([]any)) != 1 {
		t.Errorf("diff_revision: %v", d)
	}
	if r := ok("restore_revision", jsonArg(t, map[string]any{"revisionId": last})); len(r["createdEntryIds"].([]any)) != 1 {
		t.Errorf("restore_revision: %v", r)
	}
	ok("restore_revision", jsonArg(t, map[string]any{"revisionId": ok("list_revisions", jsonArg(t, map[string]any{"worldbookId": wbID}))["revisions"].([]any)[0].(map[string]any)["revisionId"]}))
	entries := ok("list_worldbook_entries", jsonArg(t, map[string]any{"worldbookId": wbID, "category": "ships", "detail": "full"}))
	if es := entries["entries"].([]any); len(es) != 1 || es[0].(map[string]any)["priority"] != json.Number("5") {
		t.Errorf("list_worldbook_entries: %v", entries)
	}
	if l := ok("list_worldbooks", `{}`)["list"].([]any); len(l) != 1 {
		t.Errorf("list_worldbooks: %v", l)
	}
	if l := ok("list_card_worldbooks", jsonArg(t, map[string]any{"roleId": roleID}))["list"].([]any); len(l) != 1 {
		t.Errorf("list_card_worldbooks: %v", l)
	}

	tr := ok("upsert_trial_card", `{"clientKey":"mira-draft","card":{"roleName":"Mira","roleWelcome":"Hi.","welcomeAlternates":["Yo."]},`+
		`"worldbook":{"entries":[{"name":"Kestrel","content":"A ship.","keywords":["Kestrel"]}]}}`)
	if tr["created"] != true {
		t.Errorf("upsert_trial_card: %v", tr)
	}
	tr = ok("upsert_trial_card", `{"clientKey":"mira-draft","card":{"roleName":"Mira","roleWelcome":"Hello."}}`)
	if tr["created"] != false || !slices.Contains(tr["changed"].([]any), any("roleWelcome")) {
		t.Errorf("upsert_trial_card update: %v", tr)
	}
	ok("get_trial_card", `{"clientKey":"mira-draft"}`)
	if l := ok("list_trial_cards", `{}`); len(l["list"].([]any)) != 1 || l["ttlHours"] != json.Number("24") {
		t.Errorf("list_trial_cards: %v", l)
	}
	ok("delete_trial_card", `{"clientKey":"mira-draft"}`)

	pub := ok("publish_card", jsonArg(t, map[string]any{"roleId": roleID}))
	if pub["reviewStatus"] != "pending" {
		t.Errorf("publish_card: %v", pub)
	}

	// The tavern toolset and the trigger tester (tavern_test.go tests them in depth).
	trig := ok("test_worldbook_triggers", jsonArg(t, map[string]any{"worldbookId": wbID, "text": "The Kestrel is late."}))
	if fired := trig["fired"].([]any); len(fired) != 1 {
		t.Errorf("test_worldbook_triggers: %v", trig)
	}
	xray := ok("preview_prompt", jsonArg(t, map[string]any{"roleId": roleID, "chat": []any{map[string]any{"text": "The Kestrel is late.", "user": true}}}))
	if len(list(xray, "blocks")) == 0 {
		t.Errorf("preview_prompt: %v", xray)
	}
	imp := ok("import_tavern_card", `{"source":{"json":{"spec":"chara_card_v2","spec_version":"2.0","data":{"name":"Vey",`+
		`"first_mes":"Hold the lantern lower.","character_book":{"entries":[{"keys":["kraken"],"content":"A kraken.","extensions":{"depth":4}}]}}}}}`)
	if imp["worldbookId"] == nil || imp["entryCount"] != json.Number("1") {
		t.Errorf("import_tavern_card: %v", imp)
	}
	exp := ok("export_tavern_card", jsonArg(t, map[string]any{"roleId": imp["roleId"]}))
	if exp["card"].(map[string]any)["spec"] != "chara_card_v3" {
		t.Errorf("export_tavern_card: %v", exp)
	}
	lore := ok("import_tavern_worldbook", jsonArg(t, map[string]any{"source": map[string]any{"json": map[string]any{
		"entries": map[string]any{"0": map[string]any{"uid": 0, "key": []string{"gate"}, "content": "The jump gate."}}}}, "roleId": roleID}))
	if lore["entryCount"] != json.Number("1") || lore["bound"] != true {
		t.Errorf("import_tavern_worldbook: %v", lore)
	}
	book := ok("export_tavern_worldbook", jsonArg(t, map[string]any{"worldbookId": lore["worldbookId"], "format": "lorebook_v3"}))
	if book["lorebook"].(map[string]any)["spec"] != "lorebook_v3" || book["entries"] != json.Number("1") {
		t.Errorf("export_tavern_worldbook: %v", book)
	}

	for _, tool := range All() {
		if !used[tool.Name] {
			t.Errorf("tool %s was not exercised", tool.Name)
		}
	}
}

// TestInvalidArguments sends every tool arguments that fail its input schema: the result is
// isError, its text names the failing location, and nothing reaches the card service.
func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	for _, tool := range All() {
		t.Run(tool.Name, func(t *testing.T) {
			var in struct {
				Properties map[string]struct {
					Type any `json:"type"`
				} `json:"properties"`
			}
			if err := json.Unmarshal(tool.InputSchema(), &in); err != nil {
				t.Fatal(err)
			}
			// A known property with a value of the wrong type, or an unknown property for a
			// tool that takes none.
			args, wantText := `{"unexpectedArgument":true}`, "unexpectedArgument"
			for _, name := range slices.Sorted(maps.Keys(in.Properties)) {
				if in.Properties[name].Type == "boolean" {
					continue // true is no wrong type for it (dryRun)
				}
				args = fmt.Sprintf(`{%q: true}`, name)
				wantText = "/" + name + ": got boolean, want "
				break
			}
			before := e.requests.n.Load()
			env, txt := e.fail(tool.Name, args)
			if env["error"] != "invalid_arguments" {
				t.Errorf("error = %v, want invalid_arguments", env["error"])
			}
			if !strings.HasPrefix(txt, "Invalid arguments: ") || !strings.Contains(txt, wantText) {
				t.Errorf("text %q does not contain %q", txt, wantText)
			}
			problems, _ := env["detail"].(map[string]any)["problems"].([]any)
			if len(problems) == 0 {
				t.Errorf("no detail.problems: %v", env)
			}
			if n := e.requests.n.Load() - before; n != 0 {
				t.Errorf("%d requests reached the card service", n)
			}
		})
	}
}

func TestInvalidArgumentsListEveryProblem(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	env, txt := e.fail("set_opening_lines", `{"roleId":"r_1","roleWelcome":7,"prologue":["ok",3],"extra":1}`)
	for _, want := range []string{"/roleWelcome: got number, want string", "/prologue/1: got number, want string", "extra"} {
		if !strings.Contains(txt, want) {
			t.Errorf("text %q lacks %q", txt, want)
		}
	}
	if n := len(env["detail"].(map[string]any)["problems"].([]any)); n != 3 {
		t.Errorf("%d problems, want 3: %v", n, env)
	}
	// Arguments that are not an object at all.
	if _, txt := e.fail("get_card", `[1]`); !strings.Contains(txt, "Invalid arguments: /") {
		t.Errorf("array arguments: %q", txt)
	}
	// A missing required argument.
	if _, txt := e.fail("get_card", `{}`); !strings.Contains(txt, "roleId") {
		t.Errorf("missing roleId: %q", txt)
	}
}

// TestUpstreamErrors checks that the card service's errors reach the model as isError results
// whose text is the envelope's message and whose structuredContent is the envelope.
func TestUpstreamErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	roleID := e.ok("create_card", `{"roleName":"Empty"}`)["roleId"].(string)
	wbID := e.ok("create_worldbook", `{"name":"Lore"}`)["worldbookId"].(string)
	entryID := e.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "entries": []any{
		map[string]any{"op": "create", "name": "A", "content": "a", "keywords": []string{"a"}}}}))["createdEntryIds"].([]any)[0]

	tests := []struct {
		name, tool, args string
		code             string
		check            func(t *testing.T, env map[string]any, text string)
	}{
		{name: "role_not_found", tool: "get_card", args: `{"roleId":"r_missing"}`, code: "role_not_found"},
		{name: "role_not_found on write", tool: "write_card_document", args: `{"roleId":"r_missing","sections":{"description":"x"}}`, code: "role_not_found"},
		{name: "worldbook_not_found", tool: "get_worldbook", args: `{"worldbookId":"wb_missing"}`, code: "worldbook_not_found"},
		{name: "trial_not_found", tool: "get_trial_card", args: `{"clientKey":"nothing-here"}`, code: "trial_not_found"},
		{name: "validation_failed via publish_card", tool: "publish_card", args: jsonArg(t, map[string]any{"roleId": roleID}), code: "validation_failed",
			check: func(t *testing.T, env map[string]any, text string) {
				for _, want := range []string{"roleWelcome: The card needs a first message", "sections.description: "} {
					if !strings.Contains(text, want) {
						t.Errorf("text %q lacks %q", text, want)
					}
				}
				issues := env["detail"].(map[string]any)["issues"].([]any)
				if len(issues) < 2 {
					t.Errorf("detail.issues: %v", issues)
				}
			}},
		{name: "unknown entryId names its op", tool: "write_worldbook_document", code: "not_found",
			args: jsonArg(t, map[string]any{"worldbookId": wbID, "entries": []any{
				map[string]any{"op": "create", "name": "B", "content": "b", "keywords": []string{"b"}},
				map[string]any{"op": "update", "entryId": "e_missing", "priority": 1},
				map[string]any{"op": "delete", "entryId": entryID},
			}}),
			check: func(t *testing.T, env map[string]any, text string) {
				if idx := env["detail"].(map[string]any)["index"]; idx != json.Number("1") {
					t.Errorf("detail.index = %v, want 1", idx)
				}
				if !strings.Contains(text, `"index":1`) {
					t.Errorf("the text does not carry the detail: %q", text)
				}
				// Atomic: neither the create (index 0) nor the delete (index 2) was applied.
				wb := e.ok("get_worldbook", jsonArg(t, map[string]any{"worldbookId": wbID}))
				if wb["entryCount"] != json.Number("1") {
					t.Errorf("entryCount = %v after a failed document, want 1", wb["entryCount"])
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, text := e.fail(tt.tool, tt.args)
			if env["error"] != tt.code {
				t.Fatalf("error = %v, want %s; envelope %v", env["error"], tt.code, env)
			}
			if _, ok := env["retryable"].(bool); !ok {
				t.Errorf("the envelope has no retryable: %v", env)
			}
			if tt.check != nil {
				tt.check(t, env, text)
			}
		})
	}
}

func TestTrialSlotsAndExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	for i := range 5 {
		e.ok("upsert_trial_card", fmt.Sprintf(`{"clientKey":"k%d","card":{"roleName":"T%d"}}`, i, i))
	}
	env, _ := e.fail("upsert_trial_card", `{"clientKey":"k5","card":{"roleName":"T5"}}`)
	if env["error"] != "trial_slots_full" {
		t.Fatalf("sixth trial: %v", env)
	}
	if d := env["detail"].(map[string]any); d["used"] != json.Number("5") || d["max"] != json.Number("5") {
		t.Errorf("detail: %v", d)
	}
	// Updating an existing key still works with every slot in use.
	e.ok("upsert_trial_card", `{"clientKey":"k0","card":{"roleName":"T0 again"}}`)

	e.clock.Advance(25 * time.Hour)
	if env, _ := e.fail("get_trial_card", `{"clientKey":"k0"}`); env["error"] != "trial_not_found" {
		t.Errorf("expired trial: %v", env)
	}
	e.ok("upsert_trial_card", `{"clientKey":"k5","card":{"roleName":"T5"}}`)
}

func TestPayloadTooLarge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	big := base64.StdEncoding.EncodeToString(make([]byte, 8<<20+1))
	env, text := e.fail("upload_image", jsonArg(t, map[string]any{"purpose": "avatar", "contentType": "image/png", "dataBase64": big}))
	if env["error"] != "payload_too_large" {
		t.Fatalf("error = %v, want payload_too_large", env["error"])
	}
	if !strings.Contains(text, "8 MiB") {
		t.Errorf("text: %q", text)
	}
}

// TestPathTraversal checks that an id that would change the request path is refused as an
// invalid argument before any request is sent.
func TestPathTraversal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	tests := []struct{ tool, args, param string }{
		{"set_opening_lines", `{"roleId":"../x","roleWelcome":"hi"}`, "roleId"},
		{"write_card_document", `{"roleId":"a/b","sections":{}}`, "roleId"},
		{"publish_card", `{"roleId":".."}`, "roleId"},
		{"update_card_profile", `{"roleId":"..%2Fx"}`, "roleId"},
		{"write_worldbook_document", `{"worldbookId":"../../role/r_1"}`, "worldbookId"},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			before := e.requests.n.Load()
			env, text := e.fail(tt.tool, tt.args)
			if env["error"] != "invalid_arguments" || !strings.Contains(text, "/"+tt.param+": must not") {
				t.Errorf("envelope %v, text %q", env, text)
			}
			if n := e.requests.n.Load() - before; n != 0 {
				t.Errorf("%d requests reached the card service", n)
			}
		})
	}
}
