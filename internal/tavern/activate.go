package tavern

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The activation simulator: SillyTavern's checkWorldInfo (public/scripts/world-info.js) run over
// the neutral model. Comments name the JavaScript they reproduce.

// Message is one chat message to scan.
type Message struct {
	// Name is the speaker; with Settings.IncludeNames the message is scanned as "Name: Text".
	Name string `json:"name,omitempty"`
	// Text is the message.
	Text string `json:"text"`
	// User marks the user's messages (the others are the character's); the prompt X-ray reads it.
	User bool `json:"user,omitempty"`
}

// Settings are SillyTavern's global World Info settings (world_info_* in world-info.js).
type Settings struct {
	// ScanDepth is world_info_depth: how many of the newest messages are scanned (0 scans none).
	ScanDepth int `json:"scanDepth"`
	// Recursive is world_info_recursive: activated entries' content is scanned again.
	Recursive bool `json:"recursive"`
	// MaxRecursionSteps is world_info_max_recursion_steps: 0 is unlimited, 1 stops after the first scan.
	MaxRecursionSteps int `json:"maxRecursionSteps"`
	// CaseSensitive is world_info_case_sensitive, for entries that do not say.
	CaseSensitive bool `json:"caseSensitive"`
	// MatchWholeWords is world_info_match_whole_words, for entries that do not say.
	MatchWholeWords bool `json:"matchWholeWords"`
	// UseGroupScoring is world_info_use_group_scoring, for entries that do not say.
	UseGroupScoring bool `json:"useGroupScoring"`
	// MinActivations is world_info_min_activations: scan deeper until this many entries fired.
	MinActivations int `json:"minActivations"`
	// MinActivationsDepthMax is world_info_min_activations_depth_max: 0 is the whole chat.
	MinActivationsDepthMax int `json:"minActivationsDepthMax"`
	// IncludeNames is world_info_include_names: messages are scanned as "Name: Text".
	IncludeNames bool `json:"includeNames"`
}

// DefaultSettings are SillyTavern's defaults: scan depth 2, names included, everything else off.
func DefaultSettings() Settings { return Settings{ScanDepth: 2, IncludeNames: true} }

// ApplyBook takes a lorebook's own scan_depth and recursive_scanning (V3 names, or the camelCase
// some editors write) from Book.Extensions; values that are missing or unreadable change nothing.
func (s *Settings) ApplyBook(ext map[string]any) {
	for _, k := range []string{"scan_depth", "scanDepth"} {
		if n, ok := jsNumber(ext[k]); ok && n >= 0 {
			s.ScanDepth = int(n)
			break
		}
	}
	for _, k := range []string{"recursive_scanning", "recursiveScanning"} {
		if v, ok := ext[k]; ok && v != nil {
			s.Recursive = truthy(v)
			break
		}
	}
}

// Timed effect types.
const (
	// EffectSticky keeps an entry active for a number of messages after it fired.
	EffectSticky = "sticky"
	// EffectCooldown keeps an entry from firing for a number of messages after it fired or its sticky ended.
	EffectCooldown = "cooldown"
)

// TimedEffect is one sticky or cooldown record of chat_metadata.timedWorldInfo: it applies to the
// entry from chat length Start until End.
type TimedEffect struct {
	// Type is EffectSticky or EffectCooldown.
	Type string `json:"type"`
	// Entry is the entry's index in the list simulated.
	Entry int `json:"entry"`
	// Start is the chat length (message count) when the effect began.
	Start float64 `json:"start"`
	// End is the chat length at which it ends.
	End float64 `json:"end"`
	// Protected effects survive a scan whose chat has not grown past Start.
	Protected bool `json:"protected"`
}

// SimOptions are the inputs of Simulate beside the entries.
type SimOptions struct {
	// Settings are the global settings (DefaultSettings, then Settings.ApplyBook).
	Settings Settings
	// Chat is the conversation, oldest first; its length is the turn timed effects count in.
	Chat []Message
	// Macros are the names {{char}} and {{user}} stand for in keys and content.
	Macros Macros
	// Seed makes probability and inclusion group rolls reproducible; nil rolls nothing and reports
	// each chance instead, continuing as if probability checks passed and the heaviest group member won.
	Seed *uint64
	// TimedEffects are the sticky and cooldown records in force before this scan.
	TimedEffects []TimedEffect
	// Native are the rules of entries without MatchOptions (the card service's own): zero is
	// case-insensitive substrings, secondary keywords an AND gate, keys taken literally.
	Native MatchOptions
	// Budget, when set, bounds the time regular expression matches take (and ends the scan when
	// the call does); nil: each match is bounded alone.
	Budget MatchBudget
	// TokenBudget is the World Info token budget (0: none, every activated entry is admitted).
	TokenBudget int
	// CountTokens counts the tokens of a text for TokenBudget; it must be set when TokenBudget is.
	CountTokens func(string) int
	// Trigger is the generation type (normal, continue, impersonate, swipe, regenerate, quiet)
	// entries with triggers are filtered by; empty is normal.
	Trigger string
	// Character is the character the chat is with, for entries' character filters.
	Character FilterTarget
	// Scan is the text beside the chat that entries may ask to be matched against.
	Scan ScanSources
	// Presorted keeps the entries in the order given (getSortedEntries over several books)
	// instead of sorting them by SortOrder.
	Presorted bool
}

// MatchBudget is what the regular expression matches of a simulation may spend: Simulate asks
// Allow before each match and reports the time it took to Spend.
type MatchBudget interface {
	// Allow returns how long the next match may run, or the error that ends the simulation.
	Allow() (time.Duration, error)
	// Spend records the time a match took.
	Spend(d time.Duration)
}

// FilterTarget is what an entry's characterFilter is tested on: getCharaFilename and the
// character's tags. Its zero value is no character: filters are then not applied.
type FilterTarget struct {
	// File is the character's file name without extension (SillyTavern's getCharaFilename).
	File string
	// Tags are the character's tags.
	Tags []string
}

// ScanSources are WIGlobalScanData: card and persona text an entry may be matched against.
type ScanSources struct {
	Persona, Description, Personality, DepthPrompt, Scenario, CreatorNotes string
}

// Generation types an entry's triggers name.
var GenerationTypes = []string{"normal", "continue", "impersonate", "swipe", "regenerate", "quiet"}

