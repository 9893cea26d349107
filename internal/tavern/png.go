package tavern

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"image"
	"image/color"
	_ "image/gif"  // register GIF for avatar conversion
	_ "image/jpeg" // register JPEG for avatar conversion
	"image/png"
	"io"
	"strings"
	"unicode/utf8"

	_ "golang.org/x/image/webp" // register WebP for avatar conversion
)

var pngSignature = []byte("\x89PNG\r\n\x1a\n")

// Avatar images given in another format are converted to PNG when at most this large.
const (
	maxAvatarSide   = 8192
	maxAvatarPixels = 32 << 20
)

// Placeholder avatar size.
const (
	placeholderWidth  = 400
	placeholderHeight = 600
)

// pngChunk is one chunk of a PNG file, with its bytes as they were in the file.
type pngChunk struct {
	typ  string
	data []byte
	raw  []byte
}

// parsePNG splits a PNG file into its chunks up to IEND, checking lengths and CRCs.
func parsePNG(data []byte) ([]pngChunk, error) {
	if !bytes.HasPrefix(data, pngSignature) {
		return nil, errors.New("not a PNG file (bad signature)")
	}
	var chunks []pngChunk
	p := len(pngSignature)
	for {
		if len(data)-p < 12 {
			return nil, fmt.Errorf("PNG truncated at byte %d: no IEND chunk", p)
		}
		n := binary.BigEndian.Uint32(data[p:])
		if n > 0x7fffffff || uint64(n) > uint64(len(data)-p-12) {
			return nil, fmt.Errorf("PNG chunk %d at byte %d: length %d runs past the end of the file", len(chunks), p, n)
		}
		end := p + 12 + int(n)
		typ := data[p+4 : p+8]
		for _, b := range typ {
			if !(b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z') {
				return nil, fmt.Errorf("PNG chunk %d at byte %d: invalid chunk type %q", len(chunks), p, typ)
			}
		}
		want := binary.BigEndian.Uint32(data[end-4:])
		if crc32.ChecksumIEEE(data[p+4:end-4]) != want {
			return nil, fmt.Errorf("PNG chunk %s at byte %d: CRC mismatch (file corrupted)", typ, p)
		}
		chunks = append(chunks, pngChunk{typ: string(typ), data: data[p+8 : end-4], raw: data[p:end]})
		p = end
		if string(typ) == "IEND" {
			return chunks, nil
		}
	}
}

// makeChunk builds a chunk with its length and CRC.
func makeChunk(typ string, data []byte) []byte {
	out := make([]byte, 12+len(data))
	binary.BigEndian.PutUint32(out, uint32(len(data)))
	copy(out[4:], typ)
	copy(out[8:], data)
	binary.BigEndian.PutUint32(out[8+len(data):], crc32.ChecksumIEEE(out[4:8+len(data)]))
	return out
}

// textKeyword returns the keyword of a tEXt, zTXt or iTXt chunk, or "" for other chunks.
func textKeyword(c pngChunk) string {
	switch c.typ {
	case "tEXt", "zTXt", "iTXt":
	default:
		return ""
	}
	i := bytes.IndexByte(c.data, 0)
	if i <= 0 {
		return ""
	}
	return string(c.data[:i])
}

// isCardChunk reports whether a chunk is a text chunk named chara or ccv3 (in any case).
func isCardChunk(c pngChunk) bool {
	kw := textKeyword(c)
	return strings.EqualFold(kw, "chara") || strings.EqualFold(kw, "ccv3")
}

// chunkText returns the text of a tEXt, zTXt or iTXt chunk, decompressed; latin1 tells that the
// text is Latin-1 by the PNG specification (tEXt, zTXt) rather than UTF-8 (iTXt).
func chunkText(c pngChunk) (text []byte, latin1 bool, err error) {
	i := bytes.IndexByte(c.data, 0)
	rest := c.data[i+1:]
	switch c.typ {
	case "tEXt":
		return rest, true, nil
	case "zTXt":
		if len(rest) < 1 {
			return nil, false, errors.New("zTXt: truncated")
		}
		if rest[0] != 0 {
			return nil, false, fmt.Errorf("zTXt: unknown compression method %d", rest[0])
		}
		t, err := inflate(rest[1:])
		if err != nil {
			return nil, false, fmt.Errorf("zTXt: %w", err)
		}
		return t, true, nil
	case "iTXt":
		if len(rest) < 2 {
			return nil, false, errors.New("iTXt: truncated")
		}
		compressed, method := rest[0], rest[1]
		rest = rest[2:]
		for range 2 { // language tag, translated keyword
			j := bytes.IndexByte(rest, 0)
			if j < 0 {
				return nil, false, errors.New("iTXt: truncated")
			}
			rest = rest[j+1:]
		}
		if compressed == 0 {
			return rest, false, nil
		}
		if method != 0 {
			return nil, false, fmt.Errorf("iTXt: unknown compression method %d", method)
		}
		t, err := inflate(rest)
		if err != nil {
			return nil, false, fmt.Errorf("iTXt: %w", err)
		}
		return t, false, nil
	}
	return nil, false, fmt.Errorf("%s is not a text chunk", c.typ)
}

