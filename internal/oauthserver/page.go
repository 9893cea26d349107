package oauthserver

import (
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"net/http"
)

// pageStyle is the style sheet of the sign-in, consent and error pages, maxWidth wide (a CSS
// length).
func pageStyle(maxWidth string) string {
	return `body{font-family:system-ui,sans-serif;max-width:` + maxWidth + `;margin:3rem auto;padding:0 1rem;color:#222;line-height:1.5}
h1{font-size:1.4rem}.box{border:1px solid #ccc;border-radius:8px;padding:1rem 1.25rem;margin:1rem 0}
.warn{background:#fff6e0;border-color:#e0b040}code{word-break:break-all}
button{font-size:1rem;padding:.5rem 1.25rem;margin-right:.5rem;border-radius:6px;border:1px solid #888;cursor:pointer}
button.primary{background:#1a5fd0;color:#fff;border-color:#1a5fd0}.muted{color:#666;font-size:.9rem}`
}

// styleHash is the CSP hash source ('sha256-…', without the quotes) that allows an inline
// style sheet.
func styleHash(css string) string {
	sum := sha256.Sum256([]byte(css))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// WriteHTML writes a rendered page that cannot be framed and is never cached, under the
// Content-Security-Policy csp and the Referrer-Policy referrer.
func WriteHTML(w http.ResponseWriter, status int, page []byte, csp, referrer string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", csp)
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", referrer)
	w.WriteHeader(status)
	_, _ = w.Write(page)
}

// Pages are a server's HTML pages: its own templates, and the shared "head" (which a page
// starts with: .Title, the style sheet, and .Refresh, a URL to go on to at once, when set),
// "decision" (the consent form: Allow or Deny, posted to .Action with the hidden fields request
// and csrf) and "error" (a page with .Message).
type Pages struct {
	*template.Template
	StyleHash string // the CSP hash source of the pages' style sheet
}

// NewPages parses templates beside the shared ones, with a head that names site in the title
// and tagline above the heading, and a style sheet maxWidth wide. It panics if templates do
// not parse, like template.Must: they are the program's own.
func NewPages(maxWidth, site, tagline, templates string) *Pages {
	css := pageStyle(maxWidth)
	head := `{{define "head"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">{{if .Refresh}}<meta http-equiv="refresh" content="0;url={{.Refresh}}">{{end}}
<title>{{.Title}} · ` + template.HTMLEscapeString(site) + `</title><style>` + css + `</style></head><body>
<p class="muted">` + template.HTMLEscapeString(tagline) + `</p>
<h1>{{.Title}}</h1>{{end}}`
	t := template.Must(template.New("pages").Parse(head + sharedTemplates + templates))
	return &Pages{Template: t, StyleHash: styleHash(css)}
}

const sharedTemplates = `
{{define "decision"}}<form method="post" action="{{.Action}}">
<input type="hidden" name="request" value="{{.Request}}">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<button type="submit" name="decision" value="allow" class="primary">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form>{{end}}

{{define "error"}}{{template "head" .}}
<p>{{.Message}}</p>
</body></html>{{end}}
`
