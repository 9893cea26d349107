package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"
	"github.com/cardwriter/cardwriter-mcp/internal/phrase"
	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
	"github.com/cardwriter/cardwriter-mcp/internal/tavernsync"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// triggerTools is test_worldbook_triggers, of the worldbook toolset: which entries a passage or a
// chat would activate, by SillyTavern's World Info rules (tavern.Simulate). Its schemas are in
// schema/tools.json (it is no single contract operation).
func triggerTools() []Tool {
	return []Tool{
		{
			Name:    "test_worldbook_triggers",
			Toolset: ToolsetWorldbook,
			Title:   "Test which worldbook entries a passage or chat triggers",
			Description: "Simulate which worldbook entries a passage (text) or chat activates, and why; changes nothing. matchOptions null: the service's rules; set: SillyTavern's (regex keys, whole words, selectiveLogic, probability: seed rolls it, groups, recursion, sticky/cooldown/delay: pass timedEffects back). Of a large worldbook, notFired lists only entries a keyword matched.\n\n" +
				`Example: {"worldbookId":"wb_41d0e7","text":"We drop out of the jump gate."}`,
			Annotations: readHints(),
			Handler:     testWorldbookTriggers,
			Cut:         "notFired",
			Summary: func(out map[string]any) string {
				var names []string
				for _, r := range list(out, "fired") {
					if m, ok := r.(map[string]any); ok {
						names = append(names, entryLabel(m))
					}
				}
				s := fmt.Sprintf("%s of %d fire", phrase.Count(int64(len(names)), "entry", "entries"), num(out, "entryCount"))
				if len(names) > 0 {
					s += ": " + firstOf(names, ", ")
				}
				s += "."
				if q := num(out, "quiet"); q > 0 {
					s += fmt.Sprintf(" %d more matched no keyword (not listed; detail full lists them).", q)
				}
				return s + omittedSummary(out)
			},
		},
	}
}

// entryLabel names an entry of the report for the summary: its name quoted, or, for an entry
// without one, its id or its position in the list tested.
func entryLabel(m map[string]any) string {
	switch {
	case strings.TrimSpace(str(m, "name")) != "":
		return quoted(str(m, "name"))
	case str(m, "entryId") != "":
		return "entry " + str(m, "entryId")
	}
	return fmt.Sprintf("entry #%d", num(m, "index")+1)
}

type triggerArgs struct {
	WorldbookID  string           `json:"worldbookId"`
	Entries      []triggerEntry   `json:"entries"`
	Text         *string          `json:"text"`
	Chat         []tavern.Message `json:"chat"`
	Format       string           `json:"format"`
	CharName     string           `json:"charName"`
	UserName     string           `json:"userName"`
	ScanDepth    *int             `json:"scanDepth"`
	Seed         *uint64          `json:"seed"`
	Settings     triggerSettings  `json:"settings"`
	TimedEffects []triggerEffect  `json:"timedEffects"`
	Detail       string           `json:"detail"`
}

// triggerSettings are SillyTavern's global World Info settings a call may set (scanDepth is beside them).
type triggerSettings struct {
	Recursive              *bool `json:"recursive"`
	MaxRecursionSteps      *int  `json:"maxRecursionSteps"`
	CaseSensitive          *bool `json:"caseSensitive"`
	MatchWholeWords        *bool `json:"matchWholeWords"`
	UseGroupScoring        *bool `json:"useGroupScoring"`
	IncludeNames           *bool `json:"includeNames"`
	MinActivations         *int  `json:"minActivations"`
	MinActivationsDepthMax *int  `json:"minActivationsDepthMax"`
}

// apply sets the settings given on s.
func (t triggerSettings) apply(s *tavern.Settings) {
	for _, b := range []struct {
		v   *bool
		dst *bool
	}{{t.Recursive, &s.Recursive}, {t.CaseSensitive, &s.CaseSensitive}, {t.MatchWholeWords, &s.MatchWholeWords},
		{t.UseGroupScoring, &s.UseGroupScoring}, {t.IncludeNames, &s.IncludeNames}} {
		if b.v != nil {
			*b.dst = *b.v
		}
	}
	for _, n := range []struct {
		v   *int
		dst *int
	}{{t.MaxRecursionSteps, &s.MaxRecursionSteps}, {t.MinActivations, &s.MinActivations}, {t.MinActivationsDepthMax, &s.MinActivationsDepthMax}} {
		if n.v != nil {
			*n.dst = *n.v
		}
	}
}

