package proxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
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
		bad := &client{e: e, id: md.URL + tc.path, redirectURI: "http://127.0.0.1:9/cb", browser: newBrowser()}
		ar := bad.newRequest()
		resp, err := nc.Get(e.url + "/authorize?" + ar.params.Encode())
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: %d, want 400 saying %q:\n%.300s", tc.path, resp.StatusCode, tc.want, body)
		}
	}
}

// TestClientIDMetadataRefusesPrivateAddresses: the default fetcher reaches no loopback or
// private address (no request forgery through client_id).
func TestClientIDMetadataRefusesPrivateAddresses(t *testing.T) {
	md := metadataServer(t)
	e := newEnv(t, envOptions{})
	c := &client{e: e, id: md.URL + "/good.json", redirectURI: "http://127.0.0.1:9/cb", browser: newBrowser()}
	ar := c.newRequest()
	nc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := nc.Get(e.url + "/authorize?" + ar.params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "not a public one") {
		t.Errorf("%d:\n%.300s", resp.StatusCode, body)
	}
	if _, err := url.Parse(md.URL); err != nil {
		t.Fatal(err)
	}
}
