package tools

// Fixture cards and lorebooks for the tavern toolset's tests: those of package taverntest, and the
// files every round trip test imports.

import (
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
	"github.com/cardwriter/cardwriter-mcp/internal/tavern/taverntest"
)

// Short names for taverntest's helpers, used throughout this package's tests.
var (
	n         = taverntest.N
	mustJSON  = taverntest.MustJSON
	show      = taverntest.Show
	diffField = taverntest.Diff
	// compareBooks compares two lorebooks field by field.
	compareBooks = taverntest.DiffFields[*tavern.Book]
)

// v2CardWithShip is taverntest.V2Card with a third lorebook entry: constant, disabled, with a
// priority and a category, listed last but with the lowest insertion_order.
func v2CardWithShip() map[string]any {
	c := taverntest.V2Card()
	book := c["data"].(map[string]any)["character_book"].(map[string]any)
	book["entries"] = append(book["entries"].([]any), map[string]any{
		"id": n("2"), "keys": []any{"Gull"}, "comment": "The ship", "content": "A fast sloop with black sails.",
		"constant": true, "selective": false, "insertion_order": n("5"), "enabled": false, "priority": n("3"),
		"extensions": map[string]any{"cardwriter/category": "ships"},
	})
	return c
}

// cardFixture is one file to import, with what it is.
type cardFixture struct {
	name       string
	file       []byte
	format     string // tavern.Format.String() of the file
	withAvatar bool
}

// cardFixtures are the files every round trip test imports: each version and each container,
// each PNG chunk layout, sloppy types, emoji and CJK text.
func cardFixtures(t testing.TB) []cardFixture {
	img := taverntest.Image(t, 24, 32)
	v2, v3 := mustJSON(t, v2CardWithShip()), mustJSON(t, taverntest.V3Card())
	stale := mustJSON(t, map[string]any{"spec": "chara_card_v2", "data": map[string]any{"name": "Stale copy", "first_mes": "old"}})
	v3icon := taverntest.V3Card()
	v3icon["data"].(map[string]any)["assets"] = []any{map[string]any{"type": "icon", "uri": "embeded://assets/icon/images/main.png", "name": "main", "ext": "png"}}
	// In PNG text chunks as card writers put them: base64 in tEXt and zTXt, the JSON itself in iTXt.
	withChunks := func(where taverntest.Place, chunks ...[]byte) []byte {
		return taverntest.InsertChunks(t, img, where, chunks...)
	}
	const afterIHDR, beforeIEND = taverntest.AfterIHDR, taverntest.BeforeIEND
	return []cardFixture{
		{name: "V1 JSON", file: mustJSON(t, taverntest.V1Card()), format: "json/chara_card_v1"},
		{name: "V2 JSON (SillyTavern)", file: v2, format: "json/chara_card_v2"},
		{name: "V3 JSON emoji CJK", file: v3, format: "json/chara_card_v3"},
		{name: "sloppy types", file: mustJSON(t, taverntest.SloppyCard()), format: "json/chara_card_v2"},
		{name: "PNG chara only", file: withChunks(beforeIEND, taverntest.TextChunk("chara", b64(v2))), format: "png/chara_card_v2 (chara chunk)", withAvatar: true},
		{name: "PNG ccv3 only", file: withChunks(beforeIEND, taverntest.TextChunk("ccv3", b64(v3))), format: "png/chara_card_v3 (ccv3 chunk)", withAvatar: true},
		{name: "PNG both chunks", file: withChunks(afterIHDR, taverntest.TextChunk("chara", b64(stale)), taverntest.TextChunk("ccv3", b64(v3))), format: "png/chara_card_v3 (ccv3 chunk)", withAvatar: true},
		{name: "PNG zTXt", file: withChunks(beforeIEND, taverntest.ZTXtChunk("chara", b64(v2))), format: "png/chara_card_v2 (chara chunk)", withAvatar: true},
		{name: "PNG iTXt", file: withChunks(afterIHDR, taverntest.ITXtChunk("ccv3", string(v3), true)), format: "png/chara_card_v3 (ccv3 chunk)", withAvatar: true},
		{name: "CHARX", file: taverntest.Zip(t, [2]string{"card.json", string(mustJSON(t, v3icon))}, [2]string{"assets/icon/images/main.png", string(img)}),
			format: "charx/chara_card_v3", withAvatar: true},
	}
}

// compareCards compares two cards field by field, the image only when withAvatar (see
// taverntest.CardSkips).
func compareCards(t testing.TB, want, got *tavern.Card, withAvatar bool) {
	t.Helper()
	taverntest.DiffFieldsExcept(t, "card", want, got, taverntest.CardSkips(withAvatar)...)
}
