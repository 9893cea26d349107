package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"
	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
	"github.com/cardwriter/cardwriter-mcp/internal/tavernsync"
	"github.com/cardwriter/cardwriter-mcp/internal/tokens"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// xrayTool is preview_prompt, of the worldbook toolset: the prompt SillyTavern builds for a chat
// at a given point (tavern.BuildPrompt), block by block with token counts, where every World Info
// entry lands and what the budget cuts. Its schemas are in schema/tools.json.
func xrayTool() Tool {
	return Tool{
		Name:    "preview_prompt",
		Toolset: ToolsetWorldbook,
		Title:   "Preview the prompt SillyTavern builds",
		Description: "The prompt SillyTavern builds for a card and chat: blocks in order with tokens, each World Info entry's slot, what the budget cuts. Changes nothing.\n\n" +
			`Example: {"roleId":"r_1","chat":[{"text":"Hi","user":true}]}`,
		Annotations: readHints(),
		Handler:     previewPrompt,
		Cut:         "entries",
		Summary: func(out map[string]any) string {
			var cut []string
			for _, r := range list(out, "entries") {
				if m, ok := r.(map[string]any); ok && str(m, "status") == "cut" {
					cut = append(cut, quoted(str(m, "name")))
				}
			}
			s := fmt.Sprintf("%d blocks, %d of %d tokens (%s); World Info budget %d: %d placed", len(list(out, "blocks")),
				num(out, "totalTokens"), num(out, "contextSize"), str(out, "tokenizer"), num(out, "budget"), num(out, "placed"))
			if len(cut) > 0 {
				s += ", cut " + firstOf(cut, ", ")
			}
			return s + "." + omittedSummary(out)
		},
	}
}

// xrayArgs are preview_prompt's arguments.
type xrayArgs struct {
	RoleID        string          `json:"roleId"`
	Card          json.RawMessage `json:"card"`
	Books         json.RawMessage `json:"books"`
	Chat          json.RawMessage `json:"chat"`
	UserName      string          `json:"userName"`
	Persona       string          `json:"persona"`
	ContextSize   int             `json:"contextSize"`
	BudgetPercent *float64        `json:"budgetPercent"`
	BudgetCap     int             `json:"budgetCap"`
	Tokenizer     string          `json:"tokenizer"`
	Strategy      string          `json:"strategy"`
	Mode          string          `json:"mode"`
	Generation    string          `json:"generation"`
	Note          json.RawMessage `json:"note"`
	ScanDepth     *int            `json:"scanDepth"`
	Recursive     bool            `json:"recursive"`
	Full          []int           `json:"full"`
}

// xrayCard is a card given inline.
type xrayCard struct {
	Name                    string   `json:"name"`
	Description             string   `json:"description"`
	Personality             string   `json:"personality"`
	Scenario                string   `json:"scenario"`
	ExampleDialogue         string   `json:"exampleDialogue"`
	SystemPrompt            string   `json:"systemPrompt"`
	PostHistoryInstructions string   `json:"postHistoryInstructions"`
	CreatorNotes            string   `json:"creatorNotes"`
	DepthPrompt             string   `json:"depthPrompt"`
	DepthPromptDepth        *int     `json:"depthPromptDepth"`
	DepthPromptRole         string   `json:"depthPromptRole"`
	Tags                    []string `json:"tags"`
}

// xrayBook is a lorebook of the arguments: stored, or its entries given.
type xrayBook struct {
	WorldbookID string            `json:"worldbookId"`
	Entries     []json.RawMessage `json:"entries"`
	Source      string            `json:"source"`
	Name        string            `json:"name"`
}

// xrayNote is the author's note.
type xrayNote struct {
	Text     string `json:"text"`
	Depth    *int   `json:"depth"`
	Role     string `json:"role"`
	Interval *int   `json:"interval"`
}

// xrayBlock is one block of the result.
type xrayBlock struct {
	Index   int      `json:"index"`
	Count   int      `json:"count,omitempty"` // chat messages run together in this block, from Index on
	Name    string   `json:"name"`
	Role    string   `json:"role,omitempty"`
	Depth   *int     `json:"depth,omitempty"`
	Tokens  int      `json:"tokens"`
	Entries []string `json:"entries,omitempty"`
	Text    *string  `json:"text,omitempty"`
}

// xrayEntry is one entry of the result: where it went, or why not.
type xrayEntry struct {
	Name   string `json:"name"`
	Book   string `json:"book"`
	Status string `json:"status"` // placed, cut, unplaced
	Slot   string `json:"slot"`
	Block  *int   `json:"block,omitempty"`
	Tokens int    `json:"tokens"`
	Why    string `json:"why"`
}

