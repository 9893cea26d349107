package tavernsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cardwriter/cardwriter-mcp/internal/aside"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// ImportWorldbookArgs are import_tavern_worldbook's arguments.
type ImportWorldbookArgs struct {
	Source      Source `json:"source"`
	WorldbookID string `json:"worldbookId"`
	Name        string `json:"name"`
	RoleID      string `json:"roleId"`
	// IdempotencyKey names the import: the same key again returns the first import's result,
	// or finishes it. "" derives one from the file and the target (worldbookId, name, roleId).
	IdempotencyKey string `json:"idempotencyKey"`
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
	IdempotencyKey  string   `json:"idempotencyKey"`
	Repeated        bool     `json:"repeated,omitempty"`
}

// DefaultBookName names a worldbook made from a lorebook that has no name.
const DefaultBookName = "Imported lorebook"

// worldbookJob is the record of one import_tavern_worldbook under its idempotency key: how far it
// got, so that the same key again finishes it, and its result once complete.
type worldbookJob struct {
	Version int `json:"version"`
	// Target is the digest of the file and the arguments: a key reused for another import is refused.
	Target string `json:"target"`
	// WorldbookID is the worldbook written to, Created whether the import made it, and Name and
	// GeneratedName the names it got (worldbookRecord).
	WorldbookID   string `json:"worldbookId,omitempty"`
	Created       bool   `json:"created,omitempty"`
	Name          string `json:"name,omitempty"`
	GeneratedName string `json:"generatedName,omitempty"`
	Format        string `json:"format,omitempty"`
	// Before lists the entries the worldbook held before the import (worldbookId given).
	Before []string `json:"before,omitempty"`
	// Creating is the name of the worldbook the import is creating, and Others the worldbooks
	// there were before: a create whose answer was lost is found by them.
	Creating string   `json:"creating,omitempty"`
	Others   []string `json:"others,omitempty"`
	// Written lists the entries made so far: Written[i] is the lorebook's entry i.
	Written []string `json:"written"`
	// Result is the import's result, once complete.
	Result json.RawMessage `json:"result,omitempty"`
}

// ImportWorldbook imports a lorebook file into a new tavern-format worldbook, or adds its
// entries to an existing worldbook, optionally binding it to a card; it returns
// import_tavern_worldbook's result object. The import runs under an idempotency key (Jobs): the
// same key again returns the first import's result, or finishes it, and makes nothing twice.
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
	sum := sha256.Sum256(data)
	var pathName string
	if in.Source.Path != nil {
		pathName = filepath.Base(*in.Source.Path)
	}
	target := digest("lorebook", hex.EncodeToString(sum[:]), in.WorldbookID, in.Name, in.RoleID, pathName)
	if in.IdempotencyKey == "" {
		in.IdempotencyKey = "lorebook-" + target[:32]
	}
	live := &liveProgress{p: c.Progress}
	c.Progress = live
	run := &worldbookImport{c: c, in: in, book: book, keys: keys, target: target, key: keys.job(in.IdempotencyKey)}
	out, joined, err := c.Jobs.join(ctx, run.key, live, run.run)
	if err != nil || !joined {
		return out, err
	}
	return repeated(out) // another request's run of the same import
}

// repeated marks an import_tavern_worldbook result as the result of an import done before.
func repeated(res json.RawMessage) (json.RawMessage, error) {
	var out importWorldbookResult
	if err := json.Unmarshal(res, &out); err != nil {
		return nil, fmt.Errorf("the result of an earlier import: %w", err)
	}
	out.Repeated = true
	return json.Marshal(out)
}

// worldbookImport is one run of import_tavern_worldbook.
type worldbookImport struct {
	c      Env
	in     ImportWorldbookArgs
	book   *tavern.Book
	keys   asideKeys
	target string
	key    aside.Key
	job    worldbookJob
}

