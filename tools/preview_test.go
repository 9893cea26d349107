package tools

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// The card preview's page as a host reads it: the built script and the style inline, each
// allowed by its hash in the page's CSP and nothing else (no eval, nothing loaded); the script
// cannot end its element early. The page's behaviour under the official host bridge is proven
// by e2e/preview.test.mjs.
func TestPreviewPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{})
	rr, err := e.client.ReadResource(context.Background(), mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: previewURI}})
	if err != nil || len(rr.Contents) != 1 {
		t.Fatalf("read %s: %v", previewURI, err)
	}
	tc, ok := rr.Contents[0].(mcp.TextResourceContents)
	if !ok || tc.MIMEType != previewMIME {
		t.Fatalf("the preview resource: %#v", rr.Contents[0])
	}
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	csp := "default-src 'none'; script-src " + hash(previewJS) + "; style-src " + hash(previewCSS) + ";"
	for _, want := range []string{csp, "<script>" + previewJS + "</script>", "<style>" + previewCSS + "</style>"} {
		if !strings.Contains(tc.Text, want) {
			t.Errorf("the page lacks %.120q", want)
		}
	}
	if strings.Contains(tc.Text, "{{") || strings.Contains(strings.ToLower(previewJS), "</script") || strings.Contains(tc.Text, "unsafe-") {
		t.Error("the page has a placeholder left, a script that ends its element early, or an unsafe- CSP source")
	}
	ui, _ := tc.Meta["ui"].(map[string]any)
	if c, ok := ui["csp"].(map[string]any); !ok || len(c) != 0 {
		t.Errorf("_meta.ui.csp %v: the page loads nothing, so it asks for no domain", ui["csp"])
	}
}
