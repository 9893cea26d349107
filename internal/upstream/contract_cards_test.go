package upstream_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// Contract tests of identity and card authoring: getMe, createCard, getCard, setOpeningLines,
// updateCardProfile, writeCardDocument, setCardVisibility, validateCard and publishCard.

func TestContractGetMe(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	second, secondID := e.user("Second Author")
	tests := []struct {
		name     string
		c        *upstream.Client
		userID   string
		nickname string
	}{
		{"demo user", e.c, "u_demo", "Demo Author"},
		{"added user", second, secondID, "Second Author"},
	}
	for _, tt := range tests {
		me, err := tt.c.GetMe(e.ctx)
		ctOK(t, "getMe", me, err)
		if me.UserID != tt.userID || me.Nickname != tt.nickname || !slices.Contains(me.Scopes, "mcp:card-writer") {
			t.Errorf("%s: getMe = %+v; want userId %q, nickname %q, scope mcp:card-writer", tt.name, me, tt.userID, tt.nickname)
		}
		if got := e.rec.last(t, "getMe").ReqHeader.Get("Authorization"); !strings.HasPrefix(got, "Bearer ct-") {
			t.Errorf("%s: Authorization %q; want the bearer token", tt.name, got)
		}
	}
}

func TestContractCreateCard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   upstream.CardCreateInput
	}{
		{"name only", upstream.CardCreateInput{RoleName: "Mira"}},
		{"every field", upstream.CardCreateInput{RoleName: "Mira <the> \"keeper\" & co", Language: "en",
			CardType: "character", ContentRatingIntent: "general", IdempotencyKey: "caller-key-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newCTEnv(t)
			before := e.clock.Now()
			out, key, err := e.c.CreateCard(e.ctx, tt.in)
			ctOK(t, "createCard", out, err)
			if out.RoleID == "" || out.RoleVisibility != "private" || out.ReviewStatus != "draft" {
				t.Errorf("createCard = %+v; want a new private draft card", out)
			}
			if tt.in.IdempotencyKey != "" && key != tt.in.IdempotencyKey {
				t.Errorf("key %q; want the caller's %q", key, tt.in.IdempotencyKey)
			}
			ex := e.rec.last(t, "createCard")
			if ex.Status != http.StatusCreated {
				t.Errorf("status %d; want 201 for a new card", ex.Status)
			}
			if sent := ctRaw(t, ex.ReqBody)["idempotencyKey"]; sent != key {
				t.Errorf("the request carried idempotencyKey %v; CreateCard returned %q", sent, key)
			}
			if tt.in.IdempotencyKey == "" && !strings.HasPrefix(key, "cw-") {
				t.Errorf("filled key %q; want a fresh cw-... key", key)
			}
			card, err := e.c.GetCard(e.ctx, out.RoleID)
			ctOK(t, "getCard", card, err)
			if card.RoleName != tt.in.RoleName || card.Language != tt.in.Language || card.CardType != tt.in.CardType ||
				card.ContentRatingIntent != tt.in.ContentRatingIntent || card.RoleVisibility != "private" || card.ReviewStatus != "draft" {
				t.Errorf("getCard = %+v; want the fields of %+v", card, tt.in)
			}
			if updated, err := time.Parse(time.RFC3339, card.LastUpdateTime); err != nil || !updated.Equal(before) {
				t.Errorf("lastUpdateTime %q; want the sandbox clock's %s", card.LastUpdateTime, before.Format(time.RFC3339))
			}
		})
	}
}