func (r *worldbookImport) run(ctx context.Context) (json.RawMessage, error) {
	c, in, book := r.c, r.in, r.book
	found, err := c.Jobs.load(ctx, c.Aside, r.key, &r.job)
	if err != nil {
		return nil, err
	}
	if found && r.job.Target != r.target {
		return nil, &Failure{Code: CodeConflict, Detail: map[string]any{"argument": "idempotencyKey"},
			Message: "idempotencyKey names an earlier import of another file or target; give a new key for a new import."}
	}
	if r.job.Result != nil {
		return repeated(r.job.Result)
	}
	st := &steps{p: c.Progress, total: (len(book.Entries) + entriesPerWrite - 1) / entriesPerWrite}
	if in.RoleID != "" {
		st.total = max(st.total, 1)
	}
	var rec worldbookRecord
	if !found {
		r.job = worldbookJob{Version: recordVersion, Target: r.target, Written: []string{}}
		if in.WorldbookID != "" {
			// The entries the worldbook holds before, so that a later run tells ours from them.
			wb, err := c.Client.GetWorldbook(ctx, in.WorldbookID)
			if err != nil {
				return nil, err
			}
			list, err := c.Client.ListWorldbookEntries(ctx, wb.WorldbookID, "")
			if err != nil {
				return nil, err
			}
			for _, e := range list.Entries {
				r.job.Before = append(r.job.Before, e.EntryID)
			}
			r.job.WorldbookID, r.job.Name, r.job.Format = wb.WorldbookID, wb.Name, wb.Format
			if err := c.revise(ctx, "worldbook", wb.WorldbookID, wb); err != nil { // the read just made, reused
				return nil, err
			}
		}
		// Recorded before anything is made: a store that cannot take it refuses the import
		// while nothing exists that nobody was told of.
		if err := c.Jobs.save(ctx, c.Aside, r.key, &r.job); err != nil {
			return nil, err
		}
	}
	if found && r.job.WorldbookID == "" && r.job.Creating != "" {
		if err := r.findCreated(ctx); err != nil {
			return nil, err
		}
	}
	if found && r.job.WorldbookID != "" {
		if err := r.reconcile(ctx); err != nil {
			return nil, r.fail(ctx, st, err)
		}
	}
	if r.job.WorldbookID == "" {
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
		// createWorldbook takes no idempotency key: what there was before is recorded, so that
		// a create whose answer is lost is found by the next run (findCreated), not made twice.
		others, err := c.Client.ListWorldbooks(ctx)
		if err != nil {
			return nil, err
		}
		r.job.Creating, r.job.Others = name, nil
		for _, w := range others.List {
			r.job.Others = append(r.job.Others, w.WorldbookID)
		}
		if err := c.Jobs.save(ctx, c.Aside, r.key, &r.job); err != nil {
			return nil, err
		}
		wb, err := c.Client.CreateWorldbook(ctx, upstream.WorldbookCreateInput{Name: name, Description: book.Description, Format: upstream.WorldbookTavern})
		if err != nil {
			return nil, err
		}
		st.end()
		r.job.WorldbookID, r.job.Created, r.job.Name, r.job.GeneratedName, r.job.Format = wb.WorldbookID, true, name, generated, upstream.WorldbookTavern
		r.job.Creating, r.job.Others = "", nil
		if err := c.Jobs.save(ctx, c.Aside, r.key, &r.job); err != nil {
			return nil, r.fail(ctx, st, err)
		}
		rec = worldbookRecord{Name: book.Name, GeneratedName: generated, Book: book.Extensions}
	} else {
		if _, err := c.Jobs.load(ctx, c.Aside, r.keys.worldbook(r.job.WorldbookID), &rec); err != nil {
			return nil, r.fail(ctx, st, err)
		}
		if r.job.Created && rec.Name == "" && rec.GeneratedName == "" {
			rec.Name, rec.GeneratedName = book.Name, r.job.GeneratedName
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
	}
	rec.Version = recordVersion
	if rec.Entries == nil {
		rec.Entries = map[string]entryAside{}
	}
	// The entries an earlier run made that the worldbook's record missed (its store failed).
	for i, id := range r.job.Written {
		if _, ok := rec.Entries[id]; !ok {
			rec.Order = append(rec.Order, id)
			rec.Entries[id] = r.entryAside(i)
		}
	}
	out := importWorldbookResult{WorldbookID: r.job.WorldbookID, Name: r.job.Name, Format: r.job.Format, Created: r.job.Created,
		RoleID: in.RoleID, Notes: []string{}, IdempotencyKey: in.IdempotencyKey}
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
	st.done = min(len(r.job.Written)/entriesPerWrite, st.total)
	w := &entryWriter{c: c, worldbookID: out.WorldbookID, roleID: in.RoleID, format: out.Format,
		rec: &rec, key: r.keys.worldbook(out.WorldbookID), steps: st}
	werr := w.write(ctx, book.Entries[min(len(r.job.Written), len(book.Entries)):])
	r.job.Written = append(r.job.Written, w.created...)
	if werr != nil {
		_ = c.Jobs.save(ctx, c.Aside, r.key, &r.job) // how far it got; the next run reconciles what this misses
		return nil, r.fail(ctx, st, werr)
	}
	out.EntryCount = len(r.job.Written)
	out.CreatedEntryIDs = slices.Clone(r.job.Written)
	out.Bound = in.RoleID != ""
	res, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	r.job.Result = res
	if err := c.Jobs.save(ctx, c.Aside, r.key, &r.job); err != nil {
		// The import is complete; only its record is held in memory instead of the store.
		c.Log.LogAttrs(ctx, slog.LevelWarn, "lorebook import result not recorded", slog.String("err", err.Error()))
	}
	return res, nil
}

// entryAside is the kept-aside part of the lorebook's entry i.
func (r *worldbookImport) entryAside(i int) entryAside {
	if i >= len(r.book.Entries) {
		return entryAside{Extensions: map[string]any{}}
	}
	e := r.book.Entries[i]
	a := entryAside{Extensions: extensionsOf(e)}
	if r.job.Format == upstream.WorldbookNative {
		a.MatchOptions = e.MatchOptions
	}
	return a
}

// reconcile makes the record's entry list agree with the worldbook after an interrupted run: an
// entry write whose answer was lost still made its entries, which are matched to the lorebook's
// next entries by name and content. A worldbook the import made that is gone is made again.
func (r *worldbookImport) reconcile(ctx context.Context) error {
	wb, err := r.c.Client.GetWorldbook(ctx, r.job.WorldbookID)
	var apiErr *upstream.Error
	if r.job.Created && errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
		r.job.WorldbookID, r.job.Created, r.job.Written = "", false, []string{}
		return nil
	}
	if err != nil {
		return err
	}
	if wb.EntryCount == len(r.job.Before)+len(r.job.Written) {
		return nil
	}
	list, err := r.c.Client.ListWorldbookEntries(ctx, r.job.WorldbookID, "")
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, id := range r.job.Before {
		known[id] = true
	}
	for _, id := range r.job.Written {
		known[id] = true
	}
	var unknown []upstream.WorldbookEntry
	for _, e := range list.Entries {
		if !known[e.EntryID] {
			unknown = append(unknown, e)
		}
	}
	for _, id := range matchEntries(r.book.Entries[min(len(r.job.Written), len(r.book.Entries)):], unknown) {
		r.job.Written = append(r.job.Written, id)
	}
	return nil
}