// Simulation is what Simulate found.
type Simulation struct {
	// Results has one result per entry, in entry order.
	Results []Result
	// Steps is how many scan loops ran (1 = the first scan only).
	Steps int
	// TimedEffects are the sticky and cooldown records after this scan, to pass to the next one.
	TimedEffects []TimedEffect
	// Activated are the indices of the entries admitted, in the order SillyTavern admitted them.
	Activated []int
	// Overflowed reports whether the budget stopped admissions.
	Overflowed bool
	// Err is why the scan stopped before its end (SimOptions.Budget's error); the results are
	// then incomplete. nil when it ran to its end.
	Err error
}

// Scan states (world-info.js scan_state).
const (
	stateNone = iota
	stateInitial
	stateRecursion
	stateMinActivations
)

const (
	maxScanDepth  = 1000 // MAX_SCAN_DEPTH
	defaultWeight = 100  // DEFAULT_WEIGHT
)

// knownDecorators is KNOWN_DECORATORS.
var knownDecorators = []string{"@@activate", "@@dont_activate"}

// simEntry is an entry as checkWorldInfo sees it (a WIScanEntry), with the simulator's notes.
type simEntry struct {
	idx    int
	e      *Entry
	native bool
	keys   []string
	second []string
	logic  int
	order  int

	caseSensitive, wholeWords, groupScoring *bool
	scanDepth                               *int

	useProbability bool
	probability    float64
	group          string
	groupOverride  bool
	groupWeight    float64
	sticky         float64
	cooldown       float64
	delay          float64
	excludeRec     bool
	preventRec     bool
	delayRec       float64
	decorators     []string
	content        string
	ignoreBudget   bool
	triggers       []string
	filter         *charFilter
	sources        int // bits of matchSources the entry is also matched against

	res    *Result
	trail  []string
	notes  []string
	chance float64
}

func (s *simEntry) note(n string) {
	for _, x := range s.notes {
		if x == n {
			return
		}
	}
	s.notes = append(s.notes, n)
}

// say records why the entry did not fire in a step; a step that repeats the last reason adds nothing.
func (s *simEntry) say(step int, why string) {
	if len(s.trail) > 0 && strings.HasSuffix(s.trail[len(s.trail)-1], why) {
		return
	}
	if step > 1 {
		why = fmt.Sprintf("step %d: %s", step, why)
	}
	s.trail = append(s.trail, why)
}

// newSimEntry reads an entry's SillyTavern fields from its Extensions, with convertCharacterBook's
// defaults (world-info.js convertCharacterBook) for those it lacks.
func newSimEntry(i int, e *Entry, native MatchOptions) *simEntry {
	s := &simEntry{idx: i, e: e, native: e.MatchOptions == nil, order: e.SortOrder, chance: 1,
		useProbability: true, probability: 100, groupWeight: defaultWeight}
	s.res = &Result{EntryID: e.EntryID, Name: e.Name, Index: i, Matched: []string{}}
	ext, _ := e.Extensions["extensions"].(map[string]any)
	mo := native
	if !s.native {
		mo = *e.MatchOptions
	}
	s.logic = mo.SelectiveLogic
	if s.native {
		for _, k := range e.Keywords {
			if k = jsTrim(k); k != "" {
				s.keys = append(s.keys, k)
			}
		}
		for _, k := range e.SecondaryKeywords {
			if k = jsTrim(k); k != "" {
				s.second = append(s.second, k)
			}
		}
		cs, ww := mo.CaseSensitive, mo.MatchWholeWords
		s.caseSensitive, s.wholeWords = &cs, &ww
	} else {
		s.keys, s.second = e.Keywords, e.SecondaryKeywords
		// A false that the entry's own fields do not spell out is SillyTavern's null: the global setting.
		top := e.Extensions["case_sensitive"]
		if top == nil {
			top = ext["case_sensitive"]
		}
		s.caseSensitive = override(mo.CaseSensitive, top)
		s.wholeWords = override(mo.MatchWholeWords, ext["match_whole_words"])
	}
	if v, ok := ext["use_group_scoring"]; ok && v != nil {
		b := truthy(v)
		s.groupScoring = &b
	}
	if n, ok := jsNumber(ext["scan_depth"]); ok {
		d := int(n)
		s.scanDepth = &d
	}
	if v, ok := ext["useProbability"]; ok && v != nil {
		s.useProbability = truthy(v)
	}
	if n, ok := jsNumber(ext["probability"]); ok {
		s.probability = n
	}
	if v, ok := ext["group"].(string); ok {
		s.group = v
	}
	s.groupOverride = truthy(ext["group_override"])
	if n, ok := jsNumber(ext["group_weight"]); ok {
		s.groupWeight = n
	}
	s.sticky, _ = jsNumber(ext["sticky"])
	s.cooldown, _ = jsNumber(ext["cooldown"])
	s.delay, _ = jsNumber(ext["delay"])
	s.excludeRec = truthy(ext["exclude_recursion"])
	s.preventRec = truthy(ext["prevent_recursion"])
	switch v := ext["delay_until_recursion"].(type) {
	case bool:
		if v {
			s.delayRec = 1 // delayUntilRecursion === true ? 1 : ...
		}
	default:
		s.delayRec, _ = jsNumber(v)
	}
	s.decorators, s.content = parseDecorators(e.Content)
	s.ignoreBudget = truthy(ext["ignore_budget"])
	if ts, ok := ext["triggers"].([]any); ok {
		for _, t := range ts {
			if v, ok := t.(string); ok {
				s.triggers = append(s.triggers, v)
			}
		}
	}
	s.filter = readCharFilter(ext["character_filter"])
	if s.filter == nil {
		s.filter = readCharFilter(ext["characterFilter"])
	}
	for i, k := range matchSources {
		if truthy(ext[k]) {
			s.sources |= 1 << i
		}
	}
	return s
}

// matchSources are the V3 names of the WIGlobalScanData flags, in the order WorldInfoBuffer.get appends them.
var matchSources = []string{"match_persona_description", "match_character_description", "match_character_personality",
	"match_character_depth_prompt", "match_scenario", "match_creator_notes"}

// charFilter is an entry's characterFilter.
type charFilter struct {
	exclude     bool
	names, tags []string
}

// readCharFilter reads characterFilter ({isExclude, names, tags}); nil when absent or when it
// names no character and no tag (checkWorldInfo tests only non-empty lists).
func readCharFilter(v any) *charFilter {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	f := &charFilter{exclude: truthy(m["isExclude"])}
	for _, x := range [...]struct {
		k   string
		dst *[]string
	}{{"names", &f.names}, {"tags", &f.tags}} {
		if l, ok := m[x.k].([]any); ok {
			for _, n := range l {
				if str, ok := n.(string); ok {
					*x.dst = append(*x.dst, str)
				}
			}
		}
	}
	if len(f.names) == 0 && len(f.tags) == 0 {
		return nil
	}
	return f
}

