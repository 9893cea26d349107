package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
)

// writeWatch sees every request to the card service: it counts the writes (any method but GET)
// and, once armed, refuses the nth writeWorldbookDocument from then on, or rewrites its answer.
type writeWatch struct {
	writes atomic.Int64

	mu      sync.Mutex
	failAt  int                 // refuse the failAt-th worldbook document write after arming; 0: none
	docs    int                 // worldbook document writes since arming
	rewrite func([]byte) []byte // rewrites the answers of worldbook document writes; nil: none
}

func (w *writeWatch) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodGet {
			return next.RoundTrip(r)
		}
		w.writes.Add(1)
		w.mu.Lock()
		doc := strings.HasSuffix(r.URL.Path, "/document") && strings.Contains(r.URL.Path, "/worldbook/")
		if doc {
			w.docs++
		}
		refuse, rewrite := doc && w.failAt > 0 && w.docs == w.failAt, w.rewrite
		w.mu.Unlock()
		if refuse {
			return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/json"}}, Request: r,
				Body: io.NopCloser(strings.NewReader(`{"error":"injected_fault","message":"A fault the test injected."}`))}, nil
		}
		res, err := next.RoundTrip(r)
		if err != nil || !doc || rewrite == nil {
			return res, err
		}
		body, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err != nil {
			return nil, err
		}
		body = rewrite(body)
		res.Body = io.NopCloser(bytes.NewReader(body))
		res.ContentLength = int64(len(body))
		res.Header.Del("Content-Length")
		return res, nil
	})
}

// arm starts counting worldbook document writes anew, refusing the failAt-th.
func (w *writeWatch) arm(failAt int, rewrite func([]byte) []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failAt, w.docs, w.rewrite = failAt, 0, rewrite
}

func newWatchedEnv(t *testing.T) (*env, *writeWatch) {
	t.Helper()
	w := &writeWatch{}
	e, _ := newTavernEnv(t, tavernEnvConfig{wrap: w.wrap})
	return e, w
}

// stale calls tool expecting a stale_write refusal that sent nothing, and returns its detail.
func staleWrite(t *testing.T, e *env, w *writeWatch, tool, args string) map[string]any {
	t.Helper()
	before := w.writes.Load()
	env, msg := e.fail(tool, args)
	if env["error"] != codeStaleWrite {
		t.Fatalf("%s: %v, want stale_write", tool, env)
	}
	if n := w.writes.Load() - before; n != 0 {
		t.Errorf("%s: a stale write sent %d writes to the card service", tool, n)
	}
	if !strings.Contains(msg, "Nothing was written") {
		t.Errorf("%s: message %q", tool, msg)
	}
	return env["detail"].(map[string]any)
}

// entryVersions returns the version of each entry of a worldbook, by name.
func entryVersions(t *testing.T, e *env, wbID string) (versions, ids map[string]string) {
	t.Helper()
	versions, ids = map[string]string{}, map[string]string{}
	for _, en := range e.ok("list_worldbook_entries", jsonArg(t, map[string]any{"worldbookId": wbID}))["entries"].([]any) {
		m := en.(map[string]any)
		versions[m["name"].(string)] = m["version"].(string)
		ids[m["name"].(string)] = m["entryId"].(string)
	}
	return versions, ids
}

