package tools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cardwriter/cardwriter-mcp/auth/authtest"
	"github.com/cardwriter/cardwriter-mcp/internal/aside"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/tavern/taverntest"
)

// inlineBudget is a result budget no export reaches: every file comes back inline.
const inlineBudget = 1 << 30

// readExport reads an export's URI through resources/read and returns its bytes (text or blob).
func readExport(t *testing.T, e *env, uri string) ([]byte, error) {
	t.Helper()
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := e.client.ReadResource(context.Background(), req)
	if err != nil {
		return nil, err
	}
	if len(res.Contents) != 1 {
		t.Fatalf("resources/read %s: %d contents", uri, len(res.Contents))
	}
	switch c := res.Contents[0].(type) {
	case mcp.TextResourceContents:
		return []byte(c.Text), nil
	case mcp.BlobResourceContents:
		return base64.StdEncoding.DecodeString(c.Blob)
	}
	t.Fatalf("resources/read %s: contents %T", uri, res.Contents[0])
	return nil, nil
}

// inlineFile returns the file of an inline export result: the text content, or the base64 of
// the image or embedded resource.
func inlineFile(t *testing.T, res *mcp.CallToolResult) []byte {
	t.Helper()
	if len(res.Content) != 2 {
		t.Fatalf("%d contents, want the summary and the file", len(res.Content))
	}
	switch c := res.Content[1].(type) {
	case mcp.TextContent:
		return []byte(c.Text)
	case mcp.ImageContent:
		b, _ := base64.StdEncoding.DecodeString(c.Data)
		return b
	case mcp.EmbeddedResource:
		b, _ := base64.StdEncoding.DecodeString(c.Resource.(mcp.BlobResourceContents).Blob)
		return b
	}
	t.Fatalf("content %T is no file", res.Content[1])
	return nil
}

