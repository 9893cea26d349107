package tavern

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// Bounds of the assets Read keeps of a CHARX: MaxKeptAssetBytes of decompressed bytes and
// MaxKeptAssets members, all together. Members past them, and members that cannot be read, are
// named in Card.AssetsLeftOut instead (at most maxLeftOutNames of them, then a count).
const (
	MaxKeptAssetBytes = 16 << 20
	MaxKeptAssets     = 1000
	maxLeftOutNames   = 100
)

// Asset is one member of a CHARX other than card.json (an image, a sound, module.risum, x_meta
// JSON, ...), kept as it was.
type Asset struct {
	// Path is the member's name in the zip, e.g. "assets/emotion/images/joy.png".
	Path string `json:"path"`
	// Data is the member's decompressed bytes.
	Data []byte `json:"data"`
}

// charxMainIcon is where WriteCHARX puts the card's avatar when the card has no icon asset of its own.
const charxMainIcon = "assets/icon/images/main.png"

// embeddedPath returns the zip member an embeded:// (or embedded://) URI names, "" for other URIs.
func embeddedPath(uri string) string {
	for _, scheme := range []string{"embeded://", "embedded://"} {
		if strings.HasPrefix(uri, scheme) {
			return path.Clean(strings.TrimPrefix(strings.TrimPrefix(uri, scheme), "/"))
		}
	}
	return ""
}

// readAssets reads the members of a CHARX other than card.json, in zip order, within
// MaxKeptAssetBytes and MaxKeptAssets; it returns the kept ones and the names of the others (a
// member that cannot be read is left out too: the card itself still imports, as it did before
// assets were kept).
func readAssets(zr *zip.Reader, card *zip.File) ([]Asset, []string) {
	var kept []Asset
	var left []string
	leftOut := 0
	budget := MaxKeptAssetBytes
	seen := map[string]bool{}
	for _, f := range zr.File {
		name := strings.TrimPrefix(strings.ReplaceAll(f.Name, "\\", "/"), "./")
		if f == card || strings.EqualFold(name, "card.json") || f.FileInfo().IsDir() || strings.HasSuffix(name, "/") || seen[name] {
			continue
		}
		seen[name] = true
		var data []byte
		err := errOverBudget
		if len(kept) < MaxKeptAssets && f.UncompressedSize64 <= uint64(budget) {
			data, err = readZipMember(f, budget)
		}
		if err != nil {
			if leftOut++; leftOut <= maxLeftOutNames {
				left = append(left, name)
			}
			continue
		}
		budget -= len(data)
		kept = append(kept, Asset{Path: name, Data: data})
	}
	if leftOut > maxLeftOutNames {
		left = append(left, fmt.Sprintf("(%d more)", leftOut-maxLeftOutNames))
	}
	return kept, left
}

var errOverBudget = errors.New("over the budget")

