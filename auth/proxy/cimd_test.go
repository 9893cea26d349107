package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/globaladdr"
)

// metadataServer serves client metadata documents over TLS: good.json describes itself.
func metadataServer(t *testing.T) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := srv.URL + r.URL.Path
		doc := map[string]any{"client_id": id, "client_name": "Metadata Client", "redirect_uris": []string{"http://127.0.0.1:9/cb"},
			"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"}}
		switch r.URL.Path {
		case "/wrong-id.json":
			doc["client_id"] = "https://elsewhere.example/client.json"
		case "/secret-auth.json":
			doc["token_endpoint_auth_method"] = "client_secret_basic"
		case "/big.json":
			doc["client_name"] = strings.Repeat("x", 6000)
		case "/moved.json":
			http.Redirect(w, r, "/good.json", http.StatusFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// authorizePage asks /authorize, with hc, for the client id (redirect URI
// http://127.0.0.1:9/cb) and returns the answer and its body.
func (e *env) authorizePage(hc *http.Client, id string) (*http.Response, string) {
	e.t.Helper()
	c := &client{e: e, id: id, redirectURI: "http://127.0.0.1:9/cb", browser: newBrowser()}
	resp, err := hc.Get(c.authURL(c.newRequest()))
	if err != nil {
		e.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// TestClientIDMetadataDocuments: a client whose client_id is its metadata document's https URL
// signs in with no registration; a document that does not check out is refused, saying why.
func TestClientIDMetadataDocuments(t *testing.T) {
	md := metadataServer(t)
	e := newEnv(t, envOptions{metadataClient: md.Client()})

	resp, err := http.Get(e.url + "/.well-known/oauth-authorization-server")
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&meta)
	resp.Body.Close()
	if meta["client_id_metadata_document_supported"] != true {
		t.Errorf("metadata does not advertise CIMD: %v", meta)
	}

	c := &client{e: e, id: md.URL + "/good.json", redirectURI: "http://127.0.0.1:9/cb", browser: newBrowser()}
	access, refresh := c.signIn()
	if access == "" || refresh == "" {
		t.Fatal("no tokens")
	}
	if status, tok := c.refresh(refresh); status != 200 || tok["access_token"] == nil {
		t.Errorf("refresh: %d %v", status, tok)
	}

	nc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct{ path, want string }{
		{"/wrong-id.json", "client_id is not its own URL"},
		{"/secret-auth.json", "only none"},
		{"/big.json", "larger than"},
		{"/moved.json", "302"},
	} {
		resp, body := e.authorizePage(nc, md.URL+tc.path)
		// The browser is told that the document could not be used, never why: the why is in
		// the server's log.
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "could not be fetched or is not valid") || strings.Contains(body, tc.want) {
			t.Errorf("%s: %d, want 400 with the generic message and not %q:\n%.300s", tc.path, resp.StatusCode, tc.want, body)
		}
		if !strings.Contains(e.logs.String(), tc.want) {
			t.Errorf("%s: the log does not say %q", tc.path, tc.want)
		}
	}
}

// TestClientIDMetadataRefusesNonGlobalAddresses: the default fetcher dials no address that is
// not a global one (no request forgery through client_id): the test's own server on loopback,
// and literal addresses of the special-purpose ranges, embedded IPv4 forms included. The
// browser sees a generic page, without the address or the network error, which go to the log.
func TestClientIDMetadataRefusesNonGlobalAddresses(t *testing.T) {
	md := metadataServer(t)
	e := newEnv(t, envOptions{})
	nc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, id := range []string{
		md.URL + "/good.json",
		"https://100.64.0.1/c.json", "https://192.0.0.170/c.json", "https://198.18.0.1/c.json", "https://0.0.0.0/c.json",
		"https://240.0.0.1/c.json", "https://169.254.169.254/c.json", "https://[64:ff9b::a9fe:a9fe]/c.json",
		"https://[64:ff9b:1::a00:1]/c.json", "https://[2002:a9fe:a9fe::1]/c.json", "https://[::a9fe:a9fe]/c.json",
		"https://[::ffff:a9fe:a9fe]/c.json", "https://[fec0::1]/c.json", "https://[fd00:ec2::254]/c.json",
	} {
		resp, body := e.authorizePage(nc, id)
		u, _ := url.Parse(id)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "could not be fetched or is not valid") {
			t.Errorf("%s: %d:\n%.300s", id, resp.StatusCode, body)
		}
		for _, leak := range []string{"public", "dial", "refused", "127.0.0.1", strings.Trim(u.Hostname(), "[]")} {
			if strings.Contains(body, leak) {
				t.Errorf("%s: the page says %q:\n%.500s", id, leak, body)
			}
		}
	}
	if n := strings.Count(e.logs.String(), "is not a public one"); n < 14 {
		t.Errorf("the log tells %d refusals by address, want 14:\n%s", n, e.logs.String())
	}
}

// TestDialRefusesEverySpecialRange: the dialer's check refuses the first address of every
// special-purpose block of both families, IPv4 ones also in their mapped, NAT64,
// IPv4-compatible and 6to4 forms, and lets global addresses through.
func TestDialRefusesEverySpecialRange(t *testing.T) {
	t.Parallel()
	for _, r := range globaladdr.Special {
		a := r.Prefix.Masked().Addr().Next()
		forms := []netip.Addr{a}
		if a.Is4() {
			v4 := a.As4()
			forms = append(forms,
				netip.AddrFrom16(a.As16()), // ::ffff:a.b.c.d
				netip.AddrFrom16([16]byte{0: 0x00, 1: 0x64, 2: 0xff, 3: 0x9b, 12: v4[0], 13: v4[1], 14: v4[2], 15: v4[3]}), // 64:ff9b::a.b.c.d
				netip.AddrFrom16([16]byte{12: v4[0], 13: v4[1], 14: v4[2], 15: v4[3]}),                                     // ::a.b.c.d
				netip.AddrFrom16([16]byte{0: 0x20, 1: 0x02, 2: v4[0], 3: v4[1], 4: v4[2], 5: v4[3], 15: 1}),                // 2002:a.b.c.d::1
			)
		}
		for _, f := range forms {
			if err := refuseNonGlobal("tcp", netip.AddrPortFrom(f, 443).String(), nil); err == nil {
				t.Errorf("%s (%s) is dialled", f, r.Name)
			}
		}
	}
	for _, ok := range []string{"8.8.8.8:443", "[2606:4700:4700::1111]:443", "[::ffff:8.8.8.8]:443"} {
		if err := refuseNonGlobal("tcp", ok, nil); err != nil {
			t.Errorf("%s is refused: %v", ok, err)
		}
	}
}