// linkOf checks an export result sent by reference and returns its structuredContent.link.
func linkOf(t *testing.T, e *env, tool string, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	if res.IsError {
		t.Fatalf("%s: %s", tool, text(res))
	}
	sc := structured(t, res).(map[string]any)
	if err := e.tools[tool].output.Validate(sc); err != nil {
		t.Fatalf("%s: structuredContent fails the output schema: %v", tool, err)
	}
	link := obj(sc, "link")
	if link == nil || sc["card"] != nil || sc["lorebook"] != nil || sc["dataBase64"] != nil {
		t.Fatalf("%s: want a link and no inline file, got keys %v", tool, keys(sc))
	}
	if len(res.Content) != 3 {
		t.Fatalf("%s: %d contents, want the summary, the result's JSON and the link", tool, len(res.Content))
	}
	// Gemini CLI shows the model only the content: the result's JSON is there too (notRestored).
	if js, ok := res.Content[1].(mcp.TextContent); !ok || !strings.Contains(js.Text, `"notRestored"`) || !strings.Contains(js.Text, str(link, "uri")) {
		t.Fatalf("%s: the second content is not the result's JSON: %#v", tool, res.Content[1])
	}
	rl, ok := res.Content[2].(mcp.ResourceLink)
	if !ok || rl.URI != link["uri"] || rl.MIMEType != link["mimeType"] || rl.Size == nil || json.Number(strconv.FormatInt(*rl.Size, 10)) != link["size"] {
		t.Fatalf("%s: content %#v does not match the link %v", tool, res.Content[2], link)
	}
	// Gemini CLI shows the model only the text: it says where the file is.
	if s := firstText(res); !strings.Contains(s, str(link, "uri")) || !strings.Contains(s, "resources/read") {
		t.Errorf("%s: the summary does not say how to read the file: %s", tool, s)
	}
	return link
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestExportByLink: a card from SillyTavern's Seraphina with a 1,500-entry lorebook exported at
// the default budget comes back as a resource_link (json, png, charx, and its worldbook as
// worldinfo), and resources/read gives byte for byte the file an inline export of the same card
// gives; a small card stays inline.
func TestExportByLink(t *testing.T) {
	t.Parallel()
	kept := aside.NewMemory()
	e, _ := newTavernEnv(t, tavernEnvConfig{opts: Options{Aside: kept}})
	inline, _ := newTavernEnv(t, tavernEnvConfig{svc: e.svc, opts: Options{Aside: kept, ResultBudget: inlineBudget}})
	imp := importCard(t, e, taverntest.Real(t, "default_Seraphina.png"), nil)
	roleID := imp["roleId"].(string)
	wbID := imp["worldbookId"].(string)
	book := bigBook(1500)
	e.ok("import_tavern_worldbook", jsonArg(t, map[string]any{"source": map[string]any{"dataBase64": b64(book)}, "worldbookId": wbID}))

	for _, tc := range []struct{ tool, idArg, id, format string }{
		{"export_tavern_card", "roleId", roleID, "json"},
		{"export_tavern_card", "roleId", roleID, "png"},
		{"export_tavern_card", "roleId", roleID, "charx"},
		{"export_tavern_worldbook", "worldbookId", wbID, "worldinfo"},
		{"export_tavern_worldbook", "worldbookId", wbID, "lorebook_v3"},
	} {
		t.Run(tc.tool+"/"+tc.format, func(t *testing.T) {
			args := jsonArg(t, map[string]any{tc.idArg: tc.id, "format": tc.format})
			link := linkOf(t, e, tc.tool, e.call(tc.tool, args))
			got, err := readExport(t, e, str(link, "uri"))
			if err != nil {
				t.Fatalf("resources/read: %v", err)
			}
			want := inlineFile(t, inline.call(tc.tool, args))
			if json.Valid(want) {
				// A JSON file sent by link is laid out in lines, so file readers can page it.
				want = inLines(want)
				if n := strings.Count(string(got), "\n"); n < 100 {
					t.Errorf("a linked JSON file of %d bytes has %d lines", len(got), n+1)
				}
			}
			if string(got) != string(want) {
				t.Fatalf("resources/read gives %d bytes that differ from the inline export's %d", len(got), len(want))
			}
			if link["size"] != json.Number(strconv.Itoa(len(want))) {
				t.Errorf("link size %v, want %d", link["size"], len(want))
			}
		})
	}

	small := e.ok("create_card", `{"roleName":"Small"}`)["roleId"].(string)
	res := e.call("export_tavern_card", jsonArg(t, map[string]any{"roleId": small}))
	sc := structured(t, res).(map[string]any)
	if sc["card"] == nil || sc["link"] != nil {
		t.Errorf("a small card did not stay inline: %v", keys(sc))
	}
	if _, ok := res.Content[1].(mcp.TextContent); !ok {
		t.Errorf("a small card's file is %T, want text", res.Content[1])
	}
}

// TestExportLinkRefused: an export is read back only by the user who made it, and only until it
// expires; otherwise resources/read answers the protocol's "resource not found" (-32002), with
// one message whatever the reason.
func TestExportLinkRefused(t *testing.T) {
	t.Parallel()
	kv := store.NewMemory()
	clk := authtest.NewClock(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	opts := Options{Exports: kv, ExportTTL: 10 * time.Minute, ResultBudget: 200, now: clk.Now}
	e, _ := newTavernEnv(t, tavernEnvConfig{opts: opts})
	// Another replica on the same store, for the same user; and a replica whose caller is
	// another user, signed in to the card service with a token it issued (so that the owner
	// check, not the sign-in, refuses).
	replica, _ := newTavernEnv(t, tavernEnvConfig{svc: e.svc, opts: opts})
	e.svc.AddUser("another-user-token", "Other")
	other, _ := newTavernEnv(t, tavernEnvConfig{svc: e.svc, opts: opts, token: "another-user-token"})
	if me := other.ok("whoami", "{}"); me["userId"] == e.ok("whoami", "{}")["userId"] {
		t.Fatalf("the other user is the same user: %v", me)
	}

	imp := importCard(t, e, bigBook(40), nil)
	link := linkOf(t, e, "export_tavern_card", e.call("export_tavern_card", jsonArg(t, map[string]any{"roleId": imp["roleId"]})))
	uri := str(link, "uri")
	if want := clk.Now().Add(10 * time.Minute).Format(time.RFC3339); link["expiresAt"] != want {
		t.Errorf("expiresAt %v, want %s", link["expiresAt"], want)
	}
	if _, err := readExport(t, replica, uri); err != nil {
		t.Fatalf("the owner on another replica: %v", err)
	}
	notFound := func(who string, e *env, uri string) {
		t.Helper()
		_, err := readExport(t, e, uri)
		if !errors.Is(err, mcp.ErrResourceNotFound) {
			t.Fatalf("%s: got %v, want resource not found (-32002)", who, err)
		}
		if !strings.Contains(err.Error(), errNoExport.Error()) {
			t.Errorf("%s: message %q", who, err)
		}
	}
	notFound("another user", other, uri)
	notFound("an export never made", e, "export://0123456789abcdef0123456789abcdef")
	clk.Advance(10*time.Minute - time.Second)
	if _, err := readExport(t, e, uri); err != nil {
		t.Fatalf("the owner before expiry: %v", err)
	}
	clk.Advance(time.Second)
	notFound("the owner after expiry", e, uri)
}

// TestExportLinkOldProtocol: a client of a revision before resource_link (2025-03-26) gets a
// text saying how to read the file instead.
func TestExportLinkOldProtocol(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{proto: "2025-03-26", opts: Options{ResultBudget: 200}})
	imp := importCard(t, e, bigBook(40), nil)
	res := e.call("export_tavern_card", jsonArg(t, map[string]any{"roleId": imp["roleId"]}))
	sc := structured(t, res).(map[string]any)
	link := obj(sc, "link")
	if link == nil || len(res.Content) != 2 || !strings.Contains(text(res), str(link, "uri")) || !strings.Contains(firstText(res), "resources/read") {
		t.Fatalf("want a text naming the link, got %#v (link %v)", res.Content, link)
	}
	got, err := readExport(t, e, str(link, "uri"))
	if err != nil || !json.Valid(got) {
		t.Fatalf("resources/read: %v", err)
	}
}

// TestExportToPath: over stdio, path writes the file inside the allowed folders instead of
// returning it; an existing file is replaced only with overwrite; a path outside is refused with
// the same message whether or not a file is there; over HTTP path is refused.
func TestExportToPath(t *testing.T) {
	t.Parallel()
	allowed, outside := t.TempDir(), t.TempDir()
	e, _ := newTavernEnv(t, tavernEnvConfig{opts: Options{LocalFiles: &LocalFiles{AllowDirs: []string{allowed}}, ResultBudget: inlineBudget}})
	imp := importCard(t, e, bigBook(40), nil)
	roleID := imp["roleId"].(string)
	want := inlineFile(t, e.call("export_tavern_card", jsonArg(t, map[string]any{"roleId": roleID, "format": "png"})))

	dest := filepath.Join(allowed, "card.png")
	res := e.call("export_tavern_card", jsonArg(t, map[string]any{"roleId": roleID, "format": "png", "path": dest}))
	sc := structured(t, res).(map[string]any)
	if err := e.tools["export_tavern_card"].output.Validate(sc); err != nil {
		t.Fatal(err)
	}
	w := obj(sc, "written")
	real, _ := filepath.EvalSymlinks(dest)
	if res.IsError || w == nil || w["path"] != real || len(res.Content) != 2 || sc["dataBase64"] != nil || !strings.Contains(firstText(res), real) {
		t.Fatalf("path: %v %s", sc, text(res))
	}
	if got, _ := os.ReadFile(dest); string(got) != string(want) {
		t.Fatal("the file written is not the inline export")
	}

	_, msg := e.fail("export_tavern_card", jsonArg(t, map[string]any{"roleId": roleID, "path": dest}))
	if !strings.Contains(msg, "overwrite") {
		t.Errorf("an existing file: %s", msg)
	}
	if got, _ := os.ReadFile(dest); string(got) != string(want) {
		t.Fatal("an existing file was changed without overwrite")
	}
	e.ok("export_tavern_card", jsonArg(t, map[string]any{"roleId": roleID, "path": dest, "overwrite": true}))
	if got, _ := os.ReadFile(dest); !json.Valid(got) {
		t.Fatal("overwrite did not replace the file")
	}
	if ents, _ := os.ReadDir(allowed); len(ents) != 1 {
		t.Errorf("temporary files left: %d entries", len(ents))
	}

	if err := os.WriteFile(filepath.Join(outside, "there.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, p := range []string{filepath.Join(outside, "there.json"), filepath.Join(outside, "absent.json"), filepath.Join(outside, "no", "such", "dir.json")} {
		env, msg := e.fail("export_tavern_card", jsonArg(t, map[string]any{"roleId": roleID, "path": p, "overwrite": true}))
		if env["error"] != codePathNotAllowed {
			t.Fatalf("%s: %v", p, env)
		}
		msgs = append(msgs, strings.ReplaceAll(msg, p, "P"))
	}
	if msgs[0] != msgs[1] || msgs[1] != msgs[2] {
		t.Errorf("outside the roots, the messages differ by what is there:\n%s", strings.Join(msgs, "\n"))
	}
	if got, _ := os.ReadFile(filepath.Join(outside, "there.json")); string(got) != "{}" {
		t.Error("a file outside the roots was changed")
	}

	http := newEnv(t, Options{})
	role := http.ok("create_card", `{"roleName":"R"}`)["roleId"]
	env, _ := http.fail("export_tavern_card", jsonArg(t, map[string]any{"roleId": role, "path": dest}))
	if env["error"] != codePathNotAllowed {
		t.Errorf("over HTTP: %v", env)
	}
}

// TestExportLinkNewestProtocol: under 2026-07-28 the link and its read work the same, and a
// refused read is that revision's "resource not found" (-32602).
func TestExportLinkNewestProtocol(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{modern: true, opts: Options{ResultBudget: 200}})
	imp := importCard(t, e, bigBook(40), nil)
	link := linkOf(t, e, "export_tavern_card", e.call("export_tavern_card", jsonArg(t, map[string]any{"roleId": imp["roleId"]})))
	if got, err := readExport(t, e, str(link, "uri")); err != nil || !json.Valid(got) {
		t.Fatalf("resources/read: %v", err)
	}
	_, err := readExport(t, e, "export://0123456789abcdef0123456789abcdef")
	if !errors.Is(err, mcp.ErrInvalidParams) || !strings.Contains(err.Error(), errNoExport.Error()) {
		t.Fatalf("got %v, want invalid params (-32602) with the refusal", err)
	}
}
