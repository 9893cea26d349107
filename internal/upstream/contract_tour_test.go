package upstream_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// ctState holds the ids the calls of ctCalls act on; the calls that create something fill it.
type ctState struct {
	roleID, worldbookID, clientKey, imageID string
	png                                     []byte
}

// ctCall is one operation of the open API called through its typed method.
type ctCall struct {
	op   string
	call func(ctx context.Context, c *upstream.Client, s *ctState) (any, error)
}

// ctCalls calls every operation of the open API once, in an order in which each call works
// when the ones before it did: the card is made publishable before publishCard.
var ctCalls = []ctCall{
	{"getMe", func(ctx context.Context, c *upstream.Client, _ *ctState) (any, error) { return c.GetMe(ctx) }},
	{"createCard", func(ctx context.Context, c *upstream.Client, s *ctState) (any, error) {
		out, _, err := c.CreateCard(ctx, upstream.CardCreateInput{RoleName: "Mira", Language: "en"})
		if err == nil {
			s.roleID = out.RoleID
		}
		return out, err
	}},
	{"getCard", func(ctx context.Context, c *upstream.Client, s *ctState) (any, error) {
		return c.GetCard(ctx, s.roleID)
	}},
	{"setOpeningLines", func(ctx context.Context, c *upstream.Client, s *ctState) (any, error) {
		return c.SetOpeningLines(ctx, s.roleID, upstream.OpeningLinesInput{RoleWelcome: "Hello.", Alternates: []string{"Hi."}, Prologue: []string{"Who are you?"}})
	}},
	{"updateCardProfile", func(ctx context.Context, c *upstream.Client, s *ctState) (any, error) {
		return c.UpdateCardProfile(ctx, s.roleID, upstream.CardProfileInput{RoleDesc: ctPtr("A keeper."), Tags: []string{"sea"}})
	}},
	{"writeCardDocument", func(ctx context.Context, c *upstream.Client, s *ctState) (any, error) {
		return c.WriteCardDocument(ctx, s.roleID, upstream.CardDocumentInput{Sections: upstream.CardSections{Description: ctPtr("She keeps the light.")}})
	}},
	{"setCardVisibility", func(ctx context.Context, c *upstream.Client, s *ctState) (any, error) {
		return c.SetCardVisibility(ctx, s.roleID, upstream.VisibilityInput{Visibility: upstream.VisibilityPrivate})
	}},
	{"uploadImage", func(ctx context.Context, c *upstream.Client, s *ctState) (any, error) {
		out, err := c.UploadImage(ctx, upstream.ImageUploadInput{Purpose: "avatar", RoleID: s.roleID, ContentType: "image/png", DataBase64: ctB64(s.png)})
		if err == nil {
			s.imageID = out.ImageID
		}
		return out, err
	}},
	{"listCardAssets", func(ctx context.Context, c *upstream.Client, s *ctState) (any, error) {
		return c.ListCardAssets(ctx, s.roleID)
	}},
	{"validateCard", func(ctx context.Context, c *upstream.Client, s *ctState) (any, error) {
		return c.ValidateCard(ctx, s.roleID)
	}},
	{"publishCard", func(ctx context.Context, c *upstream.Client, s *ctState) (any, error) {
		return c.PublishCard(ctx, s.roleID)
	}},
	{"createWorldbook", func(ctx context.Context, c *upstream.Client, s *ctState) (any, error) {
		out, err := c.CreateWorldbook(ctx, upstream.WorldbookCreateInput{Name: "Harbor", Format: upstream.WorldbookTavern})
		if err == nil {
			s.worldbookID = out.WorldbookID
		}
		return out, err
	}},
	{"listWorldbooks", func(ctx context.Context, c *upstream.Client, _ *ctState) (any, error) { return c.ListWorldbooks(ctx) }},
	{"writeWorldbookDocument", func(ctx context.Context, c *upstream.Client, s *ctState) (any, error) {
		return c.WriteWorldbookDocument(ctx, s.worldbookID, upstream.WorldbookDocumentInput{
			Metadata: &upstream.WorldbookMetadata{Description: ctPtr("The harbor town.")},
			Entries:  []upstream.WorldbookEntryOp{ctCreateOp("Harbor", "The old harbor.", "harbor")},
			Binding:  &upstream.WorldbookBinding{RoleID: s.roleID},
		})
	}},
	{"getWorldbook", func(ctx context.Context, c *upstream.Client, s *ctState) (any, error) {
		return c.GetWorldbook(ctx, s.worldbookID)
	}},
	{"listCardWorldbooks", func(ctx context.Context, c *upstream.Client, s *ctState) (any, error) {
		return c.ListCardWorldbooks(ctx, s.roleID)
	}},
	{"listWorldbookEntries", func(ctx context.Context, c *upstream.Client, s *ctState) (any, error) {
		return c.ListWorldbookEntries(ctx, s.worldbookID, "")
	}},
	{"upsertTrialCard", func(ctx context.Context, c *upstream.Client, s *ctState) (any, error) {
		return c.UpsertTrialCard(ctx, s.clientKey, upstream.TrialUpsertInput{Card: upstream.TrialCardInput{RoleName: "Mira"},
			Worldbook: &upstream.TrialWorldbookInput{Entries: []upstream.TrialEntryInput{{Name: "Harbor", Content: "The harbor.", Keywords: []string{"harbor"}}}}})
	}},
	{"getTrialCard", func(ctx context.Context, c *upstream.Client, s *ctState) (any, error) {
		return c.GetTrialCard(ctx, s.clientKey)
	}},
	{"listTrialCards", func(ctx context.Context, c *upstream.Client, _ *ctState) (any, error) { return c.ListTrialCards(ctx) }},
	{"deleteTrialCard", func(ctx context.Context, c *upstream.Client, s *ctState) (any, error) {
		return c.DeleteTrialCard(ctx, s.clientKey)
	}},
}

