package tools

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/tavern/taverntest"
)

// state reads what a revision of kind/id would hold, in a form that compares field for field:
// a card without lastUpdateTime; a worldbook's metadata and its entries by content (ids and
// the counters no write sets left out, sorted); a trial's digests and entry count.
func state(t *testing.T, e *env, kind, id string) any {
	t.Helper()
	switch kind {
	case revisions.KindCard:
		card := e.ok("get_card", jsonArg(t, map[string]any{"roleId": id}))
		delete(card, "lastUpdateTime")
		return card
	case revisions.KindWorldbook:
		wb := e.ok("get_worldbook", jsonArg(t, map[string]any{"worldbookId": id}))
		// Every entry in full (every field, isEnabled and the rest), every page.
		var entries []string
		for cursor := ""; ; {
			args := map[string]any{"worldbookId": id, "detail": "full"}
			if cursor != "" {
				args["cursor"] = cursor
			}
			page := e.ok("list_worldbook_entries", jsonArg(t, args))
			for _, en := range page["entries"].([]any) {
				m := en.(map[string]any)
				for _, k := range []string{"entryId", "lastUpdateTime", "activationCount"} {
					delete(m, k)
				}
				data, _ := json.Marshal(m)
				entries = append(entries, string(data))
			}
			if cursor, _ = page["nextCursor"].(string); cursor == "" {
				break
			}
		}
		slices.Sort(entries)
		return map[string]any{"name": wb["name"], "description": wb["description"], "tags": wb["tags"],
			"boundRoleIds": wb["boundRoleIds"], "entries": entries}
	}
	res := e.call("get_trial_card", jsonArg(t, map[string]any{"clientKey": id}))
	if res.IsError {
		return "gone"
	}
	tr := structured(t, res).(map[string]any)
	return map[string]any{"sections": tr["sections"], "entries": obj(tr, "worldbook")["entries"]}
}

// revisionOf returns the revision id a write's result names, in structuredContent and text.
func revisionOf(t *testing.T, out map[string]any, res *mcp.CallToolResult) string {
	t.Helper()
	rev, _ := out["revision"].(map[string]any)
	id, _ := rev["revisionId"].(string)
	if id == "" {
		t.Fatalf("the result names no revision: %v", out)
	}
	if !strings.Contains(firstText(res), id) || !strings.Contains(firstText(res), "restore_revision") {
		t.Errorf("the text does not name revision %s and restore_revision: %s", id, firstText(res))
	}
	return id
}

// write calls a write tool and returns its result and the revision it names.
func write(t *testing.T, e *env, tool, args string) (map[string]any, string) {
	t.Helper()
	res := e.call(tool, args)
	if res.IsError {
		t.Fatalf("%s: %s", tool, text(res))
	}
	out := structured(t, res).(map[string]any)
	return out, revisionOf(t, out, res)
}

