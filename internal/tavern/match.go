package tavern

import (
	"fmt"
	"strings"
)

// Result says whether one entry fires, and why.
type Result struct {
	// EntryID is the entry's service identifier (empty for entries read from files).
	EntryID string `json:"entryId"`
	// Name is the entry's name.
	Name string `json:"name"`
	// Index is the entry's position in the list given to Match or Simulate.
	Index int `json:"-"`
	// Fired reports whether the entry would be activated.
	Fired bool `json:"-"`
	// Matched are the keywords (main, then secondary) found in the text the entry was last tested on.
	Matched []string `json:"matched"`
	// Reason explains the outcome in one sentence.
	Reason string `json:"reason"`
	// Key is the first main keyword that matched (the one SillyTavern activates the entry by), if any did.
	Key string `json:"key,omitempty"`
	// Step is the scan step the entry fired in: 1 is the first scan, later ones recursion or a wider scan.
	Step int `json:"step,omitempty"`
	// Group is the inclusion group the entry won, if it had to.
	Group string `json:"group,omitempty"`
	// Chance is the percent chance that the entry fires, when that rested on rolls not made (no seed).
	Chance *float64 `json:"chance,omitempty"`
	// Cut says why the World Info budget kept the entry out, when it did.
	Cut string `json:"cut,omitempty"`
}

// Report is the trigger tester's answer: the entries that fire and those that do not, in entry order.
type Report struct {
	// Fired are the entries the passage activates.
	Fired []Result `json:"fired"`
	// NotFired are the entries it does not.
	NotFired []Result `json:"notFired"`
}

// Triggers runs Match and splits its results into fired and not fired.
func Triggers(entries []Entry, text string, opts MatchOptions, m Macros) Report {
	return Split(Match(entries, text, opts, m))
}

// Split sorts results into fired and not fired, keeping their order.
func Split(results []Result) Report {
	r := Report{Fired: []Result{}, NotFired: []Result{}}
	for _, res := range results {
		if res.Fired {
			r.Fired = append(r.Fired, res)
		} else {
			r.NotFired = append(r.NotFired, res)
		}
	}
	return r
}

// Match tells, for each entry, whether one passage of text would activate it: Simulate over a
// chat of that one message with SillyTavern's default settings (no recursion, no seed, so an
// entry with a probability below 100 is reported as firing with its chance).
//
// Entries with MatchOptions (tavern format) follow SillyTavern's rules (see Simulate). Entries
// without follow opts, whose zero value is the service's native rules: case-insensitive
// substrings, secondary keywords as an AND gate (one of them must appear too), keys taken
// literally, trimmed, and blank ones ignored.
//
// The text is card text as written (a first message, example dialogue): m's names replace its
// macros as SillyTavern replaces them when it puts the text into the chat, and those of the
// entries' keys and content ({{char}} is the card's name, {{user}} the reader's).
func Match(entries []Entry, text string, opts MatchOptions, m Macros) []Result {
	res, _ := MatchWithin(entries, text, opts, m, nil)
	return res
}

// MatchWithin is Match with its regular expression matches drawn from budget (nil: none); it
// stops at the budget's error, returning it.
func MatchWithin(entries []Entry, text string, opts MatchOptions, m Macros, budget MatchBudget) ([]Result, error) {
	sim := Simulate(entries, SimOptions{Settings: DefaultSettings(), Chat: []Message{{Text: m.Substitute(text)}}, Macros: m, Native: opts, Budget: budget})
	return sim.Results, sim.Err
}

// quoteList renders keys as "a", "b".
func quoteList(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}
