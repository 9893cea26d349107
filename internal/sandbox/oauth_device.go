package sandbox

// The RFC 8628 device authorization grant, a guess of the contract (the card service's document
// shows none) that the sandbox offers so that a sign-in without a browser on the signing-in
// machine can be tried and tested: the client asks /oauth/device_authorization for a device
// code and a user code; the person opens /oauth/device anywhere, types the user code, signs in
// and allows; the client polls the token endpoint with the device code meanwhile. Like codes,
// device authorizations live in memory only (oauthRuntime).

import (
	"crypto/rand"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/oauthserver"
)

const (
	deviceAuthorizationPath = "/oauth/device_authorization"
	devicePath              = "/oauth/device"
	deviceCodeTTL           = 10 * time.Minute
	devicePollInterval      = 1 // seconds between polls the client is asked to keep
)

// deviceAuth is one device authorization waiting for its user, or answered.
type deviceAuth struct {
	ClientID string
	Scope    string
	Resource string
	UserCode string
	Expires  time.Time
	UserID   string // set when the user allowed it
	Denied   bool
}

// userCodeAlphabet has no vowels (no words) and no look-alikes.
const userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

// newUserCode returns a user code such as "WDJB-MJHT" (RFC 8628 section 6.1).
func newUserCode() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	out := make([]byte, 0, 9)
	for i, v := range b {
		if i == 4 {
			out = append(out, '-')
		}
		out = append(out, userCodeAlphabet[int(v)%len(userCodeAlphabet)])
	}
	return string(out)
}

// normalUserCode is a typed user code as issued: upper case, the dash put back, spaces dropped.
func normalUserCode(s string) string {
	s = strings.ToUpper(strings.NewReplacer("-", "", " ", "").Replace(s))
	if len(s) != 8 {
		return s
	}
	return s[:4] + "-" + s[4:]
}

// deviceAuthorization is the RFC 8628 section 3.1 endpoint.
func (s *Service) deviceAuthorization(w http.ResponseWriter, r *http.Request) int {
	const op = "authorizeDevice"
	c, f, unlock, status := s.clientForm(w, r, op)
	if status != 0 {
		return status
	}
	defer unlock()
	fail := func(code, desc string) int { return s.writeOAuthError(w, op, http.StatusBadRequest, code, desc) }
	if !c.allowsGrant(oauthserver.DeviceGrantType) {
		return fail("unauthorized_client", "The client did not register the grant type "+oauthserver.DeviceGrantType+".")
	}
	scopes, ok := parseScope(f.Get("scope"))
	if !ok {
		return fail("invalid_scope", "The only scope is "+cardScope+".")
	}
	if len(scopes) == 0 {
		scopes = supportedScopes
	}
	if res := f.Get("resource"); res != "" {
		if canon, ok := oauthserver.CanonicalResource(res); !ok || canon != s.resourceID() {
			return fail("invalid_target", "resource must be "+s.resourceID()+".")
		}
	}
	now := s.now()
	s.oauth.sweep(now)
	if len(s.oauth.devices) >= maxPending {
		return fail("slow_down", "Too many sign-ins are in progress; try again in a few minutes.")
	}
	device := oauthserver.NewSecret("")
	da := &deviceAuth{ClientID: c.ID, Scope: strings.Join(scopes, " "), Resource: s.resourceID(), UserCode: newUserCode(), Expires: now.Add(deviceCodeTTL)}
	for s.oauth.userCodes[da.UserCode] != "" {
		da.UserCode = newUserCode()
	}
	h := oauthserver.Digest(device)
	s.oauth.devices[h] = da
	s.oauth.userCodes[da.UserCode] = h
	verify := s.issuer() + devicePath
	return s.writeOAuthJSON(w, op, http.StatusOK, map[string]any{
		"device_code": device, "user_code": da.UserCode,
		"verification_uri": verify, "verification_uri_complete": verify + "?user_code=" + url.QueryEscape(da.UserCode),
		"expires_in": int64(deviceCodeTTL / time.Second), "interval": devicePollInterval,
	})
}

