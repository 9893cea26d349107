package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	_ "image/png"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cardwriter/cardwriter-mcp/auth/authtest"
	"github.com/cardwriter/cardwriter-mcp/internal/aside"
	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
	"github.com/cardwriter/cardwriter-mcp/internal/tavern/taverntest"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// tavernEnvConfig configures newTavernEnv.
type tavernEnvConfig struct {
	opts   Options
	svc    *sandbox.Service                                    // a sandbox shared with another env; nil makes one
	wrap   func(http.RoundTripper) http.RoundTripper           // wraps the transport to the sandbox
	roots  []string                                            // folders the client declares as roots; nil: no roots capability
	rootsH func(context.Context) (*mcp.ListRootsResult, error) // replaces the roots answer
	modern bool                                                // speak MCP 2026-07-28 (multi round-trip requests)
	proto  string                                              // initialize with this protocol version instead
	token  string                                              // the card service token of the server's client; "": the demo user's
	client []upstream.Option                                   // more options of the card service client (they win)
	elicit client.ElicitationHandler                           // answers elicitation/create; nil: no elicitation capability
	tokens upstream.TokenSource                                // the card service client's tokens; nil: the sandbox's demo token
	apps   bool                                                // the client declares the MCP Apps extension
	caps   *mcp.ClientCapabilities                             // the client's declared capabilities, when set
}

// rootsHandler answers roots/list with fixed folders.
type rootsHandler struct {
	roots []string
	fn    func(context.Context) (*mcp.ListRootsResult, error)
	asked atomic.Int64
}

func (h *rootsHandler) ListRoots(ctx context.Context, _ mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	h.asked.Add(1)
	if h.fn != nil {
		return h.fn(ctx)
	}
	res := &mcp.ListRootsResult{Roots: []mcp.Root{}}
	for _, r := range h.roots {
		res.Roots = append(res.Roots, mcp.Root{URI: "file://" + filepath.ToSlash(r), Name: filepath.Base(r)})
	}
	return res, nil
}

// newTavernEnv starts a sandbox (checking its own responses against the contract), an MCP server
// over it and an initialized in-process client, with what the tavern tests need besides: a shared
// sandbox, a transport wrapper (to inject failures), client roots and the newest protocol.
func newTavernEnv(t *testing.T, cfg tavernEnvConfig) (*env, *rootsHandler) {
	t.Helper()
	clk := authtest.NewClock(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	svc := cfg.svc
	if svc == nil {
		var err error
		svc, err = sandbox.New(sandbox.Options{CheckResponses: true, DemoToken: demoToken, Clock: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
	}
	var rt http.RoundTripper = svc.RoundTripper()
	if cfg.wrap != nil {
		rt = cfg.wrap(rt)
	}
	ct := &countingTransport{next: rt}
	var ts upstream.TokenSource = upstream.StaticToken(svc.DemoToken())
	switch {
	case cfg.tokens != nil:
		ts = cfg.tokens
	case cfg.token != "":
		ts = upstream.StaticToken(cfg.token)
	}
	up, err := upstream.New("http://sandbox.localhost", ts,
		append([]upstream.Option{upstream.WithTransport(ct), upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 1})}, cfg.client...)...)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(up, cfg.opts)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, svc: svc, clock: clk, requests: ct, srv: srv, tools: map[string]Tool{}}
	for _, tool := range All() {
		e.tools[tool.Name] = tool
	}
	var rh *rootsHandler
	var copts []client.ClientOption
	if cfg.roots != nil || cfg.rootsH != nil {
		rh = &rootsHandler{roots: cfg.roots, fn: cfg.rootsH}
		copts = append(copts, client.WithRootsHandler(rh))
	}
	if cfg.elicit != nil {
		copts = append(copts, client.WithElicitationHandler(cfg.elicit))
	}
	if cfg.caps != nil {
		copts = append(copts, client.WithClientCapabilities(*cfg.caps))
	}
	c, err := client.NewInProcessClientWithOptions(srv, copts...)
	if err != nil {
		t.Fatal(err)
	}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.notifications = append(e.notifications, n)
	})
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	if cfg.modern {
		init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	}
	if cfg.proto != "" {
		init.Params.ProtocolVersion = cfg.proto
	}
	init.Params.ClientInfo = mcp.Implementation{Name: "tools-test", Version: "1"}
	if cfg.apps {
		init.Params.Capabilities.Extensions = appsCapability()
	}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	e.client = c
	return e, rh
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// importCard imports a file through import_tavern_card and returns the result.
func importCard(t *testing.T, e *env, file []byte, extra map[string]any) map[string]any {
	t.Helper()
	args := map[string]any{"source": map[string]any{"dataBase64": b64(file)}}
	for k, v := range extra {
		args[k] = v
	}
	return e.ok("import_tavern_card", jsonArg(t, args))
}

// exportJSON exports a card as V3 JSON and returns the file (the result's text) and the result.
func exportJSON(t *testing.T, e *env, roleID string) ([]byte, map[string]any) {
	t.Helper()
	res := e.call("export_tavern_card", jsonArg(t, map[string]any{"roleId": roleID, "format": "json"}))
	if res.IsError {
		t.Fatalf("export_tavern_card: %s", text(res))
	}
	sc := structured(t, res).(map[string]any)
	if err := e.tools["export_tavern_card"].output.Validate(sc); err != nil {
		t.Fatalf("export_tavern_card: structuredContent fails the output schema: %v", err)
	}
	if len(res.Content) != 2 {
		t.Fatalf("export_tavern_card json: %d contents, want the summary and the file", len(res.Content))
	}
	file := []byte(res.Content[1].(mcp.TextContent).Text)
	var fromFile, fromSC any
	if err := json.Unmarshal(file, &fromFile); err != nil {
		t.Fatalf("the exported text is not JSON: %v", err)
	}
	raw, _ := json.Marshal(sc["card"])
	_ = json.Unmarshal(raw, &fromSC)
	diffField(t, "structuredContent.card", fromFile, fromSC)
	return file, sc
}

