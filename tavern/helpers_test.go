package tavern

import (
	"archive/zip"
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"reflect"
	"strings"
	"testing"
)

// mustJSON encodes v as JSON.
func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

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

// testImage encodes a small gradient image as PNG with image/png.
func testImage(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x * 7), uint8(y * 11), uint8(x + y), 0xff})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// textChunk builds a tEXt chunk.
func textChunk(kw, text string) []byte {
	return makeChunk("tEXt", append([]byte(kw+"\x00"), text...))
}

// zlibBytes compresses b with zlib.
func zlibBytes(b []byte) []byte {
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// zTXtChunk builds a zTXt chunk.
func zTXtChunk(kw, text string) []byte {
	data := append([]byte(kw+"\x00\x00"), zlibBytes([]byte(text))...)
	return makeChunk("zTXt", data)
}

// iTXtChunk builds an iTXt chunk, compressed or not.
func iTXtChunk(kw, text string, compressed bool) []byte {
	data := []byte(kw + "\x00")
	if compressed {
		data = append(data, 1, 0)
	} else {
		data = append(data, 0, 0)
	}
	data = append(data, "en\x00Character\x00"...)
	if compressed {
		data = append(data, zlibBytes([]byte(text))...)
	} else {
		data = append(data, text...)
	}
	return makeChunk("iTXt", data)
}

// Places where insertChunks puts chunks.
const (
	afterIHDR  = "afterIHDR"
	afterIDAT  = "afterIDAT"
	beforeIEND = "beforeIEND"
	afterIEND  = "afterIEND"
)

// insertChunks does chunk surgery on a PNG: it puts raw chunks at the given place.
func insertChunks(t testing.TB, img []byte, where string, chunks ...[]byte) []byte {
	t.Helper()
	parsed, err := parsePNG(img)
	if err != nil {
		t.Fatal(err)
	}
	extra := bytes.Join(chunks, nil)
	var buf bytes.Buffer
	buf.Write(pngSignature)
	lastIDAT := -1
	for i, c := range parsed {
		if c.typ == "IDAT" {
			lastIDAT = i
		}
	}
	for i, c := range parsed {
		if c.typ == "IEND" && where == beforeIEND {
			buf.Write(extra)
		}
		buf.Write(c.raw)
		if (c.typ == "IHDR" && where == afterIHDR) || (i == lastIDAT && where == afterIDAT) {
			buf.Write(extra)
		}
	}
	if where == afterIEND {
		buf.Write(extra)
	}
	return buf.Bytes()
}

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

// makeZip builds a zip archive from name/content pairs, in order.
func makeZip(t testing.TB, files ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		w, err := zw.Create(f[0])
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f[1]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// diff compares two values and reports a difference under the given field name.
func diff(t testing.TB, field string, want, got any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Errorf("%s:\n want %s\n  got %s", field, show(want), show(got))
	}
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// compareCards compares two cards field by field (Avatar only when withAvatar).
func compareCards(t testing.TB, want, got *Card, withAvatar bool) {
	t.Helper()
	if want == nil || got == nil {
		if want != got {
			t.Fatalf("card: want %v, got %v", want, got)
		}
		return
	}
	diff(t, "Name", want.Name, got.Name)
	diff(t, "Welcome", want.Welcome, got.Welcome)
	diff(t, "Alternates", want.Alternates, got.Alternates)
	diff(t, "Description", want.Description, got.Description)
	diff(t, "Sections", want.Sections, got.Sections)
	diff(t, "Tags", want.Tags, got.Tags)
	diff(t, "Creator", want.Creator, got.Creator)
	diff(t, "CharacterVersion", want.CharacterVersion, got.CharacterVersion)
	for _, ns := range []string{extData, extRoot} {
		diff(t, "Extensions."+ns, want.Extensions[ns], got.Extensions[ns])
	}
	diff(t, "Extensions", want.Extensions, got.Extensions)
	compareBooks(t, "Book", want.Book, got.Book)
	if withAvatar && !bytes.Equal(want.Avatar, got.Avatar) {
		t.Errorf("Avatar: want %d bytes, got %d bytes", len(want.Avatar), len(got.Avatar))
	}
}

// compareBooks compares two books field by field.
func compareBooks(t testing.TB, name string, want, got *Book) {
	t.Helper()
	if want == nil || got == nil {
		if want != got {
			t.Errorf("%s: want %s, got %s", name, show(want), show(got))
		}
		return
	}
	diff(t, name+".Name", want.Name, got.Name)
	diff(t, name+".Description", want.Description, got.Description)
	diff(t, name+".Extensions", want.Extensions, got.Extensions)
	if len(want.Entries) != len(got.Entries) {
		t.Errorf("%s.Entries: want %d, got %d", name, len(want.Entries), len(got.Entries))
		return
	}
	for i := range want.Entries {
		compareEntries(t, fmt.Sprintf("%s.Entries[%d]", name, i), want.Entries[i], got.Entries[i])
	}
}

// compareEntries compares two entries field by field.
func compareEntries(t testing.TB, name string, want, got Entry) {
	t.Helper()
	diff(t, name+".EntryID", want.EntryID, got.EntryID)
	diff(t, name+".Name", want.Name, got.Name)
	diff(t, name+".Content", want.Content, got.Content)
	diff(t, name+".Keywords", want.Keywords, got.Keywords)
	diff(t, name+".SecondaryKeywords", want.SecondaryKeywords, got.SecondaryKeywords)
	diff(t, name+".MatchOptions", want.MatchOptions, got.MatchOptions)
	diff(t, name+".Category", want.Category, got.Category)
	diff(t, name+".IsEnabled", want.IsEnabled, got.IsEnabled)
	diff(t, name+".IsConstant", want.IsConstant, got.IsConstant)
	diff(t, name+".Priority", want.Priority, got.Priority)
	diff(t, name+".SortOrder", want.SortOrder, got.SortOrder)
	diff(t, name+".Extensions", want.Extensions, got.Extensions)
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

// n is a json.Number literal, as decoded values hold numbers.
func n(s string) json.Number { return json.Number(s) }
