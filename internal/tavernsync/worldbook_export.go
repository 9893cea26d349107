package tavernsync

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

// Lorebook export formats.
const (
	formatWorldInfo  = "worldinfo"
	FormatLorebookV3 = "lorebook_v3" // a Character Card V3 lorebook; the other is SillyTavern World Info
)

// ExportWorldbookArgs are export_tavern_worldbook's arguments.
type ExportWorldbookArgs struct {
	WorldbookID string `json:"worldbookId"`
	Format      string `json:"format"`
}

// exportWorldbookResult is export_tavern_worldbook's result (tools.json).
type exportWorldbookResult struct {
	WorldbookID       string          `json:"worldbookId"`
	Name              string          `json:"name"`
	Format            string          `json:"format"`
	Lorebook          json.RawMessage `json:"lorebook"`
	Entries           int             `json:"entries"`
	KeptAsideRestored []string        `json:"keptAsideRestored"`
	NotRestored       []string        `json:"notRestored"`
	Notes             []string        `json:"notes"`
}

// ExportWorldbook exports one worldbook as a SillyTavern World Info file or a lorebook_v3
// file, restoring what an import kept aside of it and naming what it could not; it returns
// export_tavern_worldbook's result object and the file (as Text).
func ExportWorldbook(ctx context.Context, c Env, in ExportWorldbookArgs) (json.RawMessage, File, error) {
	if in.Format == "" {
		in.Format = formatWorldInfo
	}
	st := &steps{p: c.Progress, total: 2}
	st.start(ctx, "read the worldbook and its entries")
	wb, err := c.Client.GetWorldbook(ctx, in.WorldbookID)
	if err != nil {
		return nil, File{}, err
	}
	keys, err := asideKeysFor(ctx, c.Client)
	if err != nil {
		return nil, File{}, err
	}
	rb, n, err := restoreWorldbook(ctx, c, keys, *wb, "lorebook")
	if err != nil {
		return nil, File{}, err
	}
	st.end()
	st.start(ctx, "write the "+in.Format+" file")
	out := exportWorldbookResult{WorldbookID: wb.WorldbookID, Name: rb.book.Name, Format: in.Format, Entries: n,
		KeptAsideRestored: unionSorted(rb.kept), NotRestored: unionSorted(rb.notRestored), Notes: []string{}}
	if wb.Format == upstream.WorldbookNative && n > 0 {
		out.Notes = append(out.Notes, "The worldbook is native: on the card service its entries follow the service's matching rules; "+
			"in SillyTavern they follow SillyTavern's, with its default options (case-insensitive, any word boundary).")
	}
	var file []byte
	if in.Format == FormatLorebookV3 {
		file, err = tavern.WriteLorebookV3(rb.book)
	} else {
		file, err = tavern.WriteWorldInfo(rb.book)
	}
	if err != nil {
		return nil, File{}, fmt.Errorf("write the %s file: %w", in.Format, err)
	}
	obj, err := schema.DecodeJSON(file)
	if err != nil {
		return nil, File{}, fmt.Errorf("decode the %s file: %w", in.Format, err)
	}
	if out.Lorebook, err = jsontext.Marshal(obj); err != nil {
		return nil, File{}, err
	}
	res, err := jsontext.Marshal(out)
	if err != nil {
		return nil, File{}, err
	}
	return res, File{Text: string(file)}, nil
}
