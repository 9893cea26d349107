package tavern

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
)

// The prompt X-ray: SillyTavern's getSortedEntries over several lorebooks, checkWorldInfo with its
// budget, the placement of what fired (checkWorldInfo's BUILDING PROMPT) and the prompt both of its
// paths build around it: the prompt manager's default order for chat completion (openai.js,
// PromptManager.js) and the Default context template's story string for text completion
// (script.js, default/content/presets/context/Default.json). Comments name the JavaScript.

// Book sources (getSortedEntries' getChatLore, getPersonaLore, getCharacterLore, getGlobalLore).
const (
	SourceChat      = "chat"
	SourcePersona   = "persona"
	SourceCharacter = "character"
	SourceGlobal    = "global"
)

// Insertion strategies (world_info_insertion_strategy).
const (
	StrategyEvenly         = 0
	StrategyCharacterFirst = 1 // SillyTavern's default (world_info_character_strategy)
	StrategyGlobalFirst    = 2
)

// World Info positions (world_info_position).
const (
	PosBefore = iota
	PosAfter
	PosANTop
	PosANBottom
	PosAtDepth
	PosEMTop
	PosEMBottom
	PosOutlet
)

// PositionNames name the positions as the tool reports them.
var PositionNames = []string{"before", "after", "anTop", "anBottom", "atDepth", "emTop", "emBottom", "outlet"}

// Roles of an injection (extension_prompt_roles).
var RoleNames = []string{"system", "user", "assistant"}

const defaultDepth = 4 // DEFAULT_DEPTH

// Lorebook is one book of the scan.
type Lorebook struct {
	// Name names the book (SillyTavern's world name).
	Name string
	// Source is SourceChat, SourcePersona, SourceCharacter or SourceGlobal.
	Source string
	// Entries are the book's entries.
	Entries []Entry
}

// EntryRef names an entry of the scan: its book and its index there.
type EntryRef struct {
	Book, Index int
}

// SortBooks is getSortedEntries: chat lore, then persona lore, then character and global lore
// by the strategy, each sorted by order, highest first (a stable sort). A book already in the
// scan by another way is read once (getChatLore, getPersonaLore and getCharacterLore skip it).
func SortBooks(books []Lorebook, strategy int) ([]Entry, []EntryRef) {
	type item struct {
		e   Entry
		ref EntryRef
	}
	in := map[string]map[string]bool{}
	for _, book := range books {
		if in[book.Source] == nil {
			in[book.Source] = map[string]bool{}
		}
		in[book.Source][book.Name] = true
	}
	// Where else a book of a source must not be for it to be read.
	skipIf := map[string][]string{SourceChat: {SourceGlobal}, SourcePersona: {SourceChat, SourceGlobal},
		SourceCharacter: {SourceGlobal, SourceChat, SourcePersona}}
	by := map[string][]item{}
	for b, book := range books {
		dup := false
		for _, other := range skipIf[book.Source] {
			dup = dup || (book.Name != "" && in[other][book.Name])
		}
		if dup {
			continue
		}
		for i, e := range book.Entries {
			by[book.Source] = append(by[book.Source], item{e, EntryRef{b, i}})
		}
	}
	sorted := func(l []item) []item {
		sort.SliceStable(l, func(a, b int) bool { return l[a].e.SortOrder > l[b].e.SortOrder })
		return l
	}
	var rest []item
	switch strategy {
	case StrategyCharacterFirst:
		rest = append(sorted(by[SourceCharacter]), sorted(by[SourceGlobal])...)
	case StrategyGlobalFirst:
		rest = append(sorted(by[SourceGlobal]), sorted(by[SourceCharacter])...)
	default:
		rest = sorted(append(append([]item(nil), by[SourceGlobal]...), by[SourceCharacter]...))
	}
	all := append(append(sorted(by[SourceChat]), sorted(by[SourcePersona])...), rest...)
	entries, refs := make([]Entry, len(all)), make([]EntryRef, len(all))
	for i, it := range all {
		entries[i], refs[i] = it.e, it.ref
	}
	return entries, refs
}