// triggerEntry is an entry as the tool takes it: the service's shape, every field but keywords
// optional (isEnabled defaults to true, as on create), plus SillyTavern's own fields.
type triggerEntry struct {
	EntryID           string               `json:"entryId"`
	Name              string               `json:"name"`
	Content           string               `json:"content"`
	Keywords          []string             `json:"keywords"`
	SecondaryKeywords []string             `json:"secondaryKeywords"`
	MatchOptions      *tavern.MatchOptions `json:"matchOptions"`
	IsEnabled         *bool                `json:"isEnabled"`
	IsConstant        bool                 `json:"isConstant"`
	SortOrder         int                  `json:"sortOrder"`
	SillyTavern       map[string]any       `json:"sillyTavern"`
}

// sillyTavernFields maps the tool's sillyTavern field names to the V3 lorebook extension names
// tavern.Simulate reads.
var sillyTavernFields = map[string]string{
	"probability": "probability", "useProbability": "useProbability", "group": "group",
	"groupOverride": "group_override", "groupWeight": "group_weight", "useGroupScoring": "use_group_scoring",
	"sticky": "sticky", "cooldown": "cooldown", "delay": "delay", "excludeRecursion": "exclude_recursion",
	"preventRecursion": "prevent_recursion", "delayUntilRecursion": "delay_until_recursion",
	"scanDepth": "scan_depth", "caseSensitive": "case_sensitive", "matchWholeWords": "match_whole_words",
	// preview_prompt's: where the entry goes, the budget, filters and other scan sources.
	"position": "position", "depth": "depth", "role": "role", "outletName": "outlet_name", "ignoreBudget": "ignore_budget",
	"triggers": "triggers", "characterFilter": "character_filter", "matchPersonaDescription": "match_persona_description",
	"matchCharacterDescription": "match_character_description", "matchCharacterPersonality": "match_character_personality",
	"matchCharacterDepthPrompt": "match_character_depth_prompt", "matchScenario": "match_scenario", "matchCreatorNotes": "match_creator_notes",
}

// stField is the kind of value a sillyTavern field takes.
type stField struct {
	kinds    string // letters: b boolean, n number, i integer, s string, z null, a array of generation types, o character filter
	min, max float64
}

// stFields are the sillyTavern fields an entry may carry and what each takes (SillyTavern's
// entry fields; the schema lists them, the handler checks them).
var stFields = map[string]stField{
	"probability": {kinds: "n"}, "useProbability": {kinds: "b"}, "group": {kinds: "s"}, "groupOverride": {kinds: "b"},
	"groupWeight": {kinds: "n"}, "useGroupScoring": {kinds: "bz"}, "sticky": {kinds: "n"}, "cooldown": {kinds: "n"},
	"delay": {kinds: "n"}, "excludeRecursion": {kinds: "b"}, "preventRecursion": {kinds: "b"},
	"delayUntilRecursion": {kinds: "bi", max: math.MaxInt32}, "scanDepth": {kinds: "iz", max: 1000},
	"caseSensitive": {kinds: "bz"}, "matchWholeWords": {kinds: "bz"},
	"position": {kinds: "i", max: tavern.PosOutlet}, "depth": {kinds: "i", max: 10000}, "role": {kinds: "i", max: 2},
	"outletName": {kinds: "s"}, "ignoreBudget": {kinds: "b"}, "triggers": {kinds: "a"}, "characterFilter": {kinds: "o"},
	"matchPersonaDescription": {kinds: "b"}, "matchCharacterDescription": {kinds: "b"}, "matchCharacterPersonality": {kinds: "b"},
	"matchCharacterDepthPrompt": {kinds: "b"}, "matchScenario": {kinds: "b"}, "matchCreatorNotes": {kinds: "b"},
}

