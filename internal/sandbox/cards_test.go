package sandbox_test

import (
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
)

var sectionKeys = []string{"description", "personality", "scenario", "exampleDialogue", "systemPrompt",
	"postHistoryInstructions", "creatorNotes"}

func TestCreateCardDefaults(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	c := inProcess(t, newService(t, sandbox.Options{Clock: clock.Now}))
	created := c.call("POST", "/role", map[string]any{"roleName": "Mira", "language": "en", "cardType": "character",
		"contentRatingIntent": "general"}, http.StatusCreated)
	id, _ := created["roleId"].(string)
	if len(id) < 3 || id[:2] != "r_" || created["roleVisibility"] != "private" || created["reviewStatus"] != "draft" {
		t.Fatalf("created %v", created)
	}
	card := c.call("GET", "/role/detail?roleId="+id, nil, http.StatusOK)
	want := map[string]any{
		"roleId": id, "roleName": "Mira", "roleDesc": "", "roleWelcome": "", "welcomeAlternates": []any{},
		"prologue": []any{}, "roleVisibility": "private", "reviewStatus": "draft", "tags": []any{},
		"language": "en", "cardType": "character", "contentRatingIntent": "general", "avatarImageId": "",
		"backgroundImageId": "", "lastUpdateTime": clock.Now().Format(time.RFC3339),
	}
	sections := map[string]any{}
	for _, k := range sectionKeys {
		sections[k] = ""
	}
	want["sections"] = sections
	if !reflect.DeepEqual(card, want) {
		t.Fatalf("card\n got %v\nwant %v", card, want)
	}
	c.fail("GET", "/role/detail?roleId=r_missing", nil, http.StatusNotFound, "role_not_found")
}

func TestCreateCardIdempotency(t *testing.T) {
	t.Parallel()
	svc := newService(t, sandbox.Options{})
	c := inProcess(t, svc)
	body := map[string]any{"roleName": "Mira", "idempotencyKey": "k1"}
	first := c.call("POST", "/role", body, http.StatusCreated)
	// Same body (other key order and spacing): a replay.
	replay := c.call("POST", "/role", `{ "idempotencyKey": "k1", "roleName": "Mira" }`, http.StatusOK)
	if replay["roleId"] != first["roleId"] {
		t.Fatalf("replay %v, first %v", replay, first)
	}
	// The replay reports the card's current state.
	id := first["roleId"].(string)
	c.call("PATCH", "/role/"+id+"/welcome", map[string]any{"roleWelcome": "Hi"}, http.StatusOK)
	c.call("POST", "/role/"+id+"/document", map[string]any{"sections": map[string]any{"description": "d"}}, http.StatusOK)
	c.call("POST", "/role/"+id+"/publish", map[string]any{}, http.StatusOK)
	if got := c.call("POST", "/role", body, http.StatusOK); got["reviewStatus"] != "pending" {
		t.Fatalf("replay after publish %v", got)
	}
	// Same key, different body.
	obj := c.fail("POST", "/role", map[string]any{"roleName": "Other", "idempotencyKey": "k1"}, http.StatusConflict, "conflict")
	if detail(t, obj)["field"] != "idempotencyKey" {
		t.Fatalf("detail %v", obj["detail"])
	}
	// No key: always a new card.
	a := c.call("POST", "/role", map[string]any{"roleName": "Mira"}, http.StatusCreated)
	b := c.call("POST", "/role", map[string]any{"roleName": "Mira"}, http.StatusCreated)
	if a["roleId"] == b["roleId"] {
		t.Fatal("two creates without a key made one card")
	}
	// Keys are scoped per user.
	other := c.as("other-token")
	svc.AddUser("other-token", "Other")
	if got := other.call("POST", "/role", body, http.StatusCreated); got["roleId"] == first["roleId"] {
		t.Fatal("another user's key replayed")
	}
}