// TestStaleWriteRefused: a write whose ifVersion names a state its object has left is refused
// with stale_write before anything is sent, naming what changed and the version now; a
// worldbook's entries and metadata have versions of their own, so writers of different entries
// do not conflict.
func TestStaleWriteRefused(t *testing.T) {
	t.Parallel()
	t.Run("card", func(t *testing.T) {
		t.Parallel()
		e, w := newWatchedEnv(t)
		roleID := e.ok("create_card", `{"roleName":"Stale"}`)["roleId"].(string)
		read := e.ok("get_card", jsonArg(t, map[string]any{"roleId": roleID}))
		v := read["version"].(string)
		if again := e.ok("get_card", jsonArg(t, map[string]any{"roleId": roleID}))["version"]; again != v {
			t.Fatalf("two reads of one state: versions %v and %v", v, again)
		}
		// Another assistant writes the greeting and a section.
		e.ok("set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "Theirs."}))
		e.ok("write_card_document", jsonArg(t, map[string]any{"roleId": roleID, "sections": map[string]any{"scenario": "Theirs."}}))
		now := e.ok("get_card", jsonArg(t, map[string]any{"roleId": roleID}))
		d := staleWrite(t, e, w, "update_card_profile", jsonArg(t, map[string]any{"roleId": roleID, "roleDesc": "Mine.", "ifVersion": v}))
		if got := fmt.Sprint(d["fields"]); got != "[roleWelcome sections.scenario]" || d["version"] != now["version"] {
			t.Errorf("stale detail %v; want fields roleWelcome, sections.scenario and version %v", d, now["version"])
		}
		if after := e.ok("get_card", jsonArg(t, map[string]any{"roleId": roleID})); after["roleDesc"] == "Mine." {
			t.Error("the stale write was applied")
		}
		// A restore takes ifVersion too.
		_, revID := write(t, e, "update_card_profile", jsonArg(t, map[string]any{"roleId": roleID, "roleName": "Renamed"}))
		d = staleWrite(t, e, w, "restore_revision", jsonArg(t, map[string]any{"revisionId": revID, "ifVersion": now["version"]}))
		if fmt.Sprint(d["fields"]) != "[roleName]" {
			t.Errorf("stale restore: %v", d)
		}
		now = e.ok("get_card", jsonArg(t, map[string]any{"roleId": roleID}))
		// With the version now, it goes through.
		e.ok("update_card_profile", jsonArg(t, map[string]any{"roleId": roleID, "roleDesc": "Mine.", "ifVersion": now["version"]}))
		if env, _ := e.fail("set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "x", "ifVersion": "not-a-version"})); env["error"] != codeInvalidArguments {
			t.Errorf("a malformed ifVersion: %v", env)
		}
	})
	t.Run("worldbook", func(t *testing.T) {
		t.Parallel()
		e, w := newWatchedEnv(t)
		wbID := e.ok("create_worldbook", `{"name":"Stale"}`)["worldbookId"].(string)
		e.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "entries": []any{
			map[string]any{"op": "create", "name": "A", "content": "a", "keywords": []string{"a"}},
			map[string]any{"op": "create", "name": "B", "content": "b", "keywords": []string{"b"}},
			map[string]any{"op": "create", "name": "C", "content": "c", "keywords": []string{"c"}},
		}}))
		meta := e.ok("get_worldbook", jsonArg(t, map[string]any{"worldbookId": wbID}))["version"].(string)
		versions, ids := entryVersions(t, e, wbID)
		// Two assistants, each writing its own entry from the same read: no conflict.
		e.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "ifVersion": meta, "entries": []any{
			map[string]any{"op": "update", "entryId": ids["A"], "content": "first", "ifVersion": versions["A"]}}}))
		e.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "ifVersion": meta, "entries": []any{
			map[string]any{"op": "update", "entryId": ids["B"], "content": "second", "ifVersion": versions["B"]}}}))
		// The second then writes the first's entry, and deletes another deleted meanwhile: refused, naming both.
		e.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "entries": []any{
			map[string]any{"op": "delete", "entryId": ids["C"]}}}))
		d := staleWrite(t, e, w, "write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "entries": []any{
			map[string]any{"op": "update", "entryId": ids["A"], "content": "mine", "ifVersion": versions["A"]},
			map[string]any{"op": "delete", "entryId": ids["C"], "ifVersion": versions["C"]}}}))
		got := fmt.Sprint(d["entries"])
		if !strings.Contains(got, ids["A"]) || !strings.Contains(got, "changed") || !strings.Contains(got, ids["C"]) || !strings.Contains(got, "deleted") || d["fields"] != nil {
			t.Errorf("stale entries: %v", d)
		}
		// The metadata's version: a rename since is named.
		e.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "metadata": map[string]any{"name": "Renamed"}}))
		d = staleWrite(t, e, w, "write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "ifVersion": meta,
			"metadata": map[string]any{"description": "Mine."}}))
		if fmt.Sprint(d["fields"]) != "[name]" {
			t.Errorf("stale metadata: %v", d)
		}
	})
	t.Run("trial", func(t *testing.T) {
		t.Parallel()
		e, w := newWatchedEnv(t)
		e.ok("upsert_trial_card", `{"clientKey":"stale","card":{"roleName":"One"}}`)
		v := e.ok("get_trial_card", `{"clientKey":"stale"}`)["version"].(string)
		e.ok("upsert_trial_card", `{"clientKey":"stale","card":{"roleName":"Two"}}`)
		d := staleWrite(t, e, w, "delete_trial_card", jsonArg(t, map[string]any{"clientKey": "stale", "ifVersion": v}))
		if fmt.Sprint(d["fields"]) != "[roleName]" {
			t.Errorf("stale trial: %v", d)
		}
		staleWrite(t, e, w, "upsert_trial_card", jsonArg(t, map[string]any{"clientKey": "stale", "card": map[string]any{"roleName": "Three"}, "ifVersion": v}))
	})
}

