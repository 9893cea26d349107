package tools

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestReviewCardMacros: review_card and its preview match a tavern worldbook's keys as
// SillyTavern would for this card: {{char}} is the card's name and {{user}} the default
// persona's, in keys and in the first messages, so entries keyed on them fire.
func TestReviewCardMacros(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{apps: true}) // the preview in _meta is the MCP App's
	ok := func(name string, args any) map[string]any { t.Helper(); return e.ok(name, jsonArg(t, args)) }
	roleID := ok("create_card", map[string]any{"roleName": "Mira"})["roleId"].(string)
	ok("set_opening_lines", map[string]any{"roleId": roleID, "roleWelcome": "*{{char}} trims the lamp as {{user}} comes in from the rain.*",
		"alternates": []string{"*Mira looks up from the logbook.*", "*The harbor is quiet tonight.*"}})
	wb := ok("create_worldbook", map[string]any{"name": "Keeper lore", "format": "tavern"})
	ok("write_worldbook_document", map[string]any{"worldbookId": wb["worldbookId"], "binding": map[string]any{"roleId": roleID},
		"entries": []any{
			map[string]any{"op": "create", "name": "Keeper", "content": "{{char}} has kept the light for years.", "keywords": []string{"{{char}}"}},
			map[string]any{"op": "create", "name": "Guest", "content": "Strangers are rare.", "keywords": []string{"{{user}}"}},
			map[string]any{"op": "create", "name": "Harbor", "content": "Quiet at night.", "keywords": []string{"harbor"}},
		}})

	res := e.call("review_card", jsonArg(t, map[string]any{"roleId": roleID}))
	if res.IsError || res.Meta == nil {
		t.Fatalf("review_card: %s", text(res))
	}
	raw, err := json.Marshal(res.Meta.AdditionalFields[previewKey])
	if err != nil {
		t.Fatal(err)
	}
	var preview cardPreview
	if err := json.Unmarshal(raw, &preview); err != nil || len(preview.Worldbooks) != 1 {
		t.Fatalf("the preview in _meta: %s (%v)", raw, err)
	}
	fires := map[string][]int{}
	for _, en := range preview.Worldbooks[0].Entries {
		fires[en.Name] = en.Fires
	}
	for _, tt := range []struct {
		entry string
		want  []int // the greetings that fire it
	}{
		{"Keeper", []int{0, 1}}, // {{char}} in the first message, the name in the first alternate
		{"Guest", []int{0}},     // {{user}} in the first message
		{"Harbor", []int{2}},
	} {
		if !slices.Equal(fires[tt.entry], tt.want) {
			t.Errorf("the preview: entry %s fires on greetings %v, want %v", tt.entry, fires[tt.entry], tt.want)
		}
	}
	review := text(res)
	for _, want := range []string{`fires the entry ({{char}})`, `fires the entry ({{user}})`} {
		if !strings.Contains(review, want) {
			t.Errorf("review_card: no finding that the first message %s:\n%s", want, review)
		}
	}
}
