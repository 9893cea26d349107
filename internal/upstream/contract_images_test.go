package upstream_test

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// Contract tests of uploadImage and listCardAssets: the bytes must be a PNG, JPEG, GIF or
// WebP image by content, the declared contentType must be the detected one, and an image is
// at most 8 MiB decoded.

// ctMaxImage is the upload limit: 8 MiB of decoded bytes.
const ctMaxImage = 8 << 20

// ctPadded returns a real PNG header (a 3x2 image) padded with zeros to exactly n bytes.
func ctPadded(t *testing.T, n int) []byte {
	t.Helper()
	head := ctPNG(t, 3, 2)
	if n < len(head) {
		t.Fatalf("cannot pad a %d-byte PNG to %d bytes", len(head), n)
	}
	return append(head, make([]byte, n-len(head))...)
}

func TestContractUploadImage(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	roleID := e.card(t, e.c, "Mira")
	accepted := []struct {
		name, contentType string
		data              []byte
		w, h              int
	}{
		{"png", "image/png", ctPNG(t, 5, 3), 5, 3},
		{"jpeg", "image/jpeg", ctJPEG(t, 4, 6), 4, 6},
		{"gif", "image/gif", ctGIF(t, 2, 7), 2, 7},
		{"webp", "image/webp", ctWebP, 1, 1},
	}
	for _, tt := range accepted {
		for _, purpose := range []string{"avatar", "background"} {
			out, err := e.c.UploadImage(e.ctx, upstream.ImageUploadInput{Purpose: purpose, RoleID: roleID, ContentType: tt.contentType, DataBase64: ctB64(tt.data)})
			ctOK(t, "uploadImage", out, err)
			if out.ImageID == "" || out.Width != tt.w || out.Height != tt.h || out.URL != sandbox.DefaultBaseURL+"/images/"+out.ImageID {
				t.Errorf("%s %s: uploaded %+v; want %dx%d served under %s/images/", tt.name, purpose, out, tt.w, tt.h, sandbox.DefaultBaseURL)
			}
			if st := e.rec.last(t, "uploadImage").Status; st != http.StatusCreated {
				t.Errorf("%s: status %d; want 201", tt.name, st)
			}
			// The URL serves the same bytes with the detected type.
			req, _ := http.NewRequestWithContext(e.ctx, http.MethodGet, out.URL, nil)
			resp, err := e.svc.RoundTripper().RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != tt.contentType || !bytes.Equal(got, tt.data) {
				t.Errorf("%s: GET %s = %d %s, %d bytes; want the uploaded bytes", tt.name, out.URL, resp.StatusCode, resp.Header.Get("Content-Type"), len(got))
			}
		}
	}

	refused := []struct {
		name   string
		in     upstream.ImageUploadInput
		status int
		code   string
		detail map[string]any
	}{
		{"png declared as jpeg", upstream.ImageUploadInput{Purpose: "avatar", ContentType: "image/jpeg", DataBase64: ctB64(ctPNG(t, 2, 2))},
			400, "invalid_request", map[string]any{"field": "contentType", "detected": "image/png"}},
		{"jpeg declared as png", upstream.ImageUploadInput{Purpose: "avatar", ContentType: "image/png", DataBase64: ctB64(ctJPEG(t, 2, 2))},
			400, "invalid_request", map[string]any{"field": "contentType", "detected": "image/jpeg"}},
		{"webp declared as gif", upstream.ImageUploadInput{Purpose: "background", ContentType: "image/gif", DataBase64: ctB64(ctWebP)},
			400, "invalid_request", map[string]any{"field": "contentType", "detected": "image/webp"}},
		{"text declared as png", upstream.ImageUploadInput{Purpose: "avatar", ContentType: "image/png", DataBase64: ctB64([]byte("not an image at all"))},
			400, "invalid_request", map[string]any{"field": "dataBase64"}},
		{"bmp is not accepted", upstream.ImageUploadInput{Purpose: "avatar", ContentType: "image/png", DataBase64: ctB64(append([]byte("BM"), make([]byte, 60)...))},
			400, "invalid_request", map[string]any{"field": "dataBase64"}},
		{"png signature only", upstream.ImageUploadInput{Purpose: "avatar", ContentType: "image/png", DataBase64: ctB64(ctPNG(t, 2, 2)[:8])},
			400, "invalid_request", map[string]any{"field": "dataBase64"}},
		{"not base64", upstream.ImageUploadInput{Purpose: "avatar", ContentType: "image/png", DataBase64: "***"},
			400, "invalid_request", map[string]any{"field": "dataBase64"}},
		{"url-safe base64", upstream.ImageUploadInput{Purpose: "avatar", ContentType: "image/png", DataBase64: ctURLSafe(ctPNG(t, 9, 9))},
			400, "invalid_request", map[string]any{"field": "dataBase64"}},
		{"unknown purpose", upstream.ImageUploadInput{Purpose: "banner", ContentType: "image/png", DataBase64: ctB64(ctPNG(t, 2, 2))},
			400, "invalid_request", map[string]any{"part": "body"}},
		{"unsupported content type", upstream.ImageUploadInput{Purpose: "avatar", ContentType: "image/bmp", DataBase64: ctB64(ctPNG(t, 2, 2))},
			400, "invalid_request", map[string]any{"part": "body"}},
		{"no bytes", upstream.ImageUploadInput{Purpose: "avatar", ContentType: "image/png"},
			400, "invalid_request", map[string]any{"part": "body"}},
		{"unknown card", upstream.ImageUploadInput{Purpose: "avatar", RoleID: "r_missing", ContentType: "image/png", DataBase64: ctB64(ctPNG(t, 2, 2))},
			404, "role_not_found", map[string]any{"field": "roleId"}},
	}
	for _, tt := range refused {
		_, err := e.c.UploadImage(e.ctx, tt.in)
		apiErr := ctWantErr(t, err, "uploadImage", tt.status, tt.code)
		for k, want := range tt.detail {
			if got := ctDetail(t, apiErr, k); got != want {
				t.Errorf("%s: detail.%s = %v; want %v", tt.name, k, got, want)
			}
		}
	}
	assets, err := e.c.ListCardAssets(e.ctx, roleID)
	ctOK(t, "listCardAssets", assets, err)
	if len(assets.Images) != 2*len(accepted) {
		t.Errorf("%d assets after the refused uploads; want only the %d accepted", len(assets.Images), 2*len(accepted))
	}
}

