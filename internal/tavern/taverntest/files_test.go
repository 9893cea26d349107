package taverntest_test

import (
	"bytes"
	"encoding/base64"
	"image/png"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
	"github.com/cardwriter/cardwriter-mcp/internal/tavern/taverntest"
)

// TestInsertChunks: a chunk put at each place leaves a PNG that decodes (every CRC checked), holds
// the chunk where it was asked for, and carries a card the tavern package reads.
func TestInsertChunks(t *testing.T) {
	t.Parallel()
	img := taverntest.Image(t, 5, 4)
	js := base64.StdEncoding.EncodeToString(taverntest.MustJSON(t, taverntest.V3Card()))
	chunks := map[string][]byte{
		"tEXt":            taverntest.TextChunk("ccv3", js),
		"zTXt":            taverntest.ZTXtChunk("ccv3", js),
		"iTXt":            taverntest.ITXtChunk("ccv3", js, false),
		"iTXt compressed": taverntest.ITXtChunk("ccv3", js, true),
	}
	for name, chunk := range chunks {
		for _, where := range []taverntest.Place{taverntest.AfterIHDR, taverntest.AfterIDAT, taverntest.BeforeIEND, taverntest.AfterIEND} {
			out := taverntest.InsertChunks(t, img, where, chunk)
			if len(out) != len(img)+len(chunk) || !bytes.Contains(out, chunk) {
				t.Fatalf("%s at %d: the chunk is not in the file", name, where)
			}
			if _, err := png.Decode(bytes.NewReader(out)); err != nil {
				t.Errorf("%s at %d: %v", name, where, err)
			}
			at := bytes.Index(out, chunk)
			switch before := out[:at]; where {
			case taverntest.AfterIHDR:
				if at != 8+12+13 {
					t.Errorf("%s after IHDR: at byte %d", name, at)
				}
			case taverntest.AfterIDAT:
				if !bytes.Contains(before, []byte("IDAT")) || bytes.Contains(out[at+len(chunk):], []byte("IDAT")) {
					t.Errorf("%s after IDAT: at byte %d", name, at)
				}
			case taverntest.BeforeIEND:
				if !bytes.HasPrefix(out[at+len(chunk):], []byte("\x00\x00\x00\x00IEND")) {
					t.Errorf("%s before IEND: at byte %d", name, at)
				}
			case taverntest.AfterIEND:
				if at != len(img) {
					t.Errorf("%s after IEND: at byte %d", name, at)
				}
				continue // trailing data: no chunk of the image
			}
			c, _, err := tavern.Read(out)
			if err != nil || c.Name != "龍王 🐉 Ryūō" {
				t.Errorf("%s at %d: Read: %v, %v", name, where, c, err)
			}
		}
	}
}

// TestZip: the archive lists its files in order, with their contents.
func TestZip(t *testing.T) {
	t.Parallel()
	z := taverntest.Zip(t, [2]string{"card.json", "{}"}, [2]string{"assets/icon/images/main.png", "png"})
	if !bytes.HasPrefix(z, []byte("PK\x03\x04")) || bytes.Index(z, []byte("card.json")) > bytes.Index(z, []byte("assets/")) {
		t.Errorf("zip: %q", z)
	}
}