func TestContractCreateCardIdempotent(t *testing.T) {
	t.Parallel()

	t.Run("same key twice makes one card", func(t *testing.T) {
		t.Parallel()
		e := newCTEnv(t)
		in := upstream.CardCreateInput{RoleName: "Mira", Language: "en", IdempotencyKey: "same-key"}
		first, _, err := e.c.CreateCard(e.ctx, in)
		ctOK(t, "createCard", first, err)
		again, _, err := e.c.CreateCard(e.ctx, in)
		ctOK(t, "createCard", again, err)
		if again.RoleID != first.RoleID {
			t.Fatalf("the replay made card %s; want the first card %s", again.RoleID, first.RoleID)
		}
		if st := e.rec.last(t, "createCard").Status; st != http.StatusOK {
			t.Errorf("replay status %d; want 200 (the card it created)", st)
		}
		// A key the caller does not give is filled in, returned, and replays the same way.
		made, key, err := e.c.CreateCard(e.ctx, upstream.CardCreateInput{RoleName: "Nox"})
		ctOK(t, "createCard", made, err)
		replay, _, err := e.c.CreateCard(e.ctx, upstream.CardCreateInput{RoleName: "Nox", IdempotencyKey: key})
		ctOK(t, "createCard", replay, err)
		if replay.RoleID != made.RoleID || made.RoleID == first.RoleID {
			t.Errorf("replay with the returned key made %s; want %s", replay.RoleID, made.RoleID)
		}
	})

	t.Run("same key with another body is a conflict", func(t *testing.T) {
		t.Parallel()
		e := newCTEnv(t)
		first, _, err := e.c.CreateCard(e.ctx, upstream.CardCreateInput{RoleName: "Mira", IdempotencyKey: "k"})
		ctOK(t, "createCard", first, err)
		_, _, err = e.c.CreateCard(e.ctx, upstream.CardCreateInput{RoleName: "Other", IdempotencyKey: "k"})
		apiErr := ctWantErr(t, err, "createCard", http.StatusConflict, "conflict")
		if f := ctDetail(t, apiErr, "field"); f != "idempotencyKey" {
			t.Errorf("detail.field %v; want idempotencyKey", f)
		}
		if n := e.rec.count("createCard"); n != 2 {
			t.Errorf("%d createCard requests; a 409 must not be retried", n)
		}
	})

	t.Run("keys are per user", func(t *testing.T) {
		t.Parallel()
		e := newCTEnv(t)
		other, _ := e.user("Other")
		in := upstream.CardCreateInput{RoleName: "Mira", IdempotencyKey: "shared-key"}
		mine, _, err := e.c.CreateCard(e.ctx, in)
		ctOK(t, "createCard", mine, err)
		theirs, _, err := other.CreateCard(e.ctx, in)
		ctOK(t, "createCard", theirs, err)
		if theirs.RoleID == mine.RoleID || e.rec.last(t, "createCard").Status != http.StatusCreated {
			t.Errorf("another user's create with the same key returned %s; want a card of their own", theirs.RoleID)
		}
	})

	t.Run("a retry after a lost response makes no second card", func(t *testing.T) {
		t.Parallel()
		e := newCTEnv(t)
		dropped := 0
		e.rec.drop = func(ex ctExchange) bool {
			if ex.Op == "createCard" && dropped == 0 {
				dropped++
				return true
			}
			return false
		}
		out, key, err := e.c.CreateCard(e.ctx, upstream.CardCreateInput{RoleName: "Mira"})
		ctOK(t, "createCard", out, err)
		var attempts []ctExchange
		for _, ex := range e.rec.exchanges() {
			if ex.Op == "createCard" {
				attempts = append(attempts, ex)
			}
		}
		if len(attempts) != 2 || !attempts[0].Dropped || attempts[1].Dropped {
			t.Fatalf("createCard attempts %d; want the lost one and one retry", len(attempts))
		}
		lost := ctRaw(t, attempts[0].RespBody)
		if attempts[0].Status != http.StatusCreated || lost["roleId"] != out.RoleID {
			t.Errorf("the retry returned %s; the lost response (%d) had created %v", out.RoleID, attempts[0].Status, lost["roleId"])
		}
		if attempts[1].Status != http.StatusOK {
			t.Errorf("retry status %d; want 200, the replay of the card already created", attempts[1].Status)
		}
		for i, a := range attempts {
			if got := ctRaw(t, a.ReqBody)["idempotencyKey"]; got != key {
				t.Errorf("attempt %d carried idempotencyKey %v; want %q on every attempt", i+1, got, key)
			}
		}
	})

	t.Run("limits of the key", func(t *testing.T) {
		t.Parallel()
		e := newCTEnv(t)
		longest := strings.Repeat("k", 200)
		out, _, err := e.c.CreateCard(e.ctx, upstream.CardCreateInput{RoleName: "Mira", IdempotencyKey: longest})
		ctOK(t, "createCard", out, err)
		_, _, err = e.c.CreateCard(e.ctx, upstream.CardCreateInput{RoleName: "Mira", IdempotencyKey: longest + "k"})
		apiErr := ctWantErr(t, err, "createCard", http.StatusBadRequest, "invalid_request")
		if part := ctDetail(t, apiErr, "part"); part != "body" {
			t.Errorf("detail.part %v; want body", part)
		}
		_, _, err = e.c.CreateCard(e.ctx, upstream.CardCreateInput{RoleName: ""})
		ctWantErr(t, err, "createCard", http.StatusBadRequest, "invalid_request")
	})
}