// xrayReport is preview_prompt's result.
type xrayReport struct {
	Mode          string      `json:"mode"`
	Tokenizer     string      `json:"tokenizer"`
	TokenizerNote string      `json:"tokenizerNote"`
	ContextSize   int         `json:"contextSize"`
	Budget        int         `json:"budget"`
	WorldInfo     int         `json:"worldInfoTokens"`
	TotalTokens   int         `json:"totalTokens"`
	Placed        int         `json:"placed"`
	NotFired      int         `json:"notFired"`
	Blocks        []xrayBlock `json:"blocks"`
	Entries       []xrayEntry `json:"entries"`
}

// tokenizerNote says which tokenizer SillyTavern counts with for a model family.
const tokenizerNote = "SillyTavern counts with the model's own tokenizer: o200k_base for GPT-4o, GPT-4.1 and o-series, cl100k_base for GPT-4 and GPT-3.5; Claude, Llama, Mistral, Gemini and others have their own, which cl100k_base only approximates."

var strategies = map[string]int{"evenly": tavern.StrategyEvenly, "character_first": tavern.StrategyCharacterFirst, "global_first": tavern.StrategyGlobalFirst}

// previewPrompt builds the prompt for a card and chat.
func previewPrompt(ctx context.Context, c *Call) (json.RawMessage, error) {
	var in xrayArgs
	if err := json.Unmarshal(c.Body, &in); err != nil {
		return nil, fmt.Errorf("decode the arguments: %w", err)
	}
	if (in.RoleID != "") == (in.Card != nil) {
		return nil, badTriggerArgs("Give roleId (a card on the service) or card (its fields), one of them.", "roleId", "card")
	}
	card, note := &xrayCard{}, &xrayNote{}
	var books []xrayBook
	var chat []tavern.Message
	for _, x := range []struct {
		raw  json.RawMessage
		dst  any
		name string
	}{{in.Card, card, "card"}, {in.Note, note, "note"}, {in.Books, &books, "books"}, {in.Chat, &chat, "chat"}} {
		if err := strictDecode(x.raw, x.dst); err != nil {
			return nil, badTriggerArgs(fmt.Sprintf("%s: %v", x.name, err), x.name)
		}
	}
	pi := tavern.PromptInput{Strategy: tavern.StrategyCharacterFirst, MaxContext: in.ContextSize, BudgetPercent: 25, BudgetCap: in.BudgetCap,
		Persona: in.Persona, Note: tavern.DefaultAuthorsNote(), Text: in.Mode == "text", DepthPromptDepth: 4}
	if pi.MaxContext == 0 {
		pi.MaxContext = 8192
	}
	if in.BudgetPercent != nil {
		if *in.BudgetPercent <= 0 || *in.BudgetPercent > 100 {
			return nil, badTriggerArgs("budgetPercent is World Info's share of the context: more than 0, at most 100.", "budgetPercent")
		}
		pi.BudgetPercent = *in.BudgetPercent
	}
	if in.Strategy != "" {
		pi.Strategy = strategies[in.Strategy]
	}
	enc := in.Tokenizer
	if enc == "" {
		enc = tokens.Encoding
	}
	pi.Count = ctxCounter(ctx, enc)
	if in.RoleID != "" {
		var err error
		if card, pi.Books, err = storedCard(ctx, c, in.RoleID); err != nil {
			return nil, err
		}
	}
	pi.Description, pi.Personality, pi.Scenario, pi.Examples = card.Description, card.Personality, card.Scenario, card.ExampleDialogue
	pi.SystemPrompt, pi.PostHistory, pi.DepthPrompt = card.SystemPrompt, card.PostHistoryInstructions, card.DepthPrompt
	if card.DepthPromptDepth != nil {
		pi.DepthPromptDepth = *card.DepthPromptDepth
	}
	pi.DepthPromptRole = roleIndex(card.DepthPromptRole)
	for i, b := range books {
		book, err := xrayLorebook(ctx, c, i, b)
		if err != nil {
			return nil, err
		}
		pi.Books = append(pi.Books, book)
	}
	if n := note; in.Note != nil {
		pi.Note.Text = n.Text
		if n.Depth != nil {
			pi.Note.Depth = *n.Depth
		}
		if n.Interval != nil {
			pi.Note.Interval = *n.Interval
		}
		pi.Note.Role = roleIndex(n.Role)
	}
	st := tavern.DefaultSettings()
	if in.ScanDepth != nil {
		st.ScanDepth = *in.ScanDepth
	}
	st.Recursive = in.Recursive
	pi.Sim = tavern.SimOptions{Settings: st, Chat: chat, Macros: tavern.Macros{Char: card.Name, User: in.UserName},
		Trigger: in.Generation, Character: tavern.FilterTarget{File: card.Name, Tags: card.Tags},
		Scan: tavern.ScanSources{Persona: in.Persona, Description: card.Description, Personality: card.Personality,
			DepthPrompt: card.DepthPrompt, Scenario: card.Scenario, CreatorNotes: card.CreatorNotes}}
	if pi.Sim.Macros.User == "" {
		pi.Sim.Macros.User = "User"
	}
	pi.Sim.Budget = c.matchBudget(ctx)
	p, err := tavern.BuildPrompt(ctx, pi)
	if err != nil {
		return nil, budgetFailure(err)
	}
	return jsontext.Marshal(xrayResult(p, pi, enc, in.Full))
}

