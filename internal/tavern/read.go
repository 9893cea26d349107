package tavern

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Read reads a character card, sniffing its container: a PNG (card in a chara or ccv3 tEXt, zTXt or
// iTXt chunk anywhere in the file, ccv3 preferred), a CHARX zip (card.json), or V1, V2 or V3 JSON.
func Read(data []byte) (c *Card, f Format, err error) {
	defer func() {
		if r := recover(); r != nil {
			c, f, err = nil, Format{}, fmt.Errorf("unreadable card: %v", r)
		}
	}()
	return read(data)
}

func read(data []byte) (*Card, Format, error) {
	if len(data) == 0 {
		return nil, Format{}, errors.New("input is empty")
	}
	if len(data) > MaxInputSize {
		return nil, Format{}, fmt.Errorf("input is %d bytes; the limit is %d", len(data), MaxInputSize)
	}
	switch {
	case bytes.HasPrefix(data, pngSignature):
		return readPNG(data)
	case bytes.HasPrefix(data, []byte("PK\x03\x04")), bytes.HasPrefix(data, []byte("PK\x05\x06")):
		return readCHARX(data)
	case looksLikeJSON(data):
		root, err := decodeJSONObject(data)
		if err != nil {
			return nil, Format{}, err
		}
		c, spec, err := cardFromObject(root)
		if err != nil {
			return nil, Format{}, err
		}
		return c, Format{Container: "json", Spec: spec}, nil
	case bytes.Contains(data, []byte("PK\x05\x06")):
		// A CHARX appended to an image (as some editors export it).
		return readCHARX(data)
	}
	return nil, Format{}, errors.New("unrecognised input: not a PNG, a CHARX (zip) or a JSON card")
}

// readCHARX reads a card from a CHARX zip: card.json at the root, and the main icon asset as avatar.
func readCHARX(data []byte) (*Card, Format, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return nil, Format{}, fmt.Errorf("CHARX: zip: %w", err)
	}
	files := map[string]*zip.File{}
	var card *zip.File
	for _, f := range zr.File {
		name := strings.TrimPrefix(strings.ReplaceAll(f.Name, "\\", "/"), "./")
		if !localZipName(name) {
			return nil, Format{}, fmt.Errorf("CHARX member %q has an unsafe path (absolute, or leaving the archive with ..): the file is refused", f.Name)
		}
		if _, dup := files[name]; !dup {
			files[name] = f
		}
		if card == nil && strings.EqualFold(name, "card.json") {
			card = f
		}
	}
	if f, ok := files["card.json"]; ok {
		card = f
	}
	if card == nil {
		return nil, Format{}, errors.New("CHARX has no card.json at the root of the zip")
	}
	js, err := readZipFile(card)
	if err != nil {
		return nil, Format{}, fmt.Errorf("CHARX card.json: %w", err)
	}
	root, err := decodeJSONObject(js)
	if err != nil {
		return nil, Format{}, fmt.Errorf("CHARX card.json: %w", err)
	}
	c, spec, err := cardFromObject(root)
	if err != nil {
		return nil, Format{}, fmt.Errorf("CHARX card.json: %w", err)
	}
	c.Avatar = charxAvatar(root, files)
	c.Assets, c.AssetsLeftOut = readAssets(zr, card)
	return c, Format{Container: "charx", Spec: spec}, nil
}

// localZipName reports whether a zip member's name (slashes only) stays inside the archive:
// relative, no ".." element, no drive or NUL.
func localZipName(name string) bool {
	if name == "" || strings.HasPrefix(name, "/") || strings.ContainsRune(name, 0) || strings.Contains(name, ":") {
		return false
	}
	for _, elem := range strings.Split(name, "/") {
		if elem == ".." {
			return false
		}
	}
	return true
}

// readZipFile reads a zip member, refusing to decompress more than MaxInputSize bytes.
func readZipFile(f *zip.File) ([]byte, error) {
	if f.UncompressedSize64 > MaxInputSize {
		return nil, fmt.Errorf("%d bytes uncompressed; the limit is %d", f.UncompressedSize64, MaxInputSize)
	}
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	out, err := io.ReadAll(io.LimitReader(rc, MaxInputSize+1))
	if err != nil {
		return nil, err
	}
	if len(out) > MaxInputSize {
		return nil, fmt.Errorf("decompresses to more than %d bytes", MaxInputSize)
	}
	return out, nil
}

// charxAvatar returns the card's main icon as PNG bytes when the CHARX embeds one, else nil.
func charxAvatar(root map[string]any, files map[string]*zip.File) []byte {
	data, _ := root["data"].(map[string]any)
	assets, _ := data["assets"].([]any)
	var uri string
	for _, a := range assets {
		am, _ := a.(map[string]any)
		if t, _ := am["type"].(string); t != "icon" {
			continue
		}
		u, _ := am["uri"].(string)
		if n, _ := am["name"].(string); n == "main" {
			uri = u
			break
		}
		if uri == "" {
			uri = u
		}
	}
	p := embeddedPath(uri)
	f, ok := files[p]
	if p == "" || !ok {
		return nil
	}
	img, err := readZipFile(f)
	if err != nil {
		return nil
	}
	if !bytes.HasPrefix(img, pngSignature) {
		if img, err = toPNG(img); err != nil {
			return nil
		}
	}
	chunks, err := parsePNG(img)
	if err != nil || chunks[0].typ != "IHDR" {
		return nil
	}
	return stripCardChunks(chunks)
}
