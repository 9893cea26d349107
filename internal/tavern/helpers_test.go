package tavern

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern/taverntest"
)

// Short names for taverntest's fixture builders and helpers, used throughout this package's tests.
var (
	n        = taverntest.N
	mustJSON = taverntest.MustJSON
	diff     = taverntest.Diff
	// compareBooks and compareEntries compare two books or entries field by field.
	compareBooks   = taverntest.DiffFields[*Book]
	compareEntries = taverntest.DiffFields[Entry]
	show           = taverntest.Show
	testImage      = taverntest.Image
	makeZip        = taverntest.Zip
	zlibBytes      = taverntest.Zlib
	textChunk      = taverntest.TextChunk
	zTXtChunk      = taverntest.ZTXtChunk
	iTXtChunk      = taverntest.ITXtChunk
	insertChunks   = taverntest.InsertChunks
)

// Places where insertChunks puts chunks.
const (
	afterIHDR  = taverntest.AfterIHDR
	afterIDAT  = taverntest.AfterIDAT
	beforeIEND = taverntest.BeforeIEND
	afterIEND  = taverntest.AfterIEND
)

// decodeAny decodes JSON keeping numbers as json.Number.
func decodeAny(t testing.TB, b []byte) map[string]any {
	t.Helper()
	m, err := decodeJSONObject(b)
	if err != nil {
		t.Fatalf("decode: %v\n%s", err, b)
	}
	return m
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// pngTextChunks lists the keywords of a PNG's text chunks, in order.
func pngTextChunks(t testing.TB, img []byte) []string {
	t.Helper()
	chunks, err := parsePNG(img)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range chunks {
		if kw := textKeyword(c); kw != "" {
			out = append(out, c.typ+":"+kw)
		}
	}
	return out
}

// chunkJSON returns the decoded JSON of the first text chunk named kw.
func chunkJSON(t testing.TB, img []byte, kw string) map[string]any {
	t.Helper()
	chunks, err := parsePNG(img)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		if textKeyword(c) == kw {
			text, latin1, err := chunkText(c)
			if err != nil {
				t.Fatal(err)
			}
			js, err := decodePayload(text, latin1)
			if err != nil {
				t.Fatal(err)
			}
			return decodeAny(t, js)
		}
	}
	t.Fatalf("no %s chunk", kw)
	return nil
}

// compareCards compares two cards field by field, the image only when withAvatar (see
// taverntest.CardSkips).
func compareCards(t testing.TB, want, got *Card, withAvatar bool) {
	t.Helper()
	taverntest.DiffFieldsExcept(t, "card", want, got, taverntest.CardSkips(withAvatar)...)
}

// mustRead reads a card or fails the test.
func mustRead(t testing.TB, data []byte) (*Card, Format) {
	t.Helper()
	c, f, err := Read(data)
	if err != nil {
		t.Fatalf("Read: %v\n%.400s", err, data)
	}
	return c, f
}

// wantErr checks that err is non-nil and contains substr.
func wantErr(t testing.TB, err error, substr string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want error containing %q, got nil", substr)
	}
	if !strings.Contains(err.Error(), substr) {
		t.Fatalf("want error containing %q, got %q", substr, err)
	}
}