// Slot is where an admitted entry goes.
type Slot struct {
	// Position is one of the Pos constants.
	Position int
	// Depth is the @depth entry's depth (DEFAULT_DEPTH when unset).
	Depth int
	// Role is the @depth entry's role: 0 system, 1 user, 2 assistant.
	Role int
	// Outlet is the outlet entry's name.
	Outlet string
}

// EntrySlot reads an entry's position, depth, role and outlet name as convertCharacterBook does:
// extensions.position, else the V2 position (before_char: before, anything else after); an entry
// with neither is placed before, SillyTavern's default for a new entry.
func EntrySlot(e *Entry) Slot {
	ext, _ := e.Extensions["extensions"].(map[string]any)
	sl := Slot{Position: PosBefore, Depth: defaultDepth}
	if n, ok := jsNumber(ext["position"]); ok && n >= 0 && n <= PosOutlet {
		sl.Position = int(n)
	} else if p, ok := e.Extensions["position"]; ok && p != "before_char" {
		sl.Position = PosAfter
	}
	if n, ok := jsNumber(ext["depth"]); ok {
		sl.Depth = int(n)
	}
	if n, ok := jsNumber(ext["role"]); ok && n >= 0 && n <= 2 {
		sl.Role = int(n)
	}
	sl.Outlet, _ = ext["outlet_name"].(string)
	return sl
}

// Placed is one entry in its place.
type Placed struct {
	// Index is the entry's index in the list simulated.
	Index int
	// Slot is where it goes.
	Slot Slot
	// Content is its content after macros.
	Content string
}

// DepthGroup is one injection of @depth entries: those of one depth and role, joined by newlines.
type DepthGroup struct {
	Depth, Role int
	Entries     []Placed
}

// Placement is the BUILDING PROMPT part of checkWorldInfo: the admitted entries by position, each
// list in prompt order.
type Placement struct {
	Before, After, ANTop, ANBottom, EMTop, EMBottom []Placed
	Depth                                           []DepthGroup
	// Outlets are the outlet entries by outlet name, in their order (WIOutletEntries).
	Outlets map[string][]Placed
	// OutletNames are the outlets in the order they were first filled.
	OutletNames []string
	// Dropped are admitted entries that go nowhere, with why (empty content, an outlet without a name).
	Dropped map[int]string
}

// Place sorts the admitted entries (Simulation.Activated order) by order, highest first, and
// files them as checkWorldInfo does: unshifted into each position (so each list is lowest order
// first), pushed into outlets (highest first); @depth entries grouped by depth and role.
func Place(entries []Entry, sim *Simulation, contents map[int]string) *Placement {
	p := &Placement{Outlets: map[string][]Placed{}, Dropped: map[int]string{}}
	order := append([]int(nil), sim.Activated...)
	sort.SliceStable(order, func(a, b int) bool { return entries[order[a]].SortOrder > entries[order[b]].SortOrder })
	unshift := func(l []Placed, x Placed) []Placed { return append([]Placed{x}, l...) }
	for _, i := range order {
		content := contents[i]
		sl := EntrySlot(&entries[i])
		if content == "" {
			p.Dropped[i] = "its content is empty"
			continue
		}
		x := Placed{Index: i, Slot: sl, Content: content}
		switch sl.Position {
		case PosBefore:
			p.Before = unshift(p.Before, x)
		case PosAfter:
			p.After = unshift(p.After, x)
		case PosEMTop:
			p.EMTop = unshift(p.EMTop, x)
		case PosEMBottom:
			p.EMBottom = unshift(p.EMBottom, x)
		case PosANTop:
			p.ANTop = unshift(p.ANTop, x)
		case PosANBottom:
			p.ANBottom = unshift(p.ANBottom, x)
		case PosAtDepth:
			found := false
			for g := range p.Depth {
				if p.Depth[g].Depth == sl.Depth && p.Depth[g].Role == sl.Role {
					p.Depth[g].Entries = unshift(p.Depth[g].Entries, x)
					found = true
					break
				}
			}
			if !found {
				p.Depth = append(p.Depth, DepthGroup{Depth: sl.Depth, Role: sl.Role, Entries: []Placed{x}})
			}
		case PosOutlet:
			if sl.Outlet == "" {
				p.Dropped[i] = "its position is outlet but it has no outlet name"
				continue
			}
			if _, ok := p.Outlets[sl.Outlet]; !ok {
				p.OutletNames = append(p.OutletNames, sl.Outlet)
			}
			p.Outlets[sl.Outlet] = append(p.Outlets[sl.Outlet], x)
		}
	}
	return p
}