// filtered is the character and tag filter of checkWorldInfo: why the entry does not apply to
// the character, or "".
func (f *charFilter) filtered(c FilterTarget) string {
	if f == nil {
		return ""
	}
	if len(f.names) > 0 {
		in := hasString(f.names, c.File)
		if f.exclude == in {
			if in {
				return fmt.Sprintf("filtered out: its character filter excludes %q", c.File)
			}
			return fmt.Sprintf("filtered out: its character filter names %s, not %q", quoteList(f.names), c.File)
		}
	}
	if len(f.tags) > 0 {
		in := false
		for _, t := range c.Tags {
			in = in || hasString(f.tags, t)
		}
		if f.exclude == in {
			if in {
				return fmt.Sprintf("filtered out: its tag filter excludes a tag of the character (%s)", quoteList(f.tags))
			}
			return fmt.Sprintf("filtered out: the character has none of the tags %s", quoteList(f.tags))
		}
	}
	return ""
}

func hasString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// grow appends piece to the step's new content and returns its tokens. SillyTavern counts the
// whole text again for every entry; a piece that does not start with white space, after text
// that ends in a line break, is a new pre-token of cl100k_base and o200k_base alike, so its
// tokens add to the count as they are, and a step counts each entry once.
func (s *simulator) grow(text string, tokens int, piece string) (string, int) {
	if text == "" || strings.HasSuffix(text, "\n") && piece != "" && !isJSSpace(rune(piece[0])) && piece[0] < 0x80 {
		return text + piece, tokens + s.opts.CountTokens(piece)
	}
	text += piece
	return text, s.opts.CountTokens(text)
}

// cut records that the budget kept the entry out in a step.
func (s *simEntry) cut(step, budget int, why string) {
	s.res.Cut = fmt.Sprintf("cut by the World Info budget of %d tokens: %s", budget, why)
	s.say(step, s.res.Reason+"; "+s.res.Cut)
	s.res.Reason = ""
}

// unrolled are the entries of a step SillyTavern counts as successful for recursion: those no
// roll failed and not preventing recursion.
func unrolled(rest []*simEntry, failed map[*simEntry]bool) []*simEntry {
	var out []*simEntry
	for _, e := range rest {
		if !failed[e] && !e.preventRec {
			out = append(out, e)
		}
	}
	return out
}

// effect is the entry's sticky or cooldown length (0: none).
func (s *simEntry) effect(typ string) float64 {
	if typ == EffectCooldown {
		return s.cooldown
	}
	return s.sticky
}

// override is the entry's value of a per-entry option: true stays true; false is the global
// setting unless the entry's raw field says false.
func override(val bool, raw any) *bool {
	if val {
		return &val
	}
	if raw == nil {
		return nil
	}
	b := truthy(raw)
	return &b
}

// truthy is JavaScript's Boolean(v) for JSON values.
func truthy(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case bool:
		return t
	case string:
		return t != ""
	case map[string]any, []any:
		return true
	}
	n, ok := jsNumber(v)
	return ok && n != 0 && !math.IsNaN(n)
}