// xrayResult is the compact answer: blocks with their tokens, entries with their slots.
func xrayResult(p *tavern.Prompt, pi tavern.PromptInput, enc string, full []int) xrayReport {
	count := func(s string) int { n, _ := tokens.CountWith(enc, s); return n }
	out := xrayReport{Mode: "chat", Tokenizer: enc, TokenizerNote: tokenizerNote, ContextSize: pi.MaxContext, Budget: p.Budget,
		Blocks: []xrayBlock{}, Entries: []xrayEntry{}}
	if pi.Text {
		out.Mode = "text"
	}
	bookName := func(i int) string { return pi.Books[p.Refs[i].Book].Name }
	// label names an entry: its name, else its id, else its place in its book.
	label := func(i int) string {
		switch e := &p.Entries[i]; {
		case strings.TrimSpace(e.Name) != "":
			return e.Name
		case e.EntryID != "":
			return "entry " + e.EntryID
		}
		return fmt.Sprintf("%s entry #%d", bookName(i), p.Refs[i].Index+1)
	}
	blockOf := map[int]int{}
	show := map[int]bool{}
	for _, i := range full {
		show[i] = true
	}
	for i, b := range p.Blocks {
		xb := xrayBlock{Index: i, Name: b.Name, Role: b.Role, Tokens: count(b.Text)}
		if b.Depth >= 0 {
			d := b.Depth
			xb.Depth = &d
		}
		for _, e := range b.Entries {
			xb.Entries = append(xb.Entries, label(e))
			blockOf[e] = i
		}
		if show[i] {
			t := b.Text
			xb.Text = &t
		}
		out.TotalTokens += xb.Tokens
		// A run of chat messages with nothing of World Info's is one block: a long chat stays short.
		if n := len(out.Blocks); n > 0 && b.Name == "message" && !show[i] {
			if last := &out.Blocks[n-1]; (last.Name == "message" && last.Text == nil) || last.Name == "messages" {
				last.Name, last.Role, last.Tokens, last.Count = "messages", "", last.Tokens+xb.Tokens, max(last.Count, 1)+1
				continue
			}
		}
		out.Blocks = append(out.Blocks, xb)
	}
	for i, r := range p.Sim.Results {
		e := &p.Entries[i]
		xe := xrayEntry{Name: label(i), Book: bookName(i), Slot: slotName(tavern.EntrySlot(e))}
		switch {
		case r.Fired:
			xe.Tokens = count(tavernContent(e, pi.Sim.Macros))
			out.WorldInfo += xe.Tokens
			if why, ok := p.Unplaced[i]; ok {
				xe.Status, xe.Why = "unplaced", why
			} else {
				xe.Status, xe.Why = "placed", r.Reason
				out.Placed++
				if b, ok := blockOf[i]; ok {
					xe.Block = &b
				}
			}
		case r.Cut != "":
			xe.Status, xe.Why, xe.Tokens = "cut", r.Cut, count(tavernContent(e, pi.Sim.Macros))
		default:
			out.NotFired++
			continue
		}
		out.Entries = append(out.Entries, xe)
	}
	return out
}

// tavernContent is an entry's content as the prompt carries it: decorators off, macros on.
func tavernContent(e *tavern.Entry, m tavern.Macros) string {
	return m.Substitute(tavern.EntryContent(e))
}