// TestContractTour calls every operation of the open API once, in turn, through its typed
// method against one sandbox, and checks through the recording transport that each
// operationId of the contract was called, answered with its documented success status, and
// validated.
func TestContractTour(t *testing.T) {
	e := newCTEnv(t)
	s := &ctState{clientKey: "tour-1", png: ctPNG(t, 4, 4)}
	for _, c := range ctCalls {
		out, err := c.call(e.ctx, e.c, s)
		ctOK(t, c.op, out, err)
		ex := e.rec.exchanges()
		if last := ex[len(ex)-1]; last.Op != c.op || last.Status < 200 || last.Status > 299 {
			t.Errorf("%s: the last request was %s %s (%s), answered %d", c.op, last.Method, last.Path, last.Op, last.Status)
		}
	}

	seen := map[string]int{}
	for _, ex := range e.rec.exchanges() {
		seen[ex.Op]++
	}
	for _, id := range ctAPIOperationIDs(t) {
		if seen[id] != 1 {
			t.Errorf("operation %s was called %d times; want once", id, seen[id])
		}
		delete(seen, id)
	}
	if len(seen) != 0 {
		t.Errorf("requests outside the contract's operations: %v", seen)
	}
	if len(ctCalls) != len(ctAPIOperationIDs(t)) {
		t.Errorf("the tour has %d calls for %d operations", len(ctCalls), len(ctAPIOperationIDs(t)))
	}

	// What the tour did is visible in the state it left.
	card, err := e.c.GetCard(e.ctx, s.roleID)
	ctOK(t, "getCard", card, err)
	if card.ReviewStatus != "pending" || card.RoleWelcome != "Hello." || card.RoleDesc != "A keeper." ||
		card.Sections == nil || card.Sections.Description == nil || *card.Sections.Description != "She keeps the light." {
		t.Errorf("card after the tour %+v", card)
	}
	bound, err := e.c.ListCardWorldbooks(e.ctx, s.roleID)
	ctOK(t, "listCardWorldbooks", bound, err)
	if len(bound.List) != 1 || bound.List[0].WorldbookID != s.worldbookID || bound.List[0].EntryCount != 1 {
		t.Errorf("bound worldbooks after the tour %+v", bound.List)
	}
	_, err = e.c.GetTrialCard(e.ctx, s.clientKey)
	ctWantErr(t, err, "getTrialCard", http.StatusNotFound, "trial_not_found")
	if !slices.ContainsFunc(e.rec.exchanges(), func(ex ctExchange) bool { return ex.Op == "createCard" && ex.Status == http.StatusCreated }) {
		t.Error("createCard was not answered 201")
	}
}