// inflate decompresses zlib data, refusing more than MaxInputSize bytes of output.
func inflate(data []byte) ([]byte, error) {
	zr, err := zlib.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("zlib: %w", err)
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, MaxInputSize+1))
	if err != nil {
		return nil, fmt.Errorf("zlib: %w", err)
	}
	if len(out) > MaxInputSize {
		return nil, fmt.Errorf("decompressed text exceeds %d bytes", MaxInputSize)
	}
	return out, nil
}

// decodePayload turns a card chunk's text into JSON: base64 decoded to bytes, then UTF-8. Raw JSON
// (a sloppy writer's) is accepted too.
func decodePayload(text []byte, latin1 bool) ([]byte, error) {
	t := bytes.TrimSpace(text)
	if len(t) == 0 {
		return nil, errors.New("empty text")
	}
	if t[0] == '{' {
		if !utf8.Valid(t) && latin1 {
			t = latin1ToUTF8(t)
		}
		return t, nil
	}
	compact := make([]byte, 0, len(t))
	for _, b := range t {
		switch b {
		case ' ', '\t', '\r', '\n':
		default:
			compact = append(compact, b)
		}
	}
	var decoded []byte
	var firstErr error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		d, err := enc.DecodeString(string(compact))
		if err == nil {
			decoded = d
			break
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if decoded == nil {
		return nil, fmt.Errorf("base64: %w", firstErr)
	}
	decoded = bytes.TrimPrefix(decoded, utf8BOM)
	if !utf8.Valid(decoded) {
		return nil, errors.New("base64-decoded text is not valid UTF-8")
	}
	return decoded, nil
}

func latin1ToUTF8(b []byte) []byte {
	out := make([]byte, 0, len(b)*2)
	for _, c := range b {
		out = utf8.AppendRune(out, rune(c))
	}
	return out
}

// readPNG reads a card from the chara or ccv3 text chunk of a PNG (ccv3 preferred).
func readPNG(data []byte) (*Card, Format, error) {
	chunks, err := parsePNG(data)
	if err != nil {
		return nil, Format{}, err
	}
	var ccv3, chara *pngChunk
	for i := range chunks {
		kw := textKeyword(chunks[i])
		switch {
		case ccv3 == nil && strings.EqualFold(kw, "ccv3"):
			ccv3 = &chunks[i]
		case chara == nil && strings.EqualFold(kw, "chara"):
			chara = &chunks[i]
		}
	}
	pick, name := ccv3, "ccv3"
	if pick == nil {
		pick, name = chara, "chara"
	}
	if pick == nil {
		return nil, Format{}, errors.New("PNG has no chara or ccv3 text chunk")
	}
	text, latin1, err := chunkText(*pick)
	if err != nil {
		return nil, Format{}, fmt.Errorf("%s chunk: %w", name, err)
	}
	js, err := decodePayload(text, latin1)
	if err != nil {
		return nil, Format{}, fmt.Errorf("%s chunk: %w", name, err)
	}
	root, err := decodeJSONObject(js)
	if err != nil {
		return nil, Format{}, fmt.Errorf("%s chunk: %w", name, err)
	}
	c, spec, err := cardFromObject(root)
	if err != nil {
		return nil, Format{}, fmt.Errorf("%s chunk: %w", name, err)
	}
	c.Avatar = stripCardChunks(chunks)
	return c, Format{Container: "png", Spec: spec, Chunk: name}, nil
}

// stripCardChunks reassembles a PNG from its chunks without the chara and ccv3 ones.
func stripCardChunks(chunks []pngChunk) []byte {
	var buf bytes.Buffer
	buf.Write(pngSignature)
	for _, c := range chunks {
		if !isCardChunk(c) {
			buf.Write(c.raw)
		}
	}
	return buf.Bytes()
}

// WritePNG renders a card as a PNG carrying a ccv3 chunk (V3 JSON) and a chara chunk (V2 JSON), both
// base64 tEXt before IEND. The image is avatar's (PNG, or JPEG, GIF or WebP converted to PNG); when
// avatar is nil the card's own Avatar is used, and when that is empty too, a generated placeholder.
// Old chara and ccv3 chunks of the avatar are removed; its other chunks are kept as they were.
func WritePNG(c *Card, avatar []byte) ([]byte, error) {
	if c == nil {
		return nil, errors.New("no card")
	}
	if avatar == nil {
		avatar = c.Avatar
	}
	if len(avatar) > MaxInputSize {
		return nil, fmt.Errorf("avatar is %d bytes; the limit is %d", len(avatar), MaxInputSize)
	}
	var err error
	switch {
	case len(avatar) == 0:
		avatar, err = placeholderPNG(c.Name)
	case !bytes.HasPrefix(avatar, pngSignature):
		avatar, err = toPNG(avatar)
	}
	if err != nil {
		return nil, fmt.Errorf("avatar: %w", err)
	}
	chunks, err := parsePNG(avatar)
	if err != nil {
		return nil, fmt.Errorf("avatar: %w", err)
	}
	if chunks[0].typ != "IHDR" {
		return nil, errors.New("avatar: PNG does not start with an IHDR chunk")
	}
	v2, err := writeCompactCard(c, SpecV2)
	if err != nil {
		return nil, err
	}
	v3, err := writeCompactCard(c, SpecV3)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Write(pngSignature)
	for _, ch := range chunks {
		if isCardChunk(ch) {
			continue
		}
		if ch.typ == "IEND" {
			buf.Write(makeChunk("tEXt", textChunkData("chara", v2)))
			buf.Write(makeChunk("tEXt", textChunkData("ccv3", v3)))
		}
		buf.Write(ch.raw)
	}
	return buf.Bytes(), nil
}

// textChunkData builds the data of a tEXt chunk holding base64 of the given JSON.
func textChunkData(keyword string, js []byte) []byte {
	out := make([]byte, 0, len(keyword)+1+base64.StdEncoding.EncodedLen(len(js)))
	out = append(out, keyword...)
	out = append(out, 0)
	return base64.StdEncoding.AppendEncode(out, js)
}

// ToPNG returns an image as PNG: a PNG as it is, a JPEG, GIF or WebP converted (at most 8192
// pixels a side).
func ToPNG(data []byte) ([]byte, error) {
	if bytes.HasPrefix(data, pngSignature) {
		return data, nil
	}
	return toPNG(data)
}

// toPNG converts a JPEG, GIF or WebP image to PNG, refusing huge images before decoding them.
func toPNG(data []byte) ([]byte, error) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not a PNG, and not a decodable image: %w", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width > maxAvatarSide || cfg.Height > maxAvatarSide || cfg.Width*cfg.Height > maxAvatarPixels {
		return nil, fmt.Errorf("%s image is %dx%d; at most %dx%d and %d pixels are accepted", format, cfg.Width, cfg.Height, maxAvatarSide, maxAvatarSide, maxAvatarPixels)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", format, err)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// placeholderColors are muted colours a placeholder avatar is painted in, picked by the card's name.
var placeholderColors = []color.RGBA{
	{0x4a, 0x5d, 0x7e, 0xff}, {0x6b, 0x4f, 0x7a, 0xff}, {0x3f, 0x6e, 0x5c, 0xff}, {0x7a, 0x5a, 0x3e, 0xff},
	{0x5c, 0x6b, 0x73, 0xff}, {0x80, 0x4a, 0x4a, 0xff}, {0x4e, 0x6a, 0x3b, 0xff}, {0x3b, 0x55, 0x6a, 0xff},
}

// placeholderPNG draws a 400x600 single-colour PNG, its colour chosen by the card's name.
func placeholderPNG(name string) ([]byte, error) {
	h := fnv.New32a()
	h.Write([]byte(name))
	col := placeholderColors[h.Sum32()%uint32(len(placeholderColors))]
	img := image.NewPaletted(image.Rect(0, 0, placeholderWidth, placeholderHeight), color.Palette{col})
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
