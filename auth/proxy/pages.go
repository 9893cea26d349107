package proxy

import (
	"bytes"
	"net/http"
	"net/url"

	"github.com/cardwriter/cardwriter-mcp/internal/oauthserver"
)

// The proxy's HTML pages: the consent page, the page that returns the browser to the MCP
// client, and error pages. They load nothing, cannot be framed, are never cached, and escape
// all they show.

var pages = oauthserver.NewPages("36rem", "cardwriter-mcp", "cardwriter-mcp · remote MCP server for the card service", `
{{define "consent"}}{{template "head" .}}
<div class="box">
<p><strong>{{.Client}}</strong>{{if not .Named}} (client <code>{{.ClientID}}</code>){{end}} wants to use cardwriter-mcp with your card service account:</p>
<ul>{{range .Scopes}}<li><code>{{.}}</code>{{if eq . "mcp:card-writer"}}: create and edit your cards, worldbooks and trial cards, upload images, and submit cards for review{{end}}</li>{{end}}</ul>
<p class="muted">On the MCP server <code>{{.Resource}}</code>. You sign in to the card service next.</p>
</div>
<div class="box{{if .Loopback}} warn{{end}}">
<p>If you allow it, the authorization goes to <strong>{{.RedirectHost}}</strong>:<br><code>{{.RedirectURI}}</code></p>
{{if .Loopback}}<p>That is an application on this computer. Allow only if you have just started connecting from an application you trust.</p>{{end}}
</div>
{{template "decision" .}}
</body></html>{{end}}

{{define "return"}}{{template "head" .}}
<p>{{.Message}}</p>
<p><a href="{{.Refresh}}">Continue to {{.RedirectHost}}</a></p>
</body></html>{{end}}
`)

// writePage renders a page. Its CSP has no form-action: browsers apply form-action to every
// redirect that follows a form submission, and the consent form's Allow ends, through the
// card service's authorization endpoint, on whatever sign-in page the card service redirects
// to (possibly on another host). The pages carry no content but their own, escaped.
func (s *Server) writePage(w http.ResponseWriter, status int, name string, data map[string]any) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		s.log.Error("proxy: render a page", "page", name, "err", err)
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString("<!doctype html><title>Error</title><p>The page could not be shown.</p>")
	}
	referrer := "same-origin" // not no-referrer: browsers would send the form's Origin as "null"
	if name == "return" {
		referrer = "no-referrer" // the client's page must not see this address
	}
	oauthserver.WriteHTML(w, status, buf.Bytes(), "frame-ancestors 'none'; default-src 'none'; base-uri 'none'; style-src '"+pages.StyleHash+"'", referrer)
}

// errorPage answers with an HTML error page; it never redirects.
func (s *Server) errorPage(w http.ResponseWriter, status int, title, message string) {
	s.writePage(w, status, "error", map[string]any{"Title": title, "Message": message})
}

// returnPage sends the browser to the MCP client's redirect URI with a page rather than a
// redirect: the browser reaches the callback through the card service's form, whose CSP
// form-action would refuse a redirect onward to the client.
func (s *Server) returnPage(w http.ResponseWriter, target, message string) {
	host := target
	if u, err := url.Parse(target); err == nil {
		host = u.Host
	}
	s.writePage(w, http.StatusOK, "return", map[string]any{"Title": "Returning to the application", "Message": message,
		"Refresh": target, "RedirectHost": host})
}
