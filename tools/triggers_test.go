package tools

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// firedNames lists the names of a trigger report's fired (or notFired) entries.
func firedNames(out map[string]any, key string) []string {
	var names []string
	for _, r := range list(out, key) {
		names = append(names, str(r.(map[string]any), "name"))
	}
	return names
}

// resultOf finds an entry's result by name in either list.
func resultOf(t *testing.T, out map[string]any, name string) map[string]any {
	t.Helper()
	for _, r := range append(list(out, "fired"), list(out, "notFired")...) {
		if m := r.(map[string]any); str(m, "name") == name {
			return m
		}
	}
	t.Fatalf("no result for %q: %v", name, out)
	return nil
}

// TestTriggersSimulateSillyTavern drives the SillyTavern simulator through the MCP layer with
// given entries: a chat with names and macros, JavaScript regexes, groups, probability with and
// without a seed, recursion, and sticky carried from one call to the next.
func TestTriggersSimulateSillyTavern(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{})
	mo := map[string]any{"caseSensitive": false, "matchWholeWords": true, "selectiveLogic": 0}
	entries := []any{
		map[string]any{"entryId": "e0", "name": "Self", "keywords": []string{"{{char}}"}, "matchOptions": mo, "content": "The gate hums."},
		map[string]any{"entryId": "e1", "name": "Gate", "keywords": []string{"gate"}, "matchOptions": mo, "sillyTavern": map[string]any{"excludeRecursion": false}},
		map[string]any{"entryId": "e2", "name": "Ahead", "keywords": []string{`/kraken(?=s)/i`}, "matchOptions": mo},
		map[string]any{"entryId": "e3", "name": "Start", "keywords": []string{`/^Mira/`}, "matchOptions": mo},
		map[string]any{"entryId": "e4", "name": "Rare", "keywords": []string{"krakens"}, "matchOptions": mo, "sillyTavern": map[string]any{"probability": 25}},
		map[string]any{"entryId": "e5", "name": "Never", "keywords": []string{"krakens"}, "matchOptions": mo, "sillyTavern": map[string]any{"probability": 0}},
		map[string]any{"entryId": "e6", "name": "Left", "keywords": []string{"krakens"}, "matchOptions": mo, "sillyTavern": map[string]any{"group": "side", "groupWeight": 10}},
		map[string]any{"entryId": "e7", "name": "Right", "keywords": []string{"krakens"}, "matchOptions": mo, "sillyTavern": map[string]any{"group": "side", "groupWeight": 30, "sticky": 2}},
		map[string]any{"entryId": "e8", "name": "Old", "keywords": []string{"lighthouse"}, "matchOptions": mo},
	}
	args := map[string]any{"entries": entries, "charName": "Mira", "settings": map[string]any{"recursive": true},
		"chat": []any{map[string]any{"name": "Kai", "text": "The lighthouse is dark."}, map[string]any{"name": "Kai", "text": "hello"}, map[string]any{"name": "Mira", "text": "Krakens below!"}}}
	out := e.ok("test_worldbook_triggers", jsonArg(t, args))
	if got, want := firedNames(out, "fired"), []string{"Self", "Gate", "Ahead", "Rare", "Right"}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v\n%v", got, want, out)
	}
	if got := resultOf(t, out, "Gate"); fmt.Sprint(got["step"]) != "2" {
		t.Errorf("Gate fires by recursion in step 2: %v", got)
	}
	if got := resultOf(t, out, "Rare"); fmt.Sprint(got["chance"]) != "25" {
		t.Errorf("Rare without a seed reports its chance: %v", got)
	}
	if got := resultOf(t, out, "Right"); got["group"] != "side" || fmt.Sprint(got["chance"]) != "75" {
		t.Errorf("Right wins group side with chance 75: %v", got)
	}
	if got := str(resultOf(t, out, "Start"), "reason"); got != "no keyword matched" {
		t.Errorf("/^Mira/ cannot match after the \\x01 marker: %q", got)
	}
	if got := str(resultOf(t, out, "Never"), "reason"); !strings.Contains(got, "never fires") {
		t.Errorf("probability 0: %q", got)
	}
	if got := str(resultOf(t, out, "Old"), "reason"); got != "no keyword matched" {
		t.Errorf("the third newest message is beyond scan depth 2: %q", got)
	}
	effects := list(out, "timedEffects")
	if len(effects) != 1 || effects[0].(map[string]any)["entryId"] != "e7" || fmt.Sprint(effects[0].(map[string]any)["end"]) != "5" {
		t.Fatalf("a sticky record for Right, ending at 5 messages: %v", effects)
	}

	// The next turn: the chat grew by one message without a keyword; Right is sticky.
	args["chat"] = append(args["chat"].([]any), map[string]any{"name": "Kai", "text": "Quiet now."})
	args["timedEffects"] = effects
	next := e.ok("test_worldbook_triggers", jsonArg(t, args))
	if got := resultOf(t, next, "Right"); !strings.Contains(str(got, "reason"), "sticky") || slices.Contains(firedNames(next, "notFired"), "Right") {
		t.Errorf("Right stays active as sticky: %v", got)
	}

	// A seed makes the rolls: the same seed gives the same answer, and chances are not reported.
	args["seed"] = 7
	delete(args, "timedEffects")
	a, b := e.ok("test_worldbook_triggers", jsonArg(t, args)), e.ok("test_worldbook_triggers", jsonArg(t, args))
	if !slices.Equal(firedNames(a, "fired"), firedNames(b, "fired")) {
		t.Errorf("seed 7 twice: %v and %v", firedNames(a, "fired"), firedNames(b, "fired"))
	}
	for _, r := range list(a, "fired") {
		if _, ok := r.(map[string]any)["chance"]; ok {
			t.Errorf("a seeded run reports a chance: %v", r)
		}
	}
}

