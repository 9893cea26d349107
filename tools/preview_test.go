package tools

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cardwriter/cardwriter-mcp/internal/browsertest"
)

// hostScript plays the MCP Apps host for a page opened on its own: it answers the app's
// ui/initialize and notes its ui/notifications/initialized. It runs before the page's scripts.
const hostScript = `window.__host = { initialized: false };
window.addEventListener('message', function (ev) {
  var m = ev.data;
  if (!m || m.jsonrpc !== '2.0') return;
  if (m.method === 'ui/initialize' && m.id !== undefined) {
    window.postMessage({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: '2026-01-26',
      hostInfo: { name: 'test host', version: '1' }, hostCapabilities: {}, hostContext: {} } }, '*');
  }
  if (m.method === 'ui/notifications/initialized') window.__host.initialized = true;
});`

// The card preview, rendered by headless Chromium from a sandbox card's review_card result as a
// host hands it over: name, avatar, the first message and its alternates, prologue lines, and
// the worldbook entries the chosen message fires; card text with markup shown as text, never run.
func TestCardPreviewInChromium(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	browser := browsertest.Chromium(ctx, t)
	e := newEnv(t, Options{})
	ok := func(name string, args any) map[string]any { t.Helper(); return e.ok(name, jsonArg(t, args)) }

	const welcome = `The Kestrel docks. <script>window.pwned=1</script><img src=x onerror="window.pwned=2">`
	card := ok("create_card", map[string]any{"roleName": "Captain <b>Vey</b>"})
	roleID := card["roleId"].(string)
	ok("set_opening_lines", map[string]any{"roleId": roleID, "roleWelcome": welcome,
		"alternates": []string{"A quiet night at the harbor."}, "prologue": []string{"Sorry I'm late, Captain."}})
	img := ok("upload_image", map[string]any{"purpose": "avatar", "roleId": roleID, "contentType": "image/png", "dataBase64": pngBase64(t)})
	ok("update_card_profile", map[string]any{"roleId": roleID, "avatarImageId": img["imageId"]})
	wb := ok("create_worldbook", map[string]any{"name": "Harbor lore"})
	ok("write_worldbook_document", map[string]any{"worldbookId": wb["worldbookId"], "binding": map[string]any{"roleId": roleID},
		"entries": []any{
			map[string]any{"op": "create", "name": "The Kestrel", "content": "A battered freighter.", "keywords": []string{"Kestrel"}},
			map[string]any{"op": "create", "name": "The harbor", "content": "Quiet at night.", "keywords": []string{"harbor"}},
			map[string]any{"op": "create", "name": "Customs", "content": "Always watching.", "keywords": []string{"customs"}},
		}})

	res := e.call("review_card", jsonArg(t, map[string]any{"roleId": roleID}))
	if res.IsError || res.Meta == nil || res.Meta.AdditionalFields[previewKey] == nil {
		t.Fatalf("review_card: no preview in _meta: %s", text(res))
	}
	result, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	// The page as a host reads it.
	rr, err := e.client.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: previewURI}})
	if err != nil || len(rr.Contents) != 1 {
		t.Fatalf("read %s: %v", previewURI, err)
	}
	tc := rr.Contents[0].(mcp.TextResourceContents)
	if tc.MIMEType != previewMIME || !strings.Contains(tc.Text, "script-src 'sha256-") {
		t.Fatalf("the preview resource: %s, CSP missing", tc.MIMEType)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(tc.Text))
	}))
	defer srv.Close()

	// Each step runs with the browser's context; values come back from Run.
	run := func(what string, a chromedp.Action[string]) string {
		t.Helper()
		v, err := chromedp.Run(browser, a)
		if err != nil {
			t.Fatalf("chromium: %s: %v", what, err)
		}
		return v
	}
	eval := func(js string) string { t.Helper(); return run(js, chromedp.Evaluate[string](js)) }
	addHost := func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: hostScript})
		return chromedp.Void{}, err
	}
	if err := chromedp.Do(browser, addHost, chromedp.Navigate(srv.URL)); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if _, err := chromedp.Run(browser, chromedp.Poll[bool](`window.__host.initialized`, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the page never completed ui/initialize: %v", err)
	}
	eval(`window.postMessage({jsonrpc:'2.0', method:'ui/notifications/tool-result', params: ` + string(result) + `}, '*'); ''`)
	if err := chromedp.Do(browser, chromedp.WaitVisible(chromedp.ID("card"))); err != nil {
		t.Fatalf("the card was not rendered: %v", err)
	}
	name := run("name", chromedp.Text(chromedp.ID("name")))
	message := run("message", chromedp.Text(chromedp.ID("message")))
	prologue := run("prologue", chromedp.Text(chromedp.ID("prologue")))
	const firing = `Array.from(document.querySelectorAll('.entry.fires .name')).map(e => e.textContent).join('|')`
	fires := eval(firing)
	avatar := eval(`(document.querySelector('#avatar img') || {}).src || ''`)
	shot, err := chromedp.Run(browser, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	eval(`(function(){ var p = document.getElementById('picker'); p.value = '1'; p.dispatchEvent(new Event('change')); return ''; })()`)
	fired2 := eval(firing)
	pwned := eval(`String(window.pwned)`)
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "card-preview.png"), shot, 0o644); err != nil {
		t.Errorf("screenshot: %v", err)
	}
	if name != "Captain <b>Vey</b>" {
		t.Errorf("name %q: markup must show as text", name)
	}
	if !strings.Contains(message, "<script>window.pwned=1</script>") || pwned != "undefined" {
		t.Errorf("first message %q, window.pwned %v: card text must show as text and never run", message, pwned)
	}
	if fires != "The Kestrel" || fired2 != "The harbor" {
		t.Errorf("entries fired by the first message %q, by the alternate %q; want The Kestrel, then The harbor", fires, fired2)
	}
	if !strings.Contains(prologue, "Sorry I'm late") {
		t.Errorf("prologue %q", prologue)
	}
	if !strings.HasPrefix(avatar, "data:image/png;base64,") {
		t.Errorf("avatar %q: want the thumbnail as a data URI", avatar)
	}
}
