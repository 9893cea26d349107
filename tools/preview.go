package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed" // the card preview's page
	"encoding/base64"
	"image"
	_ "image/gif"  // avatars may be GIF
	_ "image/jpeg" // or JPEG
	"image/png"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp" // or WebP

	"github.com/cardwriter/cardwriter-mcp/internal/tavern"
)

// The card preview is an MCP App (the ext-apps extension): get_card and review_card name its
// ui:// resource in their tool metadata, and put what it shows in their result's _meta under
// previewKey (hosts give _meta to the app, not to the model; the page falls back to get_card's
// structuredContent); the host renders the page in a sandboxed frame and hands it the result.
// The page's script is the view (preview/src/card.js) on the MCP Apps SDK's App class, bundled
// with the SDK by preview/src (esbuild, pinned there) into preview/card.bundle.js, which is
// checked in so that building this module needs no Node. The page is self-contained (its script
// and style inline, allowed by their hashes in its Content-Security-Policy; no eval, images only
// as data: URIs, nothing loaded), so its _meta.ui.csp asks the host for no domain; it sets card
// text as text only.
const (
	previewURI  = "ui://cardwriter/card-preview"
	previewMIME = "text/html;profile=mcp-app"
	previewKey  = "io.cardwriter/preview"
	// previewAvatarPx bounds the side of the avatar thumbnail the preview carries.
	previewAvatarPx = 128
)

var (
	//go:embed preview/card.html
	previewPage string
	//go:embed preview/card.css
	previewCSS string
	//go:embed preview/card.bundle.js
	previewJS string
)

// previewHTML is the page, with its CSP naming the hashes of its one script and one style.
var previewHTML = sync.OnceValue(func() string {
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	csp := "default-src 'none'; script-src " + hash(previewJS) + "; style-src " + hash(previewCSS) +
		"; img-src data:; base-uri 'none'; form-action 'none'"
	return strings.NewReplacer("{{CSP}}", csp, "{{CSS}}", previewCSS, "{{JS}}", previewJS).Replace(previewPage)
})

// previewToolMeta is the _meta of a tool whose results the preview shows (ui.resourceUri, and
// the flat key of earlier hosts).
func previewToolMeta() *mcp.Meta {
	return mcp.NewMetaFromMap(map[string]any{"ui": map[string]any{"resourceUri": previewURI}, "ui/resourceUri": previewURI})
}

// addPreview serves the preview's page as a resource.
func addPreview(srv *server.MCPServer) {
	res := mcp.NewResource(previewURI, "Card preview",
		mcp.WithResourceDescription("An MCP App that shows a card as a reader meets it: avatar, name, first message with its alternates, prologue suggestions, and the worldbook entries the chosen message fires."),
		mcp.WithMIMEType(previewMIME))
	srv.AddResource(res, func(context.Context, mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		return []mcp.ResourceContents{mcp.TextResourceContents{URI: previewURI, MIMEType: previewMIME, Text: previewHTML(),
			Meta: map[string]any{"ui": map[string]any{"csp": map[string]any{}, "prefersBorder": true}}}}, nil // csp: no domain, nothing is loaded
	})
}

// cardPreview is what the page shows of a card.
type cardPreview struct {
	RoleName   string             `json:"roleName"`
	Greetings  []string           `json:"greetings"` // the first message, then the alternates
	Prologue   []string           `json:"prologue"`
	Avatar     string             `json:"avatar,omitempty"` // a data:image/png thumbnail
	Worldbooks []previewWorldbook `json:"worldbooks"`
}

type previewWorldbook struct {
	Name    string         `json:"name"`
	Entries []previewEntry `json:"entries"`
}

type previewEntry struct {
	Name     string   `json:"name"`
	Keys     []string `json:"keys"`
	Constant bool     `json:"constant"`
	Fires    []int    `json:"fires"` // the greetings (by index) that fire the entry
}

