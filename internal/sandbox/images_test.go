package sandbox_test

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/image/webp"

	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
)

// tinyWebP is a 1x1 lossless WebP (RIFF, VP8L chunk, one pixel), written by hand.
var tinyWebP = []byte{
	0x52, 0x49, 0x46, 0x46, 0x1a, 0x00, 0x00, 0x00, 0x57, 0x45, 0x42, 0x50, 0x56, 0x50, 0x38, 0x4c,
	0x0d, 0x00, 0x00, 0x00, 0x2f, 0x00, 0x00, 0x00, 0x00, 0x28, 0x60, 0xff, 0x0b, 0xd2, 0xff, 0x02,
	0x00, 0x00,
}

func testImage(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, color.RGBA{uint8(x * 40), uint8(y * 40), 200, 255})
		}
	}
	return img
}

func pngBytes(t testing.TB, w, h int) []byte {
	var buf bytes.Buffer
	if err := png.Encode(&buf, testImage(w, h)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func jpegBytes(t testing.TB, w, h int) []byte {
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, testImage(w, h), nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gifBytes(t testing.TB, w, h int) []byte {
	var buf bytes.Buffer
	if err := gif.Encode(&buf, testImage(w, h), nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// upload stores an image and returns its id; roleID "" uploads without a card.
func (c *client) upload(roleID, purpose, contentType string, data []byte) string {
	c.t.Helper()
	body := map[string]any{"purpose": purpose, "contentType": contentType, "dataBase64": base64.StdEncoding.EncodeToString(data)}
	if roleID != "" {
		body["roleId"] = roleID
	}
	return c.call("POST", "/image/upload", body, http.StatusCreated)["imageId"].(string)
}

func TestTinyWebPDecodes(t *testing.T) {
	t.Parallel()
	img, err := webp.Decode(bytes.NewReader(tinyWebP))
	if err != nil {
		t.Fatalf("webp.Decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1 || b.Dy() != 1 {
		t.Fatalf("bounds %v", b)
	}
}

func TestUploadImage(t *testing.T) {
	t.Parallel()
	svc := newService(t, sandbox.Options{BaseURL: "http://img.test/"})
	c := overHTTP(t, svc)
	roleID := c.newCard("Mira")
	tests := []struct {
		name, contentType string
		data              []byte
		w, h              int
	}{
		{"png", "image/png", pngBytes(t, 3, 2), 3, 2},
		{"jpeg", "image/jpeg", jpegBytes(t, 5, 4), 5, 4},
		{"gif", "image/gif", gifBytes(t, 2, 7), 2, 7},
		{"webp", "image/webp", tinyWebP, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := *c
			c.t = t
			got := c.call("POST", "/image/upload", map[string]any{"purpose": "avatar", "roleId": roleID,
				"contentType": tt.contentType, "dataBase64": base64.StdEncoding.EncodeToString(tt.data)}, http.StatusCreated)
			id := got["imageId"].(string)
			if !strings.HasPrefix(id, "img_") || got["url"] != "http://img.test/images/"+id ||
				num(got["width"]) != tt.w || num(got["height"]) != tt.h {
				t.Fatalf("uploaded %v", got)
			}
			// The image is served at its URL path, without auth, with its content type.
			res, err := http.Get(c.base + "/images/" + id)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != tt.contentType || !bytes.Equal(body, tt.data) {
				t.Fatalf("GET image: %d %s, %d bytes", res.StatusCode, res.Header.Get("Content-Type"), len(body))
			}
		})
	}
}

func TestUploadImageErrors(t *testing.T) {
	t.Parallel()
	svc := newService(t, sandbox.Options{})
	c := inProcess(t, svc)
	svc.AddUser("other", "Other")
	foreign := c.as("other").newCard("Theirs")
	b64 := base64.StdEncoding.EncodeToString
	pngData := b64(pngBytes(t, 2, 2))
	tests := []struct {
		name   string
		body   map[string]any
		status int
		code   string
		detail map[string]any
	}{
		{"not base64", map[string]any{"purpose": "avatar", "contentType": "image/png", "dataBase64": "!!!"},
			400, "invalid_request", map[string]any{"field": "dataBase64"}},
		{"base64url is not standard", map[string]any{"purpose": "avatar", "contentType": "image/png", "dataBase64": "-_-_"},
			400, "invalid_request", map[string]any{"field": "dataBase64"}},
		{"not an image", map[string]any{"purpose": "avatar", "contentType": "image/png", "dataBase64": b64([]byte("hello, world"))},
			400, "invalid_request", map[string]any{"field": "dataBase64"}},
		{"truncated header", map[string]any{"purpose": "avatar", "contentType": "image/png", "dataBase64": b64(pngBytes(t, 2, 2)[:10])},
			400, "invalid_request", map[string]any{"field": "dataBase64"}},
		{"content type mismatch", map[string]any{"purpose": "avatar", "contentType": "image/jpeg", "dataBase64": pngData},
			400, "invalid_request", map[string]any{"field": "contentType", "detected": "image/png"}},
		{"webp declared as gif", map[string]any{"purpose": "avatar", "contentType": "image/gif", "dataBase64": b64(tinyWebP)},
			400, "invalid_request", map[string]any{"field": "contentType", "detected": "image/webp"}},
		{"unsupported content type", map[string]any{"purpose": "avatar", "contentType": "image/bmp", "dataBase64": pngData},
			400, "invalid_request", nil},
		{"bad purpose", map[string]any{"purpose": "banner", "contentType": "image/png", "dataBase64": pngData},
			400, "invalid_request", nil},
		{"unknown card", map[string]any{"purpose": "avatar", "roleId": "r_nope", "contentType": "image/png", "dataBase64": pngData},
			404, "role_not_found", map[string]any{"field": "roleId"}},
		{"another user's card", map[string]any{"purpose": "avatar", "roleId": foreign, "contentType": "image/png", "dataBase64": pngData},
			404, "role_not_found", map[string]any{"field": "roleId"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := *c
			c.t = t
			obj := c.fail("POST", "/image/upload", tt.body, tt.status, tt.code)
			for k, v := range tt.detail {
				if got := detail(t, obj)[k]; got != v {
					t.Errorf("detail.%s = %v, want %v", k, got, v)
				}
			}
		})
	}
}

func TestUploadImageTooLarge(t *testing.T) {
	t.Parallel()
	c := inProcess(t, newService(t, sandbox.Options{}))
	// A valid PNG header followed by padding, 8 MiB + 1 byte in all.
	data := append(pngBytes(t, 1, 1), make([]byte, 8<<20)...)[:8<<20+1]
	obj := c.fail("POST", "/image/upload", map[string]any{"purpose": "background", "contentType": "image/png",
		"dataBase64": base64.StdEncoding.EncodeToString(data)}, http.StatusRequestEntityTooLarge, "payload_too_large")
	d := detail(t, obj)
	if num(d["limit"]) != 8<<20 || num(d["size"]) != 8<<20+1 {
		t.Fatalf("detail %v", d)
	}
	// Exactly 8 MiB is accepted.
	c.upload("", "background", "image/png", data[:8<<20])
}

func TestImageNotFound(t *testing.T) {
	t.Parallel()
	c := overHTTP(t, newService(t, sandbox.Options{}))
	r := c.send("GET", "/images/img_nope", nil, nil)
	if r.status != http.StatusNotFound || r.obj["error"] != "not_found" {
		t.Fatalf("%d %s", r.status, r.raw)
	}
}

func TestListCardAssets(t *testing.T) {
	t.Parallel()
	svc := newService(t, sandbox.Options{})
	c := inProcess(t, svc)
	roleID := c.newCard("Mira")
	otherCard := c.newCard("Other")
	a := c.upload(roleID, "avatar", "image/png", pngBytes(t, 1, 1))
	c.upload(otherCard, "avatar", "image/png", pngBytes(t, 1, 1))
	c.upload("", "background", "image/png", pngBytes(t, 1, 1))
	b := c.upload(roleID, "background", "image/gif", gifBytes(t, 1, 1))
	got := c.call("GET", "/role/assets?roleId="+roleID, nil, http.StatusOK)
	images := got["images"].([]any)
	if got["roleId"] != roleID || len(images) != 2 {
		t.Fatalf("assets %v", got)
	}
	for i, want := range []struct{ id, purpose string }{{a, "avatar"}, {b, "background"}} {
		im := images[i].(map[string]any)
		if im["imageId"] != want.id || im["purpose"] != want.purpose || im["url"] != sandbox.DefaultBaseURL+"/images/"+want.id {
			t.Fatalf("image %d: %v", i, im)
		}
	}
	empty := c.call("GET", "/role/assets?roleId="+otherCard, nil, http.StatusOK)
	if len(empty["images"].([]any)) != 1 {
		t.Fatalf("assets %v", empty)
	}
	c.fail("GET", "/role/assets?roleId=r_nope", nil, http.StatusNotFound, "role_not_found")
}
