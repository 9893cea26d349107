package auth_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/cardwriter/cardwriter-mcp/auth"
	"github.com/cardwriter/cardwriter-mcp/auth/authtest"
	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// revokeToken revokes a token at the server's RFC 7009 endpoint.
func revokeToken(t *testing.T, base, clientID, token string) {
	t.Helper()
	resp, err := http.PostForm(base+"/oauth/revoke", url.Values{"token": {token}, "client_id": {clientID}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: status %d", resp.StatusCode)
	}
}

// rawFlow drives the authorization by hand, as an attacker or a faulty client could.
type rawFlow struct {
	t        *testing.T
	srv      *server
	md       *auth.Metadata
	clientID string
	secrets  *secretSet
}

func newRawFlow(t *testing.T, secrets *secretSet) *rawFlow {
	t.Helper()
	srv := newSandbox(t, sandbox.Options{})
	ctx := context.Background()
	md, err := auth.Discover(ctx, nil, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := auth.Register(ctx, nil, md, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &rawFlow{t: t, srv: srv, md: md, clientID: reg.ClientID, secrets: secrets}
}

func (f *rawFlow) config(redirectURI string) *oauth2.Config {
	return &oauth2.Config{ClientID: f.clientID, RedirectURL: redirectURI, Scopes: []string{auth.Scope},
		Endpoint: oauth2.Endpoint{AuthURL: f.md.AuthorizationEndpoint, TokenURL: f.md.TokenEndpoint, AuthStyle: oauth2.AuthStyleInParams}}
}

// authorize goes through sign-in and consent and returns where the server redirected.
func (f *rawFlow) authorize(redirectURI, verifier string, extra ...oauth2.AuthCodeOption) *url.URL {
	f.t.Helper()
	opts := append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}, extra...)
	b := authtest.New()
	b.StopAtCallback = true
	address := f.config(redirectURI).AuthCodeURL("st-1", opts...)
	p, err := b.Get(address)
	if err != nil {
		f.t.Fatal(err)
	}
	if p.Header.Get("Location") == "" { // refused at once, or on to sign-in and consent
		if p, err = b.SignIn(address, "Sign in", "allow"); err != nil {
			f.t.Fatal(err)
		}
	}
	loc, err := p.Location()
	if err != nil {
		f.t.Fatal(err)
	}
	f.secrets.Add(loc.Query().Get("code"))
	return loc
}

func (f *rawFlow) resource() oauth2.AuthCodeOption {
	return oauth2.SetAuthURLParam("resource", f.srv.URL+"/open/v1")
}

// exchange trades a code; it returns the OAuth error code ("" on success) and the token.
func (f *rawFlow) exchange(redirectURI, code, verifier string, extra ...oauth2.AuthCodeOption) (string, *oauth2.Token) {
	f.t.Helper()
	opts := append([]oauth2.AuthCodeOption{oauth2.VerifierOption(verifier)}, extra...)
	tok, err := f.config(redirectURI).Exchange(context.Background(), code, opts...)
	if err != nil {
		re, ok := err.(*oauth2.RetrieveError)
		if !ok {
			f.t.Fatalf("exchange: %v", err)
		}
		return re.ErrorCode, nil
	}
	f.secrets.Add(tok.AccessToken, tok.RefreshToken)
	return "", tok
}

// works reports whether an access token is accepted by the API.
func (f *rawFlow) works(tok string) bool {
	c, err := upstream.New(f.srv.URL, upstream.StaticToken(tok), upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		f.t.Fatal(err)
	}
	_, err = c.GetMe(context.Background())
	return err == nil
}

// TestAuthorizationSecurity: the code flow's defences, end to end against the sandbox.
func TestAuthorizationSecurity(t *testing.T) {
	t.Parallel()
	secrets := &secretSet{}
	const cb = "http://127.0.0.1:49152/callback"

	t.Run("wrong PKCE verifier", func(t *testing.T) {
		f := newRawFlow(t, secrets)
		v := oauth2.GenerateVerifier()
		code := f.authorize(cb, v, f.resource()).Query().Get("code")
		if e, _ := f.exchange(cb, code, oauth2.GenerateVerifier(), f.resource()); e != "invalid_grant" {
			t.Errorf("exchange with another verifier: %q, want invalid_grant", e)
		}
		if e, _ := f.exchange(cb, code, v, f.resource()); e != "invalid_grant" {
			t.Errorf("the code still works after a wrong verifier: %q", e)
		}
	})

	t.Run("reused code", func(t *testing.T) {
		f := newRawFlow(t, secrets)
		v := oauth2.GenerateVerifier()
		code := f.authorize(cb, v, f.resource()).Query().Get("code")
		e, tok := f.exchange(cb, code, v, f.resource())
		if e != "" || !f.works(tok.AccessToken) {
			t.Fatalf("first exchange: %q", e)
		}
		if e, _ := f.exchange(cb, code, v, f.resource()); e != "invalid_grant" {
			t.Errorf("second exchange: %q, want invalid_grant", e)
		}
		if f.works(tok.AccessToken) {
			t.Error("the tokens of a reused code still work")
		}
	})

	t.Run("foreign redirect URI", func(t *testing.T) {
		f := newRawFlow(t, secrets)
		for _, ru := range []string{"https://evil.example/callback", "http://127.0.0.1:49152/other", "http://evil.example/callback"} {
			b := authtest.New()
			b.StopAtCallback = true
			p, err := b.Get(f.config(ru).AuthCodeURL("st-1", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()), f.resource()))
			if err != nil {
				t.Fatal(err)
			}
			if p.Status != http.StatusBadRequest || p.Header.Get("Location") != "" || p.URL.Host != strings.TrimPrefix(f.srv.URL, "http://") {
				t.Errorf("%s: status %d at %s, Location %q: the server sent the browser elsewhere", ru, p.Status, p.URL, p.Header.Get("Location"))
			}
		}
		// A code issued for one loopback port is not exchanged for another.
		v := oauth2.GenerateVerifier()
		code := f.authorize(cb, v, f.resource()).Query().Get("code")
		if e, _ := f.exchange("http://127.0.0.1:49153/callback", code, v, f.resource()); e != "invalid_grant" {
			t.Errorf("exchange with another redirect_uri: %q, want invalid_grant", e)
		}
	})

	t.Run("missing or foreign resource", func(t *testing.T) {
		f := newRawFlow(t, secrets)
		loc := f.authorize(cb, oauth2.GenerateVerifier())
		if loc.Query().Get("error") != "invalid_target" || loc.Query().Get("code") != "" || loc.Query().Get("state") != "st-1" {
			t.Errorf("authorization without resource: %v", loc.Query())
		}
		loc = f.authorize(cb, oauth2.GenerateVerifier(), oauth2.SetAuthURLParam("resource", "https://evil.example/open/v1"))
		if loc.Query().Get("error") != "invalid_target" {
			t.Errorf("authorization for another resource: %v", loc.Query())
		}
		v := oauth2.GenerateVerifier()
		code := f.authorize(cb, v, f.resource()).Query().Get("code")
		if e, _ := f.exchange(cb, code, v, oauth2.SetAuthURLParam("resource", "https://evil.example/open/v1")); e != "invalid_target" {
			t.Errorf("exchange for another resource: %q, want invalid_target", e)
		}
	})

	t.Run("PKCE required", func(t *testing.T) {
		f := newRawFlow(t, secrets)
		b := authtest.New()
		b.StopAtCallback = true
		p, err := b.Get(f.config(cb).AuthCodeURL("st-1", f.resource()))
		if err != nil {
			t.Fatal(err)
		}
		loc, err := p.Location()
		if err != nil || loc.Query().Get("error") != "invalid_request" || loc.Query().Get("code") != "" {
			t.Errorf("authorization without code_challenge: %v, %v", loc, err)
		}
	})

	t.Run("expired and revoked tokens", func(t *testing.T) {
		f := newRawFlow(t, secrets)
		v := oauth2.GenerateVerifier()
		code := f.authorize(cb, v, f.resource()).Query().Get("code")
		_, tok := f.exchange(cb, code, v, f.resource())
		if !f.works(tok.AccessToken) {
			t.Fatal("fresh token refused")
		}
		f.srv.clock.Advance(61 * time.Minute)
		if f.works(tok.AccessToken) {
			t.Error("an expired access token works")
		}
		// Refresh rotates: the old refresh token is then refused, and its reuse ends the grant.
		src := f.config(cb).TokenSource(context.Background(), &oauth2.Token{RefreshToken: tok.RefreshToken, Expiry: time.Unix(1, 0)})
		nt, err := src.Token()
		if err != nil || nt.RefreshToken == tok.RefreshToken || !f.works(nt.AccessToken) {
			t.Fatalf("refresh: %v", err)
		}
		secrets.Add(nt.AccessToken, nt.RefreshToken)
		revokeToken(t, f.srv.URL, f.clientID, nt.RefreshToken)
		if f.works(nt.AccessToken) {
			t.Error("the access token of a revoked grant works")
		}
		_, err = f.config(cb).TokenSource(context.Background(), &oauth2.Token{RefreshToken: nt.RefreshToken, Expiry: time.Unix(1, 0)}).Token()
		if re, ok := err.(*oauth2.RetrieveError); !ok || re.ErrorCode != "invalid_grant" {
			t.Errorf("refresh with a revoked refresh token: %v", err)
		}
	})
}

