package review

import (
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
)

func good() Card {
	return Card{RoleID: "r_1", RoleName: "Mira", RoleDesc: "A keeper.",
		RoleWelcome: "*The lamp sputters as {{user}} steps in from the storm.* \"Shut the door, the wind is up.\"",
		Prologue:    []string{"Sorry, I'm soaked."},
		Sections: map[string]string{"description": "{{char}} keeps the lighthouse on a storm coast.", "personality": "Patient, wry.",
			"scenario": "The lamp has gone out.", "exampleDialogue": "<START>\n{{user}}: Hello?\n{{char}}: Shut the door."}}
}

// TestRules: each rule on a card that breaks it, and nothing but counts on one that does not.
func TestRules(t *testing.T) {
	t.Parallel()
	entry := func(name string, keys ...string) tavern.Entry {
		return tavern.Entry{Name: name, Content: "Lore about " + name + ".", Keywords: keys, IsEnabled: true}
	}
	tests := []struct {
		name     string
		change   func(c *Card)
		wbs      []Worldbook
		severity string
		field    string
		says     string
	}{
		{"no first message", func(c *Card) { c.RoleWelcome = "" }, nil, Error, "roleWelcome", "no first message"},
		{"empty description", func(c *Card) { c.Sections["description"] = " " }, nil, Warning, "sections.description", "empty"},
		{"empty scenario", func(c *Card) { delete(c.Sections, "scenario") }, nil, Info, "sections.scenario", "empty"},
		{"a short first message", func(c *Card) { c.RoleWelcome = "Hi." }, nil, Warning, "roleWelcome", "too short"},
		{"a long first message", func(c *Card) { c.RoleWelcome = strings.Repeat("The storm howls on. ", 200) }, nil, Warning, "roleWelcome", "crowds"},
		{"a repeated alternate", func(c *Card) { c.Alternates = []string{c.RoleWelcome} }, nil, Warning, "welcomeAlternates[0]", "repeats roleWelcome"},
		{"a macro in another case", func(c *Card) { c.Sections["description"] = "{{Char}} keeps the light." }, nil, Warning, "sections.description", "another case"},
		{"a macro with spaces", func(c *Card) { c.Sections["personality"] = "{{ char }} is wry." }, nil, Warning, "sections.personality", "spaces inside"},
		{"single braces", func(c *Card) { c.Sections["scenario"] = "{user} arrives." }, nil, Warning, "sections.scenario", "single braces"},
		{"an old macro", func(c *Card) { c.Sections["scenario"] = "<USER> arrives." }, nil, Info, "sections.scenario", "old macro"},
		{"an unknown macro", func(c *Card) { c.Sections["scenario"] = "{{random:a,b}} arrives." }, nil, Info, "sections.scenario", "not {{char}} or {{user}}"},
		{"a prologue line as the character", func(c *Card) { c.Prologue = []string{"Mira: Shut the door."} }, nil, Warning, "prologue[0]", "written as the character"},
		{"a prologue line repeating the greeting", func(c *Card) { c.Prologue = []string{c.RoleWelcome} }, nil, Warning, "prologue[0]", "repeats a first message"},
		{"too much in every message", func(c *Card) { c.Sections["description"] = strings.Repeat("The keeper's long history. ", 400) }, nil, Warning, "sections", "go with every message"},
		{"an entry without keywords", nil, []Worldbook{{ID: "wb_1", Entries: []tavern.Entry{entry("Gull")}}}, Error, `worldbook wb_1 entry "Gull"`, "never fires"},
		{"a disabled entry", nil, []Worldbook{{ID: "wb_1", Entries: []tavern.Entry{{Name: "Old", Keywords: []string{"old"}}}}}, Info, `worldbook wb_1 entry "Old"`, "disabled"},
		{"a shared keyword", nil, []Worldbook{{ID: "wb_1", Entries: []tavern.Entry{entry("Reef", "rocks"), entry("Wreck", "Rocks")}}}, Warning, "worldbook keywords", `"rocks" fires 2 entries`},
		{"an entry the greeting fires", nil, []Worldbook{{ID: "wb_1", Entries: []tavern.Entry{entry("Storm", "storm")}}}, Info, `worldbook wb_1 entry "Storm"`, "fires the entry (storm)"},
		{"an entry keyed on {{char}} the example dialogue fires", nil, []Worldbook{{ID: "wb_1", Entries: []tavern.Entry{{Name: "Keeper", Content: "Lore.", Keywords: []string{"{{char}}"}, IsEnabled: true, MatchOptions: &tavern.MatchOptions{MatchWholeWords: true}}}}}, Info, `worldbook wb_1 entry "Keeper"`, "fires the entry ({{char}})"},
		{"an entry keyed on {{user}} the greeting fires", nil, []Worldbook{{ID: "wb_1", Entries: []tavern.Entry{{Name: "Guest", Content: "Lore.", Keywords: []string{"{{user}}"}, IsEnabled: true, MatchOptions: &tavern.MatchOptions{MatchWholeWords: true}}}}}, Info, `worldbook wb_1 entry "Guest"`, "fires the entry ({{user}})"},
		{"an 8k context mostly taken", func(c *Card) { c.Sections["description"] = strings.Repeat("The keeper's long history. ", 900) }, nil, Warning, "context 8k", "under half"},
		{"an 8k context overfilled", func(c *Card) { c.Sections["exampleDialogue"] = strings.Repeat("The keeper's long history. ", 1700) }, nil, Error, "context 8k", "nothing is left"},
		{"a 32k context mostly taken", nil, []Worldbook{{ID: "wb_1", Entries: []tavern.Entry{{Name: "Canon", IsEnabled: true, IsConstant: true, Content: strings.Repeat("Always true. ", 6000)}}}}, Warning, "context 32k", "under half"},
		{"a large constant entry", nil, []Worldbook{{ID: "wb_1", Entries: []tavern.Entry{{Name: "Canon", IsEnabled: true, IsConstant: true, Content: strings.Repeat("Always true. ", 200)}}}}, Warning, `worldbook wb_1 entry "Canon"`, "go with every message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := good()
			if tt.change != nil {
				tt.change(&c)
			}
			r, err := Review(c, tt.wbs)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range r.Findings {
				if f.Severity == tt.severity && f.Field == tt.field && strings.Contains(f.Message, tt.says) {
					if f.Fix == "" {
						t.Errorf("a finding without a fix: %+v", f)
					}
					return
				}
			}
			t.Errorf("no %s at %s saying %q in %+v", tt.severity, tt.field, tt.says, r.Findings)
		})
	}
	r, err := Review(good(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Findings) != 0 {
		t.Errorf("a good card has findings: %+v", r.Findings)
	}
	if r.Encoding != "cl100k_base" || r.Tokens.Total == 0 || r.Tokens.Parts["roleWelcome"] == 0 || r.Tokens.Permanent == 0 {
		t.Errorf("tokens: %+v", r.Tokens)
	}
}