// TestRevisionsRestoreEveryWrite: on SillyTavern's real Seraphina card and Eldoria lorebook, each
// write tool overwrites, clears or deletes; its result names a revision, and restore_revision
// brings back exactly the earlier state (field for field, entries by content); restoring the
// restore's own revision brings the write's state back again.
func TestRevisionsRestoreEveryWrite(t *testing.T) {
	t.Parallel()
	seraphina := taverntest.Real(t, taverntest.RealSeraphinaPNG)
	eldoria := taverntest.Real(t, taverntest.RealEldoriaJSON)
	tests := []struct {
		tool string
		kind string
		// do makes the write, on a card (roleId), worldbook and trial of its own, and
		// returns its result.
		do func(t *testing.T, e *env, roleID, wbID, key string) (map[string]any, string)
	}{
		{"set_opening_lines", revisions.KindCard, func(t *testing.T, e *env, roleID, _, _ string) (map[string]any, string) {
			return write(t, e, "set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "Gone.", "alternates": []string{}, "prologue": []string{}}))
		}},
		{"update_card_profile", revisions.KindCard, func(t *testing.T, e *env, roleID, _, _ string) (map[string]any, string) {
			return write(t, e, "update_card_profile", jsonArg(t, map[string]any{"roleId": roleID, "roleName": "Someone Else", "roleDesc": "", "tags": []string{}, "avatarImageId": ""}))
		}},
		{"write_card_document", revisions.KindCard, func(t *testing.T, e *env, roleID, _, _ string) (map[string]any, string) {
			return write(t, e, "write_card_document", jsonArg(t, map[string]any{"roleId": roleID, "sections": map[string]string{"description": "", "personality": "Rewritten.", "scenario": ""}}))
		}},
		{"set_card_visibility", revisions.KindCard, func(t *testing.T, e *env, roleID, _, _ string) (map[string]any, string) {
			return write(t, e, "set_card_visibility", jsonArg(t, map[string]any{"roleId": roleID, "visibility": "private"}))
		}},
		{"write_worldbook_document", revisions.KindWorldbook, func(t *testing.T, e *env, _, wbID, _ string) (map[string]any, string) {
			entries := e.ok("list_worldbook_entries", jsonArg(t, map[string]any{"worldbookId": wbID}))["entries"].([]any)
			id := func(i int) any { return entries[i].(map[string]any)["entryId"] }
			return write(t, e, "write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID,
				"metadata": map[string]any{"name": "Renamed", "tags": []string{"x"}},
				"entries": []any{
					map[string]any{"op": "delete", "entryId": id(0)},
					map[string]any{"op": "delete", "entryId": id(1)},
					map[string]any{"op": "update", "entryId": id(2), "content": "", "keywords": []string{"nothing"}, "isEnabled": false},
					map[string]any{"op": "create", "name": "New", "content": "New lore.", "keywords": []string{"new"}},
				}}))
		}},
		{"import_tavern_worldbook", revisions.KindWorldbook, func(t *testing.T, e *env, _, wbID, _ string) (map[string]any, string) {
			// Not bound to a card: the API cannot unbind (restore_revision says so).
			return write(t, e, "import_tavern_worldbook", jsonArg(t, map[string]any{"source": map[string]any{"dataBase64": b64(eldoria)},
				"worldbookId": wbID}))
		}},
		{"import_tavern_card", revisions.KindCard, func(t *testing.T, e *env, _, _, _ string) (map[string]any, string) {
			// The same file again rewrites the card the author edited since (authorEdits).
			return write(t, e, "import_tavern_card", jsonArg(t, map[string]any{"source": map[string]any{"dataBase64": b64(seraphina)}}))
		}},
		{"upsert_trial_card", revisions.KindTrial, func(t *testing.T, e *env, _, _, key string) (map[string]any, string) {
			return write(t, e, "upsert_trial_card", jsonArg(t, map[string]any{"clientKey": key, "card": map[string]any{"roleName": "Replaced"},
				"worldbook": map[string]any{"entries": []any{}}}))
		}},
		{"delete_trial_card", revisions.KindTrial, func(t *testing.T, e *env, _, _, key string) (map[string]any, string) {
			return write(t, e, "delete_trial_card", jsonArg(t, map[string]any{"clientKey": key}))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, Options{})
			imp := importCard(t, e, seraphina, nil)
			roleID := imp["roleId"].(string)
			wbID := e.ok("import_tavern_worldbook", jsonArg(t, map[string]any{"source": map[string]any{"dataBase64": b64(eldoria)}}))["worldbookId"].(string)
			key := "seraphina-trial"
			e.ok("upsert_trial_card", jsonArg(t, map[string]any{"clientKey": key, "card": map[string]any{"roleName": "Seraphina",
				"roleWelcome": "*You wake in a glade.*", "welcomeAlternates": []string{"Hello."}, "sections": map[string]string{"description": "A guardian."}},
				"worldbook": map[string]any{"entries": []any{map[string]any{"name": "Glade", "content": "A quiet glade.", "keywords": []string{"glade"}}}}}))
			id := map[string]string{revisions.KindCard: roleID, revisions.KindWorldbook: wbID, revisions.KindTrial: key}[tt.kind]
			// The author's own edits since the import: what a second import writes over.
			e.ok("set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "Edited by the author.", "alternates": []string{"An alternate."}}))
			e.ok("write_card_document", jsonArg(t, map[string]any{"roleId": roleID, "sections": map[string]string{"scenario": "An author's scenario."}}))
			before := state(t, e, tt.kind, id)
			_, revID := tt.do(t, e, roleID, wbID, key)
			after := state(t, e, tt.kind, id)
			if reflect.DeepEqual(before, after) && tt.tool != "set_card_visibility" {
				t.Fatalf("the write changed nothing: %v", after)
			}
			listed := e.ok("list_revisions", jsonArg(t, map[string]any{map[string]string{revisions.KindCard: "roleId", revisions.KindWorldbook: "worldbookId", revisions.KindTrial: "clientKey"}[tt.kind]: id}))
			if first := listed["revisions"].([]any)[0].(map[string]any); first["revisionId"] != revID || first["tool"] != tt.tool {
				t.Errorf("list_revisions does not start with the write's revision %s: %v", revID, first)
			}
			diff := e.ok("diff_revision", jsonArg(t, map[string]any{"revisionId": revID}))
			if diff["same"] == true && tt.tool != "set_card_visibility" {
				t.Errorf("diff_revision sees no difference after %s: %v", tt.tool, diff)
			}

			restored := e.ok("restore_revision", jsonArg(t, map[string]any{"revisionId": revID}))
			if got := state(t, e, tt.kind, id); !reflect.DeepEqual(got, before) {
				t.Fatalf("after restore_revision:\n got %v\nwant %v", got, before)
			}
			if d := e.ok("diff_revision", jsonArg(t, map[string]any{"revisionId": revID})); d["same"] != true {
				t.Errorf("diff_revision after the restore: %v", d)
			}
			if tt.tool == "delete_trial_card" {
				// The restore replaced nothing (the trial was gone): no revision to restore.
				if restored["revision"] != nil {
					t.Errorf("a revision of nothing: %v", restored["revision"])
				}
				return
			}
			// A restore of the restore: the write's state again.
			again := restored["revision"].(map[string]any)["revisionId"].(string)
			e.ok("restore_revision", jsonArg(t, map[string]any{"revisionId": again}))
			if got := state(t, e, tt.kind, id); !reflect.DeepEqual(got, after) {
				t.Errorf("after restoring the restore:\n got %v\nwant %v", got, after)
			}
		})
	}
}

