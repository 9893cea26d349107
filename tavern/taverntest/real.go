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
