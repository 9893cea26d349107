package tavern

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
)

// promptCase is one case of testdata/prompt_cases.json: books, a chat and settings, and where
// SillyTavern puts every entry, as the blocks of the prompt in order, and what its budget cuts.
type promptCase struct {
	Name  string `json:"name"`
	ST    string `json:"st"` // the SillyTavern code path the case exercises
	Books []struct {
		Name    string `json:"name"`
		Source  string `json:"source"`
		Entries []struct {
			Name     string         `json:"name"`
			Keys     []string       `json:"keys"`
			Content  string         `json:"content"`
			Order    int            `json:"order"`
			Constant bool           `json:"constant"`
			Ext      map[string]any `json:"ext"`
			V2       string         `json:"v2"` // a V2 character_book position (before_char, after_char)
		} `json:"entries"`
	} `json:"books"`
	Strategy      int       `json:"strategy"`
	Chat          []Message `json:"chat"`
	MaxContext    int       `json:"maxContext"`
	BudgetPercent float64   `json:"budgetPercent"`
	BudgetCap     int       `json:"budgetCap"`
	Recursive     bool      `json:"recursive"`
	Trigger       string    `json:"trigger"`
	CharFile      string    `json:"charFile"`
	CharTags      []string  `json:"charTags"`
	Card          struct {
		Description, Personality, Scenario, Examples, SystemPrompt, PostHistory, DepthPrompt, Persona string
		DepthPromptDepth, DepthPromptRole                                                             int
		CreatorNotes                                                                                  string
	} `json:"card"`
	Note *AuthorsNote `json:"note"`
	Text bool         `json:"text"`
	Want struct {
		Budget   int               `json:"budget"`
		Blocks   []string          `json:"blocks"`
		Cut      []string          `json:"cut"`
		Unplaced []string          `json:"unplaced"`
		Texts    map[string]string `json:"texts"`
	} `json:"want"`
}

// words is the cases' tokenizer: one token a whitespace-separated word, so each budget is
// reckoned by hand.
func words(s string) int { return len(strings.Fields(s)) }

// TestPromptCases: the prompt X-ray agrees with SillyTavern's code on every case of
// testdata/prompt_cases.json (each names the code path it was derived from).
func TestPromptCases(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/prompt_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []promptCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 30 {
		t.Errorf("%d cases; the issue asks for at least 30", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			if tc.ST == "" {
				t.Error("the case names no SillyTavern code path")
			}
			in := PromptInput{Strategy: tc.Strategy, MaxContext: tc.MaxContext, BudgetPercent: tc.BudgetPercent, BudgetCap: tc.BudgetCap,
				Count: words, Description: tc.Card.Description, Personality: tc.Card.Personality, Scenario: tc.Card.Scenario,
				Examples: tc.Card.Examples, SystemPrompt: tc.Card.SystemPrompt, PostHistory: tc.Card.PostHistory,
				DepthPrompt: tc.Card.DepthPrompt, DepthPromptDepth: tc.Card.DepthPromptDepth, DepthPromptRole: tc.Card.DepthPromptRole,
				Persona: tc.Card.Persona, Note: DefaultAuthorsNote(), Text: tc.Text}
			if in.BudgetPercent == 0 {
				in.BudgetPercent = 25
			}
			if tc.Note != nil {
				in.Note = *tc.Note
			}
			st := DefaultSettings()
			st.Recursive = tc.Recursive
			in.Sim = SimOptions{Settings: st, Chat: tc.Chat, Macros: Macros{Char: "Ava", User: "Sam"}, Trigger: tc.Trigger,
				Character: FilterTarget{File: tc.CharFile, Tags: tc.CharTags},
				Scan: ScanSources{Persona: tc.Card.Persona, Description: tc.Card.Description, Personality: tc.Card.Personality,
					DepthPrompt: tc.Card.DepthPrompt, Scenario: tc.Card.Scenario, CreatorNotes: tc.Card.CreatorNotes}}
			for _, b := range tc.Books {
				book := Lorebook{Name: b.Name, Source: b.Source}
				for _, e := range b.Entries {
					ext := e.Ext
					if ext == nil {
						ext = map[string]any{}
					}
					x := map[string]any{"extensions": ext}
					if e.V2 != "" {
						x["position"] = e.V2
					}
					book.Entries = append(book.Entries, Entry{Name: e.Name, Keywords: e.Keys, Content: e.Content, SortOrder: e.Order,
						IsConstant: e.Constant, IsEnabled: true, MatchOptions: &MatchOptions{}, Extensions: x})
				}
				in.Books = append(in.Books, book)
			}
			p, err := BuildPrompt(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			name := func(i int) string { return p.Entries[i].Name }
			var blocks []string
			for _, b := range p.Blocks {
				blocks = append(blocks, blockLabel(b, name))
			}
			if got, want := strings.Join(blocks, " | "), strings.Join(tc.Want.Blocks, " | "); got != want {
				t.Errorf("blocks\n got %s\nwant %s", got, want)
			}
			var cut []string
			for _, r := range p.Sim.Results {
				if r.Cut != "" && !r.Fired {
					cut = append(cut, r.Name)
				}
			}
			sort.Strings(cut)
			want := append([]string(nil), tc.Want.Cut...)
			sort.Strings(want)
			if fmt.Sprint(cut) != fmt.Sprint(want) {
				t.Errorf("cut %v, want %v", cut, want)
			}
			var unplaced []string
			for i := range p.Unplaced {
				unplaced = append(unplaced, name(i))
			}
			sort.Strings(unplaced)
			want = append([]string(nil), tc.Want.Unplaced...)
			sort.Strings(want)
			if fmt.Sprint(unplaced) != fmt.Sprint(want) {
				t.Errorf("unplaced %v, want %v", unplaced, want)
			}
			if tc.Want.Budget != 0 && p.Budget != tc.Want.Budget {
				t.Errorf("budget %d, want %d", p.Budget, tc.Want.Budget)
			}
			for k, want := range tc.Want.Texts {
				var i int
				fmt.Sscan(k, &i)
				if i >= len(p.Blocks) || p.Blocks[i].Text != want {
					got := ""
					if i < len(p.Blocks) {
						got = p.Blocks[i].Text
					}
					t.Errorf("block %d text %q, want %q", i, got, want)
				}
			}
		})
	}
}

