package sandbox

// The sign-in and consent pages of the OAuth server. The flow: GET /oauth/authorize (validated in
// oauth.go) -> 302 GET /oauth/login?request=ID (sign-in page: a button per account the sandbox
// knows, the demo user first; sets an anonymous session cookie) -> POST /oauth/login (signs the
// session in as the chosen account, a known user id, with a new session id) -> 303 GET
// /oauth/consent?request=ID (consent page; binds the pending request to the session) -> POST
// /oauth/consent (Allow or Deny) -> 303 to the client's redirect URI with code or error, and state.
//
// Every form carries a CSRF token: an HMAC of the purpose, the session id and the pending request id
// under a per-process key, so a token is worth nothing in another session or for another request.
// Pages cannot be framed (X-Frame-Options, CSP frame-ancestors), are never cached, and escape all
// they show (html/template).

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/oauthserver"
)

const (
	sessionCookie       = "sandbox_session"
	secureSessionCookie = "__Host-sandbox_session" // on an https BaseURL: Secure, host-only, Path=/
)

// browserSession is a sandbox sign-in session of one browser.
type browserSession struct {
	ID      string
	UserID  string // "" until signed in
	Expires time.Time
}

// secureCookies reports whether the sandbox is served over https, so its cookie can be Secure.
func (s *Service) secureCookies() bool { return strings.HasPrefix(s.opts.BaseURL, "https://") }

func (s *Service) cookieName() string {
	if s.secureCookies() {
		return secureSessionCookie
	}
	return sessionCookie
}

// session returns the live session of the request's cookie, or nil. The caller holds s.mu.
func (s *Service) session(r *http.Request, now time.Time) *browserSession {
	ck, err := r.Cookie(s.cookieName())
	if err != nil {
		return nil
	}
	bs := s.oauth.sessions[ck.Value]
	if bs == nil || !now.Before(bs.Expires) {
		return nil
	}
	return bs
}

// newSession starts a session and sets its cookie (HttpOnly, SameSite=Lax); an anonymous session
// lasts as long as a pending request, a signed-in one sessionTTL. The caller holds s.mu.
func (s *Service) newSession(w http.ResponseWriter, userID string, now time.Time) *browserSession {
	ttl := authRequestTTL
	if userID != "" {
		ttl = sessionTTL
	}
	bs := &browserSession{ID: oauthserver.NewSecret(""), UserID: userID, Expires: now.Add(ttl)}
	s.oauth.sessions[bs.ID] = bs
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(), Value: bs.ID, Path: "/", MaxAge: int(ttl / time.Second),
		HttpOnly: true, Secure: s.secureCookies(), SameSite: http.SameSiteLaxMode})
	return bs
}

// csrfToken binds a form to a session and a pending authorization request.
func (s *Service) csrfToken(purpose, sessionID, requestID string) string {
	m := hmac.New(sha256.New, s.oauth.csrfKey)
	m.Write([]byte(purpose + "\x00" + sessionID + "\x00" + requestID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s *Service) csrfValid(purpose, sessionID, requestID, got string) bool {
	want := s.csrfToken(purpose, sessionID, requestID)
	return got != "" && hmac.Equal([]byte(want), []byte(got))
}

// pendingRequest returns the live pending authorization request with id, or nil. The caller holds s.mu.
func (s *Service) pendingRequest(id string, now time.Time) *authRequest {
	ar := s.oauth.pending[id]
	if ar == nil || !now.Before(ar.Expires) {
		return nil
	}
	return ar
}

// readPageForm reads a page's form POST; it refuses a cross-origin Origin ("null", which browsers
// send in some contexts, is left to the CSRF token).
func readPageForm(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return nil, false
		}
	}
	f, e := oauthserver.ReadForm(w, r)
	return f, e == nil
}

func (s *Service) expiredPage(w http.ResponseWriter) int {
	return s.writeErrorPage(w, http.StatusBadRequest, "Sign-in request expired",
		"This sign-in request is unknown, was already answered, or has expired. Go back to your application and start signing in again.")
}

