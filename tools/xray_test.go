package tools

import (
	"fmt"
	"strings"
	"testing"
)

// entryOf finds an entry of a preview_prompt result by name.
func entryOf(t *testing.T, out map[string]any, name string) map[string]any {
	t.Helper()
	for _, r := range list(out, "entries") {
		if m := r.(map[string]any); str(m, "name") == name {
			return m
		}
	}
	t.Fatalf("no entry %q in %v", name, out)
	return nil
}

// blockNames lists a preview's blocks as name@depth[entries].
func blockNames(out map[string]any) string {
	var s []string
	for _, b := range list(out, "blocks") {
		m := b.(map[string]any)
		n := str(m, "name")
		if d, ok := m["depth"]; ok {
			n += fmt.Sprintf("@%v", d)
		}
		if es, ok := m["entries"].([]any); ok {
			n += fmt.Sprint(es)
		}
		s = append(s, n)
	}
	return strings.Join(s, " ")
}

// TestPreviewPromptInline: a card and lorebooks given inline, through the MCP layer: the blocks
// in chat completion order, @depth entries in the chat, the budget's cut with its reason, a
// global book under the character-first strategy, a generation trigger, the tokenizer picked,
// and a block's text only when asked for.
func TestPreviewPromptInline(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{})
	card := map[string]any{"name": "Mira", "description": "{{char}} keeps the lighthouse.", "scenario": "A storm.", "tags": []string{"sea"}}
	char := []any{
		map[string]any{"name": "Lamp", "keywords": []string{"lamp"}, "content": "The lamp burns whale oil.", "sortOrder": 50},
		map[string]any{"name": "Deep", "isConstant": true, "content": "Mira fears the deep.", "sortOrder": 10, "sillyTavern": map[string]any{"position": 4, "depth": 0, "role": 0}},
		map[string]any{"name": "OnlyOnContinue", "isConstant": true, "content": "Keep going.", "sillyTavern": map[string]any{"triggers": []string{"continue"}}},
	}
	global := []any{map[string]any{"name": "Atlas", "isConstant": true, "content": strings.Repeat("The coast runs north for many miles. ", 30), "sortOrder": 100}}
	args := map[string]any{"card": card, "userName": "Kai", "contextSize": 1000, "full": []int{0},
		"books": []any{map[string]any{"entries": char, "source": "character", "name": "Mira's"}, map[string]any{"entries": global, "name": "World"}},
		"chat":  []any{map[string]any{"name": "Kai", "text": "Is the lamp lit?", "user": true}}}
	out := e.ok("preview_prompt", jsonArg(t, args))
	if got, want := blockNames(out), "main worldInfoBefore[Lamp] charDescription scenario chatHistory message injection@0[Deep]"; got != want {
		t.Errorf("blocks\n got %s\nwant %s", got, want)
	}
	atlas := entryOf(t, out, "Atlas")
	if str(atlas, "status") != "cut" || !strings.Contains(str(atlas, "why"), "budget of 250 tokens") {
		t.Errorf("Atlas, global and after the character's entries, is cut by the 250-token budget: %v", atlas)
	}
	if d := entryOf(t, out, "Deep"); str(d, "slot") != "atDepth 0 system" || str(d, "status") != "placed" {
		t.Errorf("Deep: %v", d)
	}
	blocks := list(out, "blocks")
	if str(blocks[0].(map[string]any), "text") != "Write Mira's next reply in a fictional chat between Mira and Kai." {
		t.Errorf("block 0 in full: %v", blocks[0])
	}
	if _, ok := blocks[1].(map[string]any)["text"]; ok {
		t.Errorf("a block not asked for carries its text: %v", blocks[1])
	}
	for _, r := range list(out, "entries") {
		if str(r.(map[string]any), "name") == "OnlyOnContinue" {
			t.Errorf("an entry for continue fired on a normal generation: %v", r)
		}
	}
	// Global lore first: Atlas is admitted before the character's entries, and Deep, last, is cut.
	args["strategy"] = "global_first"
	out = e.ok("preview_prompt", jsonArg(t, args))
	if str(entryOf(t, out, "Atlas"), "status") != "placed" || str(entryOf(t, out, "Deep"), "status") != "cut" {
		t.Errorf("global first: %v", out)
	}
	// Continue with o200k_base and room for all: OnlyOnContinue fires, after the character's definitions.
	args["generation"], args["tokenizer"], args["contextSize"] = "continue", "o200k_base", 4000
	out = e.ok("preview_prompt", jsonArg(t, args))
	if str(entryOf(t, out, "OnlyOnContinue"), "status") != "placed" || out["tokenizer"] != "o200k_base" {
		t.Errorf("continue, o200k: %v", out)
	}
	if got, want := blockNames(out), "main worldInfoBefore[OnlyOnContinue Lamp Atlas] charDescription scenario chatHistory message injection@0[Deep] continueNudge"; got != want {
		t.Errorf("blocks\n got %s\nwant %s", got, want)
	}
}

