package sandbox_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
)

const deviceGrant = "urn:ietf:params:oauth:grant-type:device_code"

// deviceClient registers a public client that may use the device grant.
func (e *oauthEnv) deviceClient(t *testing.T) string {
	t.Helper()
	status, obj := e.register(t, map[string]any{"client_name": "device", "redirect_uris": []string{loopbackCB},
		"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token", deviceGrant}})
	if status != http.StatusCreated {
		t.Fatalf("register: %d %v", status, obj)
	}
	return obj["client_id"].(string)
}

// deviceAuthorization asks for a device code.
func (e *oauthEnv) deviceAuthorization(t *testing.T, form url.Values) (int, map[string]any) {
	t.Helper()
	res, obj := e.do(t, "POST", "/oauth/device_authorization", "application/x-www-form-urlencoded", form.Encode(), nil)
	return res.StatusCode, obj
}

// typeUserCode opens the device page, types code, signs in and answers decision ("" stops at
// the page after the code); it returns the last page.
func (b *browser) typeUserCode(t *testing.T, code, decision string) *page {
	t.Helper()
	if p := b.get(t, b.e.base+"/oauth/device?user_code="+url.QueryEscape(code)); p.status != http.StatusOK || !strings.Contains(p.body, `name="user_code"`) {
		t.Fatalf("device page: %d %s", p.status, p.body)
	}
	signIn := b.post(t, "/oauth/device", url.Values{"user_code": {code}}, nil)
	if decision == "" || signIn.status != http.StatusOK {
		return signIn
	}
	consent := b.signIn(t, signIn)
	if !strings.Contains(consent.body, "This signs in the device that showed you the code") {
		t.Fatalf("the consent page does not name the device: %s", consent.body)
	}
	action, f := consent.form(t)
	f.Set("decision", decision)
	return b.post(t, action, f, nil)
}

// TestOAuthDeviceGrant: RFC 8628 in the sandbox (a guess of the contract): the code typed on
// the device page (in any case, without its dash) and allowed yields tokens once; until then the
// token endpoint answers authorization_pending; denied, expired, another client's or a client
// that did not register the grant are refused; a mistyped code gets an error page.
func TestOAuthDeviceGrant(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		register func(e *oauthEnv, t *testing.T) string
		typed    func(code string) string
		decision string
		advance  time.Duration
		other    bool // the token request names another client
		want     string
	}{
		{name: "allowed", typed: func(c string) string { return c }, decision: "allow", want: ""},
		{name: "typed lower case without the dash", typed: func(c string) string { return strings.ToLower(strings.ReplaceAll(c, "-", "")) }, decision: "allow", want: ""},
		{name: "not yet", typed: nil, want: "authorization_pending"},
		{name: "denied", typed: func(c string) string { return c }, decision: "deny", want: "access_denied"},
		{name: "expired", typed: nil, advance: 11 * time.Minute, want: "expired_token"},
		{name: "another client", typed: func(c string) string { return c }, decision: "allow", other: true, want: "invalid_grant"},
		{name: "a mistyped code", typed: func(string) string { return "BCDF-GHJK" }, decision: "", want: "authorization_pending"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newOAuthEnv(t, sandbox.Options{})
			client := e.deviceClient(t)
			status, da := e.deviceAuthorization(t, url.Values{"client_id": {client}, "scope": {"mcp:card-writer"}, "resource": {e.resource()}})
			if status != http.StatusOK || da["device_code"] == nil || da["verification_uri"] != e.base+"/oauth/device" {
				t.Fatalf("device authorization: %d %v", status, da)
			}
			code := da["user_code"].(string)
			if tt.typed != nil {
				last := e.browser(t).typeUserCode(t, tt.typed(code), tt.decision)
				if tt.name == "a mistyped code" && (last.status != http.StatusBadRequest || !strings.Contains(last.body, "Unknown code")) {
					t.Fatalf("a mistyped code: %d %s", last.status, last.body)
				}
			}
			e.clock.Advance(tt.advance)
			tokenClient := client
			if tt.other {
				tokenClient = e.deviceClient(t)
			}
			form := url.Values{"grant_type": {deviceGrant}, "client_id": {tokenClient}, "device_code": {da["device_code"].(string)}}
			if tt.want != "" {
				e.wantTokenError(t, form, http.StatusBadRequest, tt.want)
				return
			}
			got, tok := e.token(t, form)
			if got != http.StatusOK || tok["access_token"] == nil || tok["refresh_token"] == nil {
				t.Fatalf("token: %d %v", got, tok)
			}
			e.wantAPI(t, tok["access_token"].(string), http.StatusOK)
			// A device code is spent once.
			e.wantTokenError(t, form, http.StatusBadRequest, "expired_token")
		})
	}
	t.Run("a client without the grant", func(t *testing.T) {
		t.Parallel()
		e := newOAuthEnv(t, sandbox.Options{})
		status, obj := e.deviceAuthorization(t, url.Values{"client_id": {e.client(t, "plain")}})
		if status != http.StatusBadRequest || obj["error"] != "unauthorized_client" {
			t.Fatalf("%d %v", status, obj)
		}
	})
}
