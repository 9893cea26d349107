package oauthserver

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func loopback(h string) bool { return h == "127.0.0.1" || h == "localhost" || h == "::1" }

func TestPKCE(t *testing.T) {
	// RFC 7636 appendix B.
	const verifier, challenge = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
	if got := S256(verifier); got != challenge {
		t.Fatalf("S256 = %q, want %q", got, challenge)
	}
	if !VerifierMatches(verifier, challenge) {
		t.Error("the RFC 7636 verifier does not match its challenge")
	}
	if VerifierMatches(verifier+"x", challenge) || VerifierMatches(challenge, challenge) {
		t.Error("another verifier matches")
	}
	if VerifierMatches("short", S256("short")) {
		t.Error("a verifier shorter than 43 characters matches")
	}
	for _, tt := range []struct {
		q    url.Values
		code string
	}{
		{url.Values{"code_challenge_method": {"S256"}, "code_challenge": {challenge}}, ""},
		{url.Values{"code_challenge": {challenge}}, "invalid_request"},
		{url.Values{"code_challenge_method": {"plain"}, "code_challenge": {verifier}}, "invalid_request"},
		{url.Values{"code_challenge_method": {"S256"}}, "invalid_request"},
		{url.Values{"code_challenge_method": {"S256"}, "code_challenge": {challenge[:42]}}, "invalid_request"},
		{url.Values{"code_challenge_method": {"S256"}, "code_challenge": {strings.Repeat("+", 43)}}, "invalid_request"},
	} {
		e := CheckChallenge(tt.q)
		if (e == nil) != (tt.code == "") || (e != nil && e.Code != tt.code) {
			t.Errorf("CheckChallenge(%v) = %v, want %q", tt.q, e, tt.code)
		}
	}
}