// TestRevisionsOtherUser: another user of the card service, on the same server and store,
// neither lists, sees nor restores the first user's revisions.
func TestRevisionsOtherUser(t *testing.T) {
	t.Parallel()
	revs := revisions.New(store.NewMemory(), revisions.DefaultRetention())
	a := newEnv(t, Options{Revisions: revs})
	roleID := a.ok("create_card", `{"roleName":"Mine"}`)["roleId"].(string)
	_, revID := write(t, a, "set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "Hi."}))
	token := "other-user-token-5d1e"
	a.svc.AddUser(token, "Other")
	b, _ := newTavernEnv(t, tavernEnvConfig{svc: a.svc, token: token, opts: Options{Revisions: revs}})
	if l := b.ok("list_revisions", `{}`); len(l["revisions"].([]any)) != 0 {
		t.Errorf("the other user lists %v", l)
	}
	for _, tool := range []string{"diff_revision", "restore_revision"} {
		if env, _ := b.fail(tool, jsonArg(t, map[string]any{"revisionId": revID})); env["error"] != codeRevisionNotFound {
			t.Errorf("%s by the other user: %v", tool, env)
		}
	}
	if l := a.ok("list_revisions", `{}`); len(l["revisions"].([]any)) != 1 {
		t.Errorf("the owner lists %v", l)
	}
}

// TestRevisionsRetention: past the number kept per object, the oldest revision is dropped,
// and the write's result says so.
func TestRevisionsRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{Revisions: revisions.New(store.NewMemory(), revisions.Retention{PerObject: 2})})
	roleID := e.ok("create_card", `{"roleName":"Kept"}`)["roleId"].(string)
	_, first := write(t, e, "set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "1"}))
	out, _ := write(t, e, "set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "2"}))
	if _, ok := out["revision"].(map[string]any)["dropped"]; ok {
		t.Errorf("dropped before the limit: %v", out["revision"])
	}
	res := e.call("set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "3"}))
	out = structured(t, res).(map[string]any)
	if out["revision"].(map[string]any)["dropped"] != json.Number("1") || !strings.Contains(firstText(res), "Retention dropped 1 revision, the oldest") {
		t.Errorf("the result does not say a revision was dropped: %v / %s", out["revision"], firstText(res))
	}
	list := e.ok("list_revisions", jsonArg(t, map[string]any{"roleId": roleID}))["revisions"].([]any)
	if len(list) != 2 || slices.ContainsFunc(list, func(r any) bool { return r.(map[string]any)["revisionId"] == first }) {
		t.Errorf("list_revisions after the drop: %v", list)
	}
	if env, _ := e.fail("restore_revision", jsonArg(t, map[string]any{"revisionId": first})); env["error"] != codeRevisionNotFound {
		t.Errorf("restore of a dropped revision: %v", env)
	}
}

// TestRevisionsPaging: list_revisions pages newest first with cursor and limit.
func TestRevisionsPaging(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	roleID := e.ok("create_card", `{"roleName":"Paged"}`)["roleId"].(string)
	var ids []string
	for i := range 5 {
		_, id := write(t, e, "set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": strings.Repeat("x", i+1)}))
		ids = append(ids, id)
	}
	slices.Reverse(ids)
	var got []string
	cursor := ""
	for range 3 {
		args := map[string]any{"roleId": roleID, "limit": 2}
		if cursor != "" {
			args["cursor"] = cursor
		}
		res := e.call("list_revisions", jsonArg(t, args))
		out := structured(t, res).(map[string]any)
		for _, r := range out["revisions"].([]any) {
			got = append(got, r.(map[string]any)["revisionId"].(string))
		}
		cursor, _ = out["nextCursor"].(string)
		// Paged like the other lists: how many in all and here, and how to go on, in both.
		if num(out, "total") != 5 || num(out, "count") != int64(len(out["revisions"].([]any))) {
			t.Errorf("page counts: %v", out)
		}
		if cursor != "" && (!strings.Contains(str(out, "next"), "cursor set to nextCursor") || !strings.Contains(firstText(res), "This page shows 2 of 5 revisions")) {
			t.Errorf("a page does not say how to go on: %v / %s", out, firstText(res))
		}
		if cursor == "" {
			break
		}
	}
	if !slices.Equal(got, ids) {
		t.Errorf("pages %v, want %v (newest first)", got, ids)
	}
}

