package tavern

import (
	"bytes"
	"image"
	"image/jpeg"
	_ "image/png"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern/taverntest"
)

// named returns a small V2 or V3 card JSON with the given name.
func named(t testing.TB, spec, name string) []byte {
	card := map[string]any{"spec": spec, "spec_version": "2.0", "data": map[string]any{"name": name, "first_mes": "こんにちは 👋"}}
	if spec == SpecV3 {
		card["spec_version"] = "3.0"
	}
	return mustJSON(t, card)
}

func TestReadPNG(t *testing.T) {
	t.Parallel()
	img := testImage(t, 8, 6)
	v2 := named(t, SpecV2, "from chara")
	v3 := named(t, SpecV3, "from ccv3 🐉")
	v1 := mustJSON(t, taverntest.V1Card())
	unpadded := strings.TrimRight(b64(v3), "=")
	wrapped := ""
	for s := b64(v3); len(s) > 0; {
		k := min(60, len(s))
		wrapped, s = wrapped+s[:k]+"\n", s[k:]
	}
	for _, tc := range []struct {
		name      string
		png       []byte
		wantName  string
		wantChunk string
		wantSpec  string
	}{
		{"chara only", insertChunks(t, img, beforeIEND, textChunk("chara", b64(v2))), "from chara", "chara", SpecV2},
		{"ccv3 only", insertChunks(t, img, beforeIEND, textChunk("ccv3", b64(v3))), "from ccv3 🐉", "ccv3", SpecV3},
		{"both, chara first: ccv3 wins", insertChunks(t, img, beforeIEND, textChunk("chara", b64(v2)), textChunk("ccv3", b64(v3))), "from ccv3 🐉", "ccv3", SpecV3},
		{"both, ccv3 first: ccv3 wins", insertChunks(t, img, afterIHDR, textChunk("ccv3", b64(v3)), textChunk("chara", b64(v2))), "from ccv3 🐉", "ccv3", SpecV3},
		{"V1 in chara", insertChunks(t, img, beforeIEND, textChunk("chara", b64(v1))), "Mira", "chara", SpecV1},
		{"before IDAT", insertChunks(t, img, afterIHDR, textChunk("chara", b64(v2))), "from chara", "chara", SpecV2},
		{"after IDAT", insertChunks(t, img, afterIDAT, textChunk("ccv3", b64(v3))), "from ccv3 🐉", "ccv3", SpecV3},
		{"keyword CCV3 upper case", insertChunks(t, img, beforeIEND, textChunk("CCV3", b64(v3))), "from ccv3 🐉", "ccv3", SpecV3},
		{"keyword Chara mixed case", insertChunks(t, img, beforeIEND, textChunk("Chara", b64(v2))), "from chara", "chara", SpecV2},
		{"zTXt", insertChunks(t, img, beforeIEND, zTXtChunk("ccv3", b64(v3))), "from ccv3 🐉", "ccv3", SpecV3},
		{"iTXt uncompressed", insertChunks(t, img, beforeIEND, iTXtChunk("chara", b64(v2), false)), "from chara", "chara", SpecV2},
		{"iTXt compressed", insertChunks(t, img, afterIDAT, iTXtChunk("ccv3", b64(v3), true)), "from ccv3 🐉", "ccv3", SpecV3},
		{"iTXt raw UTF-8 JSON", insertChunks(t, img, beforeIEND, iTXtChunk("ccv3", string(v3), false)), "from ccv3 🐉", "ccv3", SpecV3},
		{"tEXt raw JSON", insertChunks(t, img, beforeIEND, textChunk("chara", string(v2))), "from chara", "chara", SpecV2},
		{"base64 without padding", insertChunks(t, img, beforeIEND, textChunk("ccv3", unpadded)), "from ccv3 🐉", "ccv3", SpecV3},
		{"base64 wrapped in lines", insertChunks(t, img, beforeIEND, textChunk("ccv3", wrapped)), "from ccv3 🐉", "ccv3", SpecV3},
		{"other text chunks around", insertChunks(t, img, beforeIEND, textChunk("Comment", "hello"), textChunk("chara", b64(v2)), zTXtChunk("Software", "x")), "from chara", "chara", SpecV2},
		{"trailing data after IEND", insertChunks(t, insertChunks(t, img, beforeIEND, textChunk("chara", b64(v2))), afterIEND, []byte("garbage")), "from chara", "chara", SpecV2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, f := mustRead(t, tc.png)
			diff(t, "Name", tc.wantName, c.Name)
			if tc.wantSpec != SpecV1 {
				diff(t, "Welcome", "こんにちは 👋", c.Welcome)
			}
			diff(t, "Format", Format{Container: "png", Spec: tc.wantSpec, Chunk: tc.wantChunk}, f)
			for _, kw := range pngTextChunks(t, c.Avatar) {
				if l := strings.ToLower(kw); strings.HasSuffix(l, ":chara") || strings.HasSuffix(l, ":ccv3") {
					t.Errorf("Avatar still has card chunk %s", kw)
				}
			}
			if _, _, err := image.Decode(bytes.NewReader(c.Avatar)); err != nil {
				t.Errorf("Avatar does not decode: %v", err)
			}
		})
	}
}