// exportFile exports a card as a PNG or CHARX and returns the file (structuredContent.dataBase64,
// the same as the image or resource content) and the result.
func exportFile(t *testing.T, e *env, roleID, format string) ([]byte, map[string]any) {
	t.Helper()
	res := e.call("export_tavern_card", jsonArg(t, map[string]any{"roleId": roleID, "format": format}))
	if res.IsError {
		t.Fatalf("export_tavern_card %s: %s", format, text(res))
	}
	sc := structured(t, res).(map[string]any)
	if err := e.tools["export_tavern_card"].output.Validate(sc); err != nil {
		t.Fatalf("export_tavern_card: structuredContent fails the output schema: %v", err)
	}
	if len(res.Content) != 2 {
		t.Fatalf("export_tavern_card %s: %d contents, want the summary and the file", format, len(res.Content))
	}
	var inContent string
	switch c := res.Content[1].(type) {
	case mcp.ImageContent:
		inContent = c.Data
	case mcp.EmbeddedResource:
		if blob, ok := c.Resource.(mcp.BlobResourceContents); ok {
			inContent = blob.Blob
		}
	}
	if inContent == "" || inContent != sc["dataBase64"] {
		t.Fatalf("export_tavern_card %s: the content and structuredContent.dataBase64 differ", format)
	}
	data, err := base64.StdEncoding.DecodeString(inContent)
	if err != nil {
		t.Fatal(err)
	}
	return data, sc
}

// exportPNG exports a card as PNG and returns the file (from the image content) and the result.
func exportPNG(t *testing.T, e *env, roleID string) ([]byte, map[string]any) {
	t.Helper()
	res := e.call("export_tavern_card", jsonArg(t, map[string]any{"roleId": roleID, "format": "png"}))
	if res.IsError {
		t.Fatalf("export_tavern_card png: %s", text(res))
	}
	sc := structured(t, res).(map[string]any)
	if err := e.tools["export_tavern_card"].output.Validate(sc); err != nil {
		t.Fatalf("export_tavern_card: structuredContent fails the output schema: %v", err)
	}
	if len(res.Content) != 2 {
		t.Fatalf("export_tavern_card png: %d contents, want the summary and the image", len(res.Content))
	}
	ic, ok := res.Content[1].(mcp.ImageContent)
	if !ok || ic.MIMEType != "image/png" {
		t.Fatalf("export_tavern_card png: content %#v is not a PNG image", res.Content[1])
	}
	if ic.Data != sc["dataBase64"] || sc["mimeType"] != "image/png" {
		t.Error("the image content and structuredContent.dataBase64 differ")
	}
	data, err := base64.StdEncoding.DecodeString(ic.Data)
	if err != nil {
		t.Fatal(err)
	}
	return data, sc
}

// TestTavernRoundTrip imports every fixture card into the sandbox and exports it again, as JSON
// and as PNG: every field survives, checked field by field, the JSON export is the very file a
// direct conversion gives, the PNG decodes as an image, and it re-imports to the same card.
func TestTavernRoundTrip(t *testing.T) {
	t.Parallel()
	for _, fx := range cardFixtures(t) {
		t.Run(fx.name, func(t *testing.T) {
			t.Parallel()
			e, _ := newTavernEnv(t, tavernEnvConfig{})
			want, f, err := tavern.Read(fx.file)
			if err != nil {
				t.Fatal(err)
			}
			if f.String() != fx.format {
				t.Fatalf("fixture reads as %s, want %s", f, fx.format)
			}
			imp := importCard(t, e, fx.file, nil)
			roleID := imp["roleId"].(string)
			src := imp["source"].(map[string]any)
			if got := (tavern.Format{Container: src["container"].(string), Spec: src["spec"].(string), Chunk: str(src, "chunk")}); got != f {
				t.Errorf("source = %v, want %v", got, f)
			}
			if want.Book != nil {
				if imp["worldbookId"] == nil || imp["entryCount"] != json.Number(fmt.Sprint(len(want.Book.Entries))) {
					t.Errorf("import: worldbook %v, %v entries; want %d", imp["worldbookId"], imp["entryCount"], len(want.Book.Entries))
				}
			}
			if (imp["avatarImageId"] != nil) != fx.withAvatar {
				t.Errorf("avatarImageId = %v, want one: %v", imp["avatarImageId"], fx.withAvatar)
			}

			// What the service holds, seen through the other tools.
			card := e.ok("get_card", jsonArg(t, map[string]any{"roleId": roleID}))
			if card["roleName"] != want.Name || card["roleWelcome"] != want.Welcome || card["roleDesc"] != want.Description {
				t.Errorf("get_card: %v", card)
			}
			if got := stringsOf(list(card, "welcomeAlternates")); !slices.Equal(got, want.Alternates) && len(got)+len(want.Alternates) > 0 {
				t.Errorf("welcomeAlternates = %q, want %q (order kept)", got, want.Alternates)
			}

			// A JSON or PNG file carries no CHARX member: the main icon becomes ccdefault:.
			orig, flat := want, *want
			if dropped := flat.DetachEmbedded(); len(dropped) != 0 {
				t.Fatalf("the fixture has assets besides the icon: %v", dropped)
			}
			want = &flat
			file, sc := exportJSON(t, e, roleID)
			got, gf, err := tavern.Read(file)
			if err != nil {
				t.Fatalf("the exported JSON does not read: %v", err)
			}
			if gf.String() != "json/chara_card_v3" {
				t.Errorf("exported format %s", gf)
			}
			compareCards(t, want, got, false)
			direct, err := tavern.WriteV3JSON(want)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(direct, file) {
				t.Errorf("the export differs from the file converted directly:\n%s\n---\n%s", direct, file)
			}
			if len(imp["keptAside"].([]any)) > 0 && len(sc["keptAsideRestored"].([]any)) == 0 {
				t.Errorf("keptAside %v at import, nothing restored at export", imp["keptAside"])
			}

			pngFile, psc := exportPNG(t, e, roleID)
			img, kind, err := image.Decode(bytes.NewReader(pngFile))
			if err != nil || kind != "png" {
				t.Fatalf("the exported PNG does not decode as an image: %v (%s)", err, kind)
			}
			wantAvatar := map[bool]string{true: "image", false: "placeholder"}[fx.withAvatar]
			if psc["avatar"] != wantAvatar {
				t.Errorf("avatar = %v, want %s", psc["avatar"], wantAvatar)
			}
			if fx.withAvatar && (img.Bounds().Dx() != 24 || img.Bounds().Dy() != 32) {
				t.Errorf("exported image is %v, want the card's 24x32 avatar", img.Bounds())
			}
			gotPNG, pf, err := tavern.Read(pngFile)
			if err != nil {
				t.Fatalf("the exported PNG does not read as a card: %v", err)
			}
			if pf.String() != "png/chara_card_v3 (ccv3 chunk)" {
				t.Errorf("exported PNG format %s", pf)
			}
			compareCards(t, want, gotPNG, fx.withAvatar)

			// A CHARX export holds card.json and the icon, and reads back as the card imported.
			zipped, csc := exportFile(t, e, roleID, "charx")
			gotCHARX, cf, err := tavern.Read(zipped)
			if err != nil || cf.Container != "charx" {
				t.Fatalf("the exported CHARX does not read: %v (%s)", err, cf)
			}
			if csc["avatar"] != map[bool]string{true: "image", false: "none"}[fx.withAvatar] || len(list(csc, "droppedAssets")) != 0 {
				t.Errorf("charx export: avatar %v, dropped %v", csc["avatar"], csc["droppedAssets"])
			}
			if f.Container == "charx" {
				compareCards(t, orig, gotCHARX, true)
			} else {
				// The avatar is the CHARX's main icon: data.assets names it (as ccdefault:,
				// once detached, where the card had it so, else as a new entry).
				flatC, wantC := *gotCHARX, *want
				flatC.DetachEmbedded()
				if data, _ := wantC.Extensions["data"].(map[string]any); fx.withAvatar && data["assets"] == nil {
					wantC.Extensions = maps.Clone(wantC.Extensions)
					data = maps.Clone(data)
					if data == nil {
						data = map[string]any{}
					}
					data["assets"] = []any{map[string]any{"type": "icon", "uri": "ccdefault:", "name": "main", "ext": "png"}}
					wantC.Extensions["data"] = data
				}
				compareCards(t, &wantC, &flatC, fx.withAvatar)
			}

			// The exported PNG re-imports to the same card.
			again := importCard(t, e, pngFile, nil)
			if again["roleId"] == roleID {
				t.Fatal("a different file gave the same card")
			}
			file2, _ := exportJSON(t, e, again["roleId"].(string))
			if !bytes.Equal(file, file2) {
				t.Errorf("the re-imported PNG exports differently:\n%s\n---\n%s", file, file2)
			}
		})
	}
}