// ctURLSafe returns b, with bytes added at the end until its URL-safe base64 has a '-' or
// '_', encoded that way: base64 that standard decoding refuses.
func ctURLSafe(b []byte) string {
	out := slices.Clone(b)
	for !strings.ContainsAny(base64.URLEncoding.EncodeToString(out), "-_") {
		out = append(out, 0xfb)
	}
	return base64.URLEncoding.EncodeToString(out)
}

// ctUploadLimit checks the 8 MiB limit at its edge: exactly 8 MiB of decoded bytes is stored,
// one byte more is payload_too_large (returned, for the caller to check as well), not retried,
// and nothing is stored for it. Each such upload is slow under the race detector, so the test
// of the payload_too_large code (TestContractErrorCodes) is the one place that calls this.
func ctUploadLimit(t *testing.T, e *ctEnv) error {
	t.Helper()
	roleID := e.card(t, e.c, "Mira")
	out, err := e.c.UploadImage(e.ctx, upstream.ImageUploadInput{Purpose: "background", RoleID: roleID, ContentType: "image/png", DataBase64: ctB64(ctPadded(t, ctMaxImage))})
	ctOK(t, "uploadImage", out, err)
	if out.Width != 3 || out.Height != 2 {
		t.Errorf("uploaded %+v; want 3x2", out)
	}
	_, tooLarge := e.c.UploadImage(e.ctx, upstream.ImageUploadInput{Purpose: "background", RoleID: roleID, ContentType: "image/png", DataBase64: ctB64(ctPadded(t, ctMaxImage+1))})
	apiErr := ctWantErr(t, tooLarge, "uploadImage", http.StatusRequestEntityTooLarge, "payload_too_large")
	if limit, size := ctDetail(t, apiErr, "limit"), ctDetail(t, apiErr, "size"); limit != ctMaxImage || size != ctMaxImage+1 {
		t.Errorf("detail limit %v, size %v; want %d, %d", limit, size, ctMaxImage, ctMaxImage+1)
	}
	if n := e.rec.count("uploadImage"); n != 2 {
		t.Errorf("%d uploadImage requests; want 2 (a 413 is not retried)", n)
	}
	assets, err := e.c.ListCardAssets(e.ctx, roleID)
	ctOK(t, "listCardAssets", assets, err)
	if len(assets.Images) != 1 || assets.Images[0].ImageID != out.ImageID {
		t.Errorf("assets %+v; want only the 8 MiB image", assets.Images)
	}
	return tooLarge
}

func TestContractListCardAssets(t *testing.T) {
	t.Parallel()
	e := newCTEnv(t)
	mira := e.card(t, e.c, "Mira")
	nox := e.card(t, e.c, "Nox")
	empty, err := e.c.ListCardAssets(e.ctx, mira)
	ctOK(t, "listCardAssets", empty, err)
	if empty.RoleID != mira || empty.Images == nil || len(empty.Images) != 0 {
		t.Errorf("assets of a new card %+v; want an empty list", empty)
	}
	upload := func(purpose, roleID string) string {
		t.Helper()
		out, err := e.c.UploadImage(e.ctx, upstream.ImageUploadInput{Purpose: purpose, RoleID: roleID, ContentType: "image/gif", DataBase64: ctB64(ctGIF(t, 3, 3))})
		ctOK(t, "uploadImage", out, err)
		return out.ImageID
	}
	a1 := upload("avatar", mira)
	upload("avatar", nox)
	upload("background", "") // on no card's page
	b1 := upload("background", mira)
	a2 := upload("avatar", mira)

	assets, err := e.c.ListCardAssets(e.ctx, mira)
	ctOK(t, "listCardAssets", assets, err)
	want := []upstream.CardImage{
		{ImageID: a1, Purpose: "avatar", URL: sandbox.DefaultBaseURL + "/images/" + a1},
		{ImageID: b1, Purpose: "background", URL: sandbox.DefaultBaseURL + "/images/" + b1},
		{ImageID: a2, Purpose: "avatar", URL: sandbox.DefaultBaseURL + "/images/" + a2},
	}
	if assets.RoleID != mira || !slices.Equal(assets.Images, want) {
		t.Errorf("assets %+v\nwant %+v (this card's images, in upload order)", assets.Images, want)
	}
	_, err = e.c.ListCardAssets(e.ctx, "r_missing")
	ctWantErr(t, err, "listCardAssets", http.StatusNotFound, "role_not_found")
}