// devicePage asks for the user code (filled in from verification_uri_complete); its form
// starts the usual sign-in and consent for the device authorization of that code.
func (s *Service) devicePage(w http.ResponseWriter, r *http.Request) int {
	if r.Method == http.MethodGet {
		return s.writePage(w, http.StatusOK, "device", "", map[string]any{
			"Title": "Sign in a device", "Action": devicePath, "UserCode": normalUserCode(r.URL.Query().Get("user_code")),
		})
	}
	f, ok := readPageForm(w, r)
	if !ok {
		return s.writeErrorPage(w, http.StatusForbidden, "Request refused", "The form was not sent from this site.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.oauth.sweep(now)
	code := normalUserCode(f.Get("user_code"))
	h := s.oauth.userCodes[code]
	da := s.oauth.devices[h]
	if da == nil || da.UserID != "" || da.Denied {
		return s.writeErrorPage(w, http.StatusBadRequest, "Unknown code",
			"No sign-in waits for this code: it was mistyped, already used, or has expired. Check the code your terminal shows, or start signing in again there.")
	}
	if len(s.oauth.pending) >= maxPending {
		return s.writeErrorPage(w, http.StatusServiceUnavailable, "Busy", "Too many sign-ins are in progress; try again in a few minutes.")
	}
	expires := now.Add(authRequestTTL)
	if da.Expires.Before(expires) {
		expires = da.Expires
	}
	ar := &authRequest{ID: oauthserver.NewSecret(""), ClientID: da.ClientID, Scope: da.Scope, Resource: da.Resource,
		Expires: expires, Device: h}
	s.oauth.pending[ar.ID] = ar
	return redirect(w, http.StatusSeeOther, loginPath+"?request="+url.QueryEscape(ar.ID))
}

// answerDevice records the consent to a device authorization and shows the page that sends
// the person back to their terminal. The caller holds s.mu.
func (s *Service) answerDevice(w http.ResponseWriter, ar *authRequest, userID string, allow bool) int {
	da := s.oauth.devices[ar.Device]
	if da == nil {
		return s.expiredPage(w)
	}
	if !allow {
		da.Denied = true
		return s.writeErrorPage(w, http.StatusOK, "Access denied", "Nothing was shared. The terminal that showed the code will say so.")
	}
	da.UserID = userID
	return s.writeErrorPage(w, http.StatusOK, "Signed in", "The device that showed you the code is signed in. You can close this page and go back to it.")
}

// exchangeDevice answers a token request with grant_type device_code (RFC 8628 section 3.4/3.5).
// The caller holds s.mu.
func (s *Service) exchangeDevice(c *oauthClient, f url.Values, now time.Time) (*oauthserver.TokenResponse, *oauthserver.Error) {
	code := f.Get("device_code")
	if code == "" {
		return nil, oauthserver.BadRequest("invalid_request", "device_code is required.")
	}
	h := oauthserver.Digest(code)
	da := s.oauth.devices[h]
	switch {
	case da == nil:
		return nil, oauthserver.BadRequest("expired_token", "The device code is unknown, used or expired; start signing in again.")
	case da.ClientID != c.ID:
		return nil, oauthserver.BadRequest("invalid_grant", "The device code was issued to another client.")
	case !now.Before(da.Expires):
		s.dropDevice(h)
		return nil, oauthserver.BadRequest("expired_token", "The device code has expired; start signing in again.")
	case da.Denied:
		s.dropDevice(h)
		return nil, oauthserver.BadRequest("access_denied", "The user denied access.")
	case da.UserID == "":
		return nil, oauthserver.BadRequest("authorization_pending", "The user has not finished signing in yet.")
	}
	if e := oauthserver.CheckResourceParam(f, da.Resource); e != nil {
		return nil, e
	}
	s.dropDevice(h)
	if s.st.Users[da.UserID] == nil {
		return nil, oauthserver.BadRequest("invalid_grant", "The user of the device code no longer exists.")
	}
	g := s.newGrant(c, da.UserID, da.Scope, da.Resource, now)
	return s.issueTokens(c, g, g.Scope, now), nil
}

// dropDevice forgets a device authorization. The caller holds s.mu.
func (s *Service) dropDevice(h string) {
	if da := s.oauth.devices[h]; da != nil {
		delete(s.oauth.userCodes, da.UserCode)
	}
	delete(s.oauth.devices, h)
}
