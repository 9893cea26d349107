package tavern

import (
	"archive/zip"
	"bytes"
	"image"
	"image/jpeg"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/tavern/taverntest"
)

// charxCard is a V3 card whose main icon is embedded in the CHARX.
func charxCard(t testing.TB) []byte {
	card := taverntest.V3Card()
	card["data"].(map[string]any)["assets"] = []any{
		map[string]any{"type": "background", "uri": "embeded://assets/background/images/sea.png", "name": "main", "ext": "png"},
		map[string]any{"type": "icon", "uri": "embeded://assets/icon/images/main.png", "name": "main", "ext": "png"},
	}
	return mustJSON(t, card)
}

func TestReadCHARX(t *testing.T) {
	t.Parallel()
	icon := testImage(t, 5, 5)
	iconWithCard := insertChunks(t, icon, beforeIEND, textChunk("ccv3", b64(named(t, SpecV3, "inner"))))
	js := charxCard(t)
	jsonCard, _ := mustRead(t, js)
	for _, tc := range []struct {
		name       string
		zip        []byte
		wantAvatar []byte
	}{
		{"card and icon", makeZip(t, [2]string{"card.json", string(js)}, [2]string{"assets/icon/images/main.png", string(icon)}, [2]string{"module.risum", "\x00\x01"}), icon},
		{"icon with card chunks stripped", makeZip(t, [2]string{"assets/icon/images/main.png", string(iconWithCard)}, [2]string{"card.json", string(js)}), icon},
		{"icon missing", makeZip(t, [2]string{"card.json", string(js)}), nil},
		{"card.json in odd case", makeZip(t, [2]string{"Card.JSON", string(js)}), nil},
		{"appended to a JPEG", append(jpegImage(t), makeZip(t, [2]string{"card.json", string(js)})...), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, f := mustRead(t, tc.zip)
			diff(t, "format", Format{Container: "charx", Spec: SpecV3}, f)
			want := *jsonCard
			want.Avatar = tc.wantAvatar
			compareCards(t, &want, c, true)
			if c.Avatar != nil {
				if _, _, err := image.Decode(bytes.NewReader(c.Avatar)); err != nil {
					t.Errorf("avatar: %v", err)
				}
				// The icon becomes the exported PNG's image.
				out, err := WritePNG(c, nil)
				if err != nil {
					t.Fatal(err)
				}
				back, _ := mustRead(t, out)
				compareCards(t, c, back, true)
			}
		})
	}
}

func jpegImage(t testing.TB) []byte {
	src, _, _ := image.Decode(bytes.NewReader(testImage(t, 6, 6)))
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, src, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadCHARXErrors(t *testing.T) {
	t.Parallel()
	var bomb bytes.Buffer
	zw := zip.NewWriter(&bomb)
	w, _ := zw.Create("card.json")
	w.Write([]byte("{"))
	chunk := bytes.Repeat([]byte(" "), 1<<20)
	for range MaxInputSize>>20 + 1 {
		w.Write(chunk)
	}
	zw.Close()
	for _, tc := range []struct {
		name string
		zip  []byte
		want string
	}{
		{"no card.json", makeZip(t, [2]string{"cards/card.json", "{}"}), "CHARX has no card.json"},
		{"bad JSON", makeZip(t, [2]string{"card.json", "{nope"}), "CHARX card.json: JSON"},
		{"not a card", makeZip(t, [2]string{"card.json", `{"spec":"lorebook_v3","data":{}}`}), "CHARX card.json: input is a lorebook"},
		{"zip bomb", bomb.Bytes(), "the limit is"},
		{"corrupt zip", []byte("PK\x03\x04garbage"), "CHARX: zip"},
		{"a member leaving the archive", makeZip(t, [2]string{"card.json", `{"spec":"chara_card_v3","data":{"name":"X"}}`}, [2]string{"../../x.png", "x"}), `CHARX member "../../x.png" has an unsafe path`},
		{"an absolute member", makeZip(t, [2]string{"/etc/x.png", "x"}, [2]string{"card.json", `{}`}), `CHARX member "/etc/x.png" has an unsafe path`},
		{"a drive letter", makeZip(t, [2]string{"card.json", `{}`}, [2]string{`C:\x.png`, "x"}), "has an unsafe path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := Read(tc.zip)
			wantErr(t, err, tc.want)
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error: %q", err)
			}
		})
	}
}