func TestContractGetCard(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	roleID := e.card(t, e.c, "Mira")
	card, err := e.c.GetCard(e.ctx, roleID)
	ctOK(t, "getCard", card, err)
	raw := ctRaw(t, e.rec.last(t, "getCard").RespBody)
	for _, field := range []string{"welcomeAlternates", "prologue", "tags"} {
		if list, ok := raw[field].([]any); !ok || len(list) != 0 {
			t.Errorf("a new card's %s is %v; want []", field, raw[field])
		}
	}
	sections, _ := raw["sections"].(map[string]any)
	for _, name := range []string{"description", "personality", "scenario", "exampleDialogue", "systemPrompt", "postHistoryInstructions", "creatorNotes"} {
		if sections[name] != "" {
			t.Errorf("a new card's section %s is %v; want \"\"", name, sections[name])
		}
	}

	t.Run("not found envelope", func(t *testing.T) {
		for _, id := range []string{"r_missing", "tr_0123", "r with space"} {
			_, err := e.c.GetCard(e.ctx, id)
			ctWantErr(t, err, "getCard", http.StatusNotFound, "role_not_found")
			ex := e.rec.last(t, "getCard")
			if got := ex.Query.Get("roleId"); got != id {
				t.Errorf("query roleId %q; want %q", got, id)
			}
			env := ctRaw(t, ex.RespBody)
			if env["error"] != "role_not_found" || env["message"] == "" {
				t.Errorf("envelope %v; want error role_not_found and a message", env)
			}
		}
	})
}