// TestTavernWorldbookRoundTrip imports lorebooks (lorebook_v3, World Info, a bare character_book,
// a card file's book) with import_tavern_worldbook, bound to a card, and exports the card: its
// character_book is the lorebook, field by field.
func TestTavernWorldbookRoundTrip(t *testing.T) {
	t.Parallel()
	sloppyBook := taverntest.SloppyCard()["data"].(map[string]any)["character_book"]
	tests := []struct {
		name, wantName string
		file           []byte
		kept           string // one of keptAside
	}{
		{"lorebook_v3", "Harbour lore", mustJSON(t, taverntest.Lorebook()), "lorebook.scan_depth"},
		{"World Info", "Shoals", []byte(taverntest.WorldInfo()), "lorebook.entries[].extensions.characterFilter"},
		{"character_book without a name", defaultBookName, mustJSON(t, sloppyBook), "lorebook.entries[].extensions.selectiveLogic"},
		{"card PNG", "Gull lore", taverntest.InsertChunks(t, taverntest.Image(t, 4, 4), taverntest.BeforeIEND, taverntest.ZTXtChunk("chara", b64(mustJSON(t, v2CardWithShip())))), "lorebook.entries[].use_regex"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, _ := newTavernEnv(t, tavernEnvConfig{})
			want, err := tavern.ReadBook(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			roleID := e.ok("create_card", `{"roleName":"Keeper"}`)["roleId"].(string)
			res := e.ok("import_tavern_worldbook", jsonArg(t, map[string]any{"source": map[string]any{"dataBase64": b64(tt.file)}, "roleId": roleID}))
			if res["created"] != true || res["bound"] != true || res["format"] != "tavern" || res["name"] != tt.wantName ||
				res["entryCount"] != json.Number(fmt.Sprint(len(want.Entries))) || len(res["createdEntryIds"].([]any)) != len(want.Entries) {
				t.Errorf("import_tavern_worldbook: %v", res)
			}
			if !slices.Contains(stringsOf(list(res, "keptAside")), tt.kept) {
				t.Errorf("keptAside %v lacks %s", res["keptAside"], tt.kept)
			}
			file, sc := exportJSON(t, e, roleID)
			got, _, err := tavern.Read(file)
			if err != nil {
				t.Fatal(err)
			}
			compareBooks(t, "Book", want, got.Book)
			if ws := sc["worldbooks"].([]any); len(ws) != 1 || ws[0].(map[string]any)["worldbookId"] != res["worldbookId"] {
				t.Errorf("worldbooks: %v", ws)
			}
		})
	}
}

// TestTavernWorldbookIntoNativeWorldbook adds a World Info file's entries to an existing native
// worldbook: their tavern matchOptions are kept aside (the worldbook holds null) and come back on export.
func TestTavernWorldbookIntoNativeWorldbook(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{})
	roleID := e.ok("create_card", `{"roleName":"Keeper"}`)["roleId"].(string)
	wbID := e.ok("create_worldbook", `{"name":"Native lore"}`)["worldbookId"].(string)
	e.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "entries": []any{
		map[string]any{"op": "create", "name": "Old", "content": "Already here.", "keywords": []string{"old"}}}}))
	file := []byte(taverntest.WorldInfo())
	res := e.ok("import_tavern_worldbook", jsonArg(t, map[string]any{"source": map[string]any{"json": string(file)}, "worldbookId": wbID, "roleId": roleID}))
	if res["created"] != false || res["format"] != "native" || !slices.Contains(stringsOf(list(res, "keptAside")), "lorebook.entries[].matchOptions") ||
		len(list(res, "notes")) == 0 {
		t.Errorf("import_tavern_worldbook: %v", res)
	}
	listed := e.ok("list_worldbook_entries", jsonArg(t, map[string]any{"worldbookId": wbID}))
	for _, en := range listed["entries"].([]any) {
		if en.(map[string]any)["matchOptions"] != nil {
			t.Errorf("a native worldbook's entry has matchOptions: %v", en)
		}
	}
	exported, _ := exportJSON(t, e, roleID)
	got, _, err := tavern.Read(exported)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := tavern.ReadBook(file)
	if len(got.Book.Entries) != len(want.Entries)+1 {
		t.Fatalf("%d entries exported, want %d", len(got.Book.Entries), len(want.Entries)+1)
	}
	compareBooks(t, "Book", &tavern.Book{Name: "Native lore", Entries: want.Entries}, &tavern.Book{Name: got.Book.Name, Entries: got.Book.Entries[1:]})
	if old := got.Book.Entries[0]; old.Name != "Old" || old.MatchOptions == nil || *old.MatchOptions != (tavern.MatchOptions{}) {
		t.Errorf("the native entry exports as %+v, want the native rules' equivalent", old)
	}
}