// TestRestoreAsksNothing: restore_revision asks no confirmation, even of a client that would
// decline every question; its result names the revision that undoes it, and restoring that one
// brings the write back.
func TestRestoreAsksNothing(t *testing.T) {
	t.Parallel()
	for _, modern := range []bool{false, true} {
		t.Run(map[bool]string{false: "2025-11-25", true: "2026-07-28"}[modern], func(t *testing.T) {
			t.Parallel()
			a := &answerer{res: &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}}
			e, _ := newTavernEnv(t, tavernEnvConfig{elicit: a, modern: modern})
			roleID := e.ok("create_card", `{"roleName":"Asked"}`)["roleId"].(string)
			e.ok("set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "Before."}))
			before := state(t, e, revisions.KindCard, roleID)
			_, revID := write(t, e, "set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "After."}))
			after := state(t, e, revisions.KindCard, roleID)
			_, undoID := write(t, e, "restore_revision", jsonArg(t, map[string]any{"revisionId": revID}))
			if got := state(t, e, revisions.KindCard, roleID); !reflect.DeepEqual(got, before) {
				t.Errorf("the restore did not bring the card back: %v", got)
			}
			write(t, e, "restore_revision", jsonArg(t, map[string]any{"revisionId": undoID}))
			if got := state(t, e, revisions.KindCard, roleID); !reflect.DeepEqual(got, after) {
				t.Errorf("restoring the restore's revision did not undo it: %v", got)
			}
			if len(a.questions) != 0 {
				t.Errorf("restore_revision asked: %v", a.questions)
			}
		})
	}
}

// brokenKV is a store that takes no writes.
type brokenKV struct{ store.KV }

func (brokenKV) Set(context.Context, string, []byte, time.Duration) error {
	return &store.UnavailableError{Backend: "test", Err: errors.New("down")}
}

// TestRevisionNotKept: a write whose revision cannot be kept is not sent, and says why.
func TestRevisionNotKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{Revisions: revisions.New(brokenKV{store.NewMemory()}, revisions.DefaultRetention())})
	roleID := e.ok("create_card", `{"roleName":"Safe"}`)["roleId"].(string)
	env, _ := e.fail("set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "Bye.", "alternates": []string{}}))
	if env["error"] != codeRevisionNotKept || !strings.Contains(env["message"].(string), "Nothing was written") {
		t.Errorf("%v", env)
	}
	if card := e.ok("get_card", jsonArg(t, map[string]any{"roleId": roleID})); card["roleWelcome"] != "" {
		t.Errorf("the write went out: %v", card["roleWelcome"])
	}
}