func TestContractSetOpeningLines(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	roleID := e.card(t, e.c, "Mira")
	// Applied in order to one card: omitted keeps, [] clears, a list replaces the whole list.
	steps := []struct {
		name                 string
		in                   upstream.OpeningLinesInput
		sent                 map[string]bool // which optional keys the body carries
		welcome              string
		alternates, prologue []string
	}{
		{"set everything", upstream.OpeningLinesInput{RoleWelcome: "Hello.", Alternates: []string{"Hi.", "Hey."}, Prologue: []string{"Who are you?"}},
			map[string]bool{"alternates": true, "prologue": true}, "Hello.", []string{"Hi.", "Hey."}, []string{"Who are you?"}},
		{"omitted lists keep", upstream.OpeningLinesInput{RoleWelcome: "Welcome <in> & \"out\"."},
			map[string]bool{}, "Welcome <in> & \"out\".", []string{"Hi.", "Hey."}, []string{"Who are you?"}},
		{"a list replaces", upstream.OpeningLinesInput{RoleWelcome: "Hello.", Alternates: []string{"Yo."}},
			map[string]bool{"alternates": true}, "Hello.", []string{"Yo."}, []string{"Who are you?"}},
		{"[] clears alternates only", upstream.OpeningLinesInput{RoleWelcome: "Hello.", Alternates: []string{}},
			map[string]bool{"alternates": true}, "Hello.", []string{}, []string{"Who are you?"}},
		{"[] clears prologue only", upstream.OpeningLinesInput{RoleWelcome: "Hello.", Prologue: []string{}},
			map[string]bool{"prologue": true}, "Hello.", []string{}, []string{}},
		{"refill both", upstream.OpeningLinesInput{RoleWelcome: "Again.", Alternates: []string{"a", "b", "c"}, Prologue: []string{"x", "y"}},
			map[string]bool{"alternates": true, "prologue": true}, "Again.", []string{"a", "b", "c"}, []string{"x", "y"}},
		{"empty first message is stored", upstream.OpeningLinesInput{RoleWelcome: ""},
			map[string]bool{}, "", []string{"a", "b", "c"}, []string{"x", "y"}},
	}
	for _, st := range steps {
		saved, err := e.c.SetOpeningLines(e.ctx, roleID, st.in)
		ctOK(t, "setOpeningLines", saved, err)
		if saved.RoleID != roleID || !saved.OK {
			t.Errorf("%s: saved %+v", st.name, saved)
		}
		body := ctRaw(t, e.rec.last(t, "setOpeningLines").ReqBody)
		for _, key := range []string{"alternates", "prologue"} {
			if _, has := body[key]; has != st.sent[key] {
				t.Errorf("%s: the request has %s: %v; want %v", st.name, key, has, st.sent[key])
			}
		}
		card, err := e.c.GetCard(e.ctx, roleID)
		ctOK(t, "getCard", card, err)
		if card.RoleWelcome != st.welcome || !slices.Equal(card.WelcomeAlternates, st.alternates) || !slices.Equal(card.Prologue, st.prologue) {
			t.Errorf("%s: card has %q %q %q; want %q %q %q", st.name, card.RoleWelcome, card.WelcomeAlternates, card.Prologue,
				st.welcome, st.alternates, st.prologue)
		}
		raw := ctRaw(t, e.rec.last(t, "getCard").RespBody)
		if _, isList := raw["welcomeAlternates"].([]any); !isList {
			t.Errorf("%s: welcomeAlternates is %v; want an array", st.name, raw["welcomeAlternates"])
		}
	}
	_, err := e.c.SetOpeningLines(e.ctx, "r_missing", upstream.OpeningLinesInput{RoleWelcome: "Hi."})
	ctWantErr(t, err, "setOpeningLines", http.StatusNotFound, "role_not_found")
	// roleWelcome is required: a body without it is refused.
	err = e.c.Call(e.ctx, "setOpeningLines", map[string]string{"roleId": roleID}, json.RawMessage(`{"alternates":[]}`), nil)
	ctWantErr(t, err, "setOpeningLines", http.StatusBadRequest, "invalid_request")
}

