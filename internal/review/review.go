// Package review reads a card and its bound worldbooks the way a careful editor would and
// reports what to fix: empty parts, lengths, token counts with a real BPE tokenizer (cl100k_base,
// whose vocabulary ships in the binary), macro mistakes, prologue lines in the character's voice,
// and worldbook entries that never fire, collide, fire at the start of every chat or cost tokens
// in every message. It is pure: no network.
package review

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
	"github.com/cardwriter/cardwriter-mcp/internal/tokens"
)

// Encoding names the tokenizer the counts use.
const Encoding = tokens.Encoding

// Severities of a finding.
const (
	Error   = "error"   // the card does not work as meant
	Warning = "warning" // it works, but a reader or the model will stumble
	Info    = "info"    // worth knowing
)

// Card is what a review reads of a card.
type Card struct {
	RoleID, RoleName, RoleDesc, RoleWelcome string
	Alternates, Prologue                    []string
	Sections                                map[string]string // by the service's section names
}

// Worldbook is a bound worldbook and its entries.
type Worldbook struct {
	ID, Name string
	Entries  []tavern.Entry
}

// Finding is one thing to look at: how bad, where (a field path), what, and how to fix it.
type Finding struct {
	Severity string `json:"severity"`
	Field    string `json:"field"`
	Message  string `json:"message"`
	Fix      string `json:"fix"`
}

// Tokens are the token counts of the card's parts.
type Tokens struct {
	Total int            `json:"total"`  // every part below
	Parts map[string]int `json:"fields"` // by field path
	// Permanent are the tokens sent with every message: the sections the model always reads
	// and the constant worldbook entries.
	Permanent int `json:"permanent"`
}

// Report is a review's result.
type Report struct {
	RoleID   string    `json:"roleId"`
	Encoding string    `json:"encoding"`
	Tokens   Tokens    `json:"tokens"`
	Findings []Finding `json:"findings"`
}

// Thresholds of the length rules, in tokens.
const (
	shortGreeting      = 12
	longGreeting       = 600
	permanentBudget    = 2000
	constantEntryLarge = 300
	// maxCounted is where the count of one text stops: a text over it counts as where counting
	// stopped (a little over), so a review costs CPU bounded by its number of texts, not its size.
	maxCounted = 50_000
)

// typicalContexts are the context sizes the card is weighed against: a small local model's
// and a common hosted one's.
var typicalContexts = []int{8192, 32768}

// replyReserve is the reply's share of the context: SillyTavern's default response length
// (openai_max_tokens) in chat completion.
const replyReserve = 300

// part is a part of what the card always sends, with its tokens.
type part struct {
	field  string
	tokens int
}

// largest names the n largest parts, biggest first, with their tokens.
func largest(parts []part, n int) string {
	sorted := slices.Clone(parts)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].tokens > sorted[j].tokens })
	var names []string
	for _, p := range sorted[:min(n, len(sorted))] {
		if p.tokens > 0 {
			names = append(names, fmt.Sprintf("%s (%d tokens)", p.field, p.tokens))
		}
	}
	return strings.Join(names, ", ")
}

// permanentSections are the sections the model reads with every message.
var permanentSections = []string{"description", "personality", "scenario", "systemPrompt", "postHistoryInstructions", "exampleDialogue"}

var (
	macro        = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)
	singleBraces = regexp.MustCompile(`(^|[^{])\{(char|user)\}([^}]|$)`)
	oldStyle     = regexp.MustCompile(`<(USER|BOT)>`)
)

// Review reviews a card and its bound worldbooks.
func Review(c Card, wbs []Worldbook) (Report, error) { return ReviewWithin(c, wbs, nil) }

