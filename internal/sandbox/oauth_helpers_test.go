package sandbox_test

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/cardwriter/cardwriter-mcp/auth/authtest"
	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

const (
	scope       = "mcp:card-writer"
	loopbackCB  = "http://127.0.0.1/callback"       // registered without a port
	loopbackUse = "http://127.0.0.1:54321/callback" // what the client listens on
)

// oauthEnv is a sandbox served over a real listener whose BaseURL is the listener's address.
type oauthEnv struct {
	svc   *sandbox.Service
	srv   *httptest.Server
	clock *authtest.Clock
	base  string // = BaseURL = issuer
	opts  sandbox.Options
}

func newOAuthEnv(t *testing.T, opts sandbox.Options) *oauthEnv {
	t.Helper()
	clock := newFakeClock()
	if opts.Clock == nil {
		opts.Clock = clock.Now
	}
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	if opts.BaseURL == "" {
		opts.BaseURL = base
	}
	svc := newService(t, opts)
	srv.Config.Handler = svc.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	return &oauthEnv{svc: svc, srv: srv, clock: clock, base: base, opts: opts}
}

func (e *oauthEnv) resource() string { return e.base + "/open/v1" }

// do sends a request with an optional form or JSON body and decodes a JSON answer.
func (e *oauthEnv) do(t *testing.T, method, path, contentType, body string, header map[string]string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var obj map[string]any
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &obj); err != nil {
			t.Fatalf("%s %s: not JSON: %s", method, path, raw)
		}
		if res.StatusCode >= 400 && strings.HasPrefix(path, "/oauth/") {
			if err := schema.Component("OAuthError").ValidateJSON(raw); err != nil {
				t.Fatalf("%s %s: not an OAuth error: %v: %s", method, path, err, raw)
			}
		}
	}
	return res, obj
}

// register registers a client and returns the response.
func (e *oauthEnv) register(t *testing.T, meta map[string]any) (int, map[string]any) {
	t.Helper()
	data, _ := json.Marshal(meta)
	res, obj := e.do(t, "POST", "/oauth/register", "application/json", string(data), nil)
	return res.StatusCode, obj
}

// client registers a public client with the redirect URIs and returns its client_id.
func (e *oauthEnv) client(t *testing.T, name string, redirects ...string) string {
	t.Helper()
	if len(redirects) == 0 {
		redirects = []string{loopbackCB}
	}
	status, obj := e.register(t, map[string]any{"client_name": name, "redirect_uris": redirects,
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"}})
	if status != http.StatusCreated {
		t.Fatalf("register: %d %v", status, obj)
	}
	return obj["client_id"].(string)
}

// token posts a form to the token endpoint.
func (e *oauthEnv) token(t *testing.T, form url.Values) (int, map[string]any) {
	t.Helper()
	res, obj := e.do(t, "POST", "/oauth/token", "application/x-www-form-urlencoded", form.Encode(), nil)
	if res.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("token response Cache-Control %q", res.Header.Get("Cache-Control"))
	}
	return res.StatusCode, obj
}

// wantTokenError requires an RFC 6749 error from the token endpoint.
func (e *oauthEnv) wantTokenError(t *testing.T, form url.Values, status int, code string) {
	t.Helper()
	got, obj := e.token(t, form)
	if got != status || obj["error"] != code {
		t.Fatalf("token %v: %d %v, want %d %s", redactForm(form), got, obj, status, code)
	}
}

func redactForm(f url.Values) url.Values {
	out := url.Values{}
	for k, v := range f {
		out[k] = v
		if k == "code" || k == "refresh_token" || k == "code_verifier" {
			out[k] = []string{"…"}
		}
	}
	return out
}

func (e *oauthEnv) revoke(t *testing.T, form url.Values) int {
	t.Helper()
	res, _ := e.do(t, "POST", "/oauth/revoke", "application/x-www-form-urlencoded", form.Encode(), nil)
	return res.StatusCode
}

// api calls GET /open/v1/me with a bearer token and returns the status.
func (e *oauthEnv) api(t *testing.T, token string) int {
	t.Helper()
	res, _ := e.do(t, "GET", "/open/v1/me", "", "", map[string]string{"Authorization": "Bearer " + token})
	return res.StatusCode
}

func (e *oauthEnv) wantAPI(t *testing.T, token string, want int) {
	t.Helper()
	if got := e.api(t, token); got != want {
		t.Fatalf("GET /open/v1/me: %d, want %d", got, want)
	}
}

// authParams returns a valid authorization request; overrides replace values ("" deletes one).
func (e *oauthEnv) authParams(clientID, verifier string, overrides map[string]string) url.Values {
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {clientID},
		"redirect_uri":          {loopbackUse},
		"scope":                 {scope},
		"resource":              {e.resource()},
		"state":                 {"st-123"},
		"code_challenge":        {oauth2.S256ChallengeFromVerifier(verifier)},
		"code_challenge_method": {"S256"},
	}
	for k, v := range overrides {
		if v == "" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
	}
	return q
}

// browser plays a person's browser: a cookie jar, following redirects inside the sandbox and
// stopping at the one that leaves it (to the client's redirect URI).
type browser struct {
	e  *oauthEnv
	hc *http.Client
}

func (e *oauthEnv) browser(t *testing.T) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(e.base, "http://")
	return &browser{e: e, hc: &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if req.URL.Host != host {
			return http.ErrUseLastResponse
		}
		return nil
	}}}
}

type page struct {
	status int
	header http.Header
	body   string
	url    *url.URL // the address of the final response
}

