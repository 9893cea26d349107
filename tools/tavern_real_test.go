package tools

// Round trips of real files (internal/tavern/taverntest/real: SillyTavern's bundled Seraphina card and
// Eldoria lorebook) through import and export, with the kept-aside record (the same store) and
// without it (a fresh store: another machine, another config directory).

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cardwriter/cardwriter-mcp/internal/aside"
	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
	"github.com/cardwriter/cardwriter-mcp/internal/tavern/taverntest"
)

// decodeNumbers decodes JSON with numbers as json.Number, as the source files are decoded.
func decodeNumbers(t *testing.T, data []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not a JSON object: %v", err)
	}
	return v
}

// sameJSON reports whether two decoded JSON values are equal.
func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// isEmptyJSON reports an empty string, object or array.
func isEmptyJSON(v any) bool {
	switch t := v.(type) {
	case string:
		return t == ""
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

// checkRestored fails for each field of src that got lacks or holds another value (what the
// record restores: everything), under path.
func checkRestored(t *testing.T, path string, src, got map[string]any) {
	t.Helper()
	for k, v := range src {
		if g, ok := got[k]; !ok || !sameJSON(v, g) {
			t.Errorf("%s.%s = %s, want %s as the file had it", path, k, jsonText(g), jsonText(v))
		}
	}
}

// checkNotInvented fails for each field of got that src holds with another value, that src does not
// have at all, or (for a field named in notRestored) that is not empty: without a record, an export
// writes what the service holds and the empty values the format requires, never a guess.
func checkNotInvented(t *testing.T, path string, src, got map[string]any, notRestored []string, restoredPrefix string) {
	t.Helper()
	for k, g := range got {
		name := restoredPrefix + k
		v, inSrc := src[k]
		switch {
		case k == "extensions":
			sub, _ := v.(map[string]any)
			for ek, ev := range g.(map[string]any) {
				if sv, ok := sub[ek]; !ok || !sameJSON(sv, ev) {
					t.Errorf("%s.extensions.%s = %s written, the file had %s", path, ek, jsonText(ev), jsonText(sv))
				}
			}
		case slices.Contains(notRestored, name) && !inSrc:
			if !isEmptyJSON(g) {
				t.Errorf("%s.%s = %s written, though it was not restored", path, k, jsonText(g))
			}
		case slices.Contains(notRestored, name):
			if !sameJSON(v, g) && !isEmptyJSON(g) {
				t.Errorf("%s.%s = %s written, the file had %s", path, k, jsonText(g), jsonText(v))
			}
		case !inSrc:
			t.Errorf("%s.%s = %s written, the file had none", path, k, jsonText(g))
		case !sameJSON(v, g):
			t.Errorf("%s.%s = %s, the file had %s", path, k, jsonText(g), jsonText(v))
		}
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// realEnvs starts two servers on one sandbox: a and same share a kept-aside store (the machine
// that imported), fresh has one of its own (another machine).
func realEnvs(t *testing.T) (a, same, fresh *env) {
	t.Helper()
	store := aside.NewMemory()
	a, _ = newTavernEnv(t, tavernEnvConfig{opts: Options{Aside: store, ResultBudget: inlineBudget}})
	same, _ = newTavernEnv(t, tavernEnvConfig{svc: a.svc, opts: Options{Aside: store, ResultBudget: inlineBudget}})
	fresh, _ = newTavernEnv(t, tavernEnvConfig{svc: a.svc, opts: Options{Aside: aside.NewMemory(), ResultBudget: inlineBudget}})
	return a, same, fresh
}

// TestTavernRealCardRoundTrip imports SillyTavern's Seraphina (a V2 PNG) and exports it as JSON:
// with the record every field of the file comes back; without it, nothing is invented or changed
// (probability null, useProbability false and selective false do not become 100, true and true;
// no depth or priority appears) and notRestored names what the service does not hold.
func TestTavernRealCardRoundTrip(t *testing.T) {
	t.Parallel()
	file := taverntest.Real(t, taverntest.RealSeraphinaPNG)
	src := taverntest.CardChunk(t, file, "chara")["data"].(map[string]any)
	srcBook := src["character_book"].(map[string]any)
	srcEntries := srcBook["entries"].([]any)
	a, same, fresh := realEnvs(t)
	roleID := importCard(t, a, file, nil)["roleId"].(string)

	t.Run("the same store", func(t *testing.T) {
		t.Parallel()
		out, sc := exportJSON(t, same, roleID)
		if n := list(sc, "notRestored"); len(n) != 0 {
			t.Errorf("notRestored %v with the record at hand", n)
		}
		whole := decodeNumbers(t, out)
		got := whole["data"].(map[string]any)
		for k, v := range src {
			if k != "character_book" {
				checkRestored(t, "data", map[string]any{k: v}, got)
			}
		}
		// The file's top level comes back too, and nothing more: SillyTavern's copies of the V1
		// fields and creatorcomment beside data, its chat and create_date, but spec (V3 now).
		srcRoot := taverntest.CardChunk(t, file, "chara")
		for k, v := range srcRoot {
			if k == "data" || k == "spec" || k == "spec_version" {
				continue
			}
			if !sameJSON(v, whole[k]) {
				t.Errorf("top-level %s = %s, want %s", k, jsonText(whole[k]), jsonText(v))
			}
		}
		for k := range whole {
			if _, ok := srcRoot[k]; !ok {
				t.Errorf("top-level %s added", k)
			}
		}
		book := got["character_book"].(map[string]any)
		entries := book["entries"].([]any)
		if len(entries) != len(srcEntries) {
			t.Fatalf("%d entries, want %d", len(entries), len(srcEntries))
		}
		for i, e := range srcEntries {
			checkRestored(t, "entry", e.(map[string]any), entries[i].(map[string]any))
			// And nothing more: the entry is the file's, field for field.
			checkNotInvented(t, "entry", e.(map[string]any), entries[i].(map[string]any), nil, "")
		}
	})
	t.Run("a fresh store", func(t *testing.T) {
		t.Parallel()
		out, sc := exportJSON(t, fresh, roleID)
		notRestored := stringsOf(list(sc, "notRestored"))
		for _, want := range []string{"data.creator", "data.character_version", "data.extensions", "data.assets",
			"character_book.entries[].extensions", "character_book.entries[].id", "character_book.entries[].selective",
			"character_book.scan_depth"} {
			if !slices.Contains(notRestored, want) {
				t.Errorf("notRestored %v lacks %s", notRestored, want)
			}
		}
		if k := list(sc, "keptAsideRestored"); len(k) != 0 {
			t.Errorf("keptAsideRestored %v without a record", k)
		}
		got := decodeNumbers(t, out)["data"].(map[string]any)
		book := got["character_book"].(map[string]any)
		delete(got, "character_book")
		checkNotInvented(t, "data", src, got, notRestored, "data.")
		entries := book["entries"].([]any)
		if len(entries) != len(srcEntries) {
			t.Fatalf("%d entries, want %d", len(entries), len(srcEntries))
		}
		for i, e := range srcEntries {
			ge := entries[i].(map[string]any)
			checkNotInvented(t, "entry", e.(map[string]any), ge, notRestored, "character_book.entries[].")
			ext, _ := ge["extensions"].(map[string]any)
			for _, k := range []string{"probability", "useProbability", "depth"} {
				if v, ok := ext[k]; ok {
					t.Errorf("entry %d: extensions.%s = %v invented", i, k, v)
				}
			}
			for _, k := range []string{"selective", "priority"} {
				if v, ok := ge[k]; ok {
					t.Errorf("entry %d: %s = %v invented", i, k, v)
				}
			}
		}
		// What the service holds is all there.
		for _, k := range []string{"name", "description", "personality", "scenario", "first_mes", "mes_example", "tags"} {
			if !sameJSON(src[k], got[k]) {
				t.Errorf("data.%s = %s, want %s", k, jsonText(got[k]), jsonText(src[k]))
			}
		}
	})
}

// TestTavernRealWorldInfoRoundTrip imports SillyTavern's Eldoria World Info file with
// import_tavern_worldbook and exports it with export_tavern_worldbook: with the record, each entry
// comes back field for field, as World Info and as lorebook_v3; without it, nothing is invented.
func TestTavernRealWorldInfoRoundTrip(t *testing.T) {
	t.Parallel()
	file := taverntest.Real(t, taverntest.RealEldoriaJSON)
	src := decodeNumbers(t, file)["entries"].(map[string]any)
	a, same, fresh := realEnvs(t)
	imp := a.ok("import_tavern_worldbook", jsonArg(t, map[string]any{"source": map[string]any{"dataBase64": b64(file)}}))
	wbID := imp["worldbookId"].(string)
	export := func(e *env, format string) ([]byte, map[string]any) {
		t.Helper()
		res := e.call("export_tavern_worldbook", jsonArg(t, map[string]any{"worldbookId": wbID, "format": format}))
		if res.IsError {
			t.Fatalf("export_tavern_worldbook: %s", text(res))
		}
		sc := structured(t, res).(map[string]any)
		if err := e.tools["export_tavern_worldbook"].output.Validate(sc); err != nil {
			t.Fatalf("structuredContent fails the output schema: %v", err)
		}
		f := []byte(res.Content[1].(mcp.TextContent).Text)
		if !sameJSON(decodeNumbers(t, f), sc["lorebook"]) {
			t.Error("the file and structuredContent.lorebook differ")
		}
		return f, sc
	}

	out, sc := export(same, "worldinfo")
	if n := list(sc, "notRestored"); len(n) != 0 {
		t.Errorf("notRestored %v with the record", n)
	}
	got := decodeNumbers(t, out)
	if _, ok := got["name"]; ok {
		t.Errorf("name %v written; the file had none", got["name"])
	}
	gotEntries := got["entries"].(map[string]any)
	if len(gotEntries) != len(src) {
		t.Fatalf("%d entries, want %d", len(gotEntries), len(src))
	}
	for uid, e := range src {
		g, ok := gotEntries[uid].(map[string]any)
		if !ok {
			t.Fatalf("entry %s is missing", uid)
		}
		checkRestored(t, "entries."+uid, e.(map[string]any), g)
	}

	out, _ = export(same, "lorebook_v3")
	back, err := tavern.ReadBook(out)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := tavern.ReadBook(file)
	compareBooks(t, "lorebook_v3", want, back)

	out, sc = export(fresh, "worldinfo")
	notRestored := stringsOf(list(sc, "notRestored"))
	if !slices.Contains(notRestored, "lorebook.entries[].id") || !slices.Contains(notRestored, "lorebook.extensions") {
		t.Errorf("notRestored %v", notRestored)
	}
	gotEntries = decodeNumbers(t, out)["entries"].(map[string]any)
	for uid, e := range src {
		g := gotEntries[uid].(map[string]any)
		for k, v := range g {
			if sv, ok := e.(map[string]any)[k]; ok && !sameJSON(sv, v) {
				t.Errorf("entries.%s.%s = %s, the file had %s", uid, k, jsonText(v), jsonText(sv))
			} else if !ok {
				t.Errorf("entries.%s.%s = %s written, the file had none", uid, k, jsonText(v))
			}
		}
	}
}

// zipMembers reads a zip's members by name.
func zipMembers(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[f.Name] = b
	}
	return out
}

// TestTavernRealCHARXRoundTrip: a CHARX's members, referenced or not, are kept aside and written
// back by a CHARX export on the same store; without the record the CHARX holds card.json and the
// avatar as icon, and names data.assets in notRestored; a JSON export drops the embedded
// background and leaves no embeded:// reference.
func TestTavernRealCHARXRoundTrip(t *testing.T) {
	t.Parallel()
	file := taverntest.RealCHARX(t)
	srcMembers := zipMembers(t, file)
	a, same, fresh := realEnvs(t)
	imp := importCard(t, a, file, nil)
	roleID := imp["roleId"].(string)
	if k := stringsOf(list(imp, "keptAside")); !slices.Contains(k, "charx/assets/emotions/happy.png") || !slices.Contains(k, "charx/module.risum") {
		t.Errorf("keptAside %v lacks the CHARX members", k)
	}

	out, sc := exportFile(t, same, roleID, "charx")
	got := zipMembers(t, out)
	if !sameJSON(decodeNumbers(t, got["card.json"]), sc["card"]) {
		t.Error("structuredContent.card is not the CHARX's card.json")
	}
	for name, data := range srcMembers {
		if name != "card.json" && !bytes.Equal(got[name], data) {
			t.Errorf("member %s not written back as it was", name)
		}
	}
	if len(got) != len(srcMembers) || len(list(sc, "droppedAssets")) != 0 || len(list(sc, "notRestored")) != 0 {
		t.Errorf("%d members (want %d), dropped %v, notRestored %v", len(got), len(srcMembers), sc["droppedAssets"], sc["notRestored"])
	}
	want, _, _ := tavern.Read(file)
	back, _, err := tavern.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	compareCards(t, want, back, true)

	out, sc = exportFile(t, fresh, roleID, "charx")
	got = zipMembers(t, out)
	if !sameJSON(decodeNumbers(t, got["card.json"]), sc["card"]) {
		t.Error("structuredContent.card is not the fresh CHARX's card.json")
	}
	if len(got) != 2 || got["card.json"] == nil || got["assets/icon/images/main.png"] == nil {
		t.Errorf("fresh CHARX members: %v", slices.Sorted(func(yield func(string) bool) {
			for k := range got {
				if !yield(k) {
					return
				}
			}
		}))
	}
	if !slices.Contains(stringsOf(list(sc, "notRestored")), "data.assets") || sc["avatar"] != "image" {
		t.Errorf("fresh CHARX: notRestored %v, avatar %v", sc["notRestored"], sc["avatar"])
	}

	js, sc := exportJSON(t, same, roleID)
	if bytes.Contains(js, []byte("embeded://")) {
		t.Error("a JSON export keeps an embeded:// reference")
	}
	dropped := stringsOf(list(sc, "droppedAssets"))
	if len(dropped) != 1 || !strings.Contains(dropped[0], "glade") {
		t.Errorf("droppedAssets %v, want the background", dropped)
	}
}

// TestTavernCHARXMemberNotKept: a CHARX member that cannot be read does not stop the import; the
// import says so in a note, and the export names it in notRestored.
func TestTavernCHARXMemberNotKept(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("card.json")
	w.Write(mustJSON(t, map[string]any{"spec": "chara_card_v3", "spec_version": "3.0", "data": map[string]any{"name": "Odd", "first_mes": "Hi."}}))
	w, _ = zw.CreateRaw(&zip.FileHeader{Name: "assets/odd.bin", Method: 99, CompressedSize64: 3, UncompressedSize64: 3})
	w.Write([]byte("abc"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	e, _ := newTavernEnv(t, tavernEnvConfig{opts: Options{Aside: aside.NewMemory()}})
	imp := importCard(t, e, buf.Bytes(), nil)
	if notes := strings.Join(stringsOf(list(imp, "notes")), " "); !strings.Contains(notes, "Not kept of the CHARX: assets/odd.bin") {
		t.Errorf("notes: %s", notes)
	}
	_, sc := exportFile(t, e, imp["roleId"].(string), "charx")
	if !slices.Contains(stringsOf(list(sc, "notRestored")), "charx/assets/odd.bin") {
		t.Errorf("notRestored %v", sc["notRestored"])
	}
}
