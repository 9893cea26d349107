package taverntest

// Builders for the files that carry cards: PNG images with text chunks, put in chunk by chunk, and
// CHARX zip archives. They are written here from the PNG and zip formats, not with the tavern
// package's own code, so that a test of that code does not check it against itself.

import (
	"archive/zip"
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"testing"
)

// pngSignature opens every PNG file.
const pngSignature = "\x89PNG\r\n\x1a\n"

// Image encodes a small w×h gradient image as PNG with image/png.
func Image(t testing.TB, w, h int) []byte {
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

// Chunk builds a PNG chunk: its length, type, data and CRC.
func Chunk(typ string, data []byte) []byte {
	out := make([]byte, 12+len(data))
	binary.BigEndian.PutUint32(out, uint32(len(data)))
	copy(out[4:], typ)
	copy(out[8:], data)
	binary.BigEndian.PutUint32(out[8+len(data):], crc32.ChecksumIEEE(out[4:8+len(data)]))
	return out
}

// Zlib compresses b with zlib.
func Zlib(b []byte) []byte {
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// TextChunk builds a tEXt chunk. Card writers put a card's JSON in it base64-encoded.
func TextChunk(kw, text string) []byte {
	return Chunk("tEXt", append([]byte(kw+"\x00"), text...))
}

// ZTXtChunk builds a zTXt chunk: text compressed with zlib.
func ZTXtChunk(kw, text string) []byte {
	return Chunk("zTXt", append([]byte(kw+"\x00\x00"), Zlib([]byte(text))...))
}

// ITXtChunk builds an iTXt chunk (language "en", translated keyword "Character"), its text
// compressed with zlib or not.
func ITXtChunk(kw, text string, compressed bool) []byte {
	data := []byte(kw + "\x00")
	if compressed {
		data = append(data, 1, 0)
	} else {
		data = append(data, 0, 0)
	}
	data = append(data, "en\x00Character\x00"...)
	if compressed {
		data = append(data, Zlib([]byte(text))...)
	} else {
		data = append(data, text...)
	}
	return Chunk("iTXt", data)
}

// Place is where InsertChunks puts chunks in a PNG.
type Place int

// The places InsertChunks puts chunks.
const (
	AfterIHDR  Place = iota // right after the header
	AfterIDAT               // right after the last image data chunk
	BeforeIEND              // right before the end chunk, where card writers put theirs
	AfterIEND               // after the end chunk: trailing data, not a chunk of the image
)

// InsertChunks does chunk surgery on a PNG: it puts raw chunks (or any bytes) at the given place
// and keeps everything else as it was. It fails the test when img is not a PNG made of whole
// chunks ending in IEND.
func InsertChunks(t testing.TB, img []byte, where Place, chunks ...[]byte) []byte {
	t.Helper()
	if !bytes.HasPrefix(img, []byte(pngSignature)) {
		t.Fatal("InsertChunks: not a PNG (bad signature)")
	}
	at := -1
	for p, typ := len(pngSignature), ""; typ != "IEND"; {
		if len(img)-p < 12 {
			t.Fatalf("InsertChunks: PNG truncated at byte %d: no IEND chunk", p)
		}
		end := p + 12 + int(binary.BigEndian.Uint32(img[p:]))
		if end > len(img) {
			t.Fatalf("InsertChunks: the chunk at byte %d runs past the end of the file", p)
		}
		typ = string(img[p+4 : p+8])
		switch {
		case typ == "IHDR" && where == AfterIHDR, typ == "IDAT" && where == AfterIDAT, typ == "IEND" && where == AfterIEND:
			at = end
		case typ == "IEND" && where == BeforeIEND:
			at = p
		}
		p = end
	}
	if at < 0 {
		t.Fatalf("InsertChunks: no place %d in the PNG", where)
	}
	out := append([]byte{}, img[:at]...)
	out = append(out, bytes.Join(chunks, nil)...)
	return append(out, img[at:]...)
}

// Zip builds a zip archive (a CHARX file, say) from name/content pairs, in order.
func Zip(t testing.TB, files ...[2]string) []byte {
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

// CardChunk returns the JSON object a PNG card carries base64-encoded in the tEXt chunk named
// keyword (chara or ccv3), numbers as json.Number; it fails the test when there is none. It reads
// the chunks itself, not with the tavern package.
func CardChunk(t testing.TB, img []byte, keyword string) map[string]any {
	t.Helper()
	for p := len(pngSignature); p+12 <= len(img); {
		n := int(binary.BigEndian.Uint32(img[p:]))
		if p+12+n > len(img) {
			break
		}
		typ, data := string(img[p+4:p+8]), img[p+8:p+8+n]
		p += 12 + n
		if kw, text, ok := bytes.Cut(data, []byte{0}); typ == "tEXt" && ok && string(kw) == keyword {
			js, err := base64.StdEncoding.DecodeString(string(text))
			if err != nil {
				t.Fatalf("%s chunk: %v", keyword, err)
			}
			dec := json.NewDecoder(bytes.NewReader(js))
			dec.UseNumber()
			var v map[string]any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("%s chunk: %v", keyword, err)
			}
			return v
		}
	}
	t.Fatalf("no %s chunk", keyword)
	return nil
}
