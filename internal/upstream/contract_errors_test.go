package upstream_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// TestContractErrorCodes makes the sandbox answer every documented error code it produces, and
// checks that the client reports each as an *upstream.Error with the code's status (the
// recording transport has checked the envelope against the contract on the way).
func TestContractErrorCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code   string
		status int
		op     string
		cause  func(t *testing.T, e *ctEnv) error
	}{
		{"invalid_request", 400, "createCard", func(t *testing.T, e *ctEnv) error {
			_, _, err := e.c.CreateCard(e.ctx, upstream.CardCreateInput{RoleName: ""})
			return err
		}},
		{"unauthorized", 401, "getMe", func(t *testing.T, e *ctEnv) error {
			_, err := e.client("not-a-token").GetMe(e.ctx)
			return err
		}},
		{"not_found", 404, "writeWorldbookDocument", func(t *testing.T, e *ctEnv) error {
			_, err := e.c.WriteWorldbookDocument(e.ctx, e.worldbook(t, e.c, "Harbor", ""), upstream.WorldbookDocumentInput{
				Entries: []upstream.WorldbookEntryOp{{Op: upstream.EntryOpDelete, EntryID: "e_missing"}}})
			return err
		}},
		{"role_not_found", 404, "getCard", func(t *testing.T, e *ctEnv) error {
			_, err := e.c.GetCard(e.ctx, "r_missing")
			return err
		}},
		{"worldbook_not_found", 404, "getWorldbook", func(t *testing.T, e *ctEnv) error {
			_, err := e.c.GetWorldbook(e.ctx, "wb_missing")
			return err
		}},
		{"trial_not_found", 404, "getTrialCard", func(t *testing.T, e *ctEnv) error {
			_, err := e.c.GetTrialCard(e.ctx, "missing")
			return err
		}},
		{"conflict", 409, "publishCard", func(t *testing.T, e *ctEnv) error {
			roleID := e.card(t, e.c, "Mira")
			_, err := e.c.SetOpeningLines(e.ctx, roleID, upstream.OpeningLinesInput{RoleWelcome: "Hi."})
			ctOK(t, "setOpeningLines", &upstream.RoleSaved{RoleID: roleID, OK: true}, err)
			_, err = e.c.WriteCardDocument(e.ctx, roleID, upstream.CardDocumentInput{Sections: upstream.CardSections{Description: ctPtr("d")}})
			ctOK(t, "writeCardDocument", &upstream.RoleSaved{RoleID: roleID, OK: true}, err)
			out, err := e.c.PublishCard(e.ctx, roleID)
			ctOK(t, "publishCard", out, err)
			_, err = e.c.PublishCard(e.ctx, roleID)
			return err
		}},
		{"trial_slots_full", 409, "upsertTrialCard", func(t *testing.T, e *ctEnv) error {
			in := upstream.TrialUpsertInput{Card: upstream.TrialCardInput{RoleName: "Mira"}}
			for _, k := range []string{"k1", "k2", "k3", "k4", "k5"} {
				out, err := e.c.UpsertTrialCard(e.ctx, k, in)
				ctOK(t, "upsertTrialCard", out, err)
			}
			_, err := e.c.UpsertTrialCard(e.ctx, "k6", in)
			return err
		}},
		{"payload_too_large", 413, "uploadImage", ctUploadLimit}, // 8 MiB accepted, one byte more refused
		{"validation_failed", 422, "publishCard", func(t *testing.T, e *ctEnv) error {
			_, err := e.c.PublishCard(e.ctx, e.card(t, e.c, "Mira"))
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			t.Parallel()
			e := newCTEnv(t)
			err := tt.cause(t, e)
			ctWantErr(t, err, tt.op, tt.status, tt.code)
			ex := e.rec.last(t, tt.op)
			if env := ctRaw(t, ex.RespBody); ex.Status != tt.status || env["error"] != tt.code {
				t.Errorf("on the wire: %d %v; want %d %s", ex.Status, env["error"], tt.status, tt.code)
			}
		})
	}

	// Every 4xx code of the contract's Error response that the sandbox can produce is in the
	// table; the others belong to the real service (insufficient_credits, rate_limited,
	// unavailable), to nothing the open API's operations do in the sandbox (forbidden), or to a
	// failure of the sandbox itself (internal, TestContractInternalError).
	var codes []string
	for _, tt := range tests {
		codes = append(codes, tt.code)
	}
	for code := range ctStatusOf {
		if !slices.Contains(codes, code) && !slices.Contains([]string{"insufficient_credits", "rate_limited", "unavailable", "forbidden", "internal"}, code) {
			t.Errorf("error code %s is not produced by any case", code)
		}
	}
}

// TestContractInternalError makes the sandbox fail to persist a change (its data directory is
// gone): the answer is 500 internal with retryable true, which the client retries for an
// idempotent operation and then reports as an *upstream.Error.
func TestContractInternalError(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	e := newCTEnv(t, func(o *sandbox.Options) { o.DataFile = filepath.Join(dir, "state.json") })
	roleID := e.card(t, e.c, "Mira")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	_, err := e.c.WriteCardDocument(e.ctx, roleID, upstream.CardDocumentInput{Sections: upstream.CardSections{Description: ctPtr("d")}})
	var apiErr *upstream.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusInternalServerError || apiErr.Code != "internal" || !apiErr.Retryable {
		t.Fatalf("err = %v; want a retryable 500 internal *upstream.Error", err)
	}
	if n := e.rec.count("writeCardDocument"); n != 3 {
		t.Errorf("%d writeCardDocument requests; want 3 (an idempotent call retried up to the policy)", n)
	}
}