// TestContextTrim: the context finding names what to trim, largest first, and a card that
// leaves half of 8k has none.
func TestContextTrim(t *testing.T) {
	t.Parallel()
	c := good()
	c.Sections["description"] = strings.Repeat("The keeper's long history. ", 700)
	c.Sections["scenario"] = strings.Repeat("Storm. ", 300)
	r, err := Review(c, []Worldbook{{ID: "wb_1", Entries: []tavern.Entry{{Name: "Canon", IsEnabled: true, IsConstant: true, Content: strings.Repeat("Always true. ", 300)}}}})
	if err != nil {
		t.Fatal(err)
	}
	var fix string
	for _, f := range r.Findings {
		if f.Field == "context 8k" {
			fix = f.Fix
		}
		if f.Field == "context 32k" {
			t.Errorf("32k is not mostly taken: %+v", f)
		}
	}
	d, cn, sc := strings.Index(fix, "sections.description ("), strings.Index(fix, `entry "Canon" (`), strings.Index(fix, "sections.scenario (")
	if d < 0 || cn < 0 || sc < 0 || d > cn || cn > sc {
		t.Errorf("the fix does not name the three largest parts, largest first: %q", fix)
	}
	r, _ = Review(good(), nil)
	for _, f := range r.Findings {
		if strings.HasPrefix(f.Field, "context") {
			t.Errorf("a small card: %+v", f)
		}
	}
}