// checkSillyTavern checks an entry's sillyTavern fields; the error names the first wrong one.
func checkSillyTavern(where string, fields map[string]any) error {
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		f, ok := stFields[k]
		if !ok {
			return badTriggerArgs(fmt.Sprintf("%s.sillyTavern.%s is not a SillyTavern entry field.", where, k), "entries")
		}
		if !f.accepts(fields[k]) {
			return badTriggerArgs(fmt.Sprintf("%s.sillyTavern.%s has a value of the wrong kind or range.", where, k), "entries")
		}
	}
	return nil
}

// accepts reports whether v is a value of the field.
func (f stField) accepts(v any) bool {
	has := func(k byte) bool { return strings.IndexByte(f.kinds, k) >= 0 }
	switch t := v.(type) {
	case nil:
		return has('z')
	case bool:
		return has('b')
	case string:
		return has('s')
	case float64:
		if has('n') {
			return true
		}
		return has('i') && t == math.Trunc(t) && t >= f.min && t <= f.max
	case []any:
		for _, x := range t {
			if s, ok := x.(string); !ok || !slices.Contains(tavern.GenerationTypes, s) {
				return false
			}
		}
		return has('a')
	case map[string]any:
		if !has('o') {
			return false
		}
		for k, x := range t {
			switch k {
			case "isExclude":
				if _, ok := x.(bool); !ok {
					return false
				}
			case "names", "tags":
				l, ok := x.([]any)
				if !ok {
					return false
				}
				for _, n := range l {
					if _, ok := n.(string); !ok {
						return false
					}
				}
			default:
				return false
			}
		}
		return true
	}
	return false
}

// triggerEffect is a sticky or cooldown record, in and out: the entry by entryId, else by index.
type triggerEffect struct {
	EntryID   string  `json:"entryId,omitempty"`
	Index     *int    `json:"index,omitempty"`
	Type      string  `json:"type"`
	Start     float64 `json:"start"`
	End       float64 `json:"end"`
	Protected bool    `json:"protected"`
}

// triggerResult is one entry of the report, with its position.
type triggerResult struct {
	EntryID string   `json:"entryId"`
	Name    string   `json:"name"`
	Index   int      `json:"index"`
	Matched []string `json:"matched"`
	Reason  string   `json:"reason"`
	Key     string   `json:"key,omitempty"`
	Step    int      `json:"step,omitempty"`
	Group   string   `json:"group,omitempty"`
	Chance  *float64 `json:"chance,omitempty"`
}

// triggerReport is test_worldbook_triggers' result (tools.json).
type triggerReport struct {
	WorldbookID  string          `json:"worldbookId,omitempty"`
	Format       string          `json:"format"`
	EntryCount   int             `json:"entryCount"`
	Steps        int             `json:"steps"`
	Settings     tavern.Settings `json:"settings"`
	Fired        []triggerResult `json:"fired"`
	NotFired     []triggerResult `json:"notFired"`
	Quiet        int             `json:"quiet,omitempty"`
	TimedEffects []triggerEffect `json:"timedEffects"`
}

// quietListed is how many entries a worldbook may have for notFired to list, in brief, also
// those that no keyword matched.
const quietListed = 20

// badTriggerArgs is a user mistake in the arguments, naming them.
func badTriggerArgs(msg string, args ...string) error {
	a := make([]any, len(args))
	for i, s := range args {
		a[i] = s
	}
	return &Failure{Code: codeInvalidArguments, Message: msg, Detail: map[string]any{"arguments": a}}
}