// TestRevisionsOff: a retention of none serves no revisions tools and keeps nothing.
func TestRevisionsOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{Revisions: revisions.New(store.NewMemory(), revisions.Retention{})})
	if names := e.toolNames(); slices.Contains(names, "restore_revision") || slices.Contains(names, "list_revisions") {
		t.Errorf("revisions tools served: %v", names)
	}
	roleID := e.ok("create_card", `{"roleName":"Off"}`)["roleId"].(string)
	if out := e.ok("set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "Hi."})); out["revision"] != nil {
		t.Errorf("a revision with revisions off: %v", out)
	}
}

// TestRevisionTrialUnknown: a trial card this server did not write is kept as its digests only;
// the result says so, and restore_revision says plainly it cannot bring the text back.
func TestRevisionTrialUnknown(t *testing.T) {
	t.Parallel()
	a := newEnv(t, Options{})
	a.ok("upsert_trial_card", `{"clientKey":"elsewhere","card":{"roleName":"Written elsewhere"}}`)
	b, _ := newTavernEnv(t, tavernEnvConfig{svc: a.svc})
	out, revID := write(t, b, "upsert_trial_card", `{"clientKey":"elsewhere","card":{"roleName":"Mine now"}}`)
	if note, _ := out["revision"].(map[string]any)["notKept"].(string); !strings.Contains(note, "did not write") {
		t.Errorf("notKept: %v", out["revision"])
	}
	if env, _ := b.fail("restore_revision", jsonArg(t, map[string]any{"revisionId": revID})); env["error"] != codeNotRestorable || !strings.Contains(env["message"].(string), "cannot bring its text back") {
		t.Errorf("%v", env)
	}
}

// goneCards answers every card request with role_not_found once gone is set: a card deleted
// in the service's own editor.
type goneCards struct {
	next http.RoundTripper
	gone atomic.Bool
}

func (g *goneCards) RoundTrip(r *http.Request) (*http.Response, error) {
	if g.gone.Load() && strings.HasPrefix(r.URL.Path, "/open/v1/role") {
		return &http.Response{StatusCode: http.StatusNotFound, Header: http.Header{"Content-Type": {"application/json"}}, Request: r,
			Body: io.NopCloser(strings.NewReader(`{"error":"role_not_found","message":"The card does not exist.","retryable":false}`))}, nil
	}
	return g.next.RoundTrip(r)
}

// TestRevisionDeletedCard: a revision of a card that is gone says so plainly.
func TestRevisionDeletedCard(t *testing.T) {
	t.Parallel()
	g := &goneCards{}
	e, _ := newTavernEnv(t, tavernEnvConfig{wrap: func(rt http.RoundTripper) http.RoundTripper { g.next = rt; return g }})
	roleID := e.ok("create_card", `{"roleName":"Doomed"}`)["roleId"].(string)
	_, revID := write(t, e, "set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "Hi."}))
	g.gone.Store(true)
	if env, _ := e.fail("restore_revision", jsonArg(t, map[string]any{"revisionId": revID})); env["error"] != codeNotRestorable || !strings.Contains(env["message"].(string), "no longer exists") {
		t.Errorf("%v", env)
	}
}