func TestReadPNGErrors(t *testing.T) {
	t.Parallel()
	img := testImage(t, 4, 4)
	v3 := named(t, SpecV3, "x")
	badCRC := insertChunks(t, img, beforeIEND, textChunk("ccv3", b64(v3)))
	badCRC[len(badCRC)-13] ^= 0xff // last byte of the ccv3 chunk's CRC
	unknownMethod := append([]byte("ccv3\x00\x01"), zlibBytes([]byte(b64(v3)))...)
	bomb := append([]byte("ccv3\x00\x00"), zlibBytes(bytes.Repeat([]byte("A"), MaxInputSize+10))...)
	for _, tc := range []struct {
		name string
		png  []byte
		want string
	}{
		{"no card chunk", insertChunks(t, img, beforeIEND, textChunk("Comment", "hi")), "PNG has no chara or ccv3 text chunk"},
		{"bad base64", insertChunks(t, img, beforeIEND, textChunk("ccv3", "!!!not base64!!!")), "ccv3 chunk: base64: "},
		{"ccv3 broken, chara fine", insertChunks(t, img, beforeIEND, textChunk("chara", b64(v3)), textChunk("ccv3", "%%%")), "ccv3 chunk: base64"},
		{"base64 of non-UTF-8", insertChunks(t, img, beforeIEND, textChunk("chara", b64([]byte{'{', 0xff, 0xfe, '}'}))), "chara chunk: base64-decoded text is not valid UTF-8"},
		{"base64 of non-JSON", insertChunks(t, img, beforeIEND, textChunk("chara", b64([]byte("hello")))), "chara chunk: JSON"},
		{"empty text", insertChunks(t, img, beforeIEND, textChunk("chara", "  ")), "chara chunk: empty text"},
		{"bad zlib", insertChunks(t, img, beforeIEND, makeChunk("zTXt", []byte("ccv3\x00\x00not zlib"))), "ccv3 chunk: zTXt: zlib"},
		{"zTXt unknown method", insertChunks(t, img, beforeIEND, makeChunk("zTXt", unknownMethod)), "unknown compression method 1"},
		{"zTXt bomb", insertChunks(t, img, beforeIEND, makeChunk("zTXt", bomb)), "exceeds"},
		{"bad CRC", badCRC, "CRC mismatch"},
		{"truncated", img[:len(img)-20], "PNG"},
		{"no IEND", img[:len(img)-12], "no IEND chunk"},
		{"bad chunk type", append(append([]byte{}, pngSignature...), 0, 0, 0, 0, '1', '2', '3', '4', 0, 0, 0, 0), "invalid chunk type"},
		{"lorebook inside", insertChunks(t, img, beforeIEND, textChunk("chara", b64([]byte(`{"spec":"lorebook_v3","data":{}}`)))), "chara chunk: input is a lorebook"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := Read(tc.png)
			wantErr(t, err, tc.want)
		})
	}
}