// testWorldbookTriggers runs tavern.Simulate over a worldbook's entries or the given ones.
func testWorldbookTriggers(ctx context.Context, c *Call) (json.RawMessage, error) {
	var in triggerArgs
	if err := json.Unmarshal(c.Body, &in); err != nil {
		return nil, fmt.Errorf("decode the arguments: %w", err)
	}
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(c.Body, &fields)
	_, hasEntries := fields["entries"]
	if (in.WorldbookID != "") == hasEntries {
		if hasEntries {
			return nil, badTriggerArgs("Give worldbookId (to test a stored worldbook) or entries (to test entries you pass), not both.", "worldbookId", "entries")
		}
		return nil, badTriggerArgs("Give worldbookId (to test a stored worldbook) or entries (to test entries you pass); neither was given.", "worldbookId", "entries")
	}
	_, hasChat := fields["chat"]
	if (in.Text != nil) == hasChat {
		if hasChat {
			return nil, badTriggerArgs("Give text (one passage) or chat (messages, newest last), not both.", "text", "chat")
		}
		return nil, badTriggerArgs("Give text (one passage) or chat (messages, newest last); neither was given.", "text", "chat")
	}
	settings := tavern.DefaultSettings()
	out := triggerReport{Fired: []triggerResult{}, NotFired: []triggerResult{}, TimedEffects: []triggerEffect{}}
	var entries []tavern.Entry
	if in.WorldbookID != "" {
		var err error
		if entries, err = storedTriggerEntries(ctx, c, &in, &out, &settings); err != nil {
			return nil, err
		}
	} else {
		out.Format = in.Format
		if out.Format == "" {
			out.Format = upstream.WorldbookNative
		}
		for i, e := range in.Entries {
			te, err := givenTriggerEntry(i, e, out.Format)
			if err != nil {
				return nil, err
			}
			entries = append(entries, te)
		}
	}
	if in.ScanDepth != nil {
		settings.ScanDepth = *in.ScanDepth
	}
	in.Settings.apply(&settings)
	opts := tavern.SimOptions{Settings: settings, Chat: in.Chat, Macros: tavern.Macros{Char: in.CharName, User: in.UserName}, Seed: in.Seed,
		Character: tavern.FilterTarget{File: in.CharName}}
	if in.Text != nil {
		opts.Chat = []tavern.Message{{Text: *in.Text}}
	}
	byID := map[string]int{}
	for i, e := range entries {
		if e.EntryID != "" {
			byID[e.EntryID] = i
		}
	}
	for i, t := range in.TimedEffects {
		idx, err := effectEntry(i, t, byID, len(entries))
		if err != nil {
			return nil, err
		}
		opts.TimedEffects = append(opts.TimedEffects, tavern.TimedEffect{Type: t.Type, Entry: idx, Start: t.Start, End: t.End, Protected: t.Protected})
	}
	opts.Budget = c.matchBudget(ctx)
	sim := tavern.Simulate(entries, opts)
	if sim.Err != nil {
		return nil, budgetFailure(sim.Err)
	}
	out.EntryCount, out.Steps, out.Settings = len(entries), sim.Steps, settings
	for _, r := range sim.Results {
		tr := triggerResult{EntryID: r.EntryID, Name: r.Name, Index: r.Index, Matched: jsontext.NonNil(r.Matched), Reason: r.Reason,
			Key: r.Key, Step: r.Step, Group: r.Group, Chance: r.Chance}
		switch {
		case r.Fired:
			out.Fired = append(out.Fired, tr)
		case r.Key == "" && in.Detail != "full" && len(entries) > quietListed:
			out.Quiet++ // no main keyword found: said by count only
		default:
			out.NotFired = append(out.NotFired, tr)
		}
	}
	for _, t := range sim.TimedEffects {
		idx := t.Entry
		if idx < 0 || idx >= len(entries) {
			continue // effectEntry admitted only entries of the list
		}
		out.TimedEffects = append(out.TimedEffects, triggerEffect{EntryID: entries[idx].EntryID, Index: &idx, Type: t.Type, Start: t.Start, End: t.End, Protected: t.Protected})
	}
	return jsontext.Marshal(out)
}

// storedTriggerEntries reads a worldbook's entries and, for a tavern worldbook imported from a
// file, their SillyTavern fields and the lorebook's settings from the kept-aside record.
func storedTriggerEntries(ctx context.Context, c *Call, in *triggerArgs, out *triggerReport, settings *tavern.Settings) ([]tavern.Entry, error) {
	entries, wb, book, err := storedEntries(ctx, c, in.WorldbookID, in.Format)
	if err != nil {
		return nil, err
	}
	out.WorldbookID, out.Format = wb.WorldbookID, wb.Format
	settings.ApplyBook(book)
	return entries, nil
}