// TestTavernImportIdempotentAndProgress: the same file twice is the same card and worldbook,
// nothing is created twice, and progress is reported after each step.
func TestTavernImportIdempotentAndProgress(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{})
	file := taverntest.InsertChunks(t, taverntest.Image(t, 8, 8), taverntest.BeforeIEND, taverntest.TextChunk("chara", b64(mustJSON(t, v2CardWithShip()))))
	res := e.callMeta("import_tavern_card", jsonArg(t, map[string]any{"source": map[string]any{"dataBase64": b64(file)}}), &mcp.Meta{ProgressToken: "imp-1"})
	if res.IsError {
		t.Fatal(text(res))
	}
	first := structured(t, res).(map[string]any)
	// create, opening lines, avatar, profile, text, worldbook, one entry write: each reported
	// as it starts, with the steps done so far.
	const steps = 7
	waitFor(t, "progress notifications", func() bool { return len(e.notificationsOf("notifications/progress")) == steps })
	for i, n := range e.notificationsOf("notifications/progress") {
		p := n.Params.AdditionalFields
		if fmt.Sprint(p["progressToken"]) != "imp-1" || fmt.Sprint(p["progress"]) != fmt.Sprint(i) ||
			fmt.Sprint(p["total"]) != fmt.Sprint(steps) || !strings.HasPrefix(fmt.Sprint(p["message"]), fmt.Sprintf("Step %d of %d: ", i+1, steps)) {
			t.Errorf("progress %d: %v", i+1, p)
		}
	}
	second := importCard(t, e, file, nil)
	for _, k := range []string{"roleId", "worldbookId", "avatarImageId"} {
		if first[k] != second[k] {
			t.Errorf("%s: %v then %v", k, first[k], second[k])
		}
	}
	if second["resumed"] != true {
		t.Errorf("the second import does not say it found the first: %v", second)
	}
	if n := len(e.ok("list_worldbooks", `{}`)["list"].([]any)); n != 1 {
		t.Errorf("%d worldbooks after importing one file twice", n)
	}
	if n := len(e.ok("list_card_assets", jsonArg(t, map[string]any{"roleId": first["roleId"]}))["images"].([]any)); n != 1 {
		t.Errorf("%d images after importing one file twice", n)
	}
	wb := e.ok("get_worldbook", jsonArg(t, map[string]any{"worldbookId": first["worldbookId"]}))
	if wb["entryCount"] != json.Number("3") || len(wb["boundRoleIds"].([]any)) != 1 {
		t.Errorf("worldbook after importing twice: %v", wb)
	}
	// Another clientKey makes a separate copy.
	third := importCard(t, e, file, map[string]any{"clientKey": "copy-2"})
	if third["roleId"] == first["roleId"] {
		t.Error("another clientKey gave the same card")
	}
}

// failingTransport fails writeWorldbookDocument calls as told: before the service sees them
// (failBefore) or after it applied them (failAfter, an answer lost on the way back).
type failingTransport struct {
	next                  http.RoundTripper
	mu                    sync.Mutex
	failBefore, failAfter []int // 1-based numbers of the document writes to fail
	writes                int
}

func (f *failingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/document") || !strings.Contains(r.URL.Path, "/worldbook/") {
		return f.next.RoundTrip(r)
	}
	f.mu.Lock()
	f.writes++
	n := f.writes
	before, after := slices.Contains(f.failBefore, n), slices.Contains(f.failAfter, n)
	f.mu.Unlock()
	if before {
		body := `{"error":"unavailable","message":"The card service is briefly unavailable.","retryable":true}`
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
	}
	resp, err := f.next.RoundTrip(r)
	if after && err == nil {
		resp.Body.Close()
		return nil, io.ErrUnexpectedEOF
	}
	return resp, err
}

// bigBook is a V3 card whose lorebook has n entries, so that it is written in several calls.
func bigBook(n int) []byte {
	entries := make([]any, n)
	for i := range entries {
		entries[i] = map[string]any{"keys": []any{fmt.Sprintf("key%d", i)}, "content": fmt.Sprintf("Entry %d.", i),
			"name": fmt.Sprintf("E%04d", i), "insertion_order": n - i, "enabled": true, "extensions": map[string]any{"i": i}}
	}
	b, _ := json.Marshal(map[string]any{"spec": "chara_card_v3", "spec_version": "3.0", "data": map[string]any{
		"name": "Big", "first_mes": "Hi.", "character_book": map[string]any{"name": "Big book", "entries": entries}}})
	return b
}