func TestContractUpdateCardProfile(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	roleID := e.card(t, e.c, "Mira")
	avatar, err := e.c.UploadImage(e.ctx, upstream.ImageUploadInput{Purpose: "avatar", ContentType: "image/png", DataBase64: ctB64(ctPNG(t, 2, 2))})
	ctOK(t, "uploadImage", avatar, err)
	background, err := e.c.UploadImage(e.ctx, upstream.ImageUploadInput{Purpose: "background", ContentType: "image/png", DataBase64: ctB64(ctPNG(t, 4, 2))})
	ctOK(t, "uploadImage", background, err)

	type profile struct {
		name, desc, lang, rating, avatar, background string
		tags                                         []string
	}
	steps := []struct {
		name string
		in   upstream.CardProfileInput
		want profile
	}{
		{"description only keeps the name", upstream.CardProfileInput{RoleDesc: ctPtr("A lighthouse keeper.")},
			profile{name: "Mira", desc: "A lighthouse keeper.", tags: []string{}}},
		{"tags and language", upstream.CardProfileInput{Tags: []string{"sea", "mystery"}, Language: ctPtr("en")},
			profile{name: "Mira", desc: "A lighthouse keeper.", lang: "en", tags: []string{"sea", "mystery"}}},
		{"rename keeps the rest", upstream.CardProfileInput{RoleName: ctPtr("Mira Vale"), ContentRatingIntent: ctPtr("general")},
			profile{name: "Mira Vale", desc: "A lighthouse keeper.", lang: "en", rating: "general", tags: []string{"sea", "mystery"}}},
		{"tags replace", upstream.CardProfileInput{Tags: []string{"coast"}},
			profile{name: "Mira Vale", desc: "A lighthouse keeper.", lang: "en", rating: "general", tags: []string{"coast"}}},
		{"images", upstream.CardProfileInput{AvatarImageID: ctPtr(avatar.ImageID), BackgroundImageID: ctPtr(background.ImageID)},
			profile{"Mira Vale", "A lighthouse keeper.", "en", "general", avatar.ImageID, background.ImageID, []string{"coast"}}},
		{"[] clears tags, \"\" clears the avatar", upstream.CardProfileInput{Tags: []string{}, AvatarImageID: ctPtr("")},
			profile{name: "Mira Vale", desc: "A lighthouse keeper.", lang: "en", rating: "general", background: background.ImageID, tags: []string{}}},
		{"\"\" clears the description", upstream.CardProfileInput{RoleDesc: ctPtr("")},
			profile{name: "Mira Vale", lang: "en", rating: "general", background: background.ImageID, tags: []string{}}},
	}
	check := func(what string, c *upstream.Card, want profile) {
		t.Helper()
		got := profile{c.RoleName, c.RoleDesc, c.Language, c.ContentRatingIntent, c.AvatarImageID, c.BackgroundImageID, c.Tags}
		if got.name != want.name || got.desc != want.desc || got.lang != want.lang || got.rating != want.rating ||
			got.avatar != want.avatar || got.background != want.background || !slices.Equal(got.tags, want.tags) {
			t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
		}
	}
	for _, st := range steps {
		e.clock.Advance(time.Minute)
		card, err := e.c.UpdateCardProfile(e.ctx, roleID, st.in)
		ctOK(t, "updateCardProfile", card, err)
		check(st.name+" (returned card)", card, st.want)
		if card.LastUpdateTime != e.clock.Now().Format(time.RFC3339) {
			t.Errorf("%s: lastUpdateTime %s; want %s", st.name, card.LastUpdateTime, e.clock.Now().Format(time.RFC3339))
		}
		stored, err := e.c.GetCard(e.ctx, roleID)
		ctOK(t, "getCard", stored, err)
		check(st.name+" (getCard)", stored, st.want)
	}

	refused := []struct {
		name  string
		in    upstream.CardProfileInput
		field string
	}{
		{"empty name", upstream.CardProfileInput{RoleName: ctPtr(""), RoleDesc: ctPtr("changed")}, ""},
		{"background image as avatar", upstream.CardProfileInput{AvatarImageID: ctPtr(background.ImageID), RoleDesc: ctPtr("changed")}, "avatarImageId"},
		{"unknown background", upstream.CardProfileInput{BackgroundImageID: ctPtr("img_missing"), RoleDesc: ctPtr("changed")}, "backgroundImageId"},
	}
	for _, tt := range refused {
		_, err := e.c.UpdateCardProfile(e.ctx, roleID, tt.in)
		apiErr := ctWantErr(t, err, "updateCardProfile", http.StatusBadRequest, "invalid_request")
		if tt.field != "" {
			if f := ctDetail(t, apiErr, "field"); f != tt.field {
				t.Errorf("%s: detail.field %v; want %s", tt.name, f, tt.field)
			}
		}
	}
	stored, err := e.c.GetCard(e.ctx, roleID)
	ctOK(t, "getCard", stored, err)
	check("after refused updates", stored, steps[len(steps)-1].want)
	_, err = e.c.UpdateCardProfile(e.ctx, "r_missing", upstream.CardProfileInput{RoleDesc: ctPtr("x")})
	ctWantErr(t, err, "updateCardProfile", http.StatusNotFound, "role_not_found")
}

