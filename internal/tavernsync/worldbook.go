package tavernsync

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// ImportWorldbookArgs are import_tavern_worldbook's arguments.
type ImportWorldbookArgs struct {
	Source      Source `json:"source"`
	WorldbookID string `json:"worldbookId"`
	Name        string `json:"name"`
	RoleID      string `json:"roleId"`
}

// importWorldbookResult is import_tavern_worldbook's result (tools.json).
type importWorldbookResult struct {
	WorldbookID     string   `json:"worldbookId"`
	Name            string   `json:"name"`
	Format          string   `json:"format"`
	Created         bool     `json:"created"`
	EntryCount      int      `json:"entryCount"`
	CreatedEntryIDs []string `json:"createdEntryIds"`
	Bound           bool     `json:"bound"`
	RoleID          string   `json:"roleId,omitempty"`
	KeptAside       []string `json:"keptAside"`
	Notes           []string `json:"notes"`
}

// DefaultBookName names a worldbook made from a lorebook that has no name.
const DefaultBookName = "Imported lorebook"

// ImportWorldbook imports a lorebook file into a new tavern-format worldbook, or adds its
// entries to an existing worldbook, optionally binding it to a card; it returns
// import_tavern_worldbook's result object.
func ImportWorldbook(ctx context.Context, c Env, in ImportWorldbookArgs) (json.RawMessage, error) {
	if in.WorldbookID != "" && in.Name != "" {
		return nil, &Failure{Code: CodeInvalidArguments, Detail: map[string]any{"arguments": []any{"worldbookId", "name"}},
			Message: "Give worldbookId (to add the entries to that worldbook) or name (to name a new one), not both."}
	}
	data, err := readSource(ctx, c, in.Source)
	if err != nil {
		return nil, err
	}
	book, err := tavern.ReadBook(data)
	if err != nil {
		return nil, &Failure{Code: CodeInvalidFile, Message: "The file is not a lorebook this server can read: " + err.Error() + ".",
			Detail: map[string]any{"argument": "source"}}
	}
	keys, err := asideKeysFor(ctx, c.Client)
	if err != nil {
		return nil, err
	}
	if err := checkAside(ctx, c.Aside, keys, nil); err != nil {
		return nil, err
	}
	out := importWorldbookResult{RoleID: in.RoleID, CreatedEntryIDs: []string{}, Notes: []string{}}
	var rec worldbookRecord
	st := &steps{p: c.Progress, total: (len(book.Entries) + entriesPerWrite - 1) / entriesPerWrite}
	if in.RoleID != "" {
		st.total = max(st.total, 1)
	}
	if in.WorldbookID != "" {
		wb, err := c.Client.GetWorldbook(ctx, in.WorldbookID)
		if err != nil {
			return nil, err
		}
		out.WorldbookID, out.Name, out.Format = wb.WorldbookID, wb.Name, wb.Format
		if err := c.revise(ctx, "worldbook", wb.WorldbookID, wb); err != nil { // the read just made, reused
			return nil, err
		}
		if _, err := loadRecord(ctx, c.Aside, keys.worldbook(wb.WorldbookID), &rec); err != nil {
			return nil, err
		}
		// A worldbook imported into before keeps its lorebook fields; new ones are added.
		for k, v := range book.Extensions {
			if rec.Book == nil {
				rec.Book = map[string]any{}
			}
			if _, ok := rec.Book[k]; !ok {
				rec.Book[k] = v
			}
		}
	} else {
		st.total++
		name, generated := in.Name, ""
		if name == "" {
			name = book.Name
		}
		if strings.TrimSpace(name) == "" && in.Source.Path != nil {
			// A nameless World Info file takes its file's name, as SillyTavern names it.
			base := filepath.Base(*in.Source.Path)
			name = strings.TrimSuffix(base, filepath.Ext(base))
		}
		if strings.TrimSpace(name) == "" {
			name, generated = DefaultBookName, DefaultBookName
		}
		st.start(ctx, "create the worldbook")
		wb, err := c.Client.CreateWorldbook(ctx, upstream.WorldbookCreateInput{Name: name, Description: book.Description, Format: upstream.WorldbookTavern})
		if err != nil {
			return nil, err
		}
		st.end()
		out.WorldbookID, out.Name, out.Format, out.Created = wb.WorldbookID, name, upstream.WorldbookTavern, true
		rec = worldbookRecord{Name: book.Name, GeneratedName: generated, Book: book.Extensions}
	}
	rec.Version = recordVersion
	if rec.Entries == nil {
		rec.Entries = map[string]entryAside{}
	}
	kept := bookKeptAside("lorebook", book)
	if out.Format == upstream.WorldbookNative {
		for _, e := range book.Entries {
			if e.MatchOptions != nil {
				kept = append(kept, "lorebook.entries[].matchOptions")
				out.Notes = append(out.Notes, "The worldbook is native: the entries follow the card service's matching rules, "+
					"not their SillyTavern matchOptions (kept aside).")
				break
			}
		}
	}
	rec.KeptAside = unionSorted(rec.KeptAside, kept)
	out.KeptAside = unionSorted(kept)
	w := &entryWriter{c: c, worldbookID: out.WorldbookID, roleID: in.RoleID, format: out.Format,
		rec: &rec, key: keys.worldbook(out.WorldbookID), steps: st}
	if err := w.write(ctx, book.Entries); err != nil {
		env, code, internal := c.outcome(ctx, err)
		if internal {
			c.Log.LogAttrs(ctx, slog.LevelError, "lorebook import step failed", slog.String("step", st.doing), slog.String("err", err.Error()))
		}
		msg, _ := env["message"].(string)
		retryable, _ := env["retryable"].(bool)
		return nil, &Failure{Code: code, Retryable: retryable,
			Detail: map[string]any{"worldbookId": out.WorldbookID, "failedStep": st.doing, "writtenEntries": len(w.created), "cause": env},
			Message: fmt.Sprintf("The import stopped while trying to %s: %s Worldbook %s now holds the first %d of the lorebook's %d entries; "+
				"import only the rest, or write them with write_worldbook_document.", st.doing, strings.TrimSpace(msg), out.WorldbookID, len(w.created), len(book.Entries))}
	}
	out.EntryCount = len(w.created)
	out.CreatedEntryIDs = append(out.CreatedEntryIDs, w.created...)
	out.Bound = in.RoleID != ""
	return json.Marshal(out)
}
