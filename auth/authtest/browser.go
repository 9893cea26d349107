// Package authtest holds test helpers of the sign-in: a scripted browser that goes through
// an authorization server's sign-in and consent pages the way a person would.
package authtest

import (
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
)

// Browser is a scripted browser: an HTTP client with cookies that follows redirects and
// submits the HTML forms it is shown. It knows nothing of the server beyond what a page says:
// it submits the first form of a page with its hidden fields (the CSRF token among them) and
// the submit button whose label or value matches what the script asks for.
type Browser struct {
	Client *http.Client
	// StopAtCallback, when set, makes the browser stop at a redirect whose path is
	// /callback instead of following it, so that a test can read the code and state.
	StopAtCallback bool
}

// New returns a browser with an empty cookie jar.
func New() *Browser {
	jar, _ := cookiejar.New(nil)
	b := &Browser{}
	b.Client = &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) > 10 {
			return errors.New("too many redirects")
		}
		if b.StopAtCallback && req.URL.Path == "/callback" {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	return b
}

// Page is a page the browser shows.
type Page struct {
	URL    *url.URL
	Status int
	Header http.Header
	Body   string
}

// Get navigates to address.
func (b *Browser) Get(address string) (*Page, error) {
	resp, err := b.Client.Get(address)
	if err != nil {
		return nil, err
	}
	return readPage(resp)
}

func readPage(resp *http.Response) (*Page, error) {
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	return &Page{URL: resp.Request.URL, Status: resp.StatusCode, Header: resp.Header, Body: string(body)}, nil
}

// Location is the redirect target of a page the browser stopped at (StopAtCallback).
func (p *Page) Location() (*url.URL, error) {
	loc := p.Header.Get("Location")
	if loc == "" {
		return nil, fmt.Errorf("page %s (status %d) is not a redirect", p.URL, p.Status)
	}
	return p.URL.Parse(loc)
}

var (
	formRE  = regexp.MustCompile(`(?is)<form\b([^>]*)>(.*?)</form>`)
	tagRE   = regexp.MustCompile(`(?is)<(input|button)\b([^>]*)>(?:([^<]*)</button>)?`)
	attrRE  = regexp.MustCompile(`(?is)([a-z-]+)\s*=\s*"([^"]*)"`)
	titleRE = regexp.MustCompile(`(?is)<h1>(.*?)</h1>`)
)

// Title returns the page's heading, for messages.
func (p *Page) Title() string {
	if m := titleRE.FindStringSubmatch(p.Body); m != nil {
		return html.UnescapeString(m[1])
	}
	return ""
}

func attrs(s string) map[string]string {
	out := map[string]string{}
	for _, m := range attrRE.FindAllStringSubmatch(s, -1) {
		out[strings.ToLower(m[1])] = html.UnescapeString(m[2])
	}
	return out
}

// SignInButton is the label of the sandbox sign-in page's button for the account with
// nickname: pass it to SignIn or Submit to sign in as that account. The sandbox's page
// offers every account it knows, the demo user ("Demo Author") first.
func SignInButton(nickname string) string { return "Sign in as " + nickname }

// Submit submits the page's first form, pressing the submit button whose label is button, or
// else the first one whose label or value contains it (case-insensitive; "" presses the first
// button). The exact label wins so that "Sign in as Demo" is not taken for "Sign in as Demo Author".
func (b *Browser) Submit(p *Page, button string) (*Page, error) {
	m := formRE.FindStringSubmatch(p.Body)
	if m == nil {
		return nil, fmt.Errorf("page %s (%d %q) has no form", p.URL, p.Status, p.Title())
	}
	fa := attrs(m[1])
	action, err := p.URL.Parse(fa["action"])
	if err != nil {
		return nil, err
	}
	form := url.Values{}
	var exact, first map[string]string // the attributes of the button pressed
	for _, t := range tagRE.FindAllStringSubmatch(m[2], -1) {
		a := attrs(t[2])
		if strings.EqualFold(t[1], "input") && a["type"] != "submit" {
			if a["name"] != "" {
				form.Set(a["name"], a["value"])
			}
			continue
		}
		label := strings.TrimSpace(html.UnescapeString(t[3]))
		if exact == nil && button != "" && strings.EqualFold(label, strings.TrimSpace(button)) {
			exact = a
		}
		if first == nil && (button == "" || strings.Contains(strings.ToLower(label), strings.ToLower(button)) ||
			strings.EqualFold(a["value"], button)) {
			first = a
		}
	}
	pressed := exact
	if pressed == nil {
		pressed = first
	}
	if pressed == nil {
		return nil, fmt.Errorf("page %s (%q) has no button %q", p.URL, p.Title(), button)
	}
	if pressed["name"] != "" {
		form.Set(pressed["name"], pressed["value"])
	}
	if !strings.EqualFold(fa["method"], "post") {
		return nil, fmt.Errorf("the form of %s is not posted", p.URL)
	}
	req, err := http.NewRequest(http.MethodPost, action.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", p.URL.Scheme+"://"+p.URL.Host)
	resp, err := b.Client.Do(req)
	if err != nil {
		return nil, err
	}
	return readPage(resp)
}

// SignIn goes from the authorization address to the end: the sign-in page (pressing the
// button labelled signIn, or else the first whose label contains it: SignInButton(nickname)
// chooses the account), then the consent page (pressing decide, "allow" or "deny"), then the
// redirect back to the application, followed unless StopAtCallback.
func (b *Browser) SignIn(authURL, signIn, decide string) (*Page, error) {
	p, err := b.Get(authURL)
	if err != nil {
		return nil, err
	}
	if p.Status != http.StatusOK {
		return p, fmt.Errorf("authorization page: status %d (%q)", p.Status, p.Title())
	}
	p, err = b.Submit(p, signIn)
	if err != nil {
		return nil, fmt.Errorf("sign-in page: %w", err)
	}
	if p.Status != http.StatusOK {
		return p, fmt.Errorf("after sign-in: status %d (%q)", p.Status, p.Title())
	}
	p, err = b.Submit(p, decide)
	if err != nil {
		return nil, fmt.Errorf("consent page: %w", err)
	}
	return p, nil
}
