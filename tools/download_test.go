package tools

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cardwriter/cardwriter-mcp/auth/authtest"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// TestExportDownloadURL: over HTTP with a public URL, a linked export carries a downloadUrl a
// browser opens with no sign-in: the file (as resources/read gives it) as an attachment under
// its name, on any replica; a changed signature or an expired export is a 404.
func TestExportDownloadURL(t *testing.T) {
	t.Parallel()
	clk := authtest.NewClock(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	opts := Options{Exports: store.NewMemory(), State: store.NewMemory(), ExportTTL: 10 * time.Minute, ResultBudget: 200, now: clk.Now}
	srv := httptest.NewServer(DownloadHandler(opts))
	defer srv.Close()
	opts.PublicURL = srv.URL + "/"
	e, _ := newTavernEnv(t, tavernEnvConfig{opts: opts})
	imp := importCard(t, e, bigBook(40), nil)
	res := e.call("export_tavern_card", jsonArg(t, map[string]any{"roleId": imp["roleId"]}))
	link := linkOf(t, e, "export_tavern_card", res)
	u := str(link, "downloadUrl")
	if !strings.HasPrefix(u, srv.URL+DownloadPath) || !strings.Contains(text(res), u) {
		t.Fatalf("downloadUrl %q (public URL %s); text: %s", u, srv.URL, text(res))
	}
	want, err := readExport(t, e, str(link, "uri"))
	if err != nil {
		t.Fatal(err)
	}
	get := func(u string) (*http.Response, []byte) {
		t.Helper()
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	resp, body := get(u)
	if resp.StatusCode != http.StatusOK || string(body) != string(want) {
		t.Fatalf("GET: %d, %d bytes (want %d)", resp.StatusCode, len(body), len(want))
	}
	if cd := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment") || !strings.Contains(cd, str(link, "name")) {
		t.Errorf("Content-Disposition %q", cd)
	}
	if ct := resp.Header.Get("Content-Type"); ct != str(link, "mimeType") {
		t.Errorf("Content-Type %q", ct)
	}
	i := strings.LastIndexByte(u, '.')
	flipped := u[:i+1] + strings.Map(func(r rune) rune {
		if r == 'A' {
			return 'B'
		}
		return 'A'
	}, u[i+1:i+2]) + u[i+2:]
	for name, bad := range map[string]string{
		"another signature": flipped,
		"no signature":      u[:i],
		"another export":    srv.URL + DownloadPath + "0123456789abcdef0123456789abcdef" + u[i:],
	} {
		if resp, _ := get(bad); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d", name, resp.StatusCode)
		}
	}
	clk.Advance(10 * time.Minute)
	if resp, _ := get(u); resp.StatusCode != http.StatusNotFound {
		t.Errorf("after expiry: %d", resp.StatusCode)
	}
}

// TestExportsListed: resources/list names the caller's live exports (Gemini CLI reads only
// listed URIs), on any replica; not another user's, not an expired one.
func TestExportsListed(t *testing.T) {
	t.Parallel()
	clk := authtest.NewClock(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	opts := Options{Exports: store.NewMemory(), ExportTTL: 10 * time.Minute, ResultBudget: 200, now: clk.Now}
	e, _ := newTavernEnv(t, tavernEnvConfig{opts: opts})
	replica, _ := newTavernEnv(t, tavernEnvConfig{svc: e.svc, opts: opts})
	other, _ := newTavernEnv(t, tavernEnvConfig{svc: e.svc, opts: opts, token: "another-user-token"})
	imp := importCard(t, e, bigBook(40), nil)
	link := linkOf(t, e, "export_tavern_card", e.call("export_tavern_card", jsonArg(t, map[string]any{"roleId": imp["roleId"]})))
	listed := func(e *env) []mcp.Resource {
		t.Helper()
		res, err := e.client.ListResources(context.Background(), mcp.ListResourcesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var exports []mcp.Resource
		for _, r := range res.Resources {
			if strings.HasPrefix(r.URI, exportScheme+"://") {
				exports = append(exports, r)
			}
		}
		return exports
	}
	for name, e := range map[string]*env{"the owner": e, "the owner on another replica": replica} {
		if got := listed(e); len(got) != 1 || got[0].URI != link["uri"] || got[0].MIMEType != link["mimeType"] {
			t.Errorf("%s: %v", name, got)
		}
	}
	if got := listed(other); len(got) != 0 {
		t.Errorf("another user sees %v", got)
	}
	clk.Advance(10 * time.Minute)
	if got := listed(e); len(got) != 0 {
		t.Errorf("after expiry: %v", got)
	}
}

// TestExportDefaultFile: over stdio with a folder open to the server (the client's roots, else
// --allow-dir), an export too large for the result is written there as a new file, JSON laid
// out in lines, and the result says where; a second export does not replace the first.
func TestExportDefaultFile(t *testing.T) {
	t.Parallel()
	for _, viaRoots := range []bool{false, true} {
		name := "--allow-dir"
		if viaRoots {
			name = "client roots"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := tavernEnvConfig{opts: Options{LocalFiles: &LocalFiles{}, ResultBudget: 200}}
			if viaRoots {
				cfg.roots = []string{dir}
			} else {
				cfg.opts.LocalFiles.AllowDirs = []string{dir}
			}
			e, _ := newTavernEnv(t, cfg)
			imp := importCard(t, e, bigBook(40), nil)
			var paths []string
			for range 2 {
				res := e.call("export_tavern_card", jsonArg(t, map[string]any{"roleId": imp["roleId"]}))
				sc := structured(t, res).(map[string]any)
				w := obj(sc, "written")
				if res.IsError || w == nil || sc["link"] != nil || sc["card"] != nil || !strings.Contains(firstText(res), str(w, "path")) {
					t.Fatalf("not written by default: %v %s", keys(sc), text(res))
				}
				if err := e.tools["export_tavern_card"].output.Validate(sc); err != nil {
					t.Fatal(err)
				}
				paths = append(paths, str(w, "path"))
			}
			real, _ := filepath.EvalSymlinks(dir)
			if filepath.Dir(paths[0]) != real || paths[0] == paths[1] {
				t.Fatalf("paths %v, want two files in %s", paths, real)
			}
			data, err := os.ReadFile(paths[0])
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(data), "\n"); n < 50 {
				t.Errorf("the JSON file of %d bytes has %d lines", len(data), n+1)
			}
		})
	}
}

// FuzzDownloadPath: any path under /download/ a browser sends is a 404 (nothing served) unless
// it is a URL the server made; never a panic.
func FuzzDownloadPath(f *testing.F) {
	h := DownloadHandler(Options{Exports: store.NewMemory()})
	f.Add("0123456789abcdef0123456789abcdef.sig")
	f.Add("")
	f.Add("../../etc/passwd")
	f.Add("0123456789abcdef0123456789abcdef")
	f.Fuzz(func(t *testing.T, rest string) {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL.Path = DownloadPath + rest
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusNotFound {
			t.Fatalf("%q: %d", rest, rec.Code)
		}
	})
}