// TestPreviewPromptStored: a card on the service, its bound tavern worldbook's SillyTavern fields
// read from the record kept at import, in the text-completion story string.
func TestPreviewPromptStored(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{})
	role := e.ok("create_card", `{"roleName":"Mira"}`)["roleId"].(string)
	e.ok("write_card_document", `{"roleId":"`+role+`","sections":{"description":"{{char}} keeps the light."}}`)
	book := map[string]any{"spec": "lorebook_v3", "data": map[string]any{"name": "Shoals", "entries": []any{
		map[string]any{"keys": []string{"kraken"}, "content": "A reef of bone.", "name": "Kraken", "insertion_order": 10, "enabled": true, "position": "before_char", "extensions": map[string]any{"position": 0}},
		map[string]any{"keys": []string{"kraken"}, "content": "Krakens hunt at night.", "name": "Night", "insertion_order": 5, "enabled": true, "extensions": map[string]any{"position": 1}},
	}}}
	e.ok("import_tavern_worldbook", jsonArg(t, map[string]any{"source": map[string]any{"json": book}, "roleId": role}))
	out := e.ok("preview_prompt", jsonArg(t, map[string]any{"roleId": role, "mode": "text", "full": []int{0},
		"chat": []any{map[string]any{"text": "A kraken!", "user": true}}}))
	blocks := list(out, "blocks")
	if got := str(blocks[0].(map[string]any), "text"); got != "Write Mira's next reply in a fictional chat between Mira and User.\nA reef of bone.\nMira keeps the light.\nKrakens hunt at night.\n" {
		t.Errorf("story string: %q (%s)", got, blockNames(out))
	}
	if out["mode"] != "text" {
		t.Errorf("mode: %v", out["mode"])
	}
	// A longer chat: its messages run together in one block, but for one asked for whole.
	chat := []any{map[string]any{"text": "One.", "user": true}, map[string]any{"text": "Two."}, map[string]any{"text": "Three.", "user": true},
		map[string]any{"text": "Four."}, map[string]any{"text": "A kraken!", "user": true}}
	out = e.ok("preview_prompt", jsonArg(t, map[string]any{"roleId": role, "mode": "text", "full": []int{4}, "chat": chat}))
	if got, want := blockNames(out), "storyString[Kraken Night] chatStart messages message messages"; got != want {
		t.Errorf("blocks %s, want %s", got, want)
	}
	if b := list(out, "blocks")[2].(map[string]any); fmt.Sprint(b["count"]) != "2" || fmt.Sprint(b["index"]) != "2" {
		t.Errorf("the first run: %v", b)
	}
}

// TestPreviewPromptBadArguments: mistakes are tool errors naming the argument.
func TestPreviewPromptBadArguments(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{})
	for _, bad := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{}, "roleId"},
		{map[string]any{"card": map[string]any{"nmae": "x"}}, "card"},
		{map[string]any{"card": map[string]any{}, "books": []any{map[string]any{}}}, "books[0] needs worldbookId or entries"},
		{map[string]any{"card": map[string]any{}, "books": []any{map[string]any{"entries": []any{map[string]any{"keywords": []string{"x"}, "sillyTavern": map[string]any{"position": 9}}}}}}, "sillyTavern.position"},
		{map[string]any{"card": map[string]any{}, "chat": []any{map[string]any{"txt": "x"}}}, "chat"},
		{map[string]any{"card": map[string]any{}, "budgetPercent": 0}, "budgetPercent"},
	} {
		env, msg := e.fail("preview_prompt", jsonArg(t, bad.args))
		if env["error"] != "invalid_arguments" || !strings.Contains(msg+" "+jsonArg(t, env["detail"]), bad.want) {
			t.Errorf("%v: %v %s", bad.args, env, msg)
		}
	}
}

// TestPreviewPromptImportedCard: a card imported with a character book and a depth prompt
// (the character's note): the book is its lore, the note is injected at its depth and role.
func TestPreviewPromptImportedCard(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{})
	imp := e.ok("import_tavern_card", `{"source":{"json":{"spec":"chara_card_v2","spec_version":"2.0","data":{"name":"Vey",`+
		`"description":"A pilot.","first_mes":"Hold the lantern lower.","extensions":{"depth_prompt":{"prompt":"Vey never lies.","depth":1,"role":"user"}},`+
		`"character_book":{"entries":[{"keys":["kraken"],"content":"A kraken.","extensions":{"position":4,"depth":1,"role":1}}]}}}}}`)
	out := e.ok("preview_prompt", jsonArg(t, map[string]any{"roleId": imp["roleId"], "full": []int{4},
		"chat": []any{map[string]any{"text": "Hold on.", "user": true}, map[string]any{"text": "The kraken!"}}}))
	// The entry has no name: it is named by its id.
	if got := blockNames(out); !strings.HasPrefix(got, "main charDescription chatHistory message injection@1[entry e_") || !strings.HasSuffix(got, "] message") {
		t.Fatalf("blocks %s", got)
	}
	inj := list(out, "blocks")[4].(map[string]any)
	if str(inj, "role") != "user" || str(inj, "text") != "Vey never lies.\nA kraken." {
		t.Errorf("the depth prompt, then the entry, in one user message at depth 1: %v", inj)
	}
}