// TestTriggersStoredTavernWorldbook: a lorebook imported from a file keeps its SillyTavern
// fields aside, and the simulator reads them (and the book's scan_depth) for the stored worldbook.
func TestTriggersStoredTavernWorldbook(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{})
	book := map[string]any{"spec": "lorebook_v3", "data": map[string]any{"name": "Shoals", "scan_depth": 1, "recursive_scanning": true, "entries": []any{
		map[string]any{"keys": []string{"kraken"}, "content": "A reef of bone.", "name": "Kraken", "insertion_order": 10, "enabled": true, "extensions": map[string]any{}},
		map[string]any{"keys": []string{"reef"}, "content": "The reef.", "name": "Reef", "insertion_order": 5, "enabled": true, "extensions": map[string]any{"exclude_recursion": true}},
		map[string]any{"keys": []string{"kraken"}, "content": "Maybe.", "name": "Chance", "insertion_order": 1, "enabled": true, "extensions": map[string]any{"probability": 0, "useProbability": true}},
		map[string]any{"keys": []string{"storm"}, "content": "Rain.", "name": "Storm", "insertion_order": 1, "enabled": true, "extensions": map[string]any{}},
	}}}
	wb := e.ok("import_tavern_worldbook", jsonArg(t, map[string]any{"source": map[string]any{"json": book}}))["worldbookId"].(string)
	out := e.ok("test_worldbook_triggers", jsonArg(t, map[string]any{"worldbookId": wb, "chat": []any{
		map[string]any{"text": "a storm"}, map[string]any{"text": "the kraken"},
	}}))
	if got, want := firedNames(out, "fired"), []string{"Kraken"}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v\n%v", got, want, out)
	}
	for name, want := range map[string]string{"Reef": "excludeRecursion", "Chance": "never fires", "Storm": "no keyword matched"} {
		if got := str(resultOf(t, out, name), "reason"); !strings.Contains(got, want) {
			t.Errorf("%s: reason %q lacks %q", name, got, want)
		}
	}
	settings := out["settings"].(map[string]any)
	if fmt.Sprint(settings["scanDepth"]) != "1" || settings["recursive"] != true {
		t.Errorf("the lorebook's scan_depth and recursive_scanning apply: %v", settings)
	}
	// The call's own scanDepth wins over the book's.
	deeper := e.ok("test_worldbook_triggers", jsonArg(t, map[string]any{"worldbookId": wb, "scanDepth": 2, "chat": []any{
		map[string]any{"text": "a storm"}, map[string]any{"text": "the kraken"},
	}}))
	if got := firedNames(deeper, "fired"); !slices.Contains(got, "Storm") {
		t.Errorf("scanDepth 2 reaches the storm: %v", got)
	}
}