// readZipMember reads a zip member, refusing to decompress more than limit bytes.
func readZipMember(f *zip.File, limit int) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	out, err := io.ReadAll(io.LimitReader(rc, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(out) > limit {
		return nil, errOverBudget
	}
	return out, nil
}

// dataAssets returns the card's data.assets list (nil when it has none) from its Extensions.
func dataAssets(c *Card) []any {
	list, _ := extMap(c.Extensions, extData)["assets"].([]any)
	return list
}

// setDataAssets replaces data.assets in a card's Extensions (copying them first).
func setDataAssets(c *Card, list []any) {
	ext := deepCopyMap(c.Extensions)
	if ext == nil {
		ext = map[string]any{}
	}
	data := extMap(ext, extData)
	if data == nil {
		data = map[string]any{}
	}
	data["assets"] = list
	ext[extData] = data
	c.Extensions = ext
}

// describeAsset names an asset descriptor for a message: its type, name and URI.
func describeAsset(a map[string]any) string {
	return fmt.Sprintf("%v %q (%v)", a["type"], fmt.Sprint(a["name"]), a["uri"])
}

// DetachEmbedded prepares a card for a file that carries no CHARX members (JSON or PNG): in
// data.assets, the main icon's embeded:// URI becomes "ccdefault:" (the file's own image, or the
// reader's default icon), and every other asset whose URI is embeded:// is dropped, so that no
// reference dangles. It returns the dropped assets, described for the user.
func (c *Card) DetachEmbedded() []string {
	list := dataAssets(c)
	if list == nil {
		return nil
	}
	var dropped []string
	out := make([]any, 0, len(list))
	changed := false
	for _, x := range list {
		a, ok := x.(map[string]any)
		uri, _ := a["uri"].(string)
		if !ok || embeddedPath(uri) == "" {
			out = append(out, x)
			continue
		}
		changed = true
		if a["type"] == "icon" && a["name"] == "main" {
			a = deepCopyMap(a)
			a["uri"] = "ccdefault:"
			out = append(out, a)
			continue
		}
		dropped = append(dropped, describeAsset(a))
	}
	if changed {
		setDataAssets(c, out)
	}
	return dropped
}

// AttachCHARX prepares a card for a CHARX export: an asset of data.assets whose embeded://
// member is not among c.Assets is dropped (and returned, described), so that no reference
// dangles; icon is the card's avatar (PNG): when no icon asset of the card has its member, it is
// added to c.Assets as the main icon, at assets/icon/images/main.png, and named in data.assets
// (in place of a main icon given as ccdefault:). Calling it again changes nothing.
func (c *Card) AttachCHARX(icon []byte) []string {
	members := map[string]bool{}
	for _, a := range c.Assets {
		members[a.Path] = true
	}
	var dropped []string
	var list []any
	hasIcon := false
	for _, x := range dataAssets(c) {
		a, ok := x.(map[string]any)
		uri, _ := a["uri"].(string)
		p := embeddedPath(uri)
		if ok && p != "" && !members[p] {
			dropped = append(dropped, describeAsset(a))
			continue
		}
		if ok && p != "" && a["type"] == "icon" {
			hasIcon = true
		}
		list = append(list, x)
	}
	if !hasIcon && len(icon) > 0 {
		p := charxMainIcon
		for i := 2; members[p]; i++ {
			p = fmt.Sprintf("assets/icon/images/main-%d.png", i)
		}
		c.Assets = append(append([]Asset(nil), c.Assets...), Asset{Path: p, Data: icon})
		main := map[string]any{"type": "icon", "uri": "embeded://" + p, "name": "main", "ext": "png"}
		placed := false
		for i, x := range list {
			// The main icon a PNG or JSON card names as ccdefault: (its own image) is this one.
			if a, ok := x.(map[string]any); ok && a["type"] == "icon" && a["name"] == "main" && a["uri"] == "ccdefault:" {
				a = deepCopyMap(a)
				a["uri"], a["ext"] = main["uri"], "png"
				list[i], placed = a, true
				break
			}
		}
		if !placed {
			list = append(list, main)
		}
	}
	if list != nil || dataAssets(c) != nil {
		if list == nil {
			list = []any{}
		}
		setDataAssets(c, list)
	}
	return dropped
}

// WriteCHARX renders a card as a CHARX zip: card.json (the V3 JSON) first, then every asset the
// card carries (Card.Assets, as they were read), so that an asset nobody references survives too.
// It works on a copy prepared with AttachCHARX(icon), and returns what that dropped.
func WriteCHARX(c *Card, icon []byte) ([]byte, []string, error) {
	if c == nil {
		return nil, nil, errors.New("no card")
	}
	for _, a := range c.Assets {
		if !localZipName(a.Path) || strings.EqualFold(a.Path, "card.json") {
			return nil, nil, fmt.Errorf("asset %q: not a path a CHARX may hold", a.Path)
		}
	}
	cc := *c
	dropped := cc.AttachCHARX(icon)
	assets := cc.Assets
	js, err := WriteV3JSON(&cc)
	if err != nil {
		return nil, nil, err
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	write := func(name string, data []byte) error {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	if err := write("card.json", js); err != nil {
		return nil, nil, fmt.Errorf("CHARX card.json: %w", err)
	}
	for _, a := range assets {
		if err := write(a.Path, a.Data); err != nil {
			return nil, nil, fmt.Errorf("CHARX member %q: %w", a.Path, err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, nil, fmt.Errorf("CHARX: %w", err)
	}
	return buf.Bytes(), dropped, nil
}