// TestWritePNG: an exported PNG decodes as the same image, carries exactly one chara (V2) and one
// ccv3 (V3) chunk, keeps the avatar's other chunks, and re-imports identically.
func TestWritePNG(t *testing.T) {
	t.Parallel()
	card, _ := mustRead(t, mustJSON(t, taverntest.V3Card()))
	img := testImage(t, 10, 7)
	// An avatar that already carries stale card chunks and an unrelated one.
	avatar := insertChunks(t, img, beforeIEND, textChunk("chara", b64([]byte(`{"name":"stale"}`))), textChunk("Comment", "keep me"), zTXtChunk("CCV3", b64([]byte(`{"name":"stale"}`))))
	out, err := WritePNG(card, avatar)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "text chunks", []string{"tEXt:Comment", "tEXt:chara", "tEXt:ccv3"}, pngTextChunks(t, out))
	decodedOut, format, err := image.Decode(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("exported PNG does not decode: %v", err)
	}
	diff(t, "image format", "png", format)
	decodedIn, _, _ := image.Decode(bytes.NewReader(img))
	if decodedOut.Bounds() != decodedIn.Bounds() {
		t.Fatalf("bounds %v, want %v", decodedOut.Bounds(), decodedIn.Bounds())
	}
	for y := range 7 {
		for x := range 10 {
			if decodedOut.At(x, y) != decodedIn.At(x, y) {
				t.Fatalf("pixel %d,%d differs", x, y)
			}
		}
	}
	diff(t, "chara spec", "chara_card_v2", chunkJSON(t, out, "chara")["spec"])
	diff(t, "ccv3 spec", "chara_card_v3", chunkJSON(t, out, "ccv3")["spec"])
	chara := chunkJSON(t, out, "chara")
	v2data := chara["data"].(map[string]any)
	// The V1 fields at the chunk's root too, as SillyTavern writes them, for V1 readers.
	for _, k := range v1Fields {
		diff(t, "chara root "+k, v2data[k], chara[k])
	}
	if chara["name"] == "" || chara["first_mes"] == "" {
		t.Errorf("the chara chunk's root has no name or first message: %v", chara)
	}
	if _, ok := v2data["group_only_greetings"]; ok {
		t.Error("V2 backfill carries the V3-only group_only_greetings")
	}
	diff(t, "V2 backfill name", card.Name, v2data["name"])

	back, f := mustRead(t, out)
	diff(t, "format", Format{Container: "png", Spec: SpecV3, Chunk: "ccv3"}, f)
	card.Avatar = stripCardChunks(mustParse(t, avatar))
	compareCards(t, card, back, true)

	// Re-export with the card's own avatar: the same file again.
	again, err := WritePNG(back, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, again) {
		t.Error("re-export of a re-imported PNG differs")
	}
	// And the V2 chunk alone (for V2-only readers) carries the same card.
	chunks := mustParse(t, out)
	var onlyChara bytes.Buffer
	onlyChara.Write(pngSignature)
	for _, c := range chunks {
		if textKeyword(c) != "ccv3" {
			onlyChara.Write(c.raw)
		}
	}
	v2back, f := mustRead(t, onlyChara.Bytes())
	diff(t, "V2 format", Format{Container: "png", Spec: SpecV2, Chunk: "chara"}, f)
	diff(t, "V2 name", card.Name, v2back.Name)
	diff(t, "V2 sections", card.Sections, v2back.Sections)
	compareBooks(t, "V2 book", card.Book, v2back.Book)
}

func mustParse(t testing.TB, png []byte) []pngChunk {
	t.Helper()
	chunks, err := parsePNG(png)
	if err != nil {
		t.Fatal(err)
	}
	return chunks
}

func TestWritePNGPlaceholderAndConversion(t *testing.T) {
	t.Parallel()
	card, _ := mustRead(t, mustJSON(t, taverntest.V2Card()))
	out, err := WritePNG(card, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(out))
	if err != nil || format != "png" || cfg.Width != placeholderWidth || cfg.Height != placeholderHeight {
		t.Fatalf("placeholder: %v %s %dx%d", err, format, cfg.Width, cfg.Height)
	}
	if _, _, err := image.Decode(bytes.NewReader(out)); err != nil {
		t.Fatalf("placeholder does not decode: %v", err)
	}
	back, _ := mustRead(t, out)
	compareCards(t, card, back, false)

	// A JPEG avatar is converted to PNG.
	src, _, _ := image.Decode(bytes.NewReader(testImage(t, 12, 9)))
	var jpg bytes.Buffer
	if err := jpeg.Encode(&jpg, src, nil); err != nil {
		t.Fatal(err)
	}
	out, err = WritePNG(card, jpg.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	cfg, format, err = image.DecodeConfig(bytes.NewReader(out))
	if err != nil || format != "png" || cfg.Width != 12 || cfg.Height != 9 {
		t.Fatalf("converted: %v %s %dx%d", err, format, cfg.Width, cfg.Height)
	}

	_, err = WritePNG(card, []byte("not an image"))
	wantErr(t, err, "avatar: not a PNG, and not a decodable image")
	_, err = WritePNG(card, testImage(t, 2, 2)[:30])
	wantErr(t, err, "avatar: ")
	_, err = WritePNG(nil, nil)
	wantErr(t, err, "no card")
}