// jsNumber reads a JSON number (or a numeric string, or a boolean as 0/1); ok is false for null,
// absent and anything else.
func jsNumber(v any) (float64, bool) {
	switch t := v.(type) {
	case json.Number:
		f, err := t.Float64()
		return f, err == nil
	case float64:
		return t, true
	case int:
		return float64(t), true
	case bool:
		if t {
			return 1, true
		}
		return 0, true
	case string:
		f, err := strconv.ParseFloat(jsTrim(t), 64)
		return f, err == nil && jsTrim(t) != "" && !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	return 0, false
}

// parseDecorators is world-info.js parseDecorators: leading lines starting with @@ that name a
// known decorator (@@@ escapes one that follows an unknown one) are taken off the content.
func parseDecorators(content string) ([]string, string) {
	if !strings.HasPrefix(content, "@@") {
		return nil, content
	}
	isKnown := func(d string) bool {
		if strings.HasPrefix(d, "@@@") {
			d = d[1:]
		}
		for _, k := range knownDecorators {
			if strings.HasPrefix(d, k) {
				return true
			}
		}
		return false
	}
	lines := strings.Split(content, "\n")
	var decorators []string
	newContent := content
	fallbacked := false
	for i, l := range lines {
		if !strings.HasPrefix(l, "@@") {
			newContent = strings.Join(lines[i:], "\n")
			break
		}
		if strings.HasPrefix(l, "@@@") && !fallbacked {
			continue
		}
		if isKnown(l) {
			if strings.HasPrefix(l, "@@@") {
				l = l[1:]
			}
			decorators = append(decorators, l)
			fallbacked = false
		} else {
			fallbacked = true
		}
	}
	return decorators, newContent
}

func hasDecorator(ds []string, d string) bool {
	for _, x := range ds {
		if x == d {
			return true
		}
	}
	return false
}

// scanBuffer is WorldInfoBuffer.
type scanBuffer struct {
	depth   []string // newest first, trimmed; holes are ""
	recurse []string
	skew    int
	global  int
	sources [6]string // ScanSources in matchSources order
}

// newScanBuffer is #initDepthBuffer over the chat as SillyTavern passes it: newest first,
// "Name: text" with names included.
func newScanBuffer(chat []Message, st Settings) *scanBuffer {
	b := &scanBuffer{global: st.ScanDepth}
	n := len(chat)
	if n > maxScanDepth {
		n = maxScanDepth
	}
	last := -1
	for d := 0; d < n; d++ {
		m := chat[len(chat)-1-d]
		text := m.Text
		if st.IncludeNames && m.Name != "" {
			text = m.Name + ": " + m.Text
		}
		b.depth = append(b.depth, jsTrim(text))
		if text != "" {
			last = d // an empty message is a hole; holes at the end do not count
		}
	}
	b.depth = b.depth[:last+1]
	return b
}

// get is WorldInfoBuffer.get: \x01 before the newest messages up to the entry's depth, each
// joined by \n\x01, then the recursion buffer (not in a min-activations scan).
func (b *scanBuffer) get(e *simEntry, state int) string {
	depth := b.global + b.skew
	if e.scanDepth != nil {
		depth = *e.scanDepth
	}
	if depth <= 0 {
		return ""
	}
	if depth > maxScanDepth {
		depth = maxScanDepth
	}
	const matcher, joiner = "\x01", "\n\x01"
	end := depth
	if end > len(b.depth) {
		end = len(b.depth)
	}
	out := matcher + strings.Join(b.depth[:end], joiner)
	for i, src := range b.sources {
		if e.sources&(1<<i) != 0 && src != "" {
			out += joiner + src
		}
	}
	if len(b.recurse) > 0 && state != stateMinActivations {
		out += joiner + strings.Join(b.recurse, joiner)
	}
	return out
}

// textKey names one scan text of a step: its depth, and whether the recursion buffer is in it.
type textKey struct {
	depth   int
	recurse bool
	sources int
}

// scanText is a scan text with its lower-cased form, made once.
type scanText struct {
	raw    string
	low    string
	hasLow bool
	rs     []rune
	lowRs  []rune
}

// lowerRunes is lower as runes, made once.
func (t *scanText) lowerRunes() []rune {
	if t.lowRs == nil {
		t.lowRs = []rune(t.lower())
	}
	return t.lowRs
}

// runes is the text as regexp2 reads it, made once.
func (t *scanText) runes() []rune {
	if t.rs == nil {
		t.rs = []rune(t.raw)
	}
	return t.rs
}

func (t *scanText) lower() string {
	if !t.hasLow {
		t.low, t.hasLow = jsLower(t.raw), true
	}
	return t.low
}

// text is WorldInfoBuffer.get for an entry, computed once per depth in a step.
func (s *simulator) text(e *simEntry, state int) *scanText {
	k := textKey{depth: s.buf.global + s.buf.skew, recurse: state != stateMinActivations, sources: e.sources}
	if e.scanDepth != nil {
		k.depth = *e.scanDepth
	}
	if t, ok := s.texts[k]; ok {
		return t
	}
	t := &scanText{raw: s.buf.get(e, state)}
	s.texts[k] = t
	return t
}

// simulator is one run of checkWorldInfo.
type simulator struct {
	opts    SimOptions
	st      Settings
	buf     *scanBuffer
	rng     *rand.Rand
	regexes map[string]*jsRegex
	words   map[string]*jsRegex
	texts   map[textKey]*scanText // the scan texts of the current step
	macros  map[string]string     // keys after substituteParams
	chatLen float64
	// active timed effects for this scan (WorldInfoTimedEffects #buffer), by entry index
	isSticky, isCooldown, isDelay map[int]bool
	// chat_metadata.timedWorldInfo, by type and entry index
	meta map[string]map[int]TimedEffect
	// the budget's state: entries admitted in order, the text of recursion, whether it overflowed
	admitted      []*simEntry
	activatedText string
	overflowed    bool
	err           error // why the scan stopped early (the matching budget's error)
}

// Simulate runs SillyTavern's World Info activation over entries and tells, for each, whether it
// fires and why. Entries with MatchOptions follow SillyTavern (their other fields are read from
// Extensions under their V3 names, e.g. extensions.probability); entries without follow
// opts.Native, with SillyTavern's pipeline around them.
func Simulate(entries []Entry, opts SimOptions) *Simulation {
	s := &simulator{opts: opts, st: opts.Settings, buf: newScanBuffer(opts.Chat, opts.Settings),
		regexes: map[string]*jsRegex{}, words: map[string]*jsRegex{}, texts: map[textKey]*scanText{}, macros: map[string]string{},
		chatLen: float64(len(opts.Chat)), isSticky: map[int]bool{}, isCooldown: map[int]bool{}, isDelay: map[int]bool{},
		meta: map[string]map[int]TimedEffect{EffectSticky: {}, EffectCooldown: {}}}
	if opts.Seed != nil {
		s.rng = rand.New(rand.NewPCG(*opts.Seed, 0x5eed))
	}
	sc := opts.Scan
	s.buf.sources = [6]string{sc.Persona, sc.Description, sc.Personality, sc.DepthPrompt, sc.Scenario, sc.CreatorNotes}
	if s.opts.Trigger == "" {
		s.opts.Trigger = "normal"
	}
	all := make([]*simEntry, len(entries))
	for i := range entries {
		all[i] = newSimEntry(i, &entries[i], opts.Native)
	}
	// getSortedEntries: one book, sorted by order, highest first (a stable sort).
	sorted := append([]*simEntry(nil), all...)
	if !opts.Presorted {
		sort.SliceStable(sorted, func(a, b int) bool { return sorted[a].order > sorted[b].order })
	}

	s.checkTimedEffects(all)
	steps := s.run(sorted)
	s.setTimedEffects(all)

	out := &Simulation{Results: make([]Result, len(all)), Steps: steps, TimedEffects: s.effectsAfter(), Overflowed: s.overflowed, Err: s.err}
	for _, e := range s.admitted {
		out.Activated = append(out.Activated, e.idx)
	}
	for i, e := range all {
		r := *e.res
		if !r.Fired && r.Reason == "" {
			r.Reason = strings.Join(e.trail, "; ")
		}
		if len(e.notes) > 0 {
			r.Reason += "; " + strings.Join(e.notes, "; ")
		}
		out.Results[i] = r
	}
	return out
}

// run is checkWorldInfo's scan loop; it returns the number of loops.
func (s *simulator) run(sorted []*simEntry) int {
	// availableRecursionDelayLevels: the distinct delayUntilRecursion levels, lowest first.
	levelSet := map[float64]bool{}
	var levels []float64
	for _, e := range sorted {
		if e.delayRec != 0 && !levelSet[e.delayRec] {
			levelSet[e.delayRec] = true
			levels = append(levels, e.delayRec)
		}
	}
	sort.Float64s(levels)
	var currentLevel float64
	if len(levels) > 0 {
		currentLevel, levels = levels[0], levels[1:]
	}
	if len(sorted) == 0 {
		return 0
	}

	activated := map[*simEntry]bool{}
	var activatedOrder []*simEntry
	failed := map[*simEntry]bool{}
	state := stateInitial
	count := 0
	for state != stateNone && s.err == nil {
		if s.st.MaxRecursionSteps > 0 && s.st.MaxRecursionSteps <= count {
			for _, e := range sorted {
				if !activated[e] && !failed[e] && e.e.IsEnabled {
					e.say(count+1, fmt.Sprintf("the scan stopped after %d steps (maxRecursionSteps)", count))
				}
			}
			break
		}
		count++
		s.texts = map[textKey]*scanText{} // the buffer changed
		var now []*simEntry
		for _, e := range sorted {
			if failed[e] || activated[e] {
				continue
			}
			if s.consider(e, state, count, currentLevel) {
				now = append(now, e)
			}
		}
		// Sticky entries first, then the sorted order.
		sort.SliceStable(now, func(a, b int) bool { return s.isSticky[now[a].idx] && !s.isSticky[now[b].idx] })

		newEntries := s.filterByInclusionGroups(now, activatedOrder, state, count)

		var forRecursion []*simEntry
		// The budget (checkWorldInfo after filterByInclusionGroups): entries are admitted in order
		// until the tokens of the recursion text so far plus the new content reach it.
		textTokens, newContent, newTokens, ignores := 0, "", 0, 0
		if s.opts.TokenBudget > 0 {
			textTokens = s.opts.CountTokens(s.activatedText)
			for _, e := range newEntries {
				if e.ignoreBudget {
					ignores++
				}
			}
		}
		for i, e := range newEntries {
			if e.ignoreBudget {
				ignores--
			}
			if s.overflowed && !e.ignoreBudget {
				e.cut(count, s.opts.TokenBudget, "the budget was already spent")
				if ignores > 0 {
					continue
				}
				for _, rest := range newEntries[i+1:] {
					rest.cut(count, s.opts.TokenBudget, "the budget was already spent")
				}
				break
			}
			if !s.verifyProbability(e, count) {
				failed[e] = true
				continue
			}
			e.content = s.opts.Macros.Substitute(e.content)
			if s.opts.TokenBudget > 0 {
				newContent, newTokens = s.grow(newContent, newTokens, e.content+"\n")
				if !e.ignoreBudget {
					if n := textTokens + newTokens; n >= s.opts.TokenBudget {
						s.overflowed = true
						e.cut(count, s.opts.TokenBudget, fmt.Sprintf("admitting it would bring World Info to %d tokens", n))
						continue
					}
				}
			}
			activated[e] = true
			activatedOrder = append(activatedOrder, e)
			s.admitted = append(s.admitted, e)
			e.res.Fired, e.res.Cut = true, ""
			e.res.Step = count
			if e.chance < 1 {
				c := math.Round(e.chance*10000) / 100
				e.res.Chance = &c
			}
		}

		// successfulNewEntriesForRecursion: every entry of the step that no probability roll failed,
		// also those the budget cut or never reached.
		forRecursion = unrolled(newEntries, failed)
		next := stateNone
		if s.st.Recursive && !s.overflowed && len(forRecursion) > 0 {
			next = stateRecursion
		}
		if s.st.Recursive && !s.overflowed && state == stateMinActivations && len(s.buf.recurse) > 0 {
			next = stateRecursion
		}
		if next == stateNone && !s.overflowed && s.st.MinActivations > 0 && len(activated) < s.st.MinActivations {
			depth := s.buf.global + s.buf.skew
			over := (s.st.MinActivationsDepthMax > 0 && depth > s.st.MinActivationsDepthMax) || depth > len(s.opts.Chat)
			if !over {
				next = stateMinActivations
				s.buf.skew++
			}
		}
		if next == stateNone && len(levels) > 0 {
			next = stateRecursion
			currentLevel, levels = levels[0], levels[1:]
		}
		state = next
		if state != stateNone {
			texts := make([]string, len(forRecursion))
			for i, e := range forRecursion {
				texts[i] = e.content
			}
			text := strings.Join(texts, "\n")
			s.buf.recurse = append(s.buf.recurse, text)
			if text != "" {
				s.activatedText = text + "\n" + s.activatedText
			}
		}
	}
	return count
}

// consider is the body of checkWorldInfo's entry loop: whether e activates in this step.
func (s *simulator) consider(e *simEntry, state, step int, level float64) bool {
	sticky := s.isSticky[e.idx]
	switch {
	case s.err != nil:
		return false
	case !e.e.IsEnabled:
		e.say(step, "disabled")
		return false
	case len(e.triggers) > 0 && !hasString(e.triggers, s.opts.Trigger):
		e.say(step, fmt.Sprintf("its triggers %s do not include the generation type %q", quoteList(e.triggers), s.opts.Trigger))
		return false
	}
	if e.filter != nil {
		if s.opts.Character.File == "" && s.opts.Character.Tags == nil {
			e.note("its character filter is not applied: no character was named")
		} else if why := e.filter.filtered(s.opts.Character); why != "" {
			e.say(step, why)
			return false
		}
	}
	switch {
	case s.isDelay[e.idx]:
		e.say(step, fmt.Sprintf("delayed: delay %s waits until the chat has %s messages (it has %s)", fnum(e.delay), fnum(e.delay), fnum(s.chatLen)))
		return false
	case s.isCooldown[e.idx] && !sticky:
		e.say(step, fmt.Sprintf("on cooldown until the chat has %s messages", fnum(s.meta[EffectCooldown][e.idx].End)))
		return false
	case state != stateRecursion && e.delayRec != 0 && !sticky:
		e.say(step, "delayUntilRecursion: it can only fire in a recursion step")
		return false
	case state == stateRecursion && e.delayRec != 0 && e.delayRec > level && !sticky:
		e.say(step, fmt.Sprintf("delayUntilRecursion level %s: this recursion step is level %s", fnum(e.delayRec), fnum(level)))
		return false
	case state == stateRecursion && s.st.Recursive && e.excludeRec && !sticky:
		e.say(step, "excludeRecursion: it is not scanned in recursion steps")
		return false
	case hasDecorator(e.decorators, "@@activate"):
		e.res.Reason = "activated by the @@activate decorator"
		return true
	case hasDecorator(e.decorators, "@@dont_activate"):
		e.say(step, "suppressed by the @@dont_activate decorator")
		return false
	case e.e.IsConstant:
		e.res.Reason = "constant entry"
		return true
	case sticky:
		m := s.meta[EffectSticky][e.idx]
		e.res.Reason = fmt.Sprintf("sticky: fired before and stays active until the chat has %s messages", fnum(m.End))
		return true
	case len(e.keys) == 0:
		e.say(step, "entry has no keywords")
		return false
	}
	text := s.text(e, state)
	var hits []string
	for _, k := range e.keys {
		if s.keyMatches(text, k, e) {
			hits = append(hits, k)
		}
	}
	where := s.where(state, step)
	if len(hits) == 0 {
		if text.raw == "" {
			e.say(step, "no keyword matched: the scan depth is 0, so there is no text to scan")
		} else {
			e.say(step, "no keyword matched")
		}
		return false
	}
	e.res.Matched = append([]string{}, hits...)
	e.res.Key = hits[0]
	head := fmt.Sprintf("keyword %s matched%s", quoteList(hits), where)
	if len(hits) > 1 {
		head = fmt.Sprintf("keywords %s matched%s", quoteList(hits), where)
	}
	if len(e.second) == 0 {
		e.res.Reason = head
		return true
	}
	var secHit, secMiss []string
	for _, k := range e.second {
		if s.keyMatches(text, k, e) {
			secHit = append(secHit, k)
		} else {
			secMiss = append(secMiss, k)
		}
	}
	e.res.Matched = append(e.res.Matched, secHit...)
	ok, verdict := secondaryGate(e.logic, secHit, secMiss)
	if ok {
		e.res.Reason = head + "; " + verdict
		return true
	}
	e.say(step, head+"; "+verdict)
	return false
}

// where names the text a step scanned, after "matched".
func (s *simulator) where(state, step int) string {
	switch state {
	case stateRecursion:
		return fmt.Sprintf(" in recursion step %d (chat and the content of entries activated before)", step)
	case stateMinActivations:
		return fmt.Sprintf(" in step %d, the scan widened to %d messages to reach minActivations", step, s.buf.global+s.buf.skew)
	}
	return ""
}

var logicNames = map[int]string{LogicAndAny: "any", LogicNotAll: "not all", LogicNotAny: "none", LogicAndAll: "all"}

// secondaryGate is matchSecondaryKeys: selectiveLogic over the secondary keys that matched and missed.
func secondaryGate(logic int, hit, miss []string) (bool, string) {
	name, known := logicNames[logic]
	if !known {
		return false, fmt.Sprintf("selectiveLogic %d is not 0-3, so the secondary gate never opens", logic)
	}
	gate := "secondary gate (" + name + ")"
	switch logic {
	case LogicAndAny:
		if len(hit) > 0 {
			return true, fmt.Sprintf("%s satisfied by %s", gate, quoteList(hit))
		}
		return false, fmt.Sprintf("%s failed: none of %s present", gate, quoteList(miss))
	case LogicNotAll:
		if len(miss) > 0 {
			return true, fmt.Sprintf("%s satisfied: %s missing", gate, quoteList(miss))
		}
		return false, fmt.Sprintf("%s failed: all of %s present", gate, quoteList(hit))
	case LogicNotAny:
		if len(hit) == 0 {
			return true, fmt.Sprintf("%s satisfied: none of %s present", gate, quoteList(miss))
		}
		return false, fmt.Sprintf("%s failed: %s present", gate, quoteList(hit))
	default:
		if len(miss) == 0 {
			return true, fmt.Sprintf("%s satisfied: all of %s present", gate, quoteList(hit))
		}
		return false, fmt.Sprintf("%s failed: %s missing", gate, quoteList(miss))
	}
}

// keyMatches is the key test of checkWorldInfo: substituteParams(key), falsy never matches, then
// matchKeys with the trimmed result. Native keys are already trimmed and never regular expressions.
func (s *simulator) keyMatches(text *scanText, key string, e *simEntry) bool {
	if e.native {
		return s.plainMatch(text, key, *e.caseSensitive, *e.wholeWords, e)
	}
	sub, ok := s.macros[key]
	if !ok {
		sub = s.opts.Macros.Substitute(key)
		s.macros[key] = sub
	}
	if sub == "" {
		return false
	}
	if sub != key {
		e.note(fmt.Sprintf("key %q is %q after macros", key, sub))
	}
	return s.matchKeys(text, jsTrim(sub), e)
}

// matchKeys is WorldInfoBuffer.matchKeys.
func (s *simulator) matchKeys(text *scanText, needle string, e *simEntry) bool {
	if re := s.regex(needle, e); re != nil {
		ok, err := s.test(re, text.runes())
		if err != nil && s.err == nil {
			e.note(fmt.Sprintf("regular expression %q took too long and counts as no match", needle))
		}
		return ok
	}
	cs, ww := s.st.CaseSensitive, s.st.MatchWholeWords
	if e.caseSensitive != nil {
		cs = *e.caseSensitive
	}
	if e.wholeWords != nil {
		ww = *e.wholeWords
	}
	return s.plainMatch(text, needle, cs, ww, e)
}

// plainMatch is matchKeys for a key that is not a regular expression.
func (s *simulator) plainMatch(t *scanText, needle string, cs, ww bool, e *simEntry) bool {
	text := t.raw
	if !cs {
		text, needle = t.lower(), jsLower(needle)
	}
	if !ww || jsWordCount(needle) > 1 || !strings.Contains(text, needle) {
		// A whole word is a substring first; most keys are not even that.
		return strings.Contains(text, needle)
	}
	re, ok := s.words[needle]
	if !ok {
		var err error
		// Custom boundaries: JavaScript's \W is every character but [A-Za-z0-9_].
		re, err = compileJSRegex(`(?:^|\W)(`+escapeRegex(needle)+`)(?:$|\W)`, "")
		if err != nil {
			re = nil
		}
		s.words[needle] = re
	}
	if re == nil {
		e.note(fmt.Sprintf("key %q could not be matched as a whole word", needle))
		return false
	}
	rs := t.runes()
	if !cs {
		rs = t.lowerRunes()
	}
	ok, err := s.test(re, rs)
	if err != nil && s.err == nil {
		e.note(fmt.Sprintf("whole-word match of %q took too long and counts as no match", needle))
	}
	return ok
}

// test is re.testRunes within the budget: each match runs at most what the budget allows, and
// a spent budget (or an ended call) stops the scan (s.err).
func (s *simulator) test(re *jsRegex, rs []rune) (bool, error) {
	if s.err != nil {
		return false, s.err
	}
	b := s.opts.Budget
	if b == nil {
		return re.testRunes(rs)
	}
	left, err := b.Allow()
	if err != nil {
		s.err = err
		return false, err
	}
	re.re.MatchTimeout = min(regexTimeout, left)
	start := time.Now()
	ok, err := re.testRunes(rs)
	b.Spend(time.Since(start))
	if err != nil && left < regexTimeout {
		// The budget, not the match's own bound, ran out.
		if _, err := b.Allow(); err != nil {
			s.err = err
		}
	}
	return ok, err
}

// regex is parseRegexFromString, cached; it notes a key that looks like /pattern/ but is plain text.
func (s *simulator) regex(key string, e *simEntry) *jsRegex {
	re, ok := s.regexes[key]
	if !ok {
		re = parseRegexKey(key)
		s.regexes[key] = re
	}
	if re == nil {
		if p, f, ok := splitRegexKey(key); ok {
			if _, err := compileJSRegex(strings.Replace(p, `\/`, "/", 1), f); err != nil {
				e.note(fmt.Sprintf("key %q is not a valid regular expression (%v), so it is matched as plain text", key, err))
			}
		}
	}
	return re
}

// filterByInclusionGroups is world-info.js filterByInclusionGroups (with filterGroupsByTimedEffects
// and filterGroupsByScoring): at most one entry of each inclusion group survives a step.
func (s *simulator) filterByInclusionGroups(newEntries, allActivated []*simEntry, state, step int) []*simEntry {
	type group struct {
		name    string
		members []*simEntry
	}
	var groups []*group
	byName := map[string]*group{}
	for _, e := range newEntries {
		if e.group == "" {
			continue
		}
		for _, g := range splitGroups(e.group) {
			if byName[g] == nil {
				byName[g] = &group{name: g}
				groups = append(groups, byName[g])
			}
			byName[g].members = append(byName[g].members, e)
		}
	}
	if len(groups) == 0 {
		return newEntries
	}
	// Object.entries order: integer-like keys ascending first, then the others as inserted.
	sort.SliceStable(groups, func(a, b int) bool {
		na, aok := arrayIndex(groups[a].name)
		nb, bok := arrayIndex(groups[b].name)
		if aok && bok {
			return na < nb
		}
		return aok && !bok
	})
	// removeEntry: newEntries.splice(newEntries.indexOf(entry), 1), where indexOf -1 removes the last.
	remove := func(e *simEntry, why string) {
		i := -1
		for j, x := range newEntries {
			if x == e {
				i = j
				break
			}
		}
		if i < 0 {
			if len(newEntries) == 0 {
				return
			}
			last := newEntries[len(newEntries)-1]
			last.say(step, fmt.Sprintf("dropped by SillyTavern's removal of %q, which was already out of its group (splice(-1, 1) removes the last activated entry)", e.e.Name))
			last.res.Reason = ""
			newEntries = newEntries[:len(newEntries)-1]
			return
		}
		e.say(step, why)
		e.res.Reason = ""
		newEntries = append(newEntries[:i:i], newEntries[i+1:]...)
	}
	present := func(e *simEntry) bool {
		for _, x := range newEntries {
			if x == e {
				return true
			}
		}
		return false
	}
	// filterGroupsByTimedEffects
	hasSticky := map[string]bool{}
	for _, g := range groups {
		var stickies []*simEntry
		for _, e := range g.members {
			if s.isSticky[e.idx] {
				stickies = append(stickies, e)
			}
		}
		if len(stickies) > 0 {
			for _, e := range g.members {
				if !s.isSticky[e.idx] {
					remove(e, fmt.Sprintf("inclusion group %q: a sticky member (%q) wins", g.name, stickies[0].e.Name))
				}
			}
			hasSticky[g.name] = true
		}
		for _, e := range g.members {
			if s.isCooldown[e.idx] {
				remove(e, fmt.Sprintf("inclusion group %q: members on cooldown are removed", g.name))
			}
		}
		for _, e := range g.members {
			if s.isDelay[e.idx] {
				remove(e, fmt.Sprintf("inclusion group %q: members with a delay are removed", g.name))
			}
		}
	}
	// filterGroupsByScoring
	for _, g := range groups {
		any := s.st.UseGroupScoring
		for _, e := range g.members {
			if e.groupScoring != nil && *e.groupScoring {
				any = true
			}
		}
		if !any || hasSticky[g.name] {
			continue
		}
		scores := make([]int, len(g.members))
		best := math.MinInt
		for i, e := range g.members {
			scores[i] = s.score(e, state)
			if scores[i] > best {
				best = scores[i]
			}
		}
		for i := 0; i < len(g.members); i++ {
			e := g.members[i]
			scored := s.st.UseGroupScoring
			if e.groupScoring != nil {
				scored = *e.groupScoring
			}
			if scored && scores[i] < best {
				remove(e, fmt.Sprintf("inclusion group %q: group scoring, %d matching keys against the best %d", g.name, scores[i], best))
				g.members = append(g.members[:i:i], g.members[i+1:]...)
				scores = append(scores[:i:i], scores[i+1:]...)
				i--
			}
		}
	}
	for _, g := range groups {
		if hasSticky[g.name] {
			continue
		}
		already := ""
		for _, a := range allActivated {
			if a.group == g.name {
				already = a.e.Name
				break
			}
		}
		if already != "" || len(g.members) <= 1 {
			if already != "" {
				for _, e := range g.members {
					remove(e, fmt.Sprintf("inclusion group %q already fired %q in an earlier step", g.name, already))
				}
			}
			continue
		}
		var prios []*simEntry
		for _, e := range g.members {
			if e.groupOverride {
				prios = append(prios, e)
			}
		}
		if len(prios) > 0 {
			sort.SliceStable(prios, func(a, b int) bool { return prios[a].order > prios[b].order })
			w := prios[0]
			for _, e := range g.members {
				if e != w {
					remove(e, fmt.Sprintf("inclusion group %q: %q has groupOverride and the highest order", g.name, w.e.Name))
				}
			}
			if present(w) {
				w.res.Group = g.name
				w.res.Reason += fmt.Sprintf("; won inclusion group %q by groupOverride", g.name)
			}
			continue
		}
		total := 0.0
		for _, e := range g.members {
			total += e.groupWeight
		}
		var winner *simEntry
		if s.rng != nil {
			roll := s.rng.Float64() * total
			cur := 0.0
			for _, e := range g.members {
				cur += e.groupWeight
				if roll <= cur {
					winner = e
					break
				}
			}
		} else {
			winner = g.members[0]
			for _, e := range g.members[1:] {
				if e.groupWeight > winner.groupWeight {
					winner = e
				}
			}
			if total > 0 {
				winner.chance *= math.Max(0, winner.groupWeight) / total
			}
		}
		if winner == nil {
			for _, e := range g.members {
				remove(e, fmt.Sprintf("inclusion group %q: the weighted roll found no winner", g.name))
			}
			continue
		}
		how := "won the weighted roll"
		if s.rng == nil {
			how = fmt.Sprintf("is the heaviest member (weight %s of %s); without a seed the roll is not made", fnum(winner.groupWeight), fnum(total))
		}
		for _, e := range g.members {
			if e != winner {
				remove(e, fmt.Sprintf("inclusion group %q: %q %s", g.name, winner.e.Name, how))
			}
		}
		if !present(winner) {
			continue // removed before, by a timed effect or SillyTavern's splice(-1, 1)
		}
		winner.res.Group = g.name
		if s.rng != nil {
			winner.res.Reason += fmt.Sprintf("; won inclusion group %q by the weighted roll", g.name)
		} else {
			winner.res.Reason += fmt.Sprintf("; won inclusion group %q as its heaviest member (weight %s of %s, no seed to roll)", g.name, fnum(winner.groupWeight), fnum(total))
		}
	}
	return newEntries
}

// splitGroups is group.split(/,\s*/).filter(x => x).
func splitGroups(g string) []string {
	var out []string
	for _, p := range strings.Split(g, ",") {
		if p = strings.TrimLeftFunc(p, isJSSpace); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// arrayIndex reports whether a property name is a JavaScript array index (ordered first by Object.entries).
func arrayIndex(s string) (uint64, bool) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || strconv.FormatUint(n, 10) != s || n == math.MaxUint32 {
		return 0, false
	}
	return n, true
}

// score is WorldInfoBuffer.getScore: matching primary keys, plus matching secondary keys under
// AND ANY, or under AND ALL when all match. Keys are tested as written (no macros, not trimmed).
func (s *simulator) score(e *simEntry, state int) int {
	if len(e.keys) == 0 {
		return 0
	}
	text := s.text(e, state)
	test := func(k string) bool {
		if e.native {
			return k != "" && s.plainMatch(text, k, *e.caseSensitive, *e.wholeWords, e)
		}
		return s.matchKeys(text, k, e)
	}
	primary, secondary := 0, 0
	for _, k := range e.keys {
		if test(k) {
			primary++
		}
	}
	for _, k := range e.second {
		if test(k) {
			secondary++
		}
	}
	if len(e.second) > 0 {
		switch e.logic {
		case LogicAndAny:
			return primary + secondary
		case LogicAndAll:
			if secondary == len(e.second) {
				return primary + secondary
			}
		}
	}
	return primary
}

// verifyProbability is checkWorldInfo's verifyProbability.
func (s *simulator) verifyProbability(e *simEntry, step int) bool {
	if !e.useProbability || e.probability == 100 || s.isSticky[e.idx] {
		return true
	}
	p := e.probability
	if s.rng != nil {
		roll := s.rng.Float64() * 100
		if roll <= p {
			e.res.Reason += fmt.Sprintf("; probability %s%%: rolled %.1f", fnum(p), roll)
			return true
		}
		e.say(step, fmt.Sprintf("%s, but the probability check failed: rolled %.1f against %s%%", e.res.Reason, roll, fnum(p)))
		e.res.Reason = ""
		return false
	}
	if p <= 0 {
		e.say(step, fmt.Sprintf("%s, but its probability is %s%%, so it never fires", e.res.Reason, fnum(p)))
		e.res.Reason = ""
		return false
	}
	if p < 100 {
		e.chance *= p / 100
		e.res.Reason += fmt.Sprintf("; fires with probability %s%% (no seed given, so later steps assume it fired)", fnum(p))
	}
	return true
}

// checkTimedEffects is WorldInfoTimedEffects.checkTimedEffects: which sticky, cooldown and delay
// effects hold for this scan, dropping records that ended or no longer apply.
func (s *simulator) checkTimedEffects(all []*simEntry) {
	for _, t := range s.opts.TimedEffects {
		if t.Type != EffectSticky && t.Type != EffectCooldown {
			continue
		}
		s.meta[t.Type][t.Entry] = t
	}
	check := func(typ string, active map[int]bool) {
		for _, idx := range sortedKeys(s.meta[typ]) {
			t := s.meta[typ][idx]
			if s.chatLen <= t.Start && !t.Protected {
				delete(s.meta[typ], idx) // the chat has not advanced
				continue
			}
			if idx < 0 || idx >= len(all) {
				if s.chatLen >= t.End {
					delete(s.meta[typ], idx)
				}
				continue
			}
			e := all[idx]
			if e.effect(typ) == 0 {
				delete(s.meta[typ], idx) // the entry has no such effect (any more)
				continue
			}
			if s.chatLen >= t.End {
				delete(s.meta[typ], idx)
				if typ == EffectSticky && e.cooldown != 0 {
					// A sticky that ends starts the entry's cooldown, in force for this scan already.
					s.meta[EffectCooldown][idx] = TimedEffect{Type: EffectCooldown, Entry: idx, Start: s.chatLen, End: s.chatLen + e.cooldown, Protected: true}
					s.isCooldown[idx] = true
				}
				continue
			}
			active[idx] = true
		}
	}
	check(EffectSticky, s.isSticky)
	check(EffectCooldown, s.isCooldown)
	for _, e := range all {
		if e.delay != 0 && s.chatLen < e.delay {
			s.isDelay[e.idx] = true
		}
	}
}

// setTimedEffects is WorldInfoTimedEffects.setTimedEffects: activated entries with sticky or
// cooldown start them, unless a record is already there.
func (s *simulator) setTimedEffects(all []*simEntry) {
	for _, e := range all {
		if !e.res.Fired {
			continue
		}
		for _, typ := range []string{EffectSticky, EffectCooldown} {
			n := e.effect(typ)
			if n == 0 {
				continue
			}
			if _, ok := s.meta[typ][e.idx]; !ok {
				s.meta[typ][e.idx] = TimedEffect{Type: typ, Entry: e.idx, Start: s.chatLen, End: s.chatLen + n}
			}
		}
	}
}

// effectsAfter lists the timed effect records after the scan, sticky first, by entry.
func (s *simulator) effectsAfter() []TimedEffect {
	out := []TimedEffect{}
	for _, typ := range []string{EffectSticky, EffectCooldown} {
		for _, idx := range sortedKeys(s.meta[typ]) {
			out = append(out, s.meta[typ][idx])
		}
	}
	return out
}

func sortedKeys(m map[int]TimedEffect) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}

// fnum renders a number as JavaScript would print it.
func fnum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
