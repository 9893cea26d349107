package taverntest

import (
	"embed"
	"testing"
)

// realFiles are card and lorebook files as their authors published them (see real/README.md for
// each one's source repository, path, commit and license).
//
//go:embed real/*.png real/*.json
var realFiles embed.FS

// Names of the real files.
const (
	// RealSeraphinaPNG is SillyTavern's bundled Seraphina: a PNG with a chara chunk (V2 card as
	// SillyTavern writes it) whose character_book entries carry probability null,
	// useProbability false and selective false.
	RealSeraphinaPNG = "default_Seraphina.png"
	// RealEldoriaJSON is SillyTavern's bundled Eldoria World Info file (entries keyed by uid).
	RealEldoriaJSON = "Eldoria.json"
	// RealSeraphinaJoyPNG is one of Seraphina's expression sprites, used as a CHARX emotion asset.
	RealSeraphinaJoyPNG = "joy.png"
)

// Real returns the bytes of a real file by name.
func Real(t testing.TB, name string) []byte {
	t.Helper()
	b, err := realFiles.ReadFile("real/" + name)
	if err != nil {
		t.Fatalf("real file %s: %v", name, err)
	}
	return b
}

// RealCHARX assembles a CHARX from the real files, as RisuAI lays one out: card.json (Seraphina's
// card as V3, its data.assets naming the main icon, a background in the zip and a remote emotion),
// her PNG as the main icon, joy.png as that background and again as an emotion sprite the card
// does not reference, and a module.risum.
func RealCHARX(t testing.TB) []byte {
	t.Helper()
	png := Real(t, RealSeraphinaPNG)
	joy := string(Real(t, RealSeraphinaJoyPNG))
	card := CardChunk(t, png, "chara")
	data := card["data"].(map[string]any)
	data["assets"] = []any{
		map[string]any{"type": "icon", "uri": "embeded://assets/icon/images/main.png", "name": "main", "ext": "png"},
		map[string]any{"type": "background", "uri": "embeded://assets/background/images/glade.png", "name": "glade", "ext": "png"},
		map[string]any{"type": "emotion", "uri": "https://example.com/sad.png", "name": "sad", "ext": "png"},
	}
	v3 := map[string]any{"spec": "chara_card_v3", "spec_version": "3.0", "data": data}
	return Zip(t, [2]string{"card.json", string(MustJSON(t, v3))},
		[2]string{"assets/icon/images/main.png", string(png)},
		[2]string{"assets/background/images/glade.png", joy},
		[2]string{"assets/emotions/happy.png", joy},
		[2]string{"module.risum", "\x00risum\x01"})
}
