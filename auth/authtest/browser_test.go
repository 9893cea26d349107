package authtest_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/cardwriter/cardwriter-mcp/auth/authtest"
	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
)

// TestBrowserSignsInAsChosenUser: the browser signs in to the sandbox as the account whose
// button it is told to press, and an exact label wins over a longer one that contains it
// ("Sign in as Demo" is not "Sign in as Demo Author", the first button).
func TestBrowserSignsInAsChosenUser(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	svc, err := sandbox.New(sandbox.Options{BaseURL: base})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = svc.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	demo := svc.AddUser("demo-lookalike-token-0123456789", "Demo")
	alice := svc.AddUser("alice-token-0123456789", "Alice")

	const redirect = "http://127.0.0.1:9/callback"
	body, _ := json.Marshal(map[string]any{"client_name": "authtest", "redirect_uris": []string{redirect},
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code"}})
	resp, err := http.Post(base+"/oauth/register", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var reg struct {
		ClientID string `json:"client_id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&reg)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || reg.ClientID == "" {
		t.Fatalf("register: %d", resp.StatusCode)
	}
	conf := &oauth2.Config{ClientID: reg.ClientID, RedirectURL: redirect, Scopes: []string{"mcp:card-writer"},
		Endpoint: oauth2.Endpoint{AuthURL: base + "/oauth/authorize", TokenURL: base + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}

	for _, tc := range []struct{ button, want string }{
		{"Sign in", "u_demo"}, // the first button
		{authtest.SignInButton("Demo Author"), "u_demo"},
		{authtest.SignInButton("Demo"), demo},
		{authtest.SignInButton("alice"), alice}, // case-insensitive
	} {
		t.Run(tc.button, func(t *testing.T) {
			b := authtest.New()
			b.StopAtCallback = true
			verifier := oauth2.GenerateVerifier()
			authURL := conf.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", base+"/open/v1"))
			p, err := b.SignIn(authURL, tc.button, "allow")
			if err != nil {
				t.Fatal(err)
			}
			loc, err := p.Location()
			if err != nil {
				t.Fatal(err)
			}
			tok, err := conf.Exchange(t.Context(), loc.Query().Get("code"), oauth2.VerifierOption(verifier))
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodGet, base+"/open/v1/me", nil)
			req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var me map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&me)
			if me["userId"] != tc.want {
				t.Fatalf("signed in as %v, want %s", me, tc.want)
			}
		})
	}

	// A button the page does not have is an error, not a guess.
	b := authtest.New()
	authURL := conf.AuthCodeURL("st", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()), oauth2.SetAuthURLParam("resource", base+"/open/v1"))
	if _, err := b.SignIn(authURL, authtest.SignInButton("Nobody"), "allow"); err == nil || !strings.Contains(err.Error(), "no button") {
		t.Fatalf("an account the page does not offer: %v", err)
	}
}