func TestContractWriteCardDocument(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	roleID := e.card(t, e.c, "Mira")
	all := func(c upstream.CardSections) [7]string {
		v := func(p *string) string {
			if p == nil {
				return "<absent>"
			}
			return *p
		}
		return [7]string{v(c.Description), v(c.Personality), v(c.Scenario), v(c.ExampleDialogue), v(c.SystemPrompt),
			v(c.PostHistoryInstructions), v(c.CreatorNotes)}
	}
	steps := []struct {
		name string
		in   upstream.CardSections
		want [7]string
	}{
		{"two sections", upstream.CardSections{Description: ctPtr("A keeper."), Personality: ctPtr("Calm.")},
			[7]string{"A keeper.", "Calm.", "", "", "", "", ""}},
		{"others merge in", upstream.CardSections{Scenario: ctPtr("A storm <night> & \"fog\"."), CreatorNotes: ctPtr("notes")},
			[7]string{"A keeper.", "Calm.", "A storm <night> & \"fog\".", "", "", "", "notes"}},
		{"\"\" clears one", upstream.CardSections{Personality: ctPtr("")},
			[7]string{"A keeper.", "", "A storm <night> & \"fog\".", "", "", "", "notes"}},
		{"every section", upstream.CardSections{Description: ctPtr("d"), Personality: ctPtr("p"), Scenario: ctPtr("s"),
			ExampleDialogue: ctPtr("e"), SystemPrompt: ctPtr("sp"), PostHistoryInstructions: ctPtr("ph"), CreatorNotes: ctPtr("c")},
			[7]string{"d", "p", "s", "e", "sp", "ph", "c"}},
		{"nothing keeps everything", upstream.CardSections{}, [7]string{"d", "p", "s", "e", "sp", "ph", "c"}},
	}
	for _, st := range steps {
		saved, err := e.c.WriteCardDocument(e.ctx, roleID, upstream.CardDocumentInput{Sections: st.in})
		ctOK(t, "writeCardDocument", saved, err)
		if saved.RoleID != roleID || !saved.OK {
			t.Errorf("%s: saved %+v", st.name, saved)
		}
		card, err := e.c.GetCard(e.ctx, roleID)
		ctOK(t, "getCard", card, err)
		if card.Sections == nil || all(*card.Sections) != st.want {
			t.Errorf("%s: sections %v; want %v", st.name, card.Sections, st.want)
		}
	}
	for _, body := range []string{`{"sections":{"biography":"x"}}`, `{"sections":{"description":7}}`, `{}`} {
		err := e.c.Call(e.ctx, "writeCardDocument", map[string]string{"roleId": roleID}, json.RawMessage(body), nil)
		apiErr := ctWantErr(t, err, "writeCardDocument", http.StatusBadRequest, "invalid_request")
		if part := ctDetail(t, apiErr, "part"); part != "body" {
			t.Errorf("%s: detail.part %v; want body", body, part)
		}
	}
	_, err := e.c.WriteCardDocument(e.ctx, "r_missing", upstream.CardDocumentInput{Sections: upstream.CardSections{Description: ctPtr("x")}})
	ctWantErr(t, err, "writeCardDocument", http.StatusNotFound, "role_not_found")
}

func TestContractSetCardVisibility(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	roleID := e.card(t, e.c, "Mira")
	tests := []struct {
		visibility string
		roleID     string
		status     int
		code       string
	}{
		{upstream.VisibilityPrivate, roleID, http.StatusOK, ""},
		{upstream.VisibilityPrivate, roleID, http.StatusOK, ""}, // again: nothing changes
		{"public", roleID, http.StatusBadRequest, "invalid_request"},
		{"", roleID, http.StatusBadRequest, "invalid_request"},
		{upstream.VisibilityPrivate, "r_missing", http.StatusNotFound, "role_not_found"},
	}
	for _, tt := range tests {
		out, err := e.c.SetCardVisibility(e.ctx, tt.roleID, upstream.VisibilityInput{Visibility: tt.visibility})
		if tt.code != "" {
			ctWantErr(t, err, "setCardVisibility", tt.status, tt.code)
			continue
		}
		ctOK(t, "setCardVisibility", out, err)
		if out.RoleID != roleID || out.RoleVisibility != "private" {
			t.Errorf("setCardVisibility(%q) = %+v", tt.visibility, out)
		}
	}
	card, err := e.c.GetCard(e.ctx, roleID)
	ctOK(t, "getCard", card, err)
	if card.RoleVisibility != "private" {
		t.Errorf("roleVisibility %q after the refused calls; want private", card.RoleVisibility)
	}
}