func TestOpeningLines(t *testing.T) {
	t.Parallel()
	c := inProcess(t, newService(t, sandbox.Options{}))
	id := c.newCard("Mira")
	get := func() map[string]any { return c.call("GET", "/role/detail?roleId="+id, nil, http.StatusOK) }
	steps := []struct {
		name      string
		body      map[string]any
		welcome   string
		alts, pro []string
	}{
		{"set all", map[string]any{"roleWelcome": "Hello", "alternates": []string{"A", "B"}, "prologue": []string{"P"}}, "Hello", []string{"A", "B"}, []string{"P"}},
		{"omitted keeps", map[string]any{"roleWelcome": "Hi"}, "Hi", []string{"A", "B"}, []string{"P"}},
		{"replace", map[string]any{"roleWelcome": "Hi", "alternates": []string{"C"}}, "Hi", []string{"C"}, []string{"P"}},
		{"[] clears", map[string]any{"roleWelcome": "", "alternates": []string{}, "prologue": []string{}}, "", []string{}, []string{}},
	}
	for _, st := range steps {
		got := c.call("PATCH", "/role/"+id+"/welcome", st.body, http.StatusOK)
		if got["roleId"] != id || got["ok"] != true {
			t.Fatalf("%s: %v", st.name, got)
		}
		card := get()
		if card["roleWelcome"] != st.welcome || !slices.Equal(strs(card["welcomeAlternates"]), st.alts) ||
			!slices.Equal(strs(card["prologue"]), st.pro) {
			t.Fatalf("%s: card %v", st.name, card)
		}
	}
	c.fail("PATCH", "/role/r_missing/welcome", map[string]any{"roleWelcome": "x"}, http.StatusNotFound, "role_not_found")
	c.fail("PATCH", "/role/"+id+"/welcome", map[string]any{"alternates": []string{}}, http.StatusBadRequest, "invalid_request")
}

func TestUpdateCardProfile(t *testing.T) {
	t.Parallel()
	svc := newService(t, sandbox.Options{})
	c := inProcess(t, svc)
	id := c.newCard("Mira")
	got := c.call("PATCH", "/role/"+id, map[string]any{"roleDesc": "A pilot.", "tags": []string{"scifi"}}, http.StatusOK)
	if got["roleName"] != "Mira" || got["roleDesc"] != "A pilot." || !slices.Equal(strs(got["tags"]), []string{"scifi"}) {
		t.Fatalf("profile %v", got)
	}
	got = c.call("PATCH", "/role/"+id, map[string]any{"roleName": "Mira Vale", "language": "fr", "contentRatingIntent": "teen"}, http.StatusOK)
	if got["roleName"] != "Mira Vale" || got["roleDesc"] != "A pilot." || got["language"] != "fr" ||
		got["contentRatingIntent"] != "teen" || len(strs(got["tags"])) != 1 {
		t.Fatalf("merge %v", got)
	}
	avatar := c.upload(id, "avatar", "image/png", pngBytes(t, 4, 4))
	background := c.upload("", "background", "image/png", pngBytes(t, 8, 2))
	got = c.call("PATCH", "/role/"+id, map[string]any{"avatarImageId": avatar, "backgroundImageId": background}, http.StatusOK)
	if got["avatarImageId"] != avatar || got["backgroundImageId"] != background {
		t.Fatalf("images %v", got)
	}
	// Wrong purpose, unknown image, another user's image: 400 naming the field, nothing applied.
	svc.AddUser("other", "Other")
	foreign := c.as("other").upload("", "avatar", "image/png", pngBytes(t, 1, 1))
	for _, tt := range []struct{ field, id string }{
		{"avatarImageId", background}, {"backgroundImageId", avatar}, {"avatarImageId", "img_nope"}, {"avatarImageId", foreign},
	} {
		obj := c.fail("PATCH", "/role/"+id, map[string]any{tt.field: tt.id, "roleDesc": "changed"}, http.StatusBadRequest, "invalid_request")
		if detail(t, obj)["field"] != tt.field {
			t.Fatalf("detail %v", obj["detail"])
		}
	}
	got = c.call("PATCH", "/role/"+id, map[string]any{"avatarImageId": "", "tags": []string{}}, http.StatusOK)
	if got["avatarImageId"] != "" || got["backgroundImageId"] != background || got["roleDesc"] != "A pilot." || len(strs(got["tags"])) != 0 {
		t.Fatalf("clear %v", got)
	}
	c.fail("PATCH", "/role/"+id, map[string]any{"roleName": ""}, http.StatusBadRequest, "invalid_request")
	c.fail("PATCH", "/role/"+id, map[string]any{"cardType": "x"}, http.StatusBadRequest, "invalid_request")
	c.fail("PATCH", "/role/r_missing", map[string]any{}, http.StatusNotFound, "role_not_found")
}