// storedEntries reads a worldbook's entries and, for a tavern worldbook imported from a file,
// their SillyTavern fields and the lorebook's own fields (nil when none were kept) from the
// kept-aside record. A format given must be the worldbook's.
func storedEntries(ctx context.Context, c *Call, worldbookID, format string) ([]tavern.Entry, *upstream.Worldbook, map[string]any, error) {
	wb, err := c.Client.GetWorldbook(ctx, worldbookID)
	if err != nil {
		return nil, nil, nil, err
	}
	if format != "" && format != wb.Format {
		return nil, nil, nil, &Failure{Code: codeInvalidArguments, Detail: map[string]any{"argument": "format"},
			Message: fmt.Sprintf("format %s does not apply to worldbook %s, which is %s; leave format out (it is for entries).", format, wb.WorldbookID, wb.Format)}
	}
	list, err := c.Client.ListWorldbookEntries(ctx, worldbookID, "")
	if err != nil {
		return nil, nil, nil, err
	}
	entries := tavernEntries(list.Entries)
	if wb.Format != upstream.WorldbookTavern {
		return entries, wb, nil, nil
	}
	kept, found, err := tavernsync.LoadKeptWorldbook(ctx, c.Client, c.Aside, wb.WorldbookID)
	if err != nil || !found {
		return entries, wb, nil, err
	}
	for i := range entries {
		if ext, ok := kept.Entries[entries[i].EntryID]; ok {
			entries[i].Extensions = ext
		}
	}
	return entries, wb, kept.Book, nil
}

// givenTriggerEntry turns an entry of the arguments into the model, its sillyTavern fields into
// extensions under their V3 names.
func givenTriggerEntry(i int, e triggerEntry, format string) (tavern.Entry, error) {
	te := tavern.Entry{EntryID: e.EntryID, Name: e.Name, Content: e.Content, Keywords: e.Keywords,
		SecondaryKeywords: e.SecondaryKeywords, MatchOptions: e.MatchOptions, IsEnabled: e.IsEnabled == nil || *e.IsEnabled,
		IsConstant: e.IsConstant, SortOrder: e.SortOrder}
	if te.MatchOptions == nil && format == upstream.WorldbookTavern {
		te.MatchOptions = &tavern.MatchOptions{}
	}
	if len(e.SillyTavern) == 0 {
		return te, nil
	}
	if err := checkSillyTavern(fmt.Sprintf("entries[%d]", i), e.SillyTavern); err != nil {
		return te, err
	}
	ext := map[string]any{}
	for k, v := range e.SillyTavern {
		ext[sillyTavernFields[k]] = v
	}
	for _, k := range []string{"caseSensitive", "matchWholeWords"} {
		v, ok := e.SillyTavern[k]
		if !ok {
			continue
		}
		if te.MatchOptions == nil {
			return te, badTriggerArgs(fmt.Sprintf("entries[%d].sillyTavern.%s applies to entries with SillyTavern's rules: give the entry matchOptions, or format tavern.", i, k), "entries")
		}
		// The entry's own value wins over matchOptions; null is the global setting.
		mo := *te.MatchOptions
		b, _ := v.(bool)
		if k == "caseSensitive" {
			mo.CaseSensitive = b
		} else {
			mo.MatchWholeWords = b
		}
		te.MatchOptions = &mo
	}
	te.Extensions = map[string]any{"extensions": ext}
	return te, nil
}

// effectEntry finds the entry a timed effect of the arguments is for.
func effectEntry(i int, t triggerEffect, byID map[string]int, n int) (int, error) {
	if t.EntryID != "" {
		idx, ok := byID[t.EntryID]
		if !ok {
			return 0, badTriggerArgs(fmt.Sprintf("timedEffects[%d].entryId %q is none of the entries tested.", i, t.EntryID), "timedEffects")
		}
		return idx, nil
	}
	if t.Index == nil || *t.Index < 0 || *t.Index >= n {
		return 0, badTriggerArgs(fmt.Sprintf("timedEffects[%d] needs entryId, or index between 0 and %d.", i, n-1), "timedEffects")
	}
	return *t.Index, nil
}
