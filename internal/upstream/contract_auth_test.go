package upstream_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// Contract tests of authentication and per-user isolation.

// TestContractUnauthorized calls every operation with a token the sandbox does not know: each
// is a 401 unauthorized *upstream.Error, sent once (a refused token is not retried), and
// nothing is created.
func TestContractUnauthorized(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	for _, token := range []string{"wrong-token", ctToken + "x", "bearer " + ctToken} {
		c := e.client(token)
		s := &ctState{roleID: "r_x", worldbookID: "wb_x", clientKey: "k1", png: ctPNG(t, 2, 2)}
		for _, call := range ctCalls {
			before := e.rec.count(call.op)
			_, err := call.call(e.ctx, c, s)
			ctWantErr(t, err, call.op, http.StatusUnauthorized, "unauthorized")
			ex := e.rec.last(t, call.op)
			if n := e.rec.count(call.op) - before; n != 1 {
				t.Errorf("%s: %d requests; want 1, a 401 is not retried", call.op, n)
			}
			if got := ex.RespHeader.Get("WWW-Authenticate"); got == "" {
				t.Errorf("%s: a 401 without WWW-Authenticate", call.op)
			}
		}
	}
	// The demo user sees nothing of those calls.
	wbs, err := e.c.ListWorldbooks(e.ctx)
	ctOK(t, "listWorldbooks", wbs, err)
	trials, err := e.c.ListTrialCards(e.ctx)
	ctOK(t, "listTrialCards", trials, err)
	if len(wbs.List) != 0 || len(trials.List) != 0 {
		t.Errorf("refused calls created %d worldbooks and %d trials", len(wbs.List), len(trials.List))
	}
}

// TestContractIsolation has a second user, added with sandbox AddUser, use the first user's
// ids: cards are role_not_found, worldbooks worldbook_not_found and trials trial_not_found,
// exactly as if they did not exist, and the first user's resources stay as they were.
func TestContractIsolation(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	first := &ctState{clientKey: "mine", png: ctPNG(t, 3, 3)}
	for _, c := range ctCalls {
		if c.op == "deleteTrialCard" {
			continue // keep the trial for the second user to look for
		}
		out, err := c.call(e.ctx, e.c, first)
		ctOK(t, c.op, out, err)
	}
	other, otherID := e.user("Other Author")
	me, err := other.GetMe(e.ctx)
	ctOK(t, "getMe", me, err)
	if me.UserID != otherID || me.UserID == "u_demo" || me.Nickname != "Other Author" {
		t.Fatalf("the second user is %+v; want %s", me, otherID)
	}

	want := map[string]string{
		"getCard": "role_not_found", "setOpeningLines": "role_not_found", "updateCardProfile": "role_not_found",
		"writeCardDocument": "role_not_found", "setCardVisibility": "role_not_found", "validateCard": "role_not_found",
		"publishCard": "role_not_found", "uploadImage": "role_not_found", "listCardAssets": "role_not_found",
		"listCardWorldbooks": "role_not_found",
		"getWorldbook":       "worldbook_not_found", "listWorldbookEntries": "worldbook_not_found",
		"writeWorldbookDocument": "worldbook_not_found",
		"getTrialCard":           "trial_not_found", "deleteTrialCard": "trial_not_found",
	}
	for _, c := range ctCalls {
		code, refused := want[c.op]
		if !refused {
			continue
		}
		s := *first
		_, err := c.call(e.ctx, other, &s)
		ctWantErr(t, err, c.op, http.StatusNotFound, code)
	}

	// The second user's own lists are empty, and what it creates is its own.
	wbs, err := other.ListWorldbooks(e.ctx)
	ctOK(t, "listWorldbooks", wbs, err)
	trials, err := other.ListTrialCards(e.ctx)
	ctOK(t, "listTrialCards", trials, err)
	if len(wbs.List) != 0 || len(trials.List) != 0 || trials.Slots.Used != 0 {
		t.Errorf("the second user sees %d worldbooks and %d trials; want none", len(wbs.List), len(trials.List))
	}
	theirs, err := other.UpsertTrialCard(e.ctx, first.clientKey, upstream.TrialUpsertInput{Card: upstream.TrialCardInput{RoleName: "Other"}})
	ctOK(t, "upsertTrialCard", theirs, err)
	if !theirs.Created || theirs.Slots.Used != 1 {
		t.Errorf("the second user's upsert of the same clientKey: %+v; want a new trial of its own", theirs)
	}
	// Binding one's own worldbook to another's card, or using another's image, is refused too.
	wbID := e.worldbook(t, other, "Theirs", "")
	_, err = other.WriteWorldbookDocument(e.ctx, wbID, upstream.WorldbookDocumentInput{Binding: &upstream.WorldbookBinding{RoleID: first.roleID}})
	ctWantErr(t, err, "writeWorldbookDocument", http.StatusNotFound, "role_not_found")
	theirCard := e.card(t, other, "Theirs")
	_, err = other.UpdateCardProfile(e.ctx, theirCard, upstream.CardProfileInput{AvatarImageID: &first.imageID})
	apiErr := ctWantErr(t, err, "updateCardProfile", http.StatusBadRequest, "invalid_request")
	if f := ctDetail(t, apiErr, "field"); f != "avatarImageId" {
		t.Errorf("detail.field %v; want avatarImageId", f)
	}

	// The first user's resources are untouched.
	card, err := e.c.GetCard(e.ctx, first.roleID)
	ctOK(t, "getCard", card, err)
	if card.RoleName != "Mira" || card.ReviewStatus != "pending" {
		t.Errorf("the first user's card %+v", card)
	}
	wb := e.getWorldbook(t, e.c, first.worldbookID)
	if !slices.Equal(wb.BoundRoleIDs, []string{first.roleID}) || wb.EntryCount != 1 {
		t.Errorf("the first user's worldbook %+v", wb)
	}
	mine, err := e.c.GetTrialCard(e.ctx, first.clientKey)
	ctOK(t, "getTrialCard", mine, err)
	if mine.RoleID == theirs.RoleID || mine.Slots.Used != 1 {
		t.Errorf("the first user's trial %+v; the second user's is %s", mine, theirs.RoleID)
	}
}