func TestWriteCardDocument(t *testing.T) {
	t.Parallel()
	c := inProcess(t, newService(t, sandbox.Options{}))
	id := c.newCard("Mira")
	sections := func() map[string]any {
		return c.call("GET", "/role/detail?roleId="+id, nil, http.StatusOK)["sections"].(map[string]any)
	}
	got := c.call("POST", "/role/"+id+"/document", map[string]any{"sections": map[string]any{
		"description": "D", "personality": "P", "scenario": "S"}}, http.StatusOK)
	if got["roleId"] != id || got["ok"] != true {
		t.Fatalf("saved %v", got)
	}
	c.call("POST", "/role/"+id+"/document", map[string]any{"sections": map[string]any{"personality": "", "creatorNotes": "N"}}, http.StatusOK)
	want := map[string]any{"description": "D", "personality": "", "scenario": "S", "exampleDialogue": "",
		"systemPrompt": "", "postHistoryInstructions": "", "creatorNotes": "N"}
	if s := sections(); !reflect.DeepEqual(s, want) {
		t.Fatalf("sections %v, want %v", s, want)
	}
	c.fail("POST", "/role/"+id+"/document", map[string]any{"sections": map[string]any{"lore": "x"}}, http.StatusBadRequest, "invalid_request")
	c.fail("POST", "/role/"+id+"/document", map[string]any{}, http.StatusBadRequest, "invalid_request")
	c.fail("POST", "/role/r_missing/document", map[string]any{"sections": map[string]any{}}, http.StatusNotFound, "role_not_found")
}

func TestSetCardVisibility(t *testing.T) {
	t.Parallel()
	c := inProcess(t, newService(t, sandbox.Options{}))
	id := c.newCard("Mira")
	got := c.call("POST", "/role/"+id+"/visibility", map[string]any{"visibility": "private"}, http.StatusOK)
	if got["roleId"] != id || got["roleVisibility"] != "private" {
		t.Fatalf("visibility %v", got)
	}
	c.fail("POST", "/role/r_missing/visibility", map[string]any{"visibility": "private"}, http.StatusNotFound, "role_not_found")
}

func TestValidateAndPublish(t *testing.T) {
	t.Parallel()
	c := inProcess(t, newService(t, sandbox.Options{}))
	id := c.newCard("Mira")
	report := c.call("GET", "/role/validate?roleId="+id, nil, http.StatusOK)
	if report["roleId"] != id || report["ready"] != false {
		t.Fatalf("report %v", report)
	}
	type issue struct{ field, severity string }
	issuesOf := func(list any) []issue {
		var out []issue
		for _, x := range list.([]any) {
			m := x.(map[string]any)
			if m["message"] == "" {
				t.Fatalf("issue without message %v", m)
			}
			out = append(out, issue{m["field"].(string), m["severity"].(string)})
		}
		return out
	}
	wantAll := []issue{{"roleWelcome", "error"}, {"sections.description", "error"}, {"roleDesc", "warning"},
		{"avatarImageId", "warning"}, {"prologue", "warning"}, {"tags", "warning"}}
	if got := issuesOf(report["issues"]); !slices.Equal(got, wantAll) {
		t.Fatalf("issues %v", got)
	}
	obj := c.fail("POST", "/role/"+id+"/publish", map[string]any{}, http.StatusUnprocessableEntity, "validation_failed")
	if got := issuesOf(detail(t, obj)["issues"]); !slices.Equal(got, wantAll[:2]) {
		t.Fatalf("publish issues %v", got)
	}
	c.call("PATCH", "/role/"+id+"/welcome", map[string]any{"roleWelcome": "Hello"}, http.StatusOK)
	obj = c.fail("POST", "/role/"+id+"/publish", map[string]any{}, http.StatusUnprocessableEntity, "validation_failed")
	if got := issuesOf(detail(t, obj)["issues"]); !slices.Equal(got, wantAll[1:2]) {
		t.Fatalf("publish issues %v", got)
	}
	c.call("POST", "/role/"+id+"/document", map[string]any{"sections": map[string]any{"description": "D"}}, http.StatusOK)
	report = c.call("GET", "/role/validate?roleId="+id, nil, http.StatusOK)
	if report["ready"] != true || len(issuesOf(report["issues"])) != 4 {
		t.Fatalf("report %v", report)
	}
	got := c.call("POST", "/role/"+id+"/publish", map[string]any{}, http.StatusOK)
	if got["roleId"] != id || got["reviewStatus"] != "pending" {
		t.Fatalf("publish %v", got)
	}
	c.fail("POST", "/role/"+id+"/publish", map[string]any{}, http.StatusConflict, "conflict")
	if card := c.call("GET", "/role/detail?roleId="+id, nil, http.StatusOK); card["reviewStatus"] != "pending" {
		t.Fatalf("card %v", card)
	}
	c.fail("POST", "/role/"+id+"/publish", map[string]any{"force": true}, http.StatusBadRequest, "invalid_request")
	c.fail("POST", "/role/r_missing/publish", map[string]any{}, http.StatusNotFound, "role_not_found")
	c.fail("GET", "/role/validate?roleId=r_missing", nil, http.StatusNotFound, "role_not_found")
}