// location is the redirect that left the sandbox, or nil.
func (p *page) location(t *testing.T) *url.URL {
	t.Helper()
	loc := p.header.Get("Location")
	if loc == "" {
		return nil
	}
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func (b *browser) do(t *testing.T, req *http.Request) *page {
	t.Helper()
	res, err := b.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return &page{status: res.StatusCode, header: res.Header, body: string(raw), url: res.Request.URL}
}

func (b *browser) get(t *testing.T, u string) *page {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b.do(t, req)
}

// post submits a form to a sandbox path as a same-origin page would.
func (b *browser) post(t *testing.T, path string, form url.Values, header map[string]string) *page {
	t.Helper()
	req, err := http.NewRequest("POST", b.e.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.e.base)
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return b.do(t, req)
}

// authorize opens the authorization URL and returns where the browser landed.
func (b *browser) authorize(t *testing.T, q url.Values) *page {
	t.Helper()
	return b.get(t, b.e.base+"/oauth/authorize?"+q.Encode())
}

var (
	formRE    = regexp.MustCompile(`<form method="post" action="([^"]*)">`)
	hiddenRE  = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
	accountRE = regexp.MustCompile(`<button type="submit" name="user" value="([^"]*)"[^>]*>Sign in as ([^<]*)</button>`)
)

// account is a button of the sign-in page.
type account struct{ id, nickname string }

// accounts returns the sign-in page's account buttons, in page order.
func (p *page) accounts(t *testing.T) []account {
	t.Helper()
	var out []account
	for _, m := range accountRE.FindAllStringSubmatch(p.body, -1) {
		out = append(out, account{html.UnescapeString(m[1]), html.UnescapeString(m[2])})
	}
	if len(out) == 0 {
		t.Fatalf("no account buttons on the page (%d %s): %s", p.status, p.url, p.body)
	}
	return out
}

// form returns the action and hidden fields of the page's form.
func (p *page) form(t *testing.T) (string, url.Values) {
	t.Helper()
	m := formRE.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no form on the page (%d %s): %s", p.status, p.url, p.body)
	}
	f := url.Values{}
	for _, h := range hiddenRE.FindAllStringSubmatch(p.body, -1) {
		f.Set(h[1], html.UnescapeString(h[2]))
	}
	return html.UnescapeString(m[1]), f
}

// signIn submits the sign-in page as the demo user and returns the consent page.
func (b *browser) signIn(t *testing.T, signInPage *page) *page {
	t.Helper()
	return b.signInAs(t, signInPage, "Demo Author")
}

// signInAs presses the sign-in page's button of the account named nickname and returns the
// consent page.
func (b *browser) signInAs(t *testing.T, signInPage *page, nickname string) *page {
	t.Helper()
	if signInPage.status != http.StatusOK || !strings.Contains(signInPage.body, "Sign in as Demo Author") {
		t.Fatalf("not the sign-in page: %d %s", signInPage.status, signInPage.body)
	}
	action, f := signInPage.form(t)
	for _, a := range signInPage.accounts(t) {
		if a.nickname == nickname {
			f.Set("user", a.id)
		}
	}
	if f.Get("user") == "" {
		t.Fatalf("the sign-in page offers no account %q: %v", nickname, signInPage.accounts(t))
	}
	consent := b.post(t, action, f, nil)
	if consent.status != http.StatusOK || !strings.Contains(consent.body, `value="allow"`) {
		t.Fatalf("not the consent page: %d %s", consent.status, consent.body)
	}
	if want := "Signed in as <strong>" + html.EscapeString(nickname) + "</strong>"; !strings.Contains(consent.body, want) {
		t.Fatalf("the consent page does not say %q: %s", want, consent.body)
	}
	return consent
}

// answer submits the consent page with decision and returns the redirect to the client.
func (b *browser) answer(t *testing.T, consentPage *page, decision string) *url.URL {
	t.Helper()
	action, f := consentPage.form(t)
	f.Set("decision", decision)
	p := b.post(t, action, f, nil)
	if p.status != http.StatusSeeOther {
		t.Fatalf("consent answer: %d %s", p.status, p.body)
	}
	return p.location(t)
}

// code runs the whole browser side for an authorization request and returns the code.
func (e *oauthEnv) code(t *testing.T, q url.Values) string {
	t.Helper()
	b := e.browser(t)
	loc := b.answer(t, b.signIn(t, b.authorize(t, q)), "allow")
	if loc == nil || loc.Query().Get("code") == "" {
		t.Fatalf("no code in %v", loc)
	}
	if got := loc.Query().Get("state"); got != q.Get("state") {
		t.Fatalf("state %q, want %q", got, q.Get("state"))
	}
	return loc.Query().Get("code")
}

// codeForm is a valid authorization_code token request.
func codeForm(clientID, code, verifier string) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID}, "code": {code},
		"redirect_uri": {loopbackUse}, "code_verifier": {verifier}}
}

// tokens runs a complete flow and returns the token response.
func (e *oauthEnv) tokens(t *testing.T, clientID string) map[string]any {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	code := e.code(t, e.authParams(clientID, verifier, nil))
	f := codeForm(clientID, code, verifier)
	f.Set("resource", e.resource())
	status, obj := e.token(t, f)
	if status != http.StatusOK {
		t.Fatalf("exchange: %d %v", status, obj)
	}
	return obj
}

func refreshForm(clientID, rt string) url.Values {
	return url.Values{"grant_type": {"refresh_token"}, "client_id": {clientID}, "refresh_token": {rt}}
}
