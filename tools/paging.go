package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cardwriter/cardwriter-mcp/internal/page"
	"github.com/cardwriter/cardwriter-mcp/internal/phrase"
	"github.com/cardwriter/cardwriter-mcp/internal/tokens"
	"github.com/cardwriter/cardwriter-mcp/internal/undo"
)

// Paging: the service returns whole lists; the list tools return them a page at a time, each
// page within the result budget, with MCP's words (cursor in, nextCursor out, limit).

// defaultLimit is the most items a page holds when the call gives no limit.
const defaultLimit = 50

// defaultQueryLimit is the most matches a search's page holds when the call gives no limit:
// a model reads the best few, not a list.
const defaultQueryLimit = 10

// pageOverhead is what a page's result holds besides its items, in tokens: the other fields,
// the page fields and the summary line. Items fill the budget less this.
const pageOverhead = 600

// codeInvalidCursor is the error of a cursor that is no nextCursor of the same list.
const codeInvalidCursor = "invalid_cursor"

// pageArgs are the arguments tools.json's extensions give a list tool.
type pageArgs struct {
	Cursor   string   `json:"cursor"`
	Limit    int      `json:"limit"`
	Query    string   `json:"query"`
	Detail   string   `json:"detail"`
	EntryIDs []string `json:"entryIds"`
}

// listing is how a list tool's result holds its list: the member with the items and each
// item's stable id (the key pages continue after).
type listing struct {
	key, id string
}

// shaper filters, ranks and shapes a list's items for a page (list_worldbook_entries); the
// fields it returns go into the result beside the page's (what it left out, and why).
type shaper func(args pageArgs, items []any) ([]listItem, map[string]any, error)

// paged is the handler of a list tool: one call of its operation, then one page of the list.
func paged(l listing) HandlerFunc {
	return func(ctx context.Context, c *Call) (json.RawMessage, error) {
		data, err := generic(ctx, c)
		if err != nil {
			return nil, err
		}
		return pageResult(c, data, l, nil)
	}
}

// listItem is one item of a list being paged: its Order and Version for package page, and the
// object to show (brief or whole).
type listItem struct {
	page.Item
	show any
}

// pageResult turns the operation's answer into one page of it. shape, when set, filters, ranks
// and shapes the items (list_worldbook_entries); without it every item is shown whole, by id.
// An answer that is not the operation's result is returned as is: readResult reports it.
func pageResult(c *Call, data json.RawMessage, l listing, shape shaper) (json.RawMessage, error) {
	var args pageArgs
	if len(c.Extra) > 0 {
		if err := json.Unmarshal(c.Extra, &args); err != nil {
			return nil, fmt.Errorf("read the paging arguments of %s: %w", c.Tool.Name, err)
		}
	}
	limit := args.Limit
	switch {
	case limit != 0:
	case strings.TrimSpace(args.Query) != "" && len(args.EntryIDs) == 0:
		limit = defaultQueryLimit
	default:
		limit = defaultLimit
	}
	out, err := decodeObject(data)
	if err != nil {
		return data, nil
	}
	if all, isList := out[l.key].([]any); isList && shape == nil && args.Cursor == "" && len(all) <= limit && len(data) <= c.Budget-pageOverhead {
		// One page holds it all: the answer as it came, with its counts (readResult checks it).
		return withCounts(data, len(all)), nil
	}
	if c.Tool.output.Validate(out) != nil {
		return data, nil
	}
	var items []listItem
	var shaped map[string]any
	if shape != nil {
		if items, shaped, err = shape(args, list(out, l.key)); err != nil {
			return nil, err
		}
	} else {
		for _, v := range list(out, l.key) {
			m, _ := v.(map[string]any)
			items = append(items, listItem{Item: page.Item{Order: str(m, l.id), Version: digest(v)}, show: v})
		}
	}
	slices.SortStableFunc(items, func(a, b listItem) int { return strings.Compare(a.Order, b.Order) })
	// Distinct Orders: a list the service gave with a repeated id still pages.
	for i := 1; i < len(items); i++ {
		if items[i].Order == items[i-1].Order {
			items[i].Order = items[i-1].Order + "\x00"
		}
	}
	order := make([]page.Item, len(items))
	for i, it := range items {
		order[i] = it.Item
	}
	req := page.Request{Scope: scopeOf(c, args), Cursor: args.Cursor, Limit: limit, Budget: max(c.Budget-pageOverhead, 1)}
	if len(data) <= req.Budget {
		req.Budget = 0 // the whole answer is within the budget in bytes, so in tokens: nothing to measure
	}
	var sizeErr error
	p, err := page.Make(order, req, func(i int) int {
		raw, _ := json.Marshal(items[i].show)
		n, err := tokens.Count(string(raw))
		if err != nil {
			sizeErr = err
		}
		return n + 1 // and its comma
	})
	switch {
	case errors.Is(err, page.ErrInvalid) || errors.Is(err, page.ErrScope):
		return nil, &Failure{Code: codeInvalidCursor, Message: fmt.Sprintf(
			"The cursor is not a nextCursor of this list (%v). Use nextCursor exactly as a page of %s with the same other arguments gave it, or leave cursor out for the first page.", err, c.Tool.Name)}
	case err != nil:
		return nil, err
	case sizeErr != nil:
		return nil, sizeErr
	}
	shown := make([]any, 0, p.Count())
	for _, it := range items[p.Start:p.End] {
		shown = append(shown, it.show)
	}
	out[l.key] = shown
	addPageFields(out, p, c.Tool.Name)
	maps.Copy(out, shaped)
	return json.Marshal(out)
}

