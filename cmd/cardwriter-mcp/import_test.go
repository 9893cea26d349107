package main

// The tavern commands (import, export) and source.path over stdio, driven through the built
// binary (see TestMain in e2e_test.go).

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
	"github.com/cardwriter/cardwriter-mcp/internal/tavern/taverntest"
)

// cardPNG is a PNG card: a small image with a V3 card (extensions, a lorebook with extra
// fields, CJK and emoji) in a ccv3 tEXt chunk before IEND.
func cardPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 6, 9))
	for y := range 9 {
		for x := range 6 {
			img.Set(x, y, color.RGBA{uint8(40 * x), uint8(25 * y), 90, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	card := map[string]any{
		"spec": "chara_card_v3", "spec_version": "3.0",
		"data": map[string]any{
			"name": "灯台守 Mira 🕯️", "first_mes": "You're soaked.", "alternate_greetings": []string{"Shut the door.", "Tea?"},
			"description": "A lighthouse keeper.", "personality": "wry", "creator_notes": "A quiet card.",
			"tags": []string{"coast"}, "creator": "someone", "character_version": "2",
			"extensions": map[string]any{"depth_prompt": map[string]any{"prompt": "Waves.", "depth": 4}},
			"nickname":   "Mi",
			"character_book": map[string]any{
				"name": "Coast", "scan_depth": 5,
				"entries": []any{
					map[string]any{"keys": []string{"lamp"}, "content": "The lamp is out.", "name": "Lamp", "insertion_order": 20,
						"enabled": true, "extensions": map[string]any{"depth": 4, "probability": 50}},
					map[string]any{"keys": []string{"灯"}, "content": "灯が消えた。", "name": "灯", "insertion_order": 10,
						"enabled": true, "case_sensitive": true, "extensions": map[string]any{"match_whole_words": true}},
				},
			},
		},
		"x_root": "kept",
	}
	js, err := json.Marshal(card)
	if err != nil {
		t.Fatal(err)
	}
	return taverntest.InsertChunks(t, buf.Bytes(), taverntest.BeforeIEND, taverntest.TextChunk("ccv3", base64.StdEncoding.EncodeToString(js)))
}

// runCLI runs the binary and returns its stdout and stderr.
func runCLI(t *testing.T, env []string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader("")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// TestCLIImportExport imports a PNG card with `cardwriter-mcp import` into a sandbox kept in a
// file, then exports it with `cardwriter-mcp export` in another process, as JSON and as PNG:
// the files are the card, field for field, with what the service cannot hold restored from the
// kept-aside store in the config dir.
func TestCLIImportExport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	config := filepath.Join(dir, "config")
	env := cleanEnv("CARDWRITER_CONFIG_DIR=" + config)
	backend := []string{"--sandbox", "--sandbox-data", filepath.Join(dir, "sandbox.json")}
	src := cardPNG(t)
	srcPath := filepath.Join(dir, "Mira.png")
	if err := os.WriteFile(srcPath, src, 0o644); err != nil {
		t.Fatal(err)
	}
	want, _, err := tavern.Read(src)
	if err != nil {
		t.Fatal(err)
	}

	stdout, stderr, err := runCLI(t, env, append([]string{"import", srcPath, "--json"}, backend...)...)
	if err != nil {
		t.Fatalf("import: %v\n%s%s", err, stdout, stderr)
	}
	var res struct {
		RoleID      string   `json:"roleId"`
		WorldbookID string   `json:"worldbookId"`
		EntryCount  int      `json:"entryCount"`
		KeptAside   []string `json:"keptAside"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.RoleID == "" || res.WorldbookID == "" || res.EntryCount != 2 {
		t.Fatalf("import --json: %v\n%s", err, stdout)
	}
	if !strings.Contains(stderr, "Step 1 of 7: create the card.") || !strings.Contains(stderr, "Step 7 of 7: write worldbook entries 1-2 of 2.") {
		t.Errorf("no progress on stderr:\n%s", stderr)
	}
	if len(res.KeptAside) == 0 {
		t.Error("nothing kept aside")
	}
	files, err := os.ReadDir(filepath.Join(config, "aside"))
	if err != nil || len(files) < 2 {
		t.Fatalf("kept-aside store: %v, %d files", err, len(files))
	}
	if runtime.GOOS != "windows" {
		if fi, _ := os.Stat(filepath.Join(config, "aside")); fi.Mode().Perm() != 0o700 {
			t.Errorf("store directory mode %v, want 0700", fi.Mode().Perm())
		}
		for _, f := range files {
			if fi, _ := f.Info(); fi.Mode().Perm() != 0o600 {
				t.Errorf("%s mode %v, want 0600", f.Name(), fi.Mode().Perm())
			}
		}
	}

	direct, err := tavern.WriteV3JSON(want)
	if err != nil {
		t.Fatal(err)
	}
	jsonPath := filepath.Join(dir, "out.json")
	stdout, stderr, err = runCLI(t, env, append([]string{"export", res.RoleID, "-o", jsonPath}, backend...)...)
	if err != nil {
		t.Fatalf("export json: %v\n%s%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout, res.RoleID) {
		t.Errorf("export prints %q", stdout)
	}
	got, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, direct) {
		t.Errorf("the exported JSON differs from the card:\n%s\n---\n%s", direct, got)
	}

	pngPath := filepath.Join(dir, "out.png")
	if _, stderr, err := runCLI(t, env, append([]string{"export", "--format", "png", res.RoleID, "-o", pngPath}, backend...)...); err != nil {
		t.Fatalf("export png: %v\n%s", err, stderr)
	}
	pngFile, err := os.ReadFile(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	if img, _, err := image.Decode(bytes.NewReader(pngFile)); err != nil || img.Bounds().Dx() != 6 || img.Bounds().Dy() != 9 {
		t.Fatalf("the exported PNG: %v", err)
	}
	back, _, err := tavern.Read(pngFile)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := tavern.WriteV3JSON(back); !bytes.Equal(again, direct) {
		t.Errorf("the exported PNG's card differs:\n%s\n---\n%s", direct, again)
	}
	if !bytes.Equal(back.Avatar, want.Avatar) {
		t.Error("the exported PNG's image is not the card's")
	}

	// An existing file is left alone without --overwrite (or -f), as the tool's overwrite.
	if err := os.WriteFile(jsonPath, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = runCLI(t, env, append([]string{"export", res.RoleID, "-o", jsonPath}, backend...)...)
	if kept, _ := os.ReadFile(jsonPath); err == nil || string(kept) != "mine" || !strings.Contains(stderr, "exists: give --overwrite (or -f)") {
		t.Errorf("export onto an existing file: %v, the file now %.20q\n%s", err, kept, stderr)
	}
	for _, force := range []string{"--overwrite", "-f"} {
		if err := os.WriteFile(jsonPath, []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, stderr, err = runCLI(t, env, append([]string{"export", res.RoleID, "-o", jsonPath, force}, backend...)...)
		if got, _ := os.ReadFile(jsonPath); err != nil || !bytes.Equal(got, direct) {
			t.Errorf("export %s: %v\n%s", force, err, stderr)
		}
	}

	// JSON to stdout with -o -.
	stdout, _, err = runCLI(t, env, append([]string{"export", res.RoleID, "-o", "-"}, backend...)...)
	if err != nil || stdout != string(direct) {
		t.Errorf("export -o -: %v\n%s", err, stdout)
	}
	// The same file again: the same card.
	stdout, _, err = runCLI(t, env, append([]string{"import", "--json", srcPath}, backend...)...)
	if err != nil || !strings.Contains(stdout, res.RoleID) || !strings.Contains(stdout, `"resumed": true`) {
		t.Errorf("second import: %v\n%s", err, stdout)
	}
}

func TestCLIErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := cleanEnv("CARDWRITER_CONFIG_DIR=" + filepath.Join(dir, "config"))
	notCard := filepath.Join(dir, "x.json")
	if err := os.WriteFile(notCard, []byte(`{"hello":"world"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	card := filepath.Join(dir, "c.json")
	if err := os.WriteFile(card, []byte(`{"name":"A","first_mes":"b"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		ok   bool
		want string
	}{
		{"import help", []string{"import", "--help"}, true, "--client-key"},
		{"export help", []string{"export", "--help"}, true, "ROLE_ID -o FILE"},
		{"stdio help lists --allow-dir", []string{"stdio", "--help"}, true, "CARDWRITER_ALLOW_DIR"},
		{"import without a file", []string{"import", "--sandbox"}, false, "want 1 argument"},
		{"import a missing file", []string{"import", filepath.Join(dir, "nope.png"), "--sandbox"}, false, "no such file"},
		{"import what is no card", []string{"import", notCard, "--sandbox"}, false, "not a character card"},
		{"trial without a key", []string{"import", card, "--mode", "trial", "--sandbox"}, false, "--client-key"},
		{"export without -o", []string{"export", "r_1", "--sandbox"}, false, "-o FILE"},
		{"export an unknown card", []string{"export", "r_missing", "-o", filepath.Join(dir, "o.json"), "--sandbox"}, false, "card"},
		{"export a bad format", []string{"export", "r_1", "-o", "x", "--format", "gif", "--sandbox"}, false, "--format"},
		{"export-worldbook help", []string{"export-worldbook", "--help"}, true, "WORLDBOOK_ID -o FILE"},
		{"export-worldbook a bad format", []string{"export-worldbook", "wb_1", "-o", "x", "--format", "png", "--sandbox"}, false, "want worldinfo, lorebook_v3"},
		{"export-worldbook an unknown worldbook", []string{"export-worldbook", "wb_missing", "-o", filepath.Join(dir, "w.json"), "--sandbox"}, false, "orldbook"},
		{"no backend", []string{"import", card}, false, "--api-host"},
		{"stdio with a missing --allow-dir", []string{"stdio", "--sandbox", "--allow-dir", filepath.Join(dir, "nope")}, false, "--allow-dir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, err := runCLI(t, env, tt.args...)
			if (err == nil) != tt.ok {
				t.Errorf("err = %v, want success: %v", err, tt.ok)
			}
			if !strings.Contains(stdout+stderr, tt.want) {
				t.Errorf("output lacks %q:\n%s%s", tt.want, stdout, stderr)
			}
		})
	}
}

// TestStdioImportByPath: over stdio, source.path reads a file inside a root the client declares
// or an --allow-dir folder, and nothing else, with the official SDK as the client.
func TestStdioImportByPath(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	roots, allowed, outside := filepath.Join(dir, "roots"), filepath.Join(dir, "allowed"), filepath.Join(dir, "outside")
	for _, d := range []string{roots, allowed, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src := cardPNG(t)
	for _, d := range []string{roots, allowed, outside} {
		if err := os.WriteFile(filepath.Join(d, "Mira.png"), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Under MCP 2025-11-25 the server asks for the roots with a roots/list request; under the
	// newest revision a file inside an --allow-dir folder needs no question to the client.
	for _, version := range []string{"2025-11-25", ""} {
		cmd := exec.Command(binPath, "stdio", "--sandbox", "--allow-dir", allowed)
		cmd.Env = cleanEnv("CARDWRITER_CONFIG_DIR=" + filepath.Join(dir, "config"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		client := newClient()
		client.AddRoots(&mcp.Root{URI: "file://" + filepath.ToSlash(roots), Name: "roots"})
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatalf("connect: %v\n%s", err, stderr.String())
		}
		cases := []struct {
			path    string
			wantErr bool
		}{{filepath.Join(allowed, "Mira.png"), false}}
		if version != "" {
			cases = append(cases, struct {
				path    string
				wantErr bool
			}{filepath.Join(roots, "Mira.png"), false}, struct {
				path    string
				wantErr bool
			}{filepath.Join(outside, "Mira.png"), true})
		}
		for _, tt := range cases {
			out := call(ctx, t, cs, "import_tavern_card", map[string]any{"source": map[string]any{"path": tt.path}}, tt.wantErr)
			if tt.wantErr && out["error"] != "path_not_allowed" {
				t.Errorf("%s: %v", tt.path, out)
			}
			if !tt.wantErr && out["roleId"] == nil {
				t.Errorf("%s: %v", tt.path, out)
			}
		}
		exp := call(ctx, t, cs, "export_tavern_card", map[string]any{"roleId": "r_missing"}, true)
		if exp["error"] != "role_not_found" {
			t.Errorf("export_tavern_card unknown: %v", exp)
		}
		if err := cs.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
}

// TestHTTPTavern: over streamable HTTP a card comes in as dataBase64 and goes out again, and
// source.path is refused (the server is not on the user's machine).
func TestHTTPTavern(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := startHTTP(t)
	cs := connectHTTP(ctx, t, base)
	defer cs.Close()
	refused := call(ctx, t, cs, "import_tavern_card", map[string]any{"source": map[string]any{"path": "/etc/hostname"}}, true)
	if refused["error"] != "path_not_allowed" || !strings.Contains(fmt.Sprint(refused["message"]), "HTTP") {
		t.Errorf("path over HTTP: %v", refused)
	}
	src := cardPNG(t)
	imp := call(ctx, t, cs, "import_tavern_card", map[string]any{"source": map[string]any{"dataBase64": base64.StdEncoding.EncodeToString(src)}}, false)
	roleID, _ := imp["roleId"].(string)
	if roleID == "" || imp["worldbookId"] == nil {
		t.Fatalf("import: %v", imp)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "export_tavern_card", Arguments: map[string]any{"roleId": roleID}})
	if err != nil || res.IsError || len(res.Content) != 2 {
		t.Fatalf("export: %v %v", err, res)
	}
	want, _, _ := tavern.Read(src)
	direct, _ := tavern.WriteV3JSON(want)
	if got := res.Content[1].(*mcp.TextContent).Text; got != string(direct) {
		t.Errorf("the exported JSON differs from the card:\n%s\n---\n%s", direct, got)
	}
	trig := call(ctx, t, cs, "test_worldbook_triggers", map[string]any{"worldbookId": imp["worldbookId"], "text": "The lamp flickers."}, false)
	if fired, _ := trig["fired"].([]any); len(fired) != 1 {
		t.Errorf("test_worldbook_triggers: %v", trig)
	}
}

// TestCLIRealCardOnAnotherConfigDir imports SillyTavern's Seraphina with `cardwriter-mcp import`
// and exports her with `export` and `export-worldbook`, from the same config directory (every
// kept-aside field restored) and from a fresh one, as on another laptop (nothing invented or
// changed, what could not be restored named); and as CHARX.
func TestCLIRealCardOnAnotherConfigDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	home := cleanEnv("CARDWRITER_CONFIG_DIR=" + filepath.Join(dir, "config"))
	laptop := cleanEnv("CARDWRITER_CONFIG_DIR=" + filepath.Join(dir, "other-config"))
	backend := []string{"--sandbox", "--sandbox-data", filepath.Join(dir, "sandbox.json")}
	src := taverntest.Real(t, taverntest.RealSeraphinaPNG)
	srcPath := filepath.Join(dir, "Seraphina.png")
	if err := os.WriteFile(srcPath, src, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runCLI(t, home, append([]string{"import", srcPath, "--json"}, backend...)...)
	if err != nil {
		t.Fatalf("import: %v\n%s%s", err, stdout, stderr)
	}
	var res struct {
		RoleID      string `json:"roleId"`
		WorldbookID string `json:"worldbookId"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.RoleID == "" || res.WorldbookID == "" {
		t.Fatalf("import --json: %v\n%s", err, stdout)
	}
	data := taverntest.CardChunk(t, src, "chara")["data"].(map[string]any)
	srcEntries := data["character_book"].(map[string]any)["entries"].([]any)

	export := func(env []string, args ...string) (map[string]any, string) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out.json")
		stdout, stderr, err := runCLI(t, env, append(append(args, "-o", out), backend...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s%s", args, err, stdout, stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%v wrote no JSON: %v", args, err)
		}
		return v, stdout
	}
	for _, tc := range []struct {
		name     string
		env      []string
		restored bool
	}{{"the same config dir", home, true}, {"another config dir", laptop, false}} {
		card, summary := export(tc.env, "export", res.RoleID)
		got := card["data"].(map[string]any)
		book, _ := export(tc.env, "export-worldbook", res.WorldbookID, "--format", "lorebook_v3")
		if tc.restored {
			if got["creator"] != data["creator"] || got["character_version"] != data["character_version"] || fmt.Sprint(got["extensions"]) != fmt.Sprint(data["extensions"]) {
				t.Errorf("%s: creator, character_version or extensions not restored: %v", tc.name, got)
			}
			if strings.Contains(summary, "could not be restored") {
				t.Errorf("%s: %s", tc.name, summary)
			}
		} else if got["creator"] != "" || !strings.Contains(summary, "could not be restored (notRestored): character_book.") {
			// The names too: Gemini CLI shows its model the text, not structuredContent.
			t.Errorf("%s: creator %v; summary %q", tc.name, got["creator"], summary)
		}
		for _, entries := range [][]any{got["character_book"].(map[string]any)["entries"].([]any), book["data"].(map[string]any)["entries"].([]any)} {
			if len(entries) != len(srcEntries) {
				t.Fatalf("%s: %d entries, want %d", tc.name, len(entries), len(srcEntries))
			}
			for i, e := range entries {
				want, got := srcEntries[i].(map[string]any), e.(map[string]any)
				wantExt, gotExt := want["extensions"].(map[string]any), got["extensions"].(map[string]any)
				for _, k := range []string{"probability", "useProbability", "depth"} {
					if v, ok := gotExt[k]; ok && (!tc.restored || fmt.Sprint(v) != fmt.Sprint(wantExt[k])) {
						t.Errorf("%s: entry %d: extensions.%s = %v, the file had %v", tc.name, i, k, v, wantExt[k])
					} else if _, had := wantExt[k]; !ok && had && tc.restored {
						t.Errorf("%s: entry %d: extensions.%s not restored", tc.name, i, k)
					}
				}
				if v, ok := got["selective"]; (ok || tc.restored) && v != want["selective"] {
					t.Errorf("%s: entry %d: selective = %v, the file had %v", tc.name, i, v, want["selective"])
				}
				if v, ok := got["priority"]; ok {
					t.Errorf("%s: entry %d: priority %v appeared", tc.name, i, v)
				}
			}
		}
	}

	charxPath := filepath.Join(dir, "out.charx")
	if _, stderr, err := runCLI(t, home, append([]string{"export", res.RoleID, "-o", charxPath}, backend...)...); err != nil {
		t.Fatalf("export .charx: %v\n%s", err, stderr)
	}
	zipped, err := os.ReadFile(charxPath)
	if err != nil {
		t.Fatal(err)
	}
	back, f, err := tavern.Read(zipped)
	if err != nil || f.Container != "charx" || back.Name != "Seraphina" || len(back.Avatar) == 0 {
		t.Errorf("the .charx export: %v (%s)", err, f)
	}
}