// TestTavernImportFailureMidway: a step that fails after the card exists is an isError naming the
// card and worldbook made so far and the failed step; the same import again finishes the work
// without creating anything twice, whether the failed write never reached the service or was
// applied and its answer lost.
func TestTavernImportFailureMidway(t *testing.T) {
	t.Parallel()
	const entries = 1203 // three writes of at most 500
	tests := []struct {
		name                  string
		failBefore, failAfter []int
	}{
		{"first write refused", []int{1}, nil},
		{"second write refused", []int{2}, nil},
		{"third write applied, answer lost", nil, []int{3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ft := &failingTransport{failBefore: tt.failBefore, failAfter: tt.failAfter}
			e, _ := newTavernEnv(t, tavernEnvConfig{opts: Options{ResultBudget: inlineBudget},
				wrap: func(rt http.RoundTripper) http.RoundTripper { ft.next = rt; return ft }})
			file := bigBook(entries)
			env, msg := e.fail("import_tavern_card", jsonArg(t, map[string]any{"source": map[string]any{"dataBase64": b64(file)}}))
			detail, _ := env["detail"].(map[string]any)
			roleID, _ := detail["roleId"].(string)
			wbID, _ := detail["worldbookId"].(string)
			if roleID == "" || wbID == "" || !strings.Contains(msg, roleID) || !strings.Contains(msg, wbID) ||
				!strings.Contains(fmt.Sprint(detail["failedStep"]), "write worldbook entries") {
				t.Fatalf("the failure does not name what was created and what failed: %v\n%s", env, msg)
			}
			done := e.ok("import_tavern_card", jsonArg(t, map[string]any{"source": map[string]any{"dataBase64": b64(file)}}))
			if done["roleId"] != roleID || done["worldbookId"] != wbID || done["resumed"] != true || done["entryCount"] != json.Number(fmt.Sprint(entries)) {
				t.Errorf("the second import: %v", done)
			}
			if n := len(e.ok("list_worldbooks", `{}`)["list"].([]any)); n != 1 {
				t.Errorf("%d worldbooks", n)
			}
			wb := e.ok("get_worldbook", jsonArg(t, map[string]any{"worldbookId": wbID}))
			if wb["entryCount"] != json.Number(fmt.Sprint(entries)) {
				t.Errorf("entryCount = %v, want %d (no entry written twice)", wb["entryCount"], entries)
			}
			want, _, _ := tavern.Read(file)
			exported, _ := exportJSON(t, e, roleID)
			got, _, err := tavern.Read(exported)
			if err != nil {
				t.Fatal(err)
			}
			compareCards(t, want, got, false)
		})
	}
}

// TestTavernTrialMode imports a card as a trial: the entries go in with matchOptions stripped
// (trial worldbooks are native), which are kept aside with the rest.
func TestTavernTrialMode(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{})
	env, msg := e.fail("import_tavern_card", jsonArg(t, map[string]any{"source": map[string]any{"json": v2CardWithShip()}, "mode": "trial"}))
	if env["error"] != "invalid_arguments" || !strings.Contains(msg, "clientKey") {
		t.Errorf("trial without clientKey: %v", env)
	}
	file := taverntest.InsertChunks(t, taverntest.Image(t, 4, 4), taverntest.BeforeIEND, taverntest.TextChunk("ccv3", b64(mustJSON(t, taverntest.V3Card()))))
	res := importCard(t, e, file, map[string]any{"mode": "trial", "clientKey": "ryuo-try"})
	if res["mode"] != "trial" || res["clientKey"] != "ryuo-try" || res["entryCount"] != json.Number("3") || res["worldbookId"] != nil {
		t.Errorf("import trial: %v", res)
	}
	trial, _ := res["trial"].(map[string]any)
	if trial["created"] != true || trial["roleId"] != res["roleId"] {
		t.Errorf("trial summary: %v", trial)
	}
	kept := stringsOf(list(res, "keptAside"))
	for _, want := range []string{"character_book.entries[].matchOptions", "data.tags", "data.nickname", "character_book.scan_depth"} {
		if !slices.Contains(kept, want) {
			t.Errorf("keptAside %v lacks %s", kept, want)
		}
	}
	if notes := strings.Join(stringsOf(list(res, "notes")), " "); !strings.Contains(notes, "avatar") || !strings.Contains(notes, "native") {
		t.Errorf("notes: %v", notes)
	}
	got := e.ok("get_trial_card", `{"clientKey":"ryuo-try"}`)
	if got["worldbook"].(map[string]any)["entries"] != json.Number("3") {
		t.Errorf("get_trial_card: %v", got)
	}
	// The same file again repeats the import: the trial is updated, nothing more is made.
	res = importCard(t, e, file, map[string]any{"mode": "trial", "clientKey": "ryuo-try"})
	if res["trial"].(map[string]any)["created"] != false || res["entryCount"] != json.Number("3") {
		t.Errorf("re-import trial: %v", res)
	}
	// Another file under the same key would replace a trial it did not make: refused, and the
	// trial is left as it was.
	env, msg = e.fail("import_tavern_card", jsonArg(t, map[string]any{"source": map[string]any{"dataBase64": b64(mustJSON(t, taverntest.V1Card()))},
		"mode": "trial", "clientKey": "ryuo-try"}))
	if env["error"] != "conflict" || !strings.Contains(msg, "delete_trial_card") {
		t.Errorf("another file under the same key: %v", env)
	}
	if got := e.ok("get_trial_card", `{"clientKey":"ryuo-try"}`); got["worldbook"].(map[string]any)["entries"] != json.Number("3") {
		t.Errorf("the refused import changed the trial: %v", got)
	}
	// So would a trial made by upsert_trial_card.
	e.ok("upsert_trial_card", `{"clientKey":"by-hand","card":{"roleName":"By hand"}}`)
	if env, _ := e.fail("import_tavern_card", jsonArg(t, map[string]any{"source": map[string]any{"dataBase64": b64(file)},
		"mode": "trial", "clientKey": "by-hand"})); env["error"] != "conflict" {
		t.Errorf("import over a hand-made trial: %v", env)
	}
	if n := len(e.ok("list_trial_cards", `{}`)["list"].([]any)); n != 2 {
		t.Errorf("%d trial cards", n)
	}
	big := bigBook(501)
	if env, _ := e.fail("import_tavern_card", jsonArg(t, map[string]any{"source": map[string]any{"dataBase64": b64(big)}, "mode": "trial", "clientKey": "big"})); env["error"] != codeInvalidFile {
		t.Errorf("a trial of 501 entries: %v", env)
	}
}

// TestTavernSourceArguments: exactly one of path, dataBase64 and json; unreadable files.
func TestTavernSourceArguments(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{})
	tests := []struct {
		name, tool, args, code, want string
	}{
		{"none", "import_tavern_card", `{"source":{}}`, "invalid_arguments", "none was given"},
		{"two", "import_tavern_card", `{"source":{"dataBase64":"e30=","json":{}}}`, "invalid_arguments", "not source.dataBase64 and source.json"},
		{"bad base64", "import_tavern_card", `{"source":{"dataBase64":"*&^"}}`, "invalid_arguments", "base64"},
		{"not a card", "import_tavern_card", `{"source":{"json":{"hello":"world"}}}`, codeInvalidFile, "not a character card"},
		{"a lorebook is no card", "import_tavern_card", jsonArg(t, map[string]any{"source": map[string]any{"json": taverntest.Lorebook()}}), codeInvalidFile, "lorebook"},
		{"no name", "import_tavern_card", `{"source":{"json":{"spec":"chara_card_v2","data":{"name":"","first_mes":"x"}}}}`, codeInvalidFile, "no name"},
		{"not a lorebook", "import_tavern_worldbook", `{"source":{"json":"{\"x\":1}"}}`, codeInvalidFile, "not a lorebook"},
		{"worldbookId and name", "import_tavern_worldbook", `{"source":{"json":{}},"worldbookId":"wb_1","name":"x"}`, "invalid_arguments", "not both"},
		{"path over HTTP", "import_tavern_card", `{"source":{"path":"/etc/passwd"}}`, codePathNotAllowed, "HTTP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.requests.n.Load()
			env, msg := e.fail(tt.tool, tt.args)
			if env["error"] != tt.code || !strings.Contains(msg, tt.want) {
				t.Errorf("%v: %s", env, msg)
			}
			if n := e.requests.n.Load() - before; n != 0 {
				t.Errorf("%d requests reached the card service", n)
			}
		})
	}
}