func (s *Service) signInPage(w http.ResponseWriter, r *http.Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	ar := s.pendingRequest(r.URL.Query().Get("request"), now)
	if ar == nil {
		return s.expiredPage(w)
	}
	bs := s.session(r, now)
	if bs != nil && bs.UserID != "" {
		return redirect(w, http.StatusSeeOther, consentPath+"?request="+url.QueryEscape(ar.ID))
	}
	if bs == nil {
		if len(s.oauth.sessions) >= maxPending {
			return s.writeErrorPage(w, http.StatusServiceUnavailable, "Busy", "Too many sign-ins are in progress; try again in a few minutes.")
		}
		bs = s.newSession(w, "", now)
	}
	c := s.st.OAuth.Clients[ar.ClientID]
	if c == nil {
		return s.expiredPage(w)
	}
	return s.writePage(w, http.StatusOK, "signin", "", map[string]any{
		"Title": "Sign in to the card service", "Client": c.displayName(), "Request": ar.ID,
		"CSRF": s.csrfToken("signin", bs.ID, ar.ID), "Users": s.signInUsers(), "Action": loginPath,
	})
}

// signInUsers are the accounts the sign-in page offers: every user the sandbox knows, the demo
// user first, then the others by nickname (and id). The caller holds s.mu.
func (s *Service) signInUsers() []*user {
	users := make([]*user, 0, len(s.st.Users))
	for _, u := range s.st.Users {
		users = append(users, u)
	}
	slices.SortFunc(users, func(a, b *user) int {
		switch {
		case a.ID == b.ID:
			return 0
		case a.ID == demoUserID:
			return -1
		case b.ID == demoUserID:
			return 1
		}
		if c := strings.Compare(a.Nickname, b.Nickname); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return users
}

func (s *Service) signIn(w http.ResponseWriter, r *http.Request) int {
	f, ok := readPageForm(w, r)
	if !ok {
		return s.writeErrorPage(w, http.StatusForbidden, "Request refused", "The sign-in form was not sent from this site.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	ar := s.pendingRequest(f.Get("request"), now)
	if ar == nil {
		return s.expiredPage(w)
	}
	bs := s.session(r, now)
	if bs == nil || !s.csrfValid("signin", bs.ID, ar.ID, f.Get("csrf")) {
		return s.writeErrorPage(w, http.StatusForbidden, "Request refused",
			"The sign-in form is not valid for this browser session (was the cookie blocked, or the page opened elsewhere?). Go back to your application and start again.")
	}
	if ar.Session != "" && ar.Session != bs.ID {
		return s.writeErrorPage(w, http.StatusForbidden, "Request refused", "This sign-in request belongs to another browser session.")
	}
	userID := f.Get("user") // the button pressed: only an account the sandbox knows
	if userID == "" || s.st.Users[userID] == nil {
		return s.writeErrorPage(w, http.StatusBadRequest, "Unknown account",
			"Choose one of the accounts the sign-in page offers.")
	}
	delete(s.oauth.sessions, bs.ID) // a new session id on sign-in (no fixation)
	signed := s.newSession(w, userID, now)
	ar.Session = signed.ID
	return redirect(w, http.StatusSeeOther, consentPath+"?request="+url.QueryEscape(ar.ID))
}

func (s *Service) consentPage(w http.ResponseWriter, r *http.Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	ar := s.pendingRequest(r.URL.Query().Get("request"), now)
	if ar == nil {
		return s.expiredPage(w)
	}
	bs := s.session(r, now)
	if bs == nil || bs.UserID == "" {
		return redirect(w, http.StatusSeeOther, loginPath+"?request="+url.QueryEscape(ar.ID))
	}
	if ar.Session == "" {
		ar.Session = bs.ID
	} else if ar.Session != bs.ID {
		return s.writeErrorPage(w, http.StatusForbidden, "Request refused", "This sign-in request belongs to another browser session.")
	}
	c := s.st.OAuth.Clients[ar.ClientID]
	u := s.st.Users[bs.UserID]
	if c == nil || u == nil {
		return s.expiredPage(w)
	}
	if ar.Device != "" {
		da := s.oauth.devices[ar.Device]
		if da == nil {
			return s.expiredPage(w)
		}
		return s.writePage(w, http.StatusOK, "consent", "", map[string]any{
			"Title": "Allow access to your cards?", "Client": c.displayName(), "ClientID": c.ID, "Named": c.Name != "",
			"Device": da.UserCode, "Scopes": strings.Fields(ar.Scope), "Resource": ar.Resource, "User": u.Nickname,
			"Request": ar.ID, "CSRF": s.csrfToken("consent", bs.ID, ar.ID), "Action": consentPath,
		})
	}
	ru, err := url.Parse(ar.RedirectURI)
	if err != nil {
		return s.expiredPage(w)
	}
	return s.writePage(w, http.StatusOK, "consent", ar.RedirectURI, map[string]any{
		"Title": "Allow access to your cards?", "Client": c.displayName(), "ClientID": c.ID, "Named": c.Name != "",
		"RedirectURI": ar.RedirectURI, "RedirectHost": ru.Host, "Loopback": isLoopbackHost(ru.Hostname()),
		"Scopes": strings.Fields(ar.Scope), "Resource": ar.Resource, "User": u.Nickname,
		"Request": ar.ID, "CSRF": s.csrfToken("consent", bs.ID, ar.ID), "Action": consentPath,
	})
}

func (s *Service) consent(w http.ResponseWriter, r *http.Request) int {
	f, ok := readPageForm(w, r)
	if !ok {
		return s.writeErrorPage(w, http.StatusForbidden, "Request refused", "The consent form was not sent from this site.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	ar := s.pendingRequest(f.Get("request"), now)
	if ar == nil {
		return s.expiredPage(w)
	}
	bs := s.session(r, now)
	if bs == nil || bs.UserID == "" || ar.Session != bs.ID || !s.csrfValid("consent", bs.ID, ar.ID, f.Get("csrf")) {
		return s.writeErrorPage(w, http.StatusForbidden, "Request refused",
			"The consent form is not valid for this browser session. Nothing was shared. Go back to your application and start again.")
	}
	decision := f.Get("decision")
	if decision != "allow" && decision != "deny" {
		return s.writeErrorPage(w, http.StatusBadRequest, "Invalid answer", "Choose Allow or Deny.")
	}
	delete(s.oauth.pending, ar.ID) // a pending request is answered once
	if ar.Device != "" {
		return s.answerDevice(w, ar, bs.UserID, decision == "allow")
	}
	params := url.Values{"state": {ar.State}, "iss": {s.issuer()}}
	if decision == "deny" {
		params.Set("error", "access_denied")
		params.Set("error_description", "The user denied access.")
		return redirect(w, http.StatusSeeOther, oauthserver.WithQuery(ar.RedirectURI, params))
	}
	code := oauthserver.NewSecret("")
	s.oauth.codes[oauthserver.Digest(code)] = &authCode{ClientID: ar.ClientID, UserID: bs.UserID, RedirectURI: ar.RedirectURI,
		Scope: ar.Scope, Resource: ar.Resource, Challenge: ar.Challenge, Expires: now.Add(s.opts.AuthCodeTTL)}
	params.Set("code", code)
	return redirect(w, http.StatusSeeOther, oauthserver.WithQuery(ar.RedirectURI, params))
}

// writeErrorPage answers with an HTML error page; it never redirects.
func (s *Service) writeErrorPage(w http.ResponseWriter, status int, title, message string) int {
	return s.writePage(w, status, "error", "", map[string]any{"Title": title, "Message": message})
}

// writePage renders a page with the headers that keep it out of frames and caches. formTarget is
// the URI a form on the page may end up redirecting to (the client's redirect URI), which the CSP
// form-action must allow since browsers apply it to the redirects that follow a form submission.
func (s *Service) writePage(w http.ResponseWriter, status int, name, formTarget string, data map[string]any) int {
	var buf bytes.Buffer
	if err := pageTemplates.ExecuteTemplate(&buf, name, data); err != nil {
		s.log.Error("sandbox: render page", "page", name, "err", err)
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString("<!doctype html><title>Error</title><p>The sandbox failed to render this page.</p>")
	}
	// Referrer-Policy same-origin, not no-referrer: that makes browsers send the forms' Origin as "null".
	oauthserver.WriteHTML(w, status, buf.Bytes(), pageCSP(formTarget), "same-origin")
	return status
}

// pageCSP is the Content-Security-Policy of a page: no framing, nothing but this origin and the
// page's own stylesheet, forms posted to this origin (and redirected to formTarget's origin).
func pageCSP(formTarget string) string {
	formAction := "'self'"
	if src := cspSource(formTarget); src != "" {
		formAction += " " + src
	}
	return "frame-ancestors 'none'; default-src 'self'; form-action " + formAction +
		"; base-uri 'none'; style-src '" + pageTemplates.StyleHash + "'"
}

// cspSource is the CSP source expression of a redirect URI's origin. CSP host sources cannot name
// an IPv6 literal, so for http://[::1] the scheme source http: stands in.
func cspSource(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	if strings.Contains(u.Host, "[") || strings.ContainsAny(u.Host, " ;,'\"") {
		return u.Scheme + ":"
	}
	return u.Scheme + "://" + u.Host
}

var pageTemplates = oauthserver.NewPages("34rem", "Card service sandbox", "Card service sandbox", `
{{define "signin"}}{{template "head" .}}
<p><strong>{{.Client}}</strong> wants to use your card service account. Sign in first.</p>
<p>Choose the sandbox account to sign in as.</p>
<form method="post" action="{{.Action}}">
<input type="hidden" name="request" value="{{.Request}}">
<input type="hidden" name="csrf" value="{{.CSRF}}">
{{range $i, $u := .Users}}<p><button type="submit" name="user" value="{{$u.ID}}"{{if eq $i 0}} class="primary"{{end}}>Sign in as {{$u.Nickname}}</button></p>
{{end}}</form>
</body></html>{{end}}

{{define "device"}}{{template "head" .}}
<p>Type the code your terminal shows to sign it in to your card service account.</p>
<form method="post" action="{{.Action}}">
<p><input name="user_code" value="{{.UserCode}}" autocomplete="off" autocapitalize="characters" spellcheck="false" aria-label="Code"></p>
<p><button type="submit" class="primary">Continue</button></p>
</form>
</body></html>{{end}}

{{define "consent"}}{{template "head" .}}
<p>Signed in as <strong>{{.User}}</strong>.</p>
<div class="box">
<p><strong>{{.Client}}</strong>{{if not .Named}} (client <code>{{.ClientID}}</code>){{end}} asks for access to your card service account:</p>
<ul>{{range .Scopes}}<li><code>{{.}}</code>{{if eq . "mcp:card-writer"}}: create and edit your cards, worldbooks and trial cards, upload images, and submit cards for review{{end}}</li>{{end}}</ul>
<p class="muted">For the API at <code>{{.Resource}}</code>.</p>
</div>
{{if .Device}}<div class="box warn">
<p>This signs in the device that showed you the code <strong>{{.Device}}</strong>. Allow only if you have just started signing in there yourself.</p>
</div>{{else}}<div class="box{{if .Loopback}} warn{{end}}">
<p>If you allow it, the answer goes to <strong>{{.RedirectHost}}</strong>:<br><code>{{.RedirectURI}}</code></p>
{{if .Loopback}}<p>That is an application on this computer. Allow only if you have just started signing in from an application you trust.</p>{{end}}
</div>{{end}}
{{template "decision" .}}
</body></html>{{end}}
`)