// TestContractValidateAndPublish walks a card from draft to review: publish is refused with
// validation_failed while validateCard reports errors, then succeeds with pending, and a
// second publish is a conflict.
func TestContractValidateAndPublish(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	roleID := e.card(t, e.c, "Mira")
	issues := func(r *upstream.ValidationReport, severity string) []string {
		var out []string
		for _, is := range r.Issues {
			if is.Severity == severity {
				out = append(out, is.Field)
			}
		}
		return out
	}

	report, err := e.c.ValidateCard(e.ctx, roleID)
	ctOK(t, "validateCard", report, err)
	if report.RoleID != roleID || report.Ready || !slices.Equal(issues(report, "error"), []string{"roleWelcome", "sections.description"}) {
		t.Fatalf("report of an empty card %+v; want not ready with errors roleWelcome and sections.description", report)
	}
	for i, is := range report.Issues {
		if is.Message == "" || (i > 0 && report.Issues[i-1].Severity == "warning" && is.Severity == "error") {
			t.Errorf("issue %d %+v: want a message, errors before warnings", i, is)
		}
	}
	_, err = e.c.PublishCard(e.ctx, roleID)
	apiErr := ctWantErr(t, err, "publishCard", http.StatusUnprocessableEntity, "validation_failed")
	if list, ok := ctDetail(t, apiErr, "issues").([]any); !ok || len(list) != 2 {
		t.Errorf("detail.issues %v; want the two errors", apiErr.Detail["issues"])
	}
	if n := e.rec.count("publishCard"); n != 1 {
		t.Errorf("%d publishCard requests; want 1 (not retried)", n)
	}

	// Fix one error: still refused, now naming only the other.
	saved, err := e.c.SetOpeningLines(e.ctx, roleID, upstream.OpeningLinesInput{RoleWelcome: "Hello."})
	ctOK(t, "setOpeningLines", saved, err)
	report, err = e.c.ValidateCard(e.ctx, roleID)
	ctOK(t, "validateCard", report, err)
	if report.Ready || !slices.Equal(issues(report, "error"), []string{"sections.description"}) {
		t.Fatalf("report %+v; want only sections.description as an error", report)
	}
	_, err = e.c.PublishCard(e.ctx, roleID)
	ctWantErr(t, err, "publishCard", http.StatusUnprocessableEntity, "validation_failed")

	// Fix the last error: ready with warnings, and publish submits it.
	doc, err := e.c.WriteCardDocument(e.ctx, roleID, upstream.CardDocumentInput{Sections: upstream.CardSections{Description: ctPtr("A keeper.")}})
	ctOK(t, "writeCardDocument", doc, err)
	report, err = e.c.ValidateCard(e.ctx, roleID)
	ctOK(t, "validateCard", report, err)
	if !report.Ready || len(issues(report, "error")) != 0 || len(issues(report, "warning")) == 0 {
		t.Fatalf("report %+v; want ready, with warnings only", report)
	}
	published, err := e.c.PublishCard(e.ctx, roleID)
	ctOK(t, "publishCard", published, err)
	if published.RoleID != roleID || published.ReviewStatus != "pending" {
		t.Errorf("publishCard = %+v; want pending", published)
	}
	if body := string(e.rec.last(t, "publishCard").ReqBody); body != "{}" {
		t.Errorf("publishCard sent %s; want {}", body)
	}
	card, err := e.c.GetCard(e.ctx, roleID)
	ctOK(t, "getCard", card, err)
	if card.ReviewStatus != "pending" {
		t.Errorf("reviewStatus %q after publishing; want pending", card.ReviewStatus)
	}
	_, err = e.c.PublishCard(e.ctx, roleID)
	ctWantErr(t, err, "publishCard", http.StatusConflict, "conflict")

	for _, op := range []string{"validateCard", "publishCard"} {
		var err error
		if op == "validateCard" {
			_, err = e.c.ValidateCard(e.ctx, "r_missing")
		} else {
			_, err = e.c.PublishCard(e.ctx, "r_missing")
		}
		ctWantErr(t, err, op, http.StatusNotFound, "role_not_found")
	}
	before := e.rec.count("validateCard")
	var argErr *upstream.ArgumentError
	if _, err := e.c.ValidateCard(e.ctx, ""); !errors.As(err, &argErr) || argErr.Param != "roleId" {
		t.Errorf("ValidateCard(\"\") = %v; want an *ArgumentError for roleId", err)
	}
	if e.rec.count("validateCard") != before {
		t.Error("ValidateCard(\"\") sent a request")
	}
}