// addPageFields sets in out what every page says of itself, in MCP's words: total, count, and
// when there is more, nextCursor and how to ask for it; whether the list changed under the
// cursor.
func addPageFields(out map[string]any, p page.Page, tool string) {
	out["total"] = p.Total
	out["count"] = p.Count()
	if p.Next != "" {
		out["nextCursor"] = p.Next
		out["next"] = fmt.Sprintf("%d more: call %s again with the same arguments and cursor set to nextCursor.", p.Total-p.End, tool)
	}
	if p.Changed {
		out["changed"] = fmt.Sprintf("The list changed since the previous page (%d items then, %d now). This page goes on after the last item you saw, so none is repeated; items added before that point are not on the next pages: leave cursor out to start again.", p.TotalBefore, p.Total)
	}
}

// withCounts returns a JSON object with total and count n added (as the first members).
func withCounts(data json.RawMessage, n int) json.RawMessage {
	rest := bytes.TrimLeft(bytes.TrimSpace(data)[1:], " \t\r\n") // after the object's "{"
	out := fmt.Appendf(make([]byte, 0, len(data)+40), `{"count":%d,"total":%d`, n, n)
	if rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// scopeOf names the list a call pages: the tool, its operation's parameters and the query.
func scopeOf(c *Call, args pageArgs) string {
	parts := []string{c.Tool.Name, strings.ToLower(strings.TrimSpace(args.Query)), strings.Join(args.EntryIDs, "\x00")}
	for _, p := range c.Tool.op.Params {
		parts = append(parts, p.Name, c.Params[p.Name])
	}
	return page.Scope(parts...)
}

// digest returns a short digest of a value's JSON: an item's Version.
func digest(v any) string {
	raw, _ := json.Marshal(v) // decoded JSON: cannot fail
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// pageSummary is what a list tool's summary adds about the page: how many it shows of how
// many, how to get the next page, and whether the list changed.
func pageSummary(out map[string]any, noun, nouns string) string {
	total, count := num(out, "total"), num(out, "count")
	s := ""
	switch {
	case str(out, "nextCursor") != "":
		s = fmt.Sprintf(" This page shows %d of %s. %s", count, phrase.Count(total, noun, nouns), str(out, "next"))
	case total > count:
		s = fmt.Sprintf(" This last page shows %d of %s.", count, phrase.Count(total, noun, nouns))
	}
	if w := str(out, "weaker"); w != "" {
		s += " " + w
	}
	if m := stringsOf(list(out, "missing")); len(m) > 0 {
		s += " No entry " + strings.Join(m, ", ") + "."
	}
	if ch := str(out, "changed"); ch != "" {
		s += " " + ch
	}
	return s
}

// briefContent is how much of an entry's content a brief entry shows, in characters: its
// start.
const briefContent = 100

// snippetContent is how much a brief entry shows with a query: the passage around the first
// match, in characters.
const snippetContent = 160

// snippetLead is how much of the content before a match a brief entry shows, in characters.
const snippetLead = 50

// weakerShare is how far below the best score a match may fall and still be listed, when the
// call gives no limit: score*weakerShare >= best. A clear winner comes alone, in a few
// hundred tokens; the weaker matches are counted, and listed with limit.
const weakerShare = 2

// entryShapes filters, ranks and shapes a worldbook's entries for list_worldbook_entries: with
// entryIds those entries in full, in the order asked; with a query only the entries that match
// it, best first (score, then entryId), without those far below the best unless the call gives
// a limit; brief or full.
func entryShapes(args pageArgs, entries []any) ([]listItem, map[string]any, error) {
	if len(args.EntryIDs) > 0 {
		return entriesByID(args.EntryIDs, entries)
	}
	words := strings.Fields(strings.ToLower(args.Query))
	phraseQ := strings.Join(words, " ")
	items := make([]listItem, 0, len(entries))
	scores := make([]int, 0, len(entries))
	best := 0
	for _, v := range entries {
		e, _ := v.(map[string]any)
		id := str(e, "entryId")
		order := id
		score := 0
		if len(words) > 0 {
			if score = entryScore(e, words, phraseQ); score == 0 {
				continue
			}
			order = page.Ranked(score, id)
			best = max(best, score)
		}
		version := str(e, "lastUpdateTime")
		if version == "" {
			version = digest(v)
		}
		e["version"] = undo.EntryVersion(e) // in the entry itself: detail full shows it as it is
		show := v
		if args.Detail != "full" {
			b := map[string]any{"entryId": id, "name": e["name"], "keywords": e["keywords"], "version": e["version"]}
			if c := str(e, "content"); c != "" {
				b["content"] = snippet(c, words)
			}
			if score > 0 {
				b["score"] = score
			}
			show = b
		} else if score > 0 {
			full := make(map[string]any, len(e)+1)
			for k, v := range e {
				full[k] = v
			}
			full["score"] = score
			show = full
		}
		items = append(items, listItem{Item: page.Item{Order: order, Version: version}, show: show})
		scores = append(scores, score)
	}
	if len(words) == 0 || args.Limit != 0 {
		return items, nil, nil
	}
	kept := items[:0]
	weaker, floor := 0, 0
	for i, it := range items {
		if scores[i]*weakerShare >= best {
			kept = append(kept, it)
			continue
		}
		weaker++
		floor = max(floor, scores[i])
	}
	if weaker == 0 {
		return kept, nil, nil
	}
	return kept, map[string]any{"weaker": fmt.Sprintf("%s scoring %d or less (the best scores %d) left out: give limit to list them too.",
		phrase.Count(int64(weaker), "weaker match", "weaker matches"), floor, best)}, nil
}

// entriesByID returns the entries ids names, whole, in the order asked; the result fields name
// the ids no entry has.
func entriesByID(ids []string, entries []any) ([]listItem, map[string]any, error) {
	byID := make(map[string]any, len(entries))
	for _, v := range entries {
		e, _ := v.(map[string]any)
		byID[str(e, "entryId")] = v
	}
	var items []listItem
	var missing []any
	seen := map[string]bool{}
	for i, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		v, ok := byID[id]
		if !ok {
			missing = append(missing, id)
			continue
		}
		items = append(items, listItem{Item: page.Item{Order: fmt.Sprintf("%04d", i), Version: digest(v)}, show: v})
	}
	if missing != nil {
		return items, map[string]any{"missing": missing}, nil
	}
	return items, nil, nil
}

// snippet is what a brief entry shows of content: with a query, the passage around the first
// place a query word appears (at most snippetContent characters), else its start (briefContent),
// "…" where cut.
func snippet(content string, words []string) string {
	if len(words) == 0 {
		return cut(content, briefContent)
	}
	r := []rune(content)
	if len(r) <= snippetContent {
		return content
	}
	start := -1
	if lower := []rune(strings.ToLower(content)); len(lower) == len(r) {
		low := string(lower)
		for _, w := range words {
			if i := strings.Index(low, w); i >= 0 {
				if at := utf8.RuneCountInString(low[:i]); start < 0 || at < start {
					start = at
				}
			}
		}
	}
	if start <= snippetLead {
		return cut(content, snippetContent)
	}
	from := start - snippetLead
	if sp := strings.IndexByte(string(r[from:start]), ' '); sp >= 0 {
		from += utf8.RuneCountInString(string(r[from:start])[:sp+1])
	}
	return "…" + cut(string(r[from:]), snippetContent)
}

// entryScore scores an entry against a query's words (lower case): per word, 3 when the name
// holds it, 2 when a keyword or secondary keyword does, 1 when the content does; 5 more when
// the whole query appears as written in any of them. 0: no match.
func entryScore(e map[string]any, words []string, whole string) int {
	name := strings.ToLower(str(e, "name"))
	keys := strings.ToLower(strings.Join(stringsOf(list(e, "keywords")), "\n") + "\n" + strings.Join(stringsOf(list(e, "secondaryKeywords")), "\n"))
	content := strings.ToLower(str(e, "content"))
	score := 0
	for _, w := range words {
		if strings.Contains(name, w) {
			score += 3
		}
		if strings.Contains(keys, w) {
			score += 2
		}
		if strings.Contains(content, w) {
			score++
		}
	}
	if score > 0 && len(words) > 1 && (strings.Contains(name, whole) || strings.Contains(keys, whole) || strings.Contains(content, whole)) {
		score += 5
	}
	return score
}

// cut returns s cut to at most n characters, at a space when one is near, ending with "…"
// when cut.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	r = r[:n]
	if i := strings.LastIndexByte(string(r), ' '); i > len(string(r))*3/4 {
		return strings.TrimRight(string(r)[:i], " ,.;:") + "…"
	}
	return string(r) + "…"
}