// blockLabel is a block as the cases write it: name, @depth/role of an injection, /role of a
// chat message, [entries] in order.
func blockLabel(b Block, name func(int) string) string {
	s := b.Name
	switch {
	case b.Depth >= 0:
		s += fmt.Sprintf("@%d/%s", b.Depth, b.Role)
	case b.Name == "message":
		s += "/" + b.Role
	}
	if len(b.Entries) > 0 {
		n := make([]string, len(b.Entries))
		for i, e := range b.Entries {
			n[i] = name(e)
		}
		s += "[" + strings.Join(n, ",") + "]"
	}
	return s
}

// FuzzBuildPrompt feeds an entry's extensions (as a file carries them) and a chat message to the
// prompt X-ray: it never panics, and every admitted entry is in the prompt (an example entry may
// make several blocks) or said to be unplaced, never both.
func FuzzBuildPrompt(f *testing.F) {
	f.Add([]byte(`{"position":4,"depth":1,"role":2}`), "@@activate\nlore {{char}}", "the gate")
	f.Add([]byte(`{"position":7,"outlet_name":"x","ignore_budget":true}`), "lore", "gate")
	f.Add([]byte(`{"position":2,"triggers":["normal"],"character_filter":{"isExclude":true,"names":["Ava"],"tags":[1]}}`), "lore", "gate")
	f.Add([]byte(`{"position":5,"match_scenario":true,"depth":-3,"role":9}`), "<START>\nAva: hi<start>x", "")
	f.Fuzz(func(t *testing.T, ext []byte, content, msg string) {
		var m map[string]any
		if json.Unmarshal(ext, &m) != nil {
			return
		}
		e := Entry{Name: "E", Keywords: []string{"gate"}, Content: content, IsEnabled: true, MatchOptions: &MatchOptions{},
			Extensions: map[string]any{"extensions": m}}
		c := Entry{Name: "C", Content: content, IsConstant: true, IsEnabled: true, MatchOptions: &MatchOptions{}, Extensions: map[string]any{"extensions": m}}
		for _, text := range []bool{false, true} {
			p, err := BuildPrompt(context.Background(), PromptInput{Books: []Lorebook{{Name: "b", Source: SourceCharacter, Entries: []Entry{e, c}}},
				MaxContext: 64, BudgetPercent: 25, Count: words, Note: DefaultAuthorsNote(), Text: text, Scenario: "by the gate",
				Sim: SimOptions{Settings: DefaultSettings(), Chat: []Message{{Text: msg, User: true}}, Macros: Macros{Char: "Ava", User: "Sam"}}})
			if err != nil {
				t.Fatal(err)
			}
			seen := map[int]int{}
			for _, b := range p.Blocks {
				for _, i := range b.Entries {
					seen[i]++
				}
			}
			for _, i := range p.Sim.Activated {
				_, unplaced := p.Unplaced[i]
				if (seen[i] > 0) == unplaced {
					t.Fatalf("entry %d: in %d blocks, unplaced %v (%+v)", i, seen[i], unplaced, p.Blocks)
				}
			}
		}
	})
}

// TestBudgetCountsPieces: the budget counts an entry's piece alone only where a line break ends
// the text so far and the piece starts with a character that is not white space; otherwise it
// counts the whole text again, as SillyTavern does.
func TestBudgetCountsPieces(t *testing.T) {
	t.Parallel()
	var counted []string
	s := &simulator{opts: SimOptions{CountTokens: func(x string) int { counted = append(counted, x); return len(x) }}}
	text, n := s.grow("", 0, "one\n")
	text, n = s.grow(text, n, "two\n")
	text, n = s.grow(text, n, " three\n")
	text, n = s.grow(text, n, "龍\n")
	if want := []string{"one\n", "two\n", "one\ntwo\n three\n", "one\ntwo\n three\n龍\n"}; fmt.Sprint(counted) != fmt.Sprint(want) || n != len(text) {
		t.Errorf("counted %q (total %d of %d), want %q", counted, n, len(text), want)
	}
}

// TestBuildPromptStopsWithContext: a call that ended builds nothing.
func TestBuildPromptStopsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := BuildPrompt(ctx, PromptInput{Count: words}); err == nil {
		t.Error("a cancelled context built a prompt")
	}
}