func TestCanonicalResource(t *testing.T) {
	for in, want := range map[string]string{
		"HTTPS://Example.COM:443/mcp/": "https://example.com/mcp",
		"http://127.0.0.1:80":          "http://127.0.0.1",
		"http://127.0.0.1:8080/mcp":    "http://127.0.0.1:8080/mcp",
		"https://example.com/mcp#x":    "",
		"https://u@example.com/mcp":    "",
		"/mcp":                         "",
		"urn:x:y":                      "",
	} {
		got, ok := CanonicalResource(in)
		if got != want || ok != (want != "") {
			t.Errorf("CanonicalResource(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	f := url.Values{"resource": {"https://EXAMPLE.com/mcp/"}}
	if e := CheckResourceParam(f, "https://example.com/mcp"); e != nil {
		t.Errorf("the same resource is refused: %v", e)
	}
	if e := CheckResourceParam(f, "https://example.com/other"); e == nil || e.Code != "invalid_target" {
		t.Errorf("another resource: %v, want invalid_target", e)
	}
	if e := CheckResourceParam(url.Values{}, "https://example.com/other"); e != nil {
		t.Errorf("no resource parameter is refused: %v", e)
	}
}

func TestCheckRedirectURI(t *testing.T) {
	for uri, ok := range map[string]bool{
		"https://app.example/cb":       true,
		"http://127.0.0.1:33418/cb":    true,
		"http://localhost/cb":          true,
		"http://app.example/cb":        false,
		"https://app.example/cb#x":     false,
		"https://u:p@app.example/cb":   false,
		"https://app.example:0/cb":     false,
		"https://app.example:65536/cb": false,
		"https://app.example:0443/cb":  false,
		"app.example/cb":               false,
		"myapp:/cb":                    false,
		"https://app.example/" + strings.Repeat("a", MaxURILength): false,
	} {
		if err := CheckRedirectURI(uri, loopback); (err == nil) != ok {
			t.Errorf("CheckRedirectURI(%q) = %v, want ok=%v", uri, err, ok)
		}
	}
}

func TestClientMetadata(t *testing.T) {
	read := func(ctype, body string) (*ClientMetadata, *Error) {
		r := httptest.NewRequest(http.MethodPost, "/register", strings.NewReader(body))
		r.Header.Set("Content-Type", ctype)
		return ReadClientMetadata(httptest.NewRecorder(), r)
	}
	if _, e := read("text/plain", `{}`); e == nil || e.Code != "invalid_client_metadata" {
		t.Errorf("text/plain: %v", e)
	}
	if _, e := read("application/json", `[1]`); e == nil || e.Code != "invalid_client_metadata" {
		t.Errorf("not an object: %v", e)
	}
	m, e := read("application/json; charset=utf-8",
		`{"redirect_uris":["https://a.example/cb"],"grant_types":["authorization_code","implicit","authorization_code"],"client_name":" A "}`)
	if e != nil {
		t.Fatal(e)
	}
	if e := m.CheckRedirectURIs(loopback); e != nil {
		t.Error(e)
	}
	if g, e := m.Grants(false); e != nil || strings.Join(g, " ") != "authorization_code" {
		t.Errorf("lenient grants = %v, %v", g, e)
	}
	if _, e := m.Grants(true); e == nil || e.Code != "invalid_client_metadata" {
		t.Errorf("strict grants with implicit: %v", e)
	}
	if g, e := (&ClientMetadata{}).Grants(true); e != nil || len(g) != 2 {
		t.Errorf("default grants = %v, %v", g, e)
	}
	if _, e := (&ClientMetadata{GrantTypes: []string{"refresh_token"}}).Grants(false); e == nil {
		t.Error("grants without authorization_code accepted")
	}
	if n, e := m.Name(); n != "A" || e != nil {
		t.Errorf("Name = %q, %v", n, e)
	}
	bad := "a\x01b"
	if _, e := (&ClientMetadata{ClientName: &bad}).Name(); e == nil {
		t.Error("a control character in client_name accepted")
	}
	if e := (&ClientMetadata{ResponseTypes: []string{"token"}}).CheckResponseTypes(); e == nil {
		t.Error("response_types token accepted")
	}
	if e := (&ClientMetadata{}).CheckRedirectURIs(loopback); e == nil || e.Code != "invalid_redirect_uri" {
		t.Errorf("no redirect URIs: %v", e)
	}
	many := &ClientMetadata{RedirectURIs: make([]string, MaxRedirectURIs+1)}
	if e := many.CheckRedirectURIs(loopback); e == nil {
		t.Error("too many redirect URIs accepted")
	}
}

func TestReadForm(t *testing.T) {
	post := func(ctype, body string) (url.Values, *Error) {
		r := httptest.NewRequest(http.MethodPost, "/token", strings.NewReader(body))
		r.Header.Set("Content-Type", ctype)
		return ReadForm(httptest.NewRecorder(), r)
	}
	if f, e := post("application/x-www-form-urlencoded", "a=1&b=2"); e != nil || f.Get("b") != "2" {
		t.Errorf("ReadForm = %v, %v", f, e)
	}
	if _, e := post("application/json", "{}"); e == nil {
		t.Error("JSON accepted")
	}
	if _, e := post("application/x-www-form-urlencoded", "a=1&a=2"); e == nil || !strings.Contains(e.Description, "a is given more than once") {
		t.Errorf("repeated parameter: %v", e)
	}
	if _, e := post("application/x-www-form-urlencoded", strings.Repeat("a", MaxBodyBytes+1)); e == nil {
		t.Error("a body over the limit accepted")
	}
}

func TestCheckRedemption(t *testing.T) {
	const verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ic := IssuedCode{ClientID: "c1", RedirectURI: "https://a.example/cb", Challenge: S256(verifier),
		Resource: "https://mcp.example/mcp", Expires: now.Add(time.Minute)}
	ok := CodeRequest{Code: "x", RedirectURI: "https://a.example/cb", Verifier: verifier}
	if reason, e := ic.CheckRedemption(now, "c1", ok, url.Values{"resource": {"https://mcp.example/mcp"}}); e != nil {
		t.Fatalf("a good redemption is refused: %s %v", reason, e)
	}
	other := ok
	other.RedirectURI = "https://a.example/other"
	wrongVerifier := ok
	wrongVerifier.Verifier = strings.Repeat("a", 43)
	for name, tt := range map[string]struct {
		now    time.Time
		client string
		cr     CodeRequest
		f      url.Values
		code   string
	}{
		"expired":          {now.Add(time.Minute), "c1", ok, nil, "invalid_grant"},
		"another client":   {now, "c2", ok, nil, "invalid_grant"},
		"redirect URI":     {now, "c1", other, nil, "invalid_grant"},
		"verifier":         {now, "c1", wrongVerifier, nil, "invalid_grant"},
		"another resource": {now, "c1", ok, url.Values{"resource": {"https://x.example/mcp"}}, "invalid_target"},
	} {
		reason, e := ic.CheckRedemption(tt.now, tt.client, tt.cr, tt.f)
		if e == nil || e.Code != tt.code || reason == "" {
			t.Errorf("%s: %q %v, want %s", name, reason, e, tt.code)
		}
	}
	if _, e := ReadCodeRequest(url.Values{"code": {"x"}, "redirect_uri": {"y"}}); e == nil || e.Code != "invalid_request" {
		t.Errorf("no code_verifier: %v", e)
	}
}

func TestCheckGrantType(t *testing.T) {
	reg := []string{"authorization_code"}
	for gt, code := range map[string]string{"": "invalid_request", "password": "unsupported_grant_type",
		"refresh_token": "unauthorized_client", "authorization_code": ""} {
		e := CheckGrantType(gt, reg)
		if (e == nil) != (code == "") || (e != nil && e.Code != code) {
			t.Errorf("CheckGrantType(%q) = %v, want %q", gt, e, code)
		}
	}
}

func TestWriteHTML(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteHTML(rec, http.StatusTeapot, []byte("<p>x</p>"), "default-src 'none'", "no-referrer")
	h := rec.Result().Header
	for k, want := range map[string]string{"Content-Type": "text/html; charset=utf-8", "X-Frame-Options": "DENY",
		"Content-Security-Policy": "default-src 'none'", "Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
		"X-Content-Type-Options": "nosniff"} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if rec.Code != http.StatusTeapot || rec.Body.String() != "<p>x</p>" {
		t.Errorf("got %d %q", rec.Code, rec.Body.String())
	}
	css := pageStyle("30rem")
	if !strings.Contains(css, "max-width:30rem;") {
		t.Errorf("PageStyle does not take its width: %s", css)
	}
	// The hash of the empty string, as CSP level 3 computes it.
	if got := styleHash(""); got != "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=" {
		t.Errorf("styleHash(\"\") = %s", got)
	}
}

func TestPublicClientID(t *testing.T) {
	req := func(auth string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/token", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		return r
	}
	for name, tt := range map[string]struct {
		auth     string
		f        url.Values
		required bool
		id       string
		status   int
	}{
		"named":          {"", url.Values{"client_id": {"c1"}}, true, "c1", 0},
		"none, optional": {"", url.Values{}, false, "", 0},
		"none, required": {"", url.Values{}, true, "", http.StatusBadRequest},
		"basic auth":     {"Basic YTpi", url.Values{"client_id": {"c1"}}, false, "", http.StatusUnauthorized},
		"client_secret":  {"", url.Values{"client_id": {"c1"}, "client_secret": {"s"}}, true, "", http.StatusUnauthorized},
	} {
		rec := httptest.NewRecorder()
		id, e := PublicClientID(rec, req(tt.auth), tt.f, "realm-x", tt.required)
		status := 0
		if e != nil {
			status = e.Status
		}
		if id != tt.id || status != tt.status {
			t.Errorf("%s: %q %v, want %q status %d", name, id, e, tt.id, tt.status)
		}
		if challenge := rec.Header().Get("WWW-Authenticate"); (status == http.StatusUnauthorized) != (challenge == `Basic realm="realm-x"`) {
			t.Errorf("%s: challenge %q", name, challenge)
		}
	}
	if e := UnknownClient(); e.Status != http.StatusUnauthorized || e.Code != "invalid_client" {
		t.Errorf("UnknownClient = %+v", e)
	}
}