// TestDryRunSendsNothing: every write with dryRun true answers with the change it would make
// (diff_revision's shape) and sends nothing: no write reaches the card service, no revision is
// kept, the object stays as it was.
func TestDryRunSendsNothing(t *testing.T) {
	t.Parallel()
	e, w := newWatchedEnv(t)
	roleID := e.ok("create_card", `{"roleName":"Dry"}`)["roleId"].(string)
	e.ok("set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "Before."}))
	wbID := e.ok("create_worldbook", `{"name":"Dry"}`)["worldbookId"].(string)
	e.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "entries": []any{
		map[string]any{"op": "create", "name": "A", "content": "old text", "keywords": []string{"a"}}}}))
	_, ids := entryVersions(t, e, wbID)
	_, revID := write(t, e, "set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "After."}))
	e.ok("upsert_trial_card", `{"clientKey":"dry","card":{"roleName":"One"}}`)
	tests := []struct {
		tool, args string
		kind, id   string
		want       string // in the change's JSON
	}{
		{"set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "Planned.", "dryRun": true}), revisions.KindCard, roleID,
			`{"after":"Planned.","current":"After.","field":"roleWelcome"}`},
		{"update_card_profile", jsonArg(t, map[string]any{"roleId": roleID, "roleName": "Planned", "dryRun": true}), revisions.KindCard, roleID,
			`{"after":"Planned","current":"Dry","field":"roleName"}`},
		{"write_card_document", jsonArg(t, map[string]any{"roleId": roleID, "sections": map[string]any{"scenario": "Planned."}, "dryRun": true}), revisions.KindCard, roleID,
			`"field":"sections.scenario"`},
		{"set_card_visibility", jsonArg(t, map[string]any{"roleId": roleID, "visibility": "private", "dryRun": true}), revisions.KindCard, roleID, `"same":true`},
		{"write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "dryRun": true, "metadata": map[string]any{"name": "Planned"},
			"entries": []any{map[string]any{"op": "update", "entryId": ids["A"], "content": "new text"},
				map[string]any{"op": "create", "name": "B", "content": "b", "keywords": []string{"b"}}}}), revisions.KindWorldbook, wbID,
			`"changes":[{"after":"new text","current":"old text","field":"content"}]`},
		{"upsert_trial_card", `{"clientKey":"dry","card":{"roleName":"Two"},"dryRun":true}`, revisions.KindTrial, "dry", `{"field":"roleName"}`},
		{"delete_trial_card", `{"clientKey":"dry","dryRun":true}`, revisions.KindTrial, "dry", "would be deleted"},
		{"restore_revision", jsonArg(t, map[string]any{"revisionId": revID, "dryRun": true}), revisions.KindCard, roleID,
			`{"after":"Before.","current":"After.","field":"roleWelcome"}`},
	}
	for _, tt := range tests {
		before := state(t, e, tt.kind, tt.id)
		revs := len(e.ok("list_revisions", "{}")["revisions"].([]any))
		writes := w.writes.Load()
		res := e.call(tt.tool, tt.args)
		if res.IsError {
			t.Fatalf("%s: %s", tt.tool, text(res))
		}
		out := structured(t, res).(map[string]any)
		change, _ := json.Marshal(out["change"])
		if out["dryRun"] != true || !strings.Contains(string(change), tt.want) {
			t.Errorf("%s: dry run %v; want a change holding %s", tt.tool, string(change), tt.want)
		}
		if !strings.Contains(firstText(res), "nothing was sent") {
			t.Errorf("%s: summary %q", tt.tool, firstText(res))
		}
		if n := w.writes.Load() - writes; n != 0 {
			t.Errorf("%s: a dry run sent %d writes", tt.tool, n)
		}
		if got := state(t, e, tt.kind, tt.id); !reflect.DeepEqual(got, before) {
			t.Errorf("%s: a dry run changed %s %s: %v", tt.tool, tt.kind, tt.id, got)
		}
		if n := len(e.ok("list_revisions", "{}")["revisions"].([]any)); n != revs {
			t.Errorf("%s: a dry run kept a revision (%d, then %d)", tt.tool, revs, n)
		}
	}
}