// TestTavernPathRules: source.path is read only over stdio, inside the client's roots or an
// allowed folder, symlinks resolved; everything else is refused before any request.
func TestTavernPathRules(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	rootDir := filepath.Join(base, "root")
	allowDir := filepath.Join(base, "allowed")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{rootDir, allowDir, outside, filepath.Join(rootDir, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	card := mustJSON(t, taverntest.V1Card())
	write := func(p string, data []byte) string {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	inRoot := write(filepath.Join(rootDir, "sub", "mira.json"), card)
	inAllowed := write(filepath.Join(allowDir, "mira.json"), card)
	secret := write(filepath.Join(outside, "secret.json"), card)
	escape := filepath.Join(rootDir, "escape.json")
	if err := os.Symlink(secret, escape); err != nil {
		t.Fatal(err)
	}
	dirLink := filepath.Join(rootDir, "linked")
	if err := os.Symlink(outside, dirLink); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(rootDir, "big.json")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(tavern.MaxInputSize + 1)
	f.Close()

	stdio := Options{LocalFiles: &LocalFiles{AllowDirs: []string{allowDir}}}
	tests := []struct {
		name   string
		cfg    tavernEnvConfig
		path   string
		code   string // "" for success
		want   string
		asks   bool // the client is asked for its roots
		worldb bool // through import_tavern_worldbook
	}{
		{name: "HTTP refuses path", cfg: tavernEnvConfig{roots: []string{rootDir}}, path: inRoot, code: codePathNotAllowed, want: "HTTP"},
		{name: "inside a root", cfg: tavernEnvConfig{opts: stdio, roots: []string{rootDir}}, path: inRoot, asks: true},
		{name: "inside a root, newest protocol", cfg: tavernEnvConfig{opts: stdio, roots: []string{rootDir}, modern: true}, path: inRoot, asks: true},
		{name: "inside an allowed folder, no roots", cfg: tavernEnvConfig{opts: stdio}, path: inAllowed},
		{name: "as a file URI", cfg: tavernEnvConfig{opts: stdio}, path: "file://" + inAllowed},
		{name: "lorebook inside a root", cfg: tavernEnvConfig{opts: stdio, roots: []string{rootDir}}, path: inRoot, asks: true, worldb: true, code: codeInvalidFile},
		{name: "outside the roots", cfg: tavernEnvConfig{opts: stdio, roots: []string{rootDir}}, path: secret, code: codePathNotAllowed, want: "outside", asks: true},
		{name: "outside the roots, newest protocol", cfg: tavernEnvConfig{opts: stdio, roots: []string{rootDir}, modern: true}, path: secret, code: codePathNotAllowed, want: "outside", asks: true},
		{name: "symlink out of a root", cfg: tavernEnvConfig{opts: stdio, roots: []string{rootDir}}, path: escape, code: codePathNotAllowed, want: "symbolic link", asks: true},
		{name: "linked folder out of a root", cfg: tavernEnvConfig{opts: stdio, roots: []string{rootDir}}, path: filepath.Join(dirLink, "secret.json"), code: codePathNotAllowed, want: "symbolic link", asks: true},
		{name: "dot-dot out of a root", cfg: tavernEnvConfig{opts: stdio, roots: []string{rootDir}}, path: rootDir + "/sub/../../outside/secret.json", code: codePathNotAllowed, want: "outside", asks: true},
		{name: "the root itself", cfg: tavernEnvConfig{opts: stdio, roots: []string{rootDir}}, path: rootDir, code: codePathNotAllowed, want: "outside", asks: true},
		{name: "relative", cfg: tavernEnvConfig{opts: stdio, roots: []string{rootDir}}, path: "sub/mira.json", code: codePathNotAllowed, want: "absolute"},
		{name: "no roots, no allowed folder", cfg: tavernEnvConfig{opts: Options{LocalFiles: &LocalFiles{}}}, path: inRoot, code: codePathNotAllowed, want: "--allow-dir"},
		{name: "roots/list fails", cfg: tavernEnvConfig{opts: Options{LocalFiles: &LocalFiles{}}, rootsH: func(context.Context) (*mcp.ListRootsResult, error) {
			return nil, fmt.Errorf("no roots here")
		}}, path: inRoot, code: codePathNotAllowed, want: "no folder is open", asks: true},
		{name: "missing file", cfg: tavernEnvConfig{opts: stdio, roots: []string{rootDir}}, path: filepath.Join(rootDir, "nope.json"), code: codePathNotAllowed, want: "no such file", asks: true},
		{name: "over 32 MiB", cfg: tavernEnvConfig{opts: stdio, roots: []string{rootDir}}, path: big, code: "invalid_arguments", want: "32 MiB", asks: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, rh := newTavernEnv(t, tt.cfg)
			tool := "import_tavern_card"
			if tt.worldb {
				tool = "import_tavern_worldbook"
			}
			args := jsonArg(t, map[string]any{"source": map[string]any{"path": tt.path}})
			if tt.code == "" {
				res := e.ok(tool, args)
				if res["roleName"] != "Mira" {
					t.Errorf("imported %v", res)
				}
			} else {
				before := e.requests.n.Load()
				env, msg := e.fail(tool, args)
				if env["error"] != tt.code || !strings.Contains(msg, tt.want) {
					t.Errorf("%v\n%s", env, msg)
				}
				if n := e.requests.n.Load() - before; n != 0 && tt.code != codeInvalidFile {
					t.Errorf("%d requests reached the card service", n)
				}
				if strings.Contains(msg, "secret.json") && tt.code == codePathNotAllowed && !strings.Contains(msg, "outside") {
					t.Errorf("refusal does not say why: %s", msg)
				}
			}
			if rh != nil && (rh.asked.Load() > 0) != tt.asks {
				t.Errorf("roots asked %d times, want asked: %v", rh.asked.Load(), tt.asks)
			}
		})
	}
}

// downAside is a kept-aside store whose writes fail as Redis's do while it is down or failing
// over, until it is back.
type downAside struct {
	AsideStore
	down atomic.Bool
}

func (s *downAside) Put(ctx context.Context, key AsideKey, data []byte) error {
	if s.down.Load() {
		return fmt.Errorf("aside: %w", &store.UnavailableError{Backend: "redis sentinel test", Err: &store.ReplicaWaitError{Want: 1}})
	}
	return s.AsideStore.Put(ctx, key, data)
}

// TestTavernImportStoreUnavailable: an import whose kept-aside data the store cannot take (Redis
// failing over, no replica confirming) is a retryable failure, not an internal error; the same
// import repeated when the store is back finishes it, on the card it made.
func TestTavernImportStoreUnavailable(t *testing.T) {
	t.Parallel()
	st := &downAside{AsideStore: aside.NewMemory()}
	st.down.Store(true)
	e, _ := newTavernEnv(t, tavernEnvConfig{opts: Options{Aside: st}})
	args := jsonArg(t, map[string]any{"source": map[string]any{"dataBase64": b64(mustJSON(t, taverntest.V3Card()))}})
	env, _ := e.fail("import_tavern_card", args)
	if env["error"] != codeUnavailable || env["retryable"] != true || !strings.Contains(env["message"].(string), "store") {
		t.Fatalf("import while the store is down: %v", env)
	}
	st.down.Store(false)
	got := e.ok("import_tavern_card", args)
	if detail, _ := env["detail"].(map[string]any); got["roleId"] != detail["roleId"] {
		t.Errorf("the repeated import made card %v, the first %v", got["roleId"], detail["roleId"])
	}
}

// TestTavernAsideStoreAcrossServers: what one server kept aside in a file store is restored by
// another server over the same directory; a server with a memory store of its own cannot.
func TestTavernAsideStoreAcrossServers(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "aside")
	store := func() AsideStore {
		s, err := aside.NewFile(dir)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, _ := newTavernEnv(t, tavernEnvConfig{opts: Options{Aside: store()}})
	file := mustJSON(t, taverntest.V3Card())
	imp := importCard(t, a, file, nil)
	want, _, _ := tavern.Read(file)

	b, _ := newTavernEnv(t, tavernEnvConfig{svc: a.svc, opts: Options{Aside: store()}})
	exported, sc := exportJSON(t, b, imp["roleId"].(string))
	got, _, err := tavern.Read(exported)
	if err != nil {
		t.Fatal(err)
	}
	compareCards(t, want, got, false)
	if !slices.Equal(stringsOf(list(sc, "keptAsideRestored")), stringsOf(list(imp, "keptAside"))) {
		t.Errorf("keptAsideRestored %v, keptAside %v", sc["keptAsideRestored"], imp["keptAside"])
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) < 2 {
		t.Errorf("%d files in the store, want the card's and the worldbook's", len(ents))
	}

	c, _ := newTavernEnv(t, tavernEnvConfig{svc: a.svc})
	exported, sc = exportJSON(t, c, imp["roleId"].(string))
	got, _, _ = tavern.Read(exported)
	if len(list(sc, "keptAsideRestored")) != 0 || got.Extensions != nil || got.Creator != "" {
		t.Errorf("a server without the record restored something: %v", sc["keptAsideRestored"])
	}
	if got.Name != want.Name || got.Welcome != want.Welcome || len(got.Book.Entries) != len(want.Book.Entries) {
		t.Errorf("what the service holds did not export: %+v", got)
	}
}

// TestTavernExportAuthoredCard exports a card written with the authoring tools (no import, so
// nothing kept aside): every service field maps to its V3 field.
func TestTavernExportAuthoredCard(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{})
	roleID := e.ok("create_card", `{"roleName":"Mira Vale"}`)["roleId"].(string)
	e.ok("set_opening_lines", jsonArg(t, map[string]any{"roleId": roleID, "roleWelcome": "You're late.", "alternates": []string{"B", "A"}, "prologue": []string{"Sorry."}}))
	e.ok("write_card_document", jsonArg(t, map[string]any{"roleId": roleID, "sections": map[string]string{
		"description": "Captain.", "exampleDialogue": "<START>", "creatorNotes": "Notes.", "postHistoryInstructions": "Short."}}))
	e.ok("update_card_profile", jsonArg(t, map[string]any{"roleId": roleID, "roleDesc": "A captain.", "tags": []string{"sci-fi"}}))
	wbID := e.ok("create_worldbook", `{"name":"Sector"}`)["worldbookId"].(string)
	e.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": wbID, "binding": map[string]any{"roleId": roleID}, "entries": []any{
		map[string]any{"op": "create", "name": "Kestrel", "content": "A ship.", "keywords": []string{"Kestrel"}, "secondaryKeywords": []string{"ship"}, "category": "ships", "sortOrder": 3},
	}}))
	file, sc := exportJSON(t, e, roleID)
	var v3 struct {
		Spec string         `json:"spec"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(file, &v3); err != nil {
		t.Fatal(err)
	}
	d := v3.Data
	for k, want := range map[string]any{"name": "Mira Vale", "first_mes": "You're late.", "creator_notes": "A captain.",
		"description": "Captain.", "mes_example": "<START>", "post_history_instructions": "Short."} {
		if d[k] != want {
			t.Errorf("data.%s = %v, want %v", k, d[k], want)
		}
	}
	if fmt.Sprint(d["alternate_greetings"]) != "[B A]" || fmt.Sprint(d["tags"]) != "[sci-fi]" || v3.Spec != "chara_card_v3" {
		t.Errorf("data: %v", d)
	}
	book := d["character_book"].(map[string]any)
	entry := book["entries"].([]any)[0].(map[string]any)
	if book["name"] != "Sector" || fmt.Sprint(entry["keys"]) != "[Kestrel]" || fmt.Sprint(entry["secondary_keys"]) != "[ship]" ||
		entry["insertion_order"] != float64(3) || entry["extensions"].(map[string]any)["cardwriter/category"] != "ships" {
		t.Errorf("character_book: %v", book)
	}
	if len(list(sc, "keptAsideRestored")) != 0 {
		t.Errorf("keptAsideRestored: %v", sc["keptAsideRestored"])
	}
	png, psc := exportPNG(t, e, roleID)
	if psc["avatar"] != "placeholder" || len(list(psc, "notes")) == 0 {
		t.Errorf("png export: %v", psc["avatar"])
	}
	if _, _, err := image.Decode(bytes.NewReader(png)); err != nil {
		t.Errorf("placeholder PNG: %v", err)
	}
	if env, _ := e.fail("export_tavern_card", `{"roleId":"r_missing"}`); env["error"] != "role_not_found" {
		t.Errorf("unknown card: %v", env)
	}
}

// TestTestWorldbookTriggers runs the trigger tester on a stored worldbook of each format and on
// given entries.
func TestTestWorldbookTriggers(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{})
	tavernWB := e.ok("import_tavern_worldbook", jsonArg(t, map[string]any{"source": map[string]any{"json": taverntest.WorldInfo()}}))["worldbookId"].(string)
	nativeWB := e.ok("create_worldbook", `{"name":"Native"}`)["worldbookId"].(string)
	e.ok("write_worldbook_document", jsonArg(t, map[string]any{"worldbookId": nativeWB, "entries": []any{
		map[string]any{"op": "create", "name": "Kraken", "content": "k", "keywords": []string{"kraken"}, "secondaryKeywords": []string{"storm", "squall"}},
		map[string]any{"op": "create", "name": "Regex", "content": "r", "keywords": []string{"/ale|mead/i"}},
	}}))
	type want struct{ fired, notFired []string }
	names := func(l []any) []string {
		var out []string
		for _, r := range l {
			out = append(out, r.(map[string]any)["name"].(string))
		}
		return out
	}
	tests := []struct {
		name string
		args map[string]any
		want want
		wb   string
	}{
		{"tavern worldbook: NOT ALL gate, CJK, disabled, constant", map[string]any{"worldbookId": tavernWB, "text": "A KRAKEN rose in the storm; 龍 watched."},
			want{[]string{"", "Kraken"}, []string{"Dragon (CJK)"}}, tavernWB},
		{"tavern worldbook: NOT ALL satisfied", map[string]any{"worldbookId": tavernWB, "text": "A kraken, and no weather."},
			want{[]string{"", "Kraken"}, []string{"Dragon (CJK)"}}, tavernWB},
		{"native worldbook: AND gate, keys taken literally", map[string]any{"worldbookId": nativeWB, "text": "The KRAKEN and the squall; ale."},
			want{[]string{"Kraken"}, []string{"Regex"}}, nativeWB},
		{"entries, native", map[string]any{"text": "the gate opens", "entries": []any{
			map[string]any{"name": "Gate", "keywords": []string{"Gate"}},
			map[string]any{"name": "Off", "keywords": []string{"gate"}, "isEnabled": false},
			map[string]any{"name": "Whole", "keywords": []string{"gat"}, "matchOptions": map[string]any{"caseSensitive": false, "matchWholeWords": true, "selectiveLogic": 0}},
		}}, want{[]string{"Gate"}, []string{"Off", "Whole"}}, ""},
		{"entries, tavern format: regex keys", map[string]any{"text": "Mead for all!", "format": "tavern", "entries": []any{
			map[string]any{"name": "Regex", "keywords": []string{"/ale|mead/i"}},
		}}, want{[]string{"Regex"}, nil}, ""},
		{"entries from list_worldbook_entries", map[string]any{"text": "kraken squall", "entries": e.ok("list_worldbook_entries",
			jsonArg(t, map[string]any{"worldbookId": nativeWB}))["entries"]}, want{[]string{"Kraken"}, []string{"Regex"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.requests.n.Load()
			out := e.ok("test_worldbook_triggers", jsonArg(t, tt.args))
			if got := names(list(out, "fired")); !slices.Equal(got, tt.want.fired) {
				t.Errorf("fired %v, want %v: %v", got, tt.want.fired, out["fired"])
			}
			if got := names(list(out, "notFired")); !slices.Equal(got, tt.want.notFired) {
				t.Errorf("notFired %v, want %v: %v", got, tt.want.notFired, out["notFired"])
			}
			for _, r := range append(list(out, "fired"), list(out, "notFired")...) {
				if str(r.(map[string]any), "reason") == "" {
					t.Errorf("no reason: %v", r)
				}
			}
			if tt.wb != "" && out["worldbookId"] != tt.wb {
				t.Errorf("worldbookId %v", out["worldbookId"])
			}
			if tt.wb == "" && e.requests.n.Load() != before {
				t.Error("testing given entries reached the card service")
			}
		})
	}
	for _, bad := range []struct{ args, want string }{
		{`{"text":"x"}`, "neither"},
		{jsonArg(t, map[string]any{"text": "x", "worldbookId": nativeWB, "entries": []any{}}), "not both"},
		{jsonArg(t, map[string]any{"text": "x", "worldbookId": nativeWB, "format": "tavern"}), "native"},
		{`{"text":"x","entries":[{"name":"no keywords"}]}`, "keywords"},
	} {
		if env, msg := e.fail("test_worldbook_triggers", bad.args); env["error"] != "invalid_arguments" || !strings.Contains(msg, bad.want) {
			t.Errorf("%s: %v %s", bad.args, env, msg)
		}
	}
}

// TestNamelessWorldInfoTakesItsFileName: a World Info file without a name, read from a path,
// becomes a worldbook named after the file, as SillyTavern names it.
func TestNamelessWorldInfoTakesItsFileName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "Shoals of Ire.json")
	if err := os.WriteFile(file, []byte(`{"entries":{"0":{"uid":0,"key":["kraken"],"content":"A kraken.","comment":"Kraken"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	e, _ := newTavernEnv(t, tavernEnvConfig{opts: Options{LocalFiles: &LocalFiles{AllowDirs: []string{dir}}}})
	res := e.ok("import_tavern_worldbook", jsonArg(t, map[string]any{"source": map[string]any{"path": file}}))
	if res["name"] != "Shoals of Ire" {
		t.Errorf("name %v, want the file's name", res["name"])
	}
}
