package tools

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

// Lorebook export formats.
const (
	formatWorldInfo  = "worldinfo"
	formatLorebookV3 = "lorebook_v3"
)

type exportWorldbookArgs struct {
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

// exportTavernWorldbook exports one worldbook as a SillyTavern World Info file or a lorebook_v3
// file, restoring what an import kept aside of it and naming what it could not.
func exportTavernWorldbook(ctx context.Context, c *Call) (json.RawMessage, error) {
	var in exportWorldbookArgs
	if err := json.Unmarshal(c.Body, &in); err != nil {
		return nil, fmt.Errorf("decode the arguments: %w", err)
	}
	if in.Format == "" {
		in.Format = formatWorldInfo
	}
	st := &steps{p: c.Progress, total: 2}
	st.start(ctx, "read the worldbook and its entries")
	wb, err := c.Client.GetWorldbook(ctx, in.WorldbookID)
	if err != nil {
		return nil, err
	}
	keys, err := asideKeysFor(ctx, c.Client)
	if err != nil {
		return nil, err
	}
	rb, n, err := restoreWorldbook(ctx, c, keys, *wb, "lorebook")
	if err != nil {
		return nil, err
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
	if in.Format == formatLorebookV3 {
		file, err = tavern.WriteLorebookV3(rb.book)
	} else {
		file, err = tavern.WriteWorldInfo(rb.book)
	}
	if err != nil {
		return nil, fmt.Errorf("write the %s file: %w", in.Format, err)
	}
	obj, err := schema.DecodeJSON(file)
	if err != nil {
		return nil, fmt.Errorf("decode the %s file: %w", in.Format, err)
	}
	if out.Lorebook, err = marshalNoEscape(obj); err != nil {
		return nil, err
	}
	c.Content = []mcp.Content{mcp.NewTextContent(string(file))}
	return marshalNoEscape(out)
}