// TestRegistration checks the registration request and that a kept client is reused.
func TestRegistration(t *testing.T) {
	t.Parallel()
	var got map[string]any
	srv := httptestServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/oauth/register" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewDecoder(r.Body).Decode(&got)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"client_id":"c_1","redirect_uris":["http://127.0.0.1/callback"],"token_endpoint_auth_method":"none"}`))
	})
	md, err := auth.Discover(context.Background(), nil, srv)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := auth.Register(context.Background(), nil, md, time.Now())
	if err != nil || reg.ClientID != "c_1" || reg.Issuer != srv {
		t.Fatalf("Register = %+v, %v", reg, err)
	}
	want := map[string]any{"client_name": "cardwriter-mcp", "token_endpoint_auth_method": "none", "scope": auth.Scope}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("registration %s = %v, want %v", k, got[k], v)
		}
	}
	if ru, _ := got["redirect_uris"].([]any); len(ru) != 1 || ru[0] != "http://127.0.0.1/callback" {
		t.Errorf("redirect_uris = %v", got["redirect_uris"])
	}
}

func TestRegistrationRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, status, body, want string }{
		{"error", "400", `{"error":"invalid_redirect_uri","error_description":"no"}`, "invalid_redirect_uri"},
		{"no client_id", "201", `{"redirect_uris":["http://127.0.0.1/callback"]}`, "no client_id"},
		{"confidential", "201", `{"client_id":"c","client_secret":"s","redirect_uris":["http://127.0.0.1/callback"],"token_endpoint_auth_method":"client_secret_basic"}`, "confidential"},
		{"other redirect", "201", `{"client_id":"c","redirect_uris":["http://127.0.0.1:1/x"]}`, "redirect URI"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptestServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/oauth/register" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				code := http.StatusCreated
				if tc.status == "400" {
					code = http.StatusBadRequest
				}
				w.WriteHeader(code)
				_, _ = w.Write([]byte(tc.body))
			})
			md, _ := auth.Discover(context.Background(), nil, srv)
			if _, err := auth.Register(context.Background(), nil, md, time.Now()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Register = %v, want %q", err, tc.want)
			}
		})
	}
}
