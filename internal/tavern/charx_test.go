package tavern

import (
	"archive/zip"
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern/taverntest"
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

// realCHARX reads taverntest.RealCHARX and returns it, its main icon member and the card.
func realCHARX(t testing.TB) (zipped []byte, icon []byte, card *Card) {
	t.Helper()
	zipped = taverntest.RealCHARX(t)
	card, _ = mustRead(t, zipped)
	return zipped, taverntest.Real(t, taverntest.RealSeraphinaPNG), card
}

func mustV3(t testing.TB, c *Card) []byte {
	t.Helper()
	out, err := WriteV3JSON(c)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// stIconPath is how SillyTavern's importFromCharX finds an icon asset's member: the URI without
// its scheme (uri.replace(/^(?:\/\/|[^/]+)*\//, ”)).
var stIconPath = regexp.MustCompile(`^(?:\/\/|[^/]+)*\/`)

// TestCHARXRoundTripReal: every member of a real CHARX is kept (the unreferenced sprite and
// module.risum too) and written back byte for byte beside card.json; the export reads back as the
// same card, and SillyTavern's reader finds card.json and the icon in it.
func TestCHARXRoundTripReal(t *testing.T) {
	t.Parallel()
	zipped, icon, c := realCHARX(t)
	want := []string{"assets/icon/images/main.png", "assets/background/images/glade.png", "assets/emotions/happy.png", "module.risum"}
	var got []string
	for _, a := range c.Assets {
		got = append(got, a.Path)
	}
	diff(t, "kept members", want, got)
	if len(c.AssetsLeftOut) != 0 {
		t.Errorf("left out: %v", c.AssetsLeftOut)
	}
	out, dropped, err := WriteCHARX(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 0 {
		t.Errorf("dropped %v", dropped)
	}
	zr, err := zip.NewReader(bytes.NewReader(out), int64(len(out)))
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := zip.NewReader(bytes.NewReader(zipped), int64(len(zipped)))
	members := map[string][]byte{}
	for _, f := range zr.File {
		members[f.Name] = mustZipMember(t, f)
	}
	// SillyTavern's extractFileFromZipBuffer: the first member whose name ends with what it seeks.
	stExtract := func(suffix string) []byte {
		for _, f := range zr.File {
			if strings.HasSuffix(f.Name, suffix) && !strings.HasPrefix(f.Name, "__MACOSX") {
				return members[f.Name]
			}
		}
		return nil
	}
	if zr.File[0].Name != "card.json" {
		t.Errorf("first member %q, want card.json", zr.File[0].Name)
	}
	for _, f := range orig.File {
		if f.Name != "card.json" && !bytes.Equal(members[f.Name], mustZipMember(t, f)) {
			t.Errorf("member %s not written back as it was", f.Name)
		}
	}
	back, _ := mustRead(t, out)
	compareCards(t, c, back, true)
	diff(t, "assets", c.Assets, back.Assets)

	// SillyTavern: card.json with a spec, and an icon asset whose member is in the zip.
	card := decodeAny(t, stExtract("card.json"))
	if card["spec"] != SpecV3 {
		t.Errorf("card.json spec %v", card["spec"])
	}
	found := false
	for _, x := range card["data"].(map[string]any)["assets"].([]any) {
		a := x.(map[string]any)
		if a["type"] != "icon" {
			continue
		}
		if m := stExtract(stIconPath.ReplaceAllString(a["uri"].(string), "")); bytes.Equal(m, icon) {
			found = true
		}
	}
	if !found {
		t.Error("SillyTavern would find no icon in the export")
	}
}

// TestCHARXExportDropsDangling: an asset whose member is gone is dropped from data.assets and
// named; a card with no icon asset gets the avatar as its main icon; unsafe member paths are refused.
func TestCHARXExportDropsDangling(t *testing.T) {
	t.Parallel()
	_, _, c := realCHARX(t)
	icon := c.Avatar
	c.Assets = c.Assets[1:] // the icon's member is gone
	out, dropped, err := WriteCHARX(c, icon)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "dropped", []string{`icon "main" (embeded://assets/icon/images/main.png)`}, dropped)
	back, _ := mustRead(t, out)
	if !bytes.Equal(back.Avatar, icon) {
		t.Error("the avatar did not become the main icon")
	}
	assets := extMap(back.Extensions, extData)["assets"].([]any)
	last := assets[len(assets)-1].(map[string]any)
	diff(t, "added icon", map[string]any{"type": "icon", "uri": "embeded://assets/icon/images/main.png", "name": "main", "ext": "png"}, last)

	plain := &Card{Name: "Plain"}
	out, _, err = WriteCHARX(plain, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := mustRead(t, out); extMap(b.Extensions, extData)["assets"] != nil {
		t.Error("a card with no icon and no assets got data.assets")
	}
	for _, p := range []string{"../x.png", "/abs.png", "card.json"} {
		_, _, err := WriteCHARX(&Card{Name: "x", Assets: []Asset{{Path: p, Data: []byte("x")}}}, nil)
		wantErr(t, err, "not a path a CHARX may hold")
	}
}

// TestDetachEmbedded: a JSON or PNG export keeps no embeded:// reference: the main icon becomes
// ccdefault:, the other embedded assets are dropped and named, remote ones stay.
func TestDetachEmbedded(t *testing.T) {
	t.Parallel()
	_, _, c := realCHARX(t)
	before := mustV3(t, c)
	dropped := c.DetachEmbedded()
	diff(t, "dropped", []string{`background "glade" (embeded://assets/background/images/glade.png)`}, dropped)
	out := mustV3(t, c)
	if bytes.Contains(out, []byte("embeded://")) {
		t.Errorf("a reference dangles: %s", out)
	}
	assets := decodeAny(t, out)["data"].(map[string]any)["assets"].([]any)
	diff(t, "assets", []any{
		map[string]any{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"},
		map[string]any{"type": "emotion", "uri": "https://example.com/sad.png", "name": "sad", "ext": "png"},
	}, assets)
	if !bytes.Contains(before, []byte("embeded://")) {
		t.Error("the fixture had no embedded asset")
	}
	if (&Card{Name: "x"}).DetachEmbedded() != nil {
		t.Error("a card with no assets dropped some")
	}
}

// TestCHARXAssetsOverBudget: members past MaxKeptAssetBytes or MaxKeptAssets, and members that
// cannot be read, are named, not kept, and the card still reads.
func TestCHARXAssetsOverBudget(t *testing.T) {
	t.Parallel()
	card := [2]string{"card.json", string(named(t, SpecV3, "x"))}
	many := []([2]string){card}
	for i := range MaxKeptAssets + maxLeftOutNames + 5 {
		many = append(many, [2]string{fmt.Sprintf("assets/m%04d.bin", i), "m"})
	}
	var raw bytes.Buffer
	zw := zip.NewWriter(&raw)
	w, _ := zw.Create("card.json")
	w.Write([]byte(card[1]))
	w, _ = zw.CreateRaw(&zip.FileHeader{Name: "assets/odd.bin", Method: 99, CompressedSize64: 3, UncompressedSize64: 3})
	w.Write([]byte("abc"))
	w, _ = zw.Create("assets/fine.bin")
	w.Write([]byte("fine"))
	zw.Close()
	for _, tc := range []struct {
		name     string
		zip      []byte
		kept     int
		leftOut  []string
		lastLeft string
	}{
		{"bytes", makeZip(t, card, [2]string{"a.bin", strings.Repeat("\x00", MaxKeptAssetBytes-10)}, [2]string{"b.bin", "0123456789ab"}, [2]string{"c.bin", "0"}),
			2, []string{"b.bin"}, "b.bin"},
		{"members", makeZip(t, many...), MaxKeptAssets, nil, "(5 more)"},
		{"an unknown compression method", raw.Bytes(), 1, []string{"assets/odd.bin"}, "assets/odd.bin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _ := mustRead(t, tc.zip)
			if len(c.Assets) != tc.kept {
				t.Errorf("kept %d assets, want %d", len(c.Assets), tc.kept)
			}
			if tc.leftOut != nil {
				diff(t, "left out", tc.leftOut, c.AssetsLeftOut)
			}
			if n := len(c.AssetsLeftOut); n == 0 || n > maxLeftOutNames+1 || c.AssetsLeftOut[n-1] != tc.lastLeft {
				t.Errorf("left out: %d names, the last %q", n, c.AssetsLeftOut[n-1:])
			}
		})
	}
}

func mustZipMember(t testing.TB, f *zip.File) []byte {
	t.Helper()
	rc, err := f.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