// ReviewWithin is Review with the regular expression matches of the worldbooks' keys drawn
// from budget (nil: none); it stops at the budget's error, returning it.
func ReviewWithin(c Card, wbs []Worldbook, budget tavern.MatchBudget) (Report, error) {
	r := Report{RoleID: c.RoleID, Encoding: Encoding, Tokens: Tokens{Parts: map[string]int{}}, Findings: []Finding{}}
	add := func(sev, field, msg, fix string) {
		r.Findings = append(r.Findings, Finding{Severity: sev, Field: field, Message: msg, Fix: fix})
	}
	count := func(field, s string) (int, error) {
		n, err := tokens.CountUpTo(s, maxCounted)
		if err != nil {
			return 0, err
		}
		if n > maxCounted {
			add(Error, field, fmt.Sprintf("The text is over %d tokens (counted no further): no model reads this much of a card.", maxCounted),
				"Cut it down to what the model needs; move reference material into worldbook entries.")
		}
		if s != "" {
			r.Tokens.Parts[field] = n
			r.Tokens.Total += n
		}
		return n, nil
	}
	texts := map[string]string{"roleDesc": c.RoleDesc, "roleWelcome": c.RoleWelcome}
	for i, a := range c.Alternates {
		texts[fmt.Sprintf("welcomeAlternates[%d]", i)] = a
	}
	for i, p := range c.Prologue {
		texts[fmt.Sprintf("prologue[%d]", i)] = p
	}
	for name, s := range c.Sections {
		texts["sections."+name] = s
	}
	fields := make([]string, 0, len(texts))
	for f := range texts {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	counts := map[string]int{}
	for _, f := range fields {
		n, err := count(f, texts[f])
		if err != nil {
			return Report{}, err
		}
		counts[f] = n
	}

	// Empty parts.
	if strings.TrimSpace(c.RoleWelcome) == "" {
		add(Error, "roleWelcome", "The card has no first message: a chat starts with nothing from the character.",
			"Write one with set_opening_lines, in the character's voice, setting the scene.")
	}
	if strings.TrimSpace(c.Sections["description"]) == "" {
		add(Warning, "sections.description", "The description section is empty: the model knows the character only by name.",
			"Describe who the character is, looks like and wants, with write_card_document.")
	}
	for _, name := range []string{"personality", "scenario", "exampleDialogue"} {
		if strings.TrimSpace(c.Sections[name]) == "" {
			add(Info, "sections."+name, fmt.Sprintf("The %s section is empty.", name), fmt.Sprintf("Consider writing %s with write_card_document.", name))
		}
	}

	// Greetings: length, duplicates.
	greetings := append([]string{c.RoleWelcome}, c.Alternates...)
	seen := map[string]string{}
	for i, g := range greetings {
		field := "roleWelcome"
		if i > 0 {
			field = fmt.Sprintf("welcomeAlternates[%d]", i-1)
		}
		if strings.TrimSpace(g) == "" {
			if i > 0 {
				add(Warning, field, "An alternate first message is empty.", "Remove it or write it, with set_opening_lines.")
			}
			continue
		}
		switch n := counts[field]; {
		case n < shortGreeting:
			add(Warning, field, fmt.Sprintf("The first message is %d tokens: too short to set a scene.", n), "Give the player a place, a situation and something to answer.")
		case n > longGreeting:
			add(Warning, field, fmt.Sprintf("The first message is %d tokens: it crowds the chat's context.", n), fmt.Sprintf("Keep it under %d tokens.", longGreeting))
		}
		key := strings.ToLower(strings.TrimSpace(g))
		if other, dup := seen[key]; dup {
			add(Warning, field, "This first message repeats "+other+".", "Make each alternate a different opening, or remove the copy.")
		}
		seen[key] = field
	}

	// What the model reads with every message.
	var always []part
	for _, s := range permanentSections {
		r.Tokens.Permanent += counts["sections."+s]
		always = append(always, part{"sections." + s, counts["sections."+s]})
	}

	// Macros.
	for _, f := range fields {
		s := texts[f]
		for _, m := range macro.FindAllStringSubmatch(s, -1) {
			name := m[1]
			switch {
			case name == "char" || name == "user":
			case strings.EqualFold(name, "char") || strings.EqualFold(name, "user"):
				add(Warning, f, fmt.Sprintf("The macro %s is written in another case: it is not replaced.", m[0]),
					fmt.Sprintf("Write {{%s}}.", strings.ToLower(name)))
			default:
				add(Info, f, fmt.Sprintf("The macro %s is not {{char}} or {{user}}: it may reach the model as written.", m[0]),
					"Use {{char}} for the character and {{user}} for the player, or write the text out.")
			}
			if m[0] != "{{"+name+"}}" && (name == "char" || name == "user") {
				add(Warning, f, fmt.Sprintf("The macro %s has spaces inside: it is not replaced.", m[0]), fmt.Sprintf("Write {{%s}}.", name))
			}
		}
		if m := singleBraces.FindStringSubmatch(s); m != nil {
			add(Warning, f, fmt.Sprintf("{%s} has single braces: it is not a macro.", m[2]), fmt.Sprintf("Write {{%s}}.", m[2]))
		}
		if m := oldStyle.FindString(s); m != "" {
			fix := "{{user}}"
			if m == "<BOT>" {
				fix = "{{char}}"
			}
			add(Info, f, m+" is an old macro some apps no longer replace.", "Write "+fix+".")
		}
	}

	// Prologue lines are the player's.
	name := strings.TrimSpace(c.RoleName)
	for i, p := range c.Prologue {
		f := fmt.Sprintf("prologue[%d]", i)
		t := strings.TrimSpace(p)
		switch {
		case strings.HasPrefix(t, "{{char}}") || (name != "" && strings.HasPrefix(strings.ToLower(t), strings.ToLower(name)+":")):
			add(Warning, f, "This prologue line is written as the character; prologue lines are suggestions for the player to say.",
				"Rewrite it in the player's voice, or move it to the first message.")
		case slices.ContainsFunc(greetings, func(g string) bool { return strings.TrimSpace(g) == t && t != "" }):
			add(Warning, f, "This prologue line repeats a first message.", "Prologue lines are the player's answers: write one the player would say.")
		}
	}

	// Worldbooks.
	opening := c.RoleWelcome + "\n" + c.Sections["exampleDialogue"]
	macros := tavern.CardMacros(c.RoleName)
	keywordOwners := map[string][]string{}
	for _, wb := range wbs {
		for _, e := range wb.Entries {
			f := fmt.Sprintf("worldbook %s entry %q", wb.ID, e.Name)
			if !e.IsEnabled {
				add(Info, f, "The entry is disabled: it never fires.", "Enable it, or delete it if it is not needed.")
				continue
			}
			if e.IsConstant {
				n, err := tokens.CountUpTo(e.Content, maxCounted)
				if err != nil {
					return Report{}, err
				}
				r.Tokens.Permanent += n
				always = append(always, part{f, n})
				sev := Info
				if n > constantEntryLarge {
					sev = Warning
				}
				add(sev, f, fmt.Sprintf("The entry is constant: its %d tokens go with every message.", n),
					"Keep constant entries short, or give it keywords so it fires only when relevant.")
				continue
			}
			if len(e.Keywords) == 0 || !slices.ContainsFunc(e.Keywords, func(k string) bool { return strings.TrimSpace(k) != "" }) {
				add(Error, f, "The entry has no keyword: it never fires.", "Give it the words that should bring it up, with write_worldbook_document.")
				continue
			}
			for _, k := range e.Keywords {
				k = strings.ToLower(strings.TrimSpace(k))
				if k != "" && !slices.Contains(keywordOwners[k], e.Name) {
					keywordOwners[k] = append(keywordOwners[k], e.Name)
				}
			}
			res, err := tavern.MatchWithin([]tavern.Entry{e}, opening, tavern.MatchOptions{}, macros, budget)
			if err != nil {
				return Report{}, err
			}
			if len(res) == 1 && res[0].Fired {
				add(Info, f, fmt.Sprintf("The card's own first message or example dialogue fires the entry (%s): it is in the context from the first message.",
					strings.Join(res[0].Matched, ", ")), "Make it constant if it always belongs, or narrow its keywords.")
			}
		}
	}
	keys := make([]string, 0, len(keywordOwners))
	for k := range keywordOwners {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if owners := keywordOwners[k]; len(owners) > 1 {
			add(Warning, "worldbook keywords", fmt.Sprintf("The keyword %q fires %d entries at once: %s.", k, len(owners), strings.Join(owners, ", ")),
				"Give each entry keywords of its own, or merge the entries.")
		}
	}
	if r.Tokens.Permanent > permanentBudget {
		add(Warning, "sections", fmt.Sprintf("%d tokens go with every message (the always-read sections and constant entries).", r.Tokens.Permanent),
			fmt.Sprintf("Keep them under about %d: trim the description and example dialogue, or move lore into keyword entries.", permanentBudget))
	}
	for _, ctx := range typicalContexts {
		left := ctx - r.Tokens.Permanent - replyReserve
		if left >= ctx/2 {
			continue
		}
		sev, what := Warning, fmt.Sprintf("%d are left for the chat, under half", max(left, 0))
		if left <= 0 {
			sev, what = Error, "nothing is left for the chat"
		}
		add(sev, fmt.Sprintf("context %dk", ctx/1024), fmt.Sprintf("Of a %d-token context the card always sends %d tokens (its sections and constant entries); with a %d-token reply %s, so the model forgets the chat quickly.",
			ctx, r.Tokens.Permanent, replyReserve, what), "Trim "+largest(always, 3)+", or move lore into keyword entries.")
	}
	rank := map[string]int{Error: 0, Warning: 1, Info: 2}
	sort.SliceStable(r.Findings, func(i, j int) bool { return rank[r.Findings[i].Severity] < rank[r.Findings[j].Severity] })
	return r, nil
}