// findCreated finds the worldbook an earlier run created without learning its id (the answer
// was lost): the one named job.Creating that was not there before. Not finding one leaves the
// job to create it.
func (r *worldbookImport) findCreated(ctx context.Context) error {
	list, err := r.c.Client.ListWorldbooks(ctx)
	if err != nil {
		return err
	}
	for _, w := range list.List {
		if w.Name == r.job.Creating && w.Format == upstream.WorldbookTavern && !slices.Contains(r.job.Others, w.WorldbookID) {
			r.job.WorldbookID, r.job.Created, r.job.Name, r.job.Format = w.WorldbookID, true, w.Name, w.Format
			if r.job.Name == DefaultBookName {
				r.job.GeneratedName = DefaultBookName
			}
			r.job.Creating, r.job.Others = "", nil
			return r.c.Jobs.save(ctx, r.c.Aside, r.key, &r.job)
		}
	}
	return nil
}

// matchEntries returns the ids of the entries of unknown that are the lorebook's next entries,
// in order, matched by name and content, up to the first that has none.
func matchEntries(next []tavern.Entry, unknown []upstream.WorldbookEntry) []string {
	var ids []string
	for i := 0; i < len(next) && len(unknown) > 0; i++ {
		j := slices.IndexFunc(unknown, func(u upstream.WorldbookEntry) bool { return u.Name == next[i].Name && u.Content == next[i].Content })
		if j < 0 {
			break
		}
		ids = append(ids, unknown[j].EntryID)
		unknown = slices.Delete(unknown, j, j+1)
	}
	return ids
}

// fail turns the error of a step into the call's error: before the worldbook exists it is
// returned as it is; after, it names the worldbook and how far the import got, and says that
// the same import again finishes it.
func (r *worldbookImport) fail(ctx context.Context, st *steps, err error) error {
	if r.job.WorldbookID == "" {
		return err
	}
	env, code, internal := r.c.outcome(ctx, err)
	if internal {
		r.c.Log.LogAttrs(ctx, slog.LevelError, "lorebook import step failed", slog.String("step", st.doing), slog.String("err", err.Error()))
	}
	msg, _ := env["message"].(string)
	retryable, _ := env["retryable"].(bool)
	return &Failure{Code: code, Retryable: retryable,
		Detail: map[string]any{"worldbookId": r.job.WorldbookID, "failedStep": st.doing, "writtenEntries": len(r.job.Written),
			"idempotencyKey": r.in.IdempotencyKey, "cause": env},
		Message: fmt.Sprintf("The import stopped while trying to %s: %s Worldbook %s holds %d of the lorebook's %d entries. "+
			"Run the same import again (same file and arguments) to finish it: it continues there and makes nothing twice.",
			st.doing, strings.TrimSpace(msg), r.job.WorldbookID, len(r.job.Written), len(r.book.Entries))}
}