// TestRestorePartial: a restore of a worldbook that needs two documents and fails on the
// second says what it applied and what remains; calling it again finishes it, and the
// worldbook is then, in full, what the revision kept.
func TestRestorePartial(t *testing.T) {
	t.Parallel()
	e, w := newWatchedEnv(t)
	wbID := e.ok("create_worldbook", `{"name":"Partial"}`)["worldbookId"].(string)
	ops := func(from, n int) []any {
		var out []any
		for i := from; i < from+n; i++ {
			out = append(out, map[string]any{"op": "create", "name": fmt.Sprintf("E%03d", i), "content": fmt.Sprintf("Entry %d.", i),
				"keywords": []string{fmt.Sprintf("k%d", i)}, "isEnabled": i%3 != 0})
		}
		return out
	}
	e.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "entries": ops(0, 100)}))
	kept := state(t, e, revisions.KindWorldbook, wbID)
	_, revID := write(t, e, "write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "entries": ops(100, 450)}))
	e.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "entries": ops(550, 100)}))

	w.arm(2, nil) // the restore deletes 550 entries: two documents; the second is refused
	env, msg := e.fail("restore_revision", jsonArg(t, map[string]any{"revisionId": revID}))
	d, _ := env["detail"].(map[string]any)
	if env["error"] != "restore_incomplete" || env["retryable"] != true || fmt.Sprint(d["applied"]) != "[500 entries deleted]" ||
		fmt.Sprint(d["remaining"]) != "[50 entries deleted]" || d["cause"] != "injected_fault" || d["undoRevisionId"] == nil {
		t.Fatalf("partial restore: %v", env)
	}
	if !strings.Contains(msg, "again") || !strings.Contains(msg, revID) {
		t.Errorf("message %q", msg)
	}
	if got := state(t, e, revisions.KindWorldbook, wbID); reflect.DeepEqual(got, kept) {
		t.Fatal("the fault applied nothing: the test does not test a partial restore")
	}
	w.arm(0, nil)
	e.ok("restore_revision", jsonArg(t, map[string]any{"revisionId": revID}))
	if got := state(t, e, revisions.KindWorldbook, wbID); !reflect.DeepEqual(got, kept) {
		t.Errorf("a second restore did not finish the first: %v", got)
	}
}

// TestRestoreFewerCreatedIDs: a service that names fewer created entries than the restore
// created does not break it: the result says so.
func TestRestoreFewerCreatedIDs(t *testing.T) {
	t.Parallel()
	e, w := newWatchedEnv(t)
	wbID := e.ok("create_worldbook", `{"name":"Short"}`)["worldbookId"].(string)
	e.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "entries": []any{
		map[string]any{"op": "create", "name": "A", "content": "a", "keywords": []string{"a"}},
		map[string]any{"op": "create", "name": "B", "content": "b", "keywords": []string{"b"}}}}))
	_, ids := entryVersions(t, e, wbID)
	_, revID := write(t, e, "write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "entries": []any{
		map[string]any{"op": "delete", "entryId": ids["A"]}, map[string]any{"op": "delete", "entryId": ids["B"]}}}))
	w.arm(0, func(body []byte) []byte {
		var m map[string]any
		if json.Unmarshal(body, &m) != nil {
			return body
		}
		if l, ok := m["createdEntryIds"].([]any); ok && len(l) > 0 {
			m["createdEntryIds"] = l[:1]
		}
		out, _ := json.Marshal(m)
		return out
	})
	out := e.ok("restore_revision", jsonArg(t, map[string]any{"revisionId": revID}))
	if len(out["createdEntryIds"].([]any)) != 1 || !slices.ContainsFunc(stringsOf(list(out, "notRestored")), func(s string) bool {
		return strings.Contains(s, "did not name")
	}) {
		t.Errorf("restore with fewer created ids: %v", out)
	}
}

// TestDiffShowsEntryText: diff_revision shows the old and new text of a changed entry, so that a
// model can tell the author what an undo brings back.
func TestDiffShowsEntryText(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	wbID := e.ok("create_worldbook", `{"name":"Diff"}`)["worldbookId"].(string)
	e.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "entries": []any{
		map[string]any{"op": "create", "name": "A", "content": "The old lore.", "keywords": []string{"a"}}}}))
	_, ids := entryVersions(t, e, wbID)
	_, revID := write(t, e, "write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "entries": []any{
		map[string]any{"op": "update", "entryId": ids["A"], "content": "The new lore.", "isEnabled": false}}}))
	out := e.ok("diff_revision", jsonArg(t, map[string]any{"revisionId": revID}))
	changed, _ := json.Marshal(obj(out, "entries")["changed"])
	want := `"changes":[{"current":"The new lore.","field":"content","revision":"The old lore."},{"current":false,"field":"isEnabled","revision":true}]`
	if !strings.Contains(string(changed), want) {
		t.Errorf("changed entries %s; want %s", changed, want)
	}
}