// TestTriggersBadArguments: mistakes come back as tool errors that name the argument.
func TestTriggersBadArguments(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{})
	entry := map[string]any{"entryId": "a", "name": "A", "keywords": []string{"x"}}
	for _, bad := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"entries": []any{entry}}, "neither was given"},
		{map[string]any{"entries": []any{entry}, "text": "x", "chat": []any{}}, "not both"},
		{map[string]any{"entries": []any{entry}, "text": "x", "timedEffects": []any{map[string]any{"entryId": "zz", "type": "sticky", "start": 0, "end": 2}}}, `"zz" is none of the entries`},
		{map[string]any{"entries": []any{entry}, "text": "x", "timedEffects": []any{map[string]any{"index": 3, "type": "sticky", "start": 0, "end": 2}}}, "index between 0 and 0"},
		{map[string]any{"entries": []any{map[string]any{"name": "A", "keywords": []string{"x"}, "sillyTavern": map[string]any{"caseSensitive": true}}}, "text": "x"}, "sillyTavern.caseSensitive applies to entries with SillyTavern's rules"},
		{map[string]any{"entries": []any{entry}, "text": "x", "scanDepth": -1}, "scanDepth"},
		{map[string]any{"entries": []any{map[string]any{"name": "A", "keywords": []string{"x"}, "sillyTavern": map[string]any{"probabilty": 5}}}, "text": "x"}, "sillyTavern.probabilty is not a SillyTavern entry field"},
		{map[string]any{"entries": []any{map[string]any{"name": "A", "keywords": []string{"x"}, "sillyTavern": map[string]any{"scanDepth": 1001}}}, "text": "x"}, "sillyTavern.scanDepth has a value of the wrong kind"},
		{map[string]any{"entries": []any{map[string]any{"name": "A", "keywords": []string{"x"}, "sillyTavern": map[string]any{"sticky": "2"}}}, "text": "x"}, "sillyTavern.sticky has a value of the wrong kind"},
		{map[string]any{"entries": []any{map[string]any{"name": "A", "keywords": []string{"x"}, "sillyTavern": map[string]any{"triggers": []string{"often"}}}}, "text": "x"}, "sillyTavern.triggers has a value of the wrong kind"},
		{map[string]any{"entries": []any{entry}, "chat": []any{map[string]any{"name": "no text"}}}, "text"},
	} {
		env, msg := e.fail("test_worldbook_triggers", jsonArg(t, bad.args))
		if env["error"] != "invalid_arguments" || !strings.Contains(msg+" "+jsonArg(t, env["detail"]), bad.want) {
			t.Errorf("%v: %v %s", bad.args, env, msg)
		}
	}
}

// TestTriggersCharacterFilter: an entry's character filter applies to charName; without one it
// is not applied, and the reason says so.
func TestTriggersCharacterFilter(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{})
	mo := map[string]any{"caseSensitive": false, "matchWholeWords": false, "selectiveLogic": 0}
	entries := []any{map[string]any{"name": "Hers", "keywords": []string{"gate"}, "matchOptions": mo, "sillyTavern": map[string]any{"characterFilter": map[string]any{"names": []string{"Mira"}}}}}
	out := e.ok("test_worldbook_triggers", jsonArg(t, map[string]any{"entries": entries, "text": "the gate"}))
	if r := resultOf(t, out, "Hers"); !slices.Contains(firedNames(out, "fired"), "Hers") || !strings.Contains(str(r, "reason"), "not applied") {
		t.Errorf("no charName: %v", r)
	}
	out = e.ok("test_worldbook_triggers", jsonArg(t, map[string]any{"entries": entries, "text": "the gate", "charName": "Kai"}))
	if r := resultOf(t, out, "Hers"); slices.Contains(firedNames(out, "fired"), "Hers") || !strings.Contains(str(r, "reason"), "filtered out") {
		t.Errorf("charName Kai: %v", r)
	}
}