// slotName renders a slot: the position, with depth and role at depth, the name of an outlet.
func slotName(s tavern.Slot) string {
	name := tavern.PositionNames[s.Position]
	switch s.Position {
	case tavern.PosAtDepth:
		return fmt.Sprintf("%s %d %s", name, s.Depth, tavern.RoleNames[s.Role])
	case tavern.PosOutlet:
		return name + " " + s.Outlet
	}
	return name
}

func roleIndex(r string) int {
	for i, n := range tavern.RoleNames {
		if n == r {
			return i
		}
	}
	return 0
}

// ctxCounter counts tokens in enc, and nothing once ctx is done (the scan then runs out fast).
func ctxCounter(ctx context.Context, enc string) func(string) int {
	return func(s string) int {
		if ctx.Err() != nil {
			return 0
		}
		n, _ := tokens.CountWith(enc, s)
		return n
	}
}

// storedCard reads a card's fields and its bound worldbooks (the character's lore).
func storedCard(ctx context.Context, c *Call, roleID string) (*xrayCard, []tavern.Lorebook, error) {
	card, err := c.Client.GetCard(ctx, roleID)
	if err != nil {
		return nil, nil, err
	}
	out := &xrayCard{Name: card.RoleName, Tags: card.Tags}
	if s := card.Sections; s != nil {
		for _, f := range []struct {
			v   *string
			dst *string
		}{{s.Description, &out.Description}, {s.Personality, &out.Personality}, {s.Scenario, &out.Scenario},
			{s.ExampleDialogue, &out.ExampleDialogue}, {s.SystemPrompt, &out.SystemPrompt},
			{s.PostHistoryInstructions, &out.PostHistoryInstructions}, {s.CreatorNotes, &out.CreatorNotes}} {
			if f.v != nil {
				*f.dst = *f.v
			}
		}
	}
	// The card's depth prompt (character's note), kept aside when the card was imported.
	kept, found, err := tavernsync.LoadKeptCard(ctx, c.Client, c.Aside, roleID)
	if err != nil {
		return nil, nil, err
	}
	if found {
		data, _ := kept["data"].(map[string]any)
		ext, _ := data["extensions"].(map[string]any)
		if dp, ok := ext["depth_prompt"].(map[string]any); ok {
			out.DepthPrompt, _ = dp["prompt"].(string)
			if n, err := strconv.Atoi(fmt.Sprint(dp["depth"])); err == nil && n >= 0 {
				out.DepthPromptDepth = &n
			}
			out.DepthPromptRole, _ = dp["role"].(string)
		}
	}
	bound, err := c.Client.ListCardWorldbooks(ctx, roleID)
	if err != nil {
		return nil, nil, err
	}
	var books []tavern.Lorebook
	for _, wb := range bound.List {
		entries, _, _, err := storedEntries(ctx, c, wb.WorldbookID, "")
		if err != nil {
			return nil, nil, err
		}
		books = append(books, tavern.Lorebook{Name: wb.Name, Source: tavern.SourceCharacter, Entries: entries})
	}
	return out, books, nil
}

// xrayLorebook reads one lorebook of the arguments.
func xrayLorebook(ctx context.Context, c *Call, i int, b xrayBook) (tavern.Lorebook, error) {
	book := tavern.Lorebook{Name: b.Name, Source: b.Source}
	if book.Source == "" {
		book.Source = tavern.SourceGlobal
	}
	if (b.WorldbookID != "") == (b.Entries != nil) {
		return book, badTriggerArgs(fmt.Sprintf("books[%d] needs worldbookId or entries, one of them.", i), "books")
	}
	if b.WorldbookID != "" {
		entries, wb, _, err := storedEntries(ctx, c, b.WorldbookID, "")
		if err != nil {
			return book, err
		}
		book.Entries = entries
		if book.Name == "" {
			book.Name = wb.Name
		}
		return book, nil
	}
	if book.Name == "" {
		book.Name = fmt.Sprintf("books[%d]", i)
	}
	for j, raw := range b.Entries {
		var te triggerEntry
		if err := strictDecode(raw, &te); err != nil {
			return book, badTriggerArgs(fmt.Sprintf("books[%d].entries[%d] is not an entry as test_worldbook_triggers takes it: %v", i, j, err), "books")
		}
		e, err := givenTriggerEntry(j, te, upstream.WorldbookTavern)
		if err != nil {
			return book, err
		}
		book.Entries = append(book.Entries, e)
	}
	return book, nil
}

// strictDecode decodes JSON that the input schema leaves open (to keep tools/list small) as
// strictly as the schema would: no unknown fields. Absent JSON decodes to nothing.
func strictDecode(raw json.RawMessage, dst any) error {
	if raw == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(dst)
}