// previewOfCard is get_card's preview, from its result: the card without worldbooks.
func previewOfCard(out map[string]any) map[string]any {
	p := cardPreview{RoleName: str(out, "roleName"), Greetings: []string{str(out, "roleWelcome")}, Prologue: []string{}, Worldbooks: []previewWorldbook{}}
	for _, v := range list(out, "welcomeAlternates") {
		if s, ok := v.(string); ok {
			p.Greetings = append(p.Greetings, s)
		}
	}
	for _, v := range list(out, "prologue") {
		if s, ok := v.(string); ok {
			p.Prologue = append(p.Prologue, s)
		}
	}
	return map[string]any{previewKey: p}
}

// previewWorldbookOf lists a worldbook's entries with the greetings that fire each, for the card
// named charName ({{char}} in keys, content and greetings), its /regex/ keys matched within budget.
func previewWorldbookOf(name string, entries []tavern.Entry, greetings []string, charName string, budget tavern.MatchBudget) (previewWorldbook, error) {
	macros := tavern.CardMacros(charName)
	wb := previewWorldbook{Name: name, Entries: make([]previewEntry, len(entries))}
	for i, e := range entries {
		wb.Entries[i] = previewEntry{Name: e.Name, Keys: append([]string{}, e.Keywords...), Constant: e.IsConstant, Fires: []int{}}
	}
	for g, text := range greetings {
		res, err := tavern.MatchWithin(entries, text, tavern.MatchOptions{}, macros, budget)
		if err != nil {
			return wb, err
		}
		for _, r := range res {
			if r.Fired && !entries[r.Index].IsConstant {
				wb.Entries[r.Index].Fires = append(wb.Entries[r.Index].Fires, g)
			}
		}
	}
	return wb, nil
}

// avatarThumbnail scales an avatar image to fit previewAvatarPx and returns it as a PNG data
// URI; "" when the image cannot be decoded.
func avatarThumbnail(data []byte) string {
	src, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return ""
	}
	b := src.Bounds()
	w, h := b.Dx(), b.Dy()
	if w == 0 || h == 0 {
		return ""
	}
	if w > previewAvatarPx || h > previewAvatarPx {
		if w >= h {
			w, h = previewAvatarPx, max(1, h*previewAvatarPx/w)
		} else {
			w, h = max(1, w*previewAvatarPx/h), previewAvatarPx
		}
	}
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.CatmullRom.Scale(dst, dst.Bounds(), src, b, draw.Over, nil)
	var buf bytes.Buffer
	if err := png.Encode(&buf, dst); err != nil {
		return ""
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
}

// appsExtension is the MCP Apps extension's identifier in capabilities.extensions (2026-07-28;
// clients of earlier revisions declare it the same way in their initialize capabilities).
const appsExtension = "io.modelcontextprotocol/ui"

// appsCapability is what the server declares of the extension: the MIME type of its views.
func appsCapability() map[string]any {
	return map[string]any{appsExtension: map[string]any{"mimeTypes": []string{previewMIME}}}
}

// extensions is the server's extensions: MCP Apps and more.
func extensions(more map[string]any) map[string]any {
	all := appsCapability()
	maps.Copy(all, more)
	return all
}

// declaresApps reports whether the client of ctx declared the MCP Apps extension: only such a
// client is given the tools' _meta.ui and the preview's data in results; any other gets the
// same tools and results without them (the text and structuredContent are the fallback).
func declaresApps(ctx context.Context) bool {
	s, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo)
	if !ok {
		return false
	}
	_, declared := s.GetClientCapabilities().Extensions[appsExtension]
	return declared
}

// appsToolFilter leaves tools/list's _meta (the preview's ui.resourceUri) to clients that
// declared the MCP Apps extension.
func appsToolFilter(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	if declaresApps(ctx) {
		return tools
	}
	out, cloned := tools, false
	for i, t := range tools {
		if t.Meta == nil {
			continue
		}
		if !cloned {
			out, cloned = slices.Clone(tools), true
		}
		out[i].Meta = nil
	}
	return out
}