// EntryContent is an entry's content without its decorator lines (parseDecorators).
func EntryContent(e *Entry) string {
	_, c := parseDecorators(e.Content)
	return c
}

// joined is the contents of a list joined by newlines.
func joined(l []Placed) string {
	s := make([]string, len(l))
	for i, x := range l {
		s[i] = x.Content
	}
	return strings.Join(s, "\n")
}

// AuthorsNote is the chat's author's note (chat_metadata note_*).
type AuthorsNote struct {
	// Text is the note.
	Text string
	// Interval is note_interval: inserted every Interval user messages; 0 disables it and the
	// entries at its top and bottom.
	Interval int
	// Depth is note_depth (4).
	Depth int
	// Role is note_role (0 system).
	Role int
}

// DefaultAuthorsNote is a chat's author's note before anyone writes one: empty, every turn, depth 4, system.
func DefaultAuthorsNote() AuthorsNote { return AuthorsNote{Interval: 1, Depth: 4} }

// PromptInput is everything the prompt is built from.
type PromptInput struct {
	// Books are the lorebooks of the scan.
	Books []Lorebook
	// Strategy is the insertion strategy of character and global lore.
	Strategy int
	// Sim are the scan's options (settings, chat, names, seed, timed effects, trigger, filters,
	// scan sources); TokenBudget and CountTokens are set from the fields below.
	Sim SimOptions
	// MaxContext is the context size in tokens; BudgetPercent its share for World Info (25);
	// BudgetCap caps the budget in tokens (0: none).
	MaxContext    int
	BudgetPercent float64
	BudgetCap     int
	// Count counts tokens with the tokenizer picked.
	Count func(string) int
	// Card fields.
	Description, Personality, Scenario, Examples, SystemPrompt, PostHistory, DepthPrompt string
	// DepthPromptDepth and DepthPromptRole place the card's depth prompt (extensions.depth_prompt).
	DepthPromptDepth, DepthPromptRole int
	// Persona is the user's persona description (placed in the prompt: persona_description_position IN_PROMPT).
	Persona string
	// Note is the author's note.
	Note AuthorsNote
	// Text builds the text-completion prompt (the story string) instead of chat completion's.
	Text bool
}

// Block is one part of the prompt, in order.
type Block struct {
	// Name is the prompt manager identifier, or the text-completion part.
	Name string
	// Role is the message's role (chat completion).
	Role string
	// Text is the block's text.
	Text string
	// Entries are the indices (in the scan's sorted list) of the World Info entries in it.
	Entries []int
	// Depth is the chat depth an injection was made at (-1: not an injection).
	Depth int
}

// Prompt is the built prompt.
type Prompt struct {
	// Entries are the entries of all books in scan order; Refs name their books.
	Entries []Entry
	Refs    []EntryRef
	// Sim is the scan.
	Sim *Simulation
	// Budget is the World Info budget in tokens.
	Budget int
	// Placement is where the admitted entries went.
	Placement *Placement
	// Blocks are the prompt's parts in order.
	Blocks []Block
	// Unplaced are admitted entries the prompt does not carry, with why.
	Unplaced map[int]string
}

// WIBudget is checkWorldInfo's budget: percent of the context, rounded, at least 1, capped.
func WIBudget(percent float64, maxContext, capTokens int) int {
	b := int(math.Round(percent * float64(maxContext) / 100))
	if b == 0 {
		b = 1
	}
	if capTokens > 0 && b > capTokens {
		b = capTokens
	}
	return b
}

// BuildPrompt scans the books and builds the prompt around what fired. It stops with ctx.
func BuildPrompt(ctx context.Context, in PromptInput) (*Prompt, error) {
	entries, refs := SortBooks(in.Books, in.Strategy)
	opts := in.Sim
	opts.Presorted = true
	out := &Prompt{Entries: entries, Refs: refs, Unplaced: map[int]string{}}
	if in.MaxContext > 0 {
		out.Budget = WIBudget(in.BudgetPercent, in.MaxContext, in.BudgetCap)
		opts.TokenBudget, opts.CountTokens = out.Budget, in.Count
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	sim := Simulate(entries, opts)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if sim.Err != nil {
		return nil, sim.Err // the matching budget (SimOptions.Budget) is spent
	}
	out.Sim = sim
	m := opts.Macros
	contents := map[int]string{}
	for _, i := range sim.Activated {
		contents[i] = m.Substitute(EntryContent(&entries[i]))
	}
	p := Place(entries, sim, contents)
	out.Placement = p
	for i, why := range p.Dropped {
		out.Unplaced[i] = why
	}
	sub := func(s string) string { return m.Substitute(s) }

	// The author's note with the AN entries (checkWorldInfo, shouldWIAddPrompt).
	note := sub(in.Note.Text)
	var noteEntries []int
	anOn := in.Note.Interval > 0 && (in.Note.Interval == 1 || userTurns(opts.Chat)%in.Note.Interval == 0 && userTurns(opts.Chat) > 0)
	if anOn {
		note = strings.TrimSuffix(strings.TrimPrefix(joined(p.ANTop)+"\n"+note+"\n"+joined(p.ANBottom), "\n"), "\n")
		noteEntries = append(indices(p.ANTop), indices(p.ANBottom)...)
	} else {
		note = ""
		for _, x := range append(append([]Placed(nil), p.ANTop...), p.ANBottom...) {
			out.Unplaced[x.Index] = "the author's note is off this turn (its interval), so entries at its top and bottom are left out"
		}
	}
	for _, name := range p.OutletNames {
		for _, x := range p.Outlets[name] {
			out.Unplaced[x.Index] = fmt.Sprintf("outlet %q: it appears only where a prompt says {{outlet::%s}}", name, name)
		}
	}

	// Injections (extension prompts IN_CHAT), by key name sorted: the author's note
	// (2_floating_prompt), the card's DEPTH_PROMPT, then customDepthWI-<depth>-<role>.
	type injection struct {
		key         string
		depth, role int
		text        string
		entries     []int
	}
	var inj []injection
	if note != "" {
		inj = append(inj, injection{"2_floating_prompt", in.Note.Depth, in.Note.Role, note, noteEntries})
	}
	if dp := sub(in.DepthPrompt); dp != "" {
		inj = append(inj, injection{"DEPTH_PROMPT", in.DepthPromptDepth, in.DepthPromptRole, dp, nil})
	}
	for _, g := range p.Depth {
		inj = append(inj, injection{fmt.Sprintf("customDepthWI-%d-%d", g.Depth, g.Role), g.Depth, g.Role, joined(g.Entries), indices(g.Entries)})
	}
	sort.SliceStable(inj, func(a, b int) bool { return inj[a].key < inj[b].key })

	// Example blocks: the card's, with WI examples before (each unshifted: highest order first)
	// and after (pushed).
	examples := splitExamples(sub(in.Examples))
	type exBlock struct {
		text  string
		entry int
	}
	var exs []exBlock
	for _, e := range examples {
		exs = append(exs, exBlock{e, -1})
	}
	for _, x := range p.EMTop {
		for _, b := range reverse(splitExamples(x.Content)) {
			exs = append([]exBlock{{b, x.Index}}, exs...)
		}
	}
	for _, x := range p.EMBottom {
		for _, b := range splitExamples(x.Content) {
			exs = append(exs, exBlock{b, x.Index})
		}
	}

	// The chat, newest last, with the injections at their depth (populationInjectionPrompts /
	// doChatInject): depth 0 after the newest message; at one depth system, then user, then assistant.
	type msg struct {
		role, name, text string
		entries          []int
		depth            int
	}
	rev := make([]msg, 0, len(opts.Chat))
	for i := len(opts.Chat) - 1; i >= 0; i-- {
		c := opts.Chat[i]
		role := "assistant"
		if c.User {
			role = "user"
		}
		rev = append(rev, msg{role: role, name: c.Name, text: sub(c.Text), depth: -1})
	}
	inserted := 0
	maxDepth := 0
	for _, x := range inj {
		maxDepth = max(maxDepth, x.depth)
	}
	for d := 0; d <= maxDepth && len(inj) > 0; d++ {
		var roleMsgs []msg
		for r := 0; r < 3; r++ {
			var texts []string
			var ents []int
			for _, x := range inj {
				if x.depth == d && x.role == r {
					texts = append(texts, jsTrim(x.text))
					ents = append(ents, x.entries...)
				}
			}
			// getExtensionPrompt joins the trimmed prompts; chat completion trims the whole
			// (populationInjectionPrompts), text completion its start (doChatInject).
			text := strings.TrimLeftFunc(strings.Join(texts, "\n"), isJSSpace)
			if !in.Text {
				text = jsTrim(text)
			}
			if text == "" {
				for _, i := range ents {
					out.Unplaced[i] = "only white space of it reaches its injection, which is then left out"
				}
				continue
			}
			roleMsgs = append(roleMsgs, msg{role: RoleNames[r], text: text, entries: ents, depth: d})
		}
		if len(roleMsgs) == 0 {
			continue
		}
		at := d
		if in.Text && d == 0 && opts.Trigger == "continue" {
			at = 1 // doChatInject: a continuation keeps the message it continues last
		}
		at = min(at+inserted, len(rev))
		rev = append(rev[:at], append(roleMsgs, rev[at:]...)...)
		inserted += len(roleMsgs)
	}
	var chatMsgs []msg
	for i := len(rev) - 1; i >= 0; i-- {
		chatMsgs = append(chatMsgs, rev[i])
	}

	wiBefore, wiAfter := joined(p.Before), joined(p.After)
	add := func(name, role, text string, ents []int, depth int) {
		if text != "" {
			out.Blocks = append(out.Blocks, Block{Name: name, Role: role, Text: text, Entries: ents, Depth: depth})
		}
	}
	if in.Text {
		// The Default context template's story string; its system is the card's system prompt,
		// else the default system prompt (power_user.sysprompt, enabled, "Neutral - Chat").
		system := in.SystemPrompt
		if system == "" {
			system = "Write {{char}}'s next reply in a fictional chat between {{char}} and {{user}}."
		}
		system = strings.ReplaceAll(system, "{{original}}", "")
		var sb strings.Builder
		for _, part := range []string{sub(system), wiBefore, sub(in.Description), personalityLine(m, sub(in.Personality)),
			scenarioLine(sub(in.Scenario)), wiAfter, sub(in.Persona)} {
			if part != "" {
				sb.WriteString(part + "\n")
			}
		}
		add("storyString", "", sb.String(), append(indices(p.Before), indices(p.After)...), -1)
		for _, e := range exs {
			add("example", "", "***\n"+jsTrim(e.text)+"\n", one(e.entry), -1)
		}
		add("chatStart", "", "***", nil, -1)
		for _, c := range chatMsgs {
			name := c.name
			if c.role == "user" && name == "" {
				name = m.User
			}
			if c.role == "assistant" && name == "" && c.depth < 0 {
				name = m.Char
			}
			if c.depth >= 0 && c.role == "system" {
				name = ""
			}
			line := c.text
			if name != "" {
				line = name + ": " + c.text
			}
			add(chatBlockName(c.depth), c.role, line+"\n", c.entries, c.depth)
		}
		return out, nil
	}
	// Chat completion: the prompt manager's default order.
	main := "Write {{char}}'s next reply in a fictional chat between {{charIfNotGroup}} and {{user}}."
	if in.SystemPrompt != "" {
		main = strings.ReplaceAll(in.SystemPrompt, "{{original}}", main)
	}
	main = strings.ReplaceAll(main, "{{charIfNotGroup}}", "{{char}}")
	add("main", "system", sub(main), nil, -1)
	add("worldInfoBefore", "system", wiBefore, indices(p.Before), -1)
	add("personaDescription", "system", sub(in.Persona), nil, -1)
	add("charDescription", "system", sub(in.Description), nil, -1)
	if pers := sub(in.Personality); pers != "" {
		add("charPersonality", "system", "["+m.Char+"'s personality: "+pers+"]", nil, -1)
	}
	if sc := sub(in.Scenario); sc != "" {
		add("scenario", "system", "[Circumstances and context of the dialogue: "+sc+"]", nil, -1)
	}
	add("worldInfoAfter", "system", wiAfter, indices(p.After), -1)
	for _, e := range exs {
		add("dialogueExamples", "system", "[Example Chat]\n"+jsTrim(e.text), one(e.entry), -1)
	}
	add("chatHistory", "system", "[Start a new Chat]", nil, -1)
	for _, c := range chatMsgs {
		add(chatBlockName(c.depth), c.role, c.text, c.entries, c.depth)
	}
	if opts.Trigger == "continue" && len(opts.Chat) > 0 {
		// populateChatHistory's continue nudge (continue_prefill off), with the message continued
		// as formatMessageHistoryItem writes it.
		last := opts.Chat[len(opts.Chat)-1]
		add("continueNudge", "system", "[Continue the following message. Do not include ANY parts of the original message. Use capitalization and punctuation as if your reply is a part of the original message: "+
			jsTrim(speaker(last, m)+sub(last.Text))+"]", nil, -1)
	}
	add("jailbreak", "system", sub(in.PostHistory), nil, -1)
	if opts.Trigger == "impersonate" {
		// The impersonation prompt, a control prompt: always last.
		add("impersonate", "system", sub("[Write your next reply from the point of view of {{user}}, using the chat history so far as a guideline for the writing style of {{user}}. Don't write as {{char}} or system. Don't describe actions of {{char}}.]"), nil, -1)
	}
	return out, nil
}

// speaker is "Name: " for a chat message: its own name, else the user's or the character's.
func speaker(c Message, m Macros) string {
	name := c.Name
	if name == "" && c.User {
		name = m.User
	} else if name == "" {
		name = m.Char
	}
	if name == "" {
		return ""
	}
	return name + ": "
}

func chatBlockName(depth int) string {
	if depth >= 0 {
		return "injection"
	}
	return "message"
}

func personalityLine(m Macros, p string) string {
	if p == "" {
		return ""
	}
	return m.Char + "'s personality: " + p
}

func scenarioLine(s string) string {
	if s == "" {
		return ""
	}
	return "Scenario: " + s
}

// splitExamples is parseMesExamples: blocks that each start with <START> (one is added when the
// text lacks it), trimmed.
func splitExamples(s string) []string {
	if jsTrim(s) == "" || jsTrim(s) == "<START>" {
		return nil
	}
	if t := jsTrim(s); len(t) < len("<START>") || !asciiEqualFold(t[:len("<START>")], "<START>") {
		s = "<START>\n" + jsTrim(s)
	}
	parts := splitFold(s, "<START>")
	var out []string
	for _, p := range parts[1:] {
		out = append(out, jsTrim(p))
	}
	return out
}

// splitFold splits s at every sep, ASCII letters in any case (/<START>/gi; lower-casing all
// of s would move byte offsets where it is not valid UTF-8).
func splitFold(s, sep string) []string {
	var out []string
	start := 0
	for i := 0; i+len(sep) <= len(s); i++ {
		if asciiEqualFold(s[i:i+len(sep)], sep) {
			out = append(out, s[start:i])
			i += len(sep) - 1
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// asciiEqualFold compares a and b of one length, ASCII letters in any case.
func asciiEqualFold(a, b string) bool {
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func reverse(l []string) []string {
	out := make([]string, len(l))
	for i, x := range l {
		out[len(l)-1-i] = x
	}
	return out
}

func indices(l []Placed) []int {
	out := make([]int, len(l))
	for i, x := range l {
		out[i] = x.Index
	}
	return out
}

func one(i int) []int {
	if i < 0 {
		return nil
	}
	return []int{i}
}

// userTurns counts the user's messages (setFloatingPrompt's lastMessageNumber).
func userTurns(chat []Message) int {
	n := 0
	for _, m := range chat {
		if m.User {
			n++
		}
	}
	return n
}
