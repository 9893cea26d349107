package sandbox

// The card service's OAuth side: RFC 8414 metadata, RFC 9728 protected-resource metadata for the
// API, RFC 7591 registration of public clients, the authorization endpoint (PKCE S256 and RFC 8707
// resource required), the token endpoint (authorization code, refresh with rotation), RFC 7009
// revocation, and the check of OAuth access tokens on API calls. The sign-in and consent pages are in
// oauth_pages.go.
//
// What is kept where: clients, grants and the SHA-256 digests of access and refresh tokens are in
// state (the data file); pending authorization requests, authorization codes, browser sessions and
// the CSRF key live in memory only (oauthRuntime), since they last minutes. Every field is guarded by
// Service.mu.

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"

	"github.com/cardwriter/cardwriter-mcp/internal/oauthserver"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

// Defaults of the OAuth lifetimes in Options.
const (
	DefaultAccessTokenTTL  = time.Hour
	DefaultRefreshTokenTTL = 30 * 24 * time.Hour
	DefaultAuthCodeTTL     = time.Minute
)

const (
	asMetadataPath = "/.well-known/oauth-authorization-server"
	prmPath        = "/.well-known/oauth-protected-resource" + apiPrefix
	authorizePath  = "/oauth/authorize"
	loginPath      = "/oauth/login"
	consentPath    = "/oauth/consent"
	registerPath   = "/oauth/register"
	tokenPath      = "/oauth/token"
	revokePath     = "/oauth/revoke"
	authRequestTTL = 10 * time.Minute // a pending authorization request (sign-in and consent) must finish within this
	sessionTTL     = 12 * time.Hour   // a signed-in browser session; an anonymous one lasts authRequestTTL
	maxPending     = 10000            // pending authorization requests, and browser sessions, kept at once
	usedCodeKept   = 10 * time.Minute // a used code is remembered this long past its expiry, to revoke on reuse
)

var supportedScopes = []string{cardScope}

// oauthDefaults fills the OAuth lifetimes of Options and refuses negative ones.
func (o *Options) oauthDefaults() error {
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"AccessTokenTTL", &o.AccessTokenTTL, DefaultAccessTokenTTL},
		{"RefreshTokenTTL", &o.RefreshTokenTTL, DefaultRefreshTokenTTL},
		{"AuthCodeTTL", &o.AuthCodeTTL, DefaultAuthCodeTTL},
	} {
		if *d.v < 0 {
			return fmt.Errorf("sandbox: %s must not be negative", d.name)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	return nil
}

// oauthState is the persisted part of the OAuth server.
type oauthState struct {
	Clients       map[string]*oauthClient `json:"clients"`       // client_id -> client
	Grants        map[string]*oauthGrant  `json:"grants"`        // grant id -> grant
	AccessTokens  map[string]*oauthToken  `json:"accessTokens"`  // SHA-256 (hex) of the token -> token
	RefreshTokens map[string]*oauthToken  `json:"refreshTokens"` // SHA-256 (hex) of the token -> token
}

// oauthClient is a dynamically registered public client.
type oauthClient struct {
	ID           string   `json:"id"`
	Name         string   `json:"name,omitempty"`
	RedirectURIs []string `json:"redirectUris"`
	GrantTypes   []string `json:"grantTypes"`
	Scope        string   `json:"scope,omitempty"` // registered scope; "" = any supported scope
	IssuedAt     int64    `json:"issuedAt"`
}

// oauthGrant is one consent of a user to a client, from which tokens are issued; revoking it revokes them all.
type oauthGrant struct {
	ID       string    `json:"id"`
	ClientID string    `json:"clientId"`
	UserID   string    `json:"userId"`
	Scope    string    `json:"scope"`
	Resource string    `json:"resource"`
	Created  time.Time `json:"created"`
}

// oauthToken is an issued access or refresh token, known by its digest only.
type oauthToken struct {
	GrantID string    `json:"grantId"`
	Scope   string    `json:"scope,omitempty"` // access tokens: the scope of this token (a refresh may narrow it)
	Expires time.Time `json:"expires"`
	Rotated bool      `json:"rotated,omitempty"` // refresh tokens: already exchanged; kept until expiry to detect reuse
}

func (o *oauthState) init() {
	if o.Clients == nil {
		o.Clients = map[string]*oauthClient{}
	}
	if o.Grants == nil {
		o.Grants = map[string]*oauthGrant{}
	}
	if o.AccessTokens == nil {
		o.AccessTokens = map[string]*oauthToken{}
	}
	if o.RefreshTokens == nil {
		o.RefreshTokens = map[string]*oauthToken{}
	}
}

func (o *oauthState) check() error {
	for id, c := range o.Clients {
		if c == nil || c.ID != id {
			return fmt.Errorf("oauth client %q is malformed", id)
		}
	}
	for id, g := range o.Grants {
		if g == nil || g.ID != id {
			return fmt.Errorf("oauth grant %q is malformed", id)
		}
	}
	for _, m := range []map[string]*oauthToken{o.AccessTokens, o.RefreshTokens} {
		for h, t := range m {
			if t == nil {
				return fmt.Errorf("oauth token %.8s… is malformed", h)
			}
		}
	}
	return nil
}

// revokeGrant removes a grant and every token issued from it.
func (o *oauthState) revokeGrant(id string) {
	delete(o.Grants, id)
	for _, m := range []map[string]*oauthToken{o.AccessTokens, o.RefreshTokens} {
		for h, t := range m {
			if t.GrantID == id {
				delete(m, h)
			}
		}
	}
}

// sweep drops expired tokens, and grants no live token refers to any more; it reports a change.
func (o *oauthState) sweep(now time.Time) bool {
	n := len(o.Grants) + len(o.AccessTokens) + len(o.RefreshTokens)
	live := map[string]bool{}
	for _, m := range []map[string]*oauthToken{o.AccessTokens, o.RefreshTokens} {
		for h, t := range m {
			if !now.Before(t.Expires) {
				delete(m, h)
				continue
			}
			if !t.Rotated {
				live[t.GrantID] = true
			}
		}
	}
	for id := range o.Grants {
		if !live[id] {
			o.revokeGrant(id)
		}
	}
	return n != len(o.Grants)+len(o.AccessTokens)+len(o.RefreshTokens)
}

// oauthRuntime is the memory-only state of the OAuth server.
type oauthRuntime struct {
	csrfKey   []byte
	pending   map[string]*authRequest    // request id -> pending authorization request
	codes     map[string]*authCode       // SHA-256 (hex) of the code -> code
	sessions  map[string]*browserSession // session id -> session
	devices   map[string]*deviceAuth     // SHA-256 (hex) of the device code -> device authorization
	userCodes map[string]string          // user code -> the device code's digest
}

func newOAuthRuntime() *oauthRuntime {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails
	return &oauthRuntime{csrfKey: key, pending: map[string]*authRequest{},
		codes: map[string]*authCode{}, sessions: map[string]*browserSession{},
		devices: map[string]*deviceAuth{}, userCodes: map[string]string{}}
}

// authRequest is a validated authorization request waiting for sign-in and consent.
type authRequest struct {
	ID          string
	ClientID    string
	RedirectURI string // as sent (for a loopback URI, with the port the client listens on)
	Scope       string
	Resource    string
	State       string
	Challenge   string
	Expires     time.Time
	Session     string // the signed-in browser session it is bound to; "" until one signs in or views it
	Device      string // of a device authorization (RFC 8628): its device code's digest; no redirect
}

// authCode is an issued authorization code.
type authCode struct {
	ClientID    string
	UserID      string
	RedirectURI string
	Scope       string
	Resource    string
	Challenge   string
	Expires     time.Time
	Used        bool
	GrantID     string // the grant its exchange created
}

// sweep drops expired pending requests, sessions and codes (used ones a while later, for reuse detection).
func (rt *oauthRuntime) sweep(now time.Time) {
	for id, ar := range rt.pending {
		if !now.Before(ar.Expires) {
			delete(rt.pending, id)
		}
	}
	for id, bs := range rt.sessions {
		if !now.Before(bs.Expires) {
			delete(rt.sessions, id)
		}
	}
	for h, c := range rt.codes {
		if !now.Before(c.Expires.Add(usedCodeKept)) {
			delete(rt.codes, h)
		}
	}
	for h, d := range rt.devices {
		if !now.Before(d.Expires) {
			delete(rt.userCodes, d.UserCode)
			delete(rt.devices, h)
		}
	}
}

// isOAuthPath reports whether an escaped path belongs to the OAuth server.
func isOAuthPath(p string) bool {
	return p == asMetadataPath || p == prmPath || strings.HasPrefix(p, "/oauth/")
}

// serveOAuth dispatches the OAuth server's endpoints; it returns an operation name for the log and the status.
func (s *Service) serveOAuth(w http.ResponseWriter, r *http.Request, p string) (string, int) {
	allow := func(methods ...string) bool {
		if slices.Contains(methods, r.Method) {
			return true
		}
		w.Header().Set("Allow", strings.Join(methods, ", "))
		return false
	}
	switch p {
	case asMetadataPath:
		if !allow(http.MethodGet, http.MethodHead) {
			return "getAuthorizationServerMetadata", s.writeOAuthError(w, "", http.StatusMethodNotAllowed, "invalid_request", "Use GET.")
		}
		return "getAuthorizationServerMetadata", s.serveASMetadata(w)
	case prmPath:
		if !allow(http.MethodGet, http.MethodHead) {
			return "getProtectedResourceMetadata", s.writeOAuthError(w, "", http.StatusMethodNotAllowed, "invalid_request", "Use GET.")
		}
		return "getProtectedResourceMetadata", s.servePRMetadata(w)
	case authorizePath:
		if !allow(http.MethodGet) {
			return "authorize", s.writeErrorPage(w, http.StatusMethodNotAllowed, "Wrong method", "The authorization endpoint takes GET requests (a browser navigation).")
		}
		return "authorize", s.authorize(w, r)
	case loginPath:
		if !allow(http.MethodGet, http.MethodPost) {
			return "signIn", s.writeErrorPage(w, http.StatusMethodNotAllowed, "Wrong method", "Use the sign-in page.")
		}
		if r.Method == http.MethodGet {
			return "signInPage", s.signInPage(w, r)
		}
		return "signIn", s.signIn(w, r)
	case consentPath:
		if !allow(http.MethodGet, http.MethodPost) {
			return "consent", s.writeErrorPage(w, http.StatusMethodNotAllowed, "Wrong method", "Use the consent page.")
		}
		if r.Method == http.MethodGet {
			return "consentPage", s.consentPage(w, r)
		}
		return "consent", s.consent(w, r)
	case registerPath:
		if !allow(http.MethodPost) {
			return "registerClient", s.writeOAuthError(w, "", http.StatusMethodNotAllowed, "invalid_request", "Use POST.")
		}
		return "registerClient", s.register(w, r)
	case tokenPath:
		if !allow(http.MethodPost) {
			return "exchangeToken", s.writeOAuthError(w, "", http.StatusMethodNotAllowed, "invalid_request", "Use POST.")
		}
		return "exchangeToken", s.token(w, r)
	case deviceAuthorizationPath:
		if !allow(http.MethodPost) {
			return "authorizeDevice", s.writeOAuthError(w, "", http.StatusMethodNotAllowed, "invalid_request", "Use POST.")
		}
		return "authorizeDevice", s.deviceAuthorization(w, r)
	case devicePath:
		if !allow(http.MethodGet, http.MethodPost) {
			return "device", s.writeErrorPage(w, http.StatusMethodNotAllowed, "Wrong method", "Use the device sign-in page.")
		}
		return "device", s.devicePage(w, r)
	case revokePath:
		if !allow(http.MethodPost) {
			return "revokeToken", s.writeOAuthError(w, "", http.StatusMethodNotAllowed, "invalid_request", "Use POST.")
		}
		return "revokeToken", s.revoke(w, r)
	}
	return "", s.writeError(w, nil, errNoRoute())
}

// issuer is the authorization server's issuer identifier: the sandbox's public origin ({api_host}).
func (s *Service) issuer() string { return s.opts.BaseURL }

// resourceID is the canonical resource indicator of the API: {base_url}.
func (s *Service) resourceID() string {
	r, _ := oauthserver.CanonicalResource(s.opts.BaseURL + apiPrefix)
	return r
}

// prmURL is the address of the API's RFC 9728 metadata.
func (s *Service) prmURL() string { return s.opts.BaseURL + prmPath }

// bearerChallenge is the WWW-Authenticate value of the API's 401: where the metadata is and which
// scope to ask for (RFC 9728 section 5.1, RFC 6750 section 3); error="invalid_token" when a bearer
// token was sent.
func (s *Service) bearerChallenge(r *http.Request) string {
	c := `Bearer resource_metadata="` + s.prmURL() + `", scope="` + cardScope + `"`
	scheme, token, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(token) != "" {
		c += `, error="invalid_token", error_description="The access token is unknown, expired, revoked, or not issued for this API."`
	}
	return c
}

// oauthUser returns the user a live OAuth access token acts for, when the token was issued for this
// API with the scope mcp:card-writer. The caller holds s.mu.
func (s *Service) oauthUser(token string) (string, bool) {
	at := s.st.OAuth.AccessTokens[oauthserver.Digest(token)]
	if at == nil || !s.now().Before(at.Expires) || !oauthserver.CoversScope(at.Scope, cardScope) {
		return "", false
	}
	g := s.st.OAuth.Grants[at.GrantID]
	if g == nil || g.Resource != s.resourceID() || s.st.Users[g.UserID] == nil {
		return "", false
	}
	return g.UserID, true
}

func (s *Service) serveASMetadata(w http.ResponseWriter) int {
	iss := s.issuer()
	w.Header().Set("Access-Control-Allow-Origin", "*")
	return s.writeOAuthJSON(w, "getAuthorizationServerMetadata", http.StatusOK, oauthserver.AuthorizationServerMetadata(oauthserver.Endpoints{
		Issuer:        iss,
		Authorization: iss + authorizePath,
		Token:         iss + tokenPath,
		Registration:  iss + registerPath,
		Revocation:    iss + revokePath,

		DeviceAuthorization: iss + deviceAuthorizationPath,
	}, supportedScopes, false))
}

func (s *Service) servePRMetadata(w http.ResponseWriter) int {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	return s.writeOAuthJSON(w, "", http.StatusOK, oauthserver.ProtectedResourceMetadata(s.resourceID(), s.issuer(), supportedScopes,
		"Card service open API (sandbox)"))
}

func (s *Service) writeOAuthError(w http.ResponseWriter, op string, status int, code, desc string) int {
	return s.writeOAuthJSON(w, op, status, &oauthserver.Error{Status: status, Code: code, Description: desc})
}

// writeOAuthJSON writes an OAuth JSON response; with CheckResponses it must match what the contract
// documents for op and status (op "": the ProtectedResourceMetadata or OAuthError schema).
func (s *Service) writeOAuthJSON(w http.ResponseWriter, op string, status int, v any) int {
	data, err := jsontext.Marshal(v)
	if err != nil {
		s.log.Error("sandbox: encode oauth response", "op", op, "err", err)
		status, data = http.StatusInternalServerError, []byte(`{"error":"server_error"}`)
	}
	if s.opts.CheckResponses && status < 500 {
		if problems := checkOAuthResponse(op, status, data); len(problems) > 0 {
			locs := make([]string, len(problems))
			for i, p := range problems {
				locs[i] = p.InstanceLocation + ": " + p.Message
			}
			s.log.Error("sandbox: oauth response does not match the contract", "op", op, "status", status, "problems", locs)
			status = http.StatusInternalServerError
			data, _ = jsontext.Marshal(&oauthserver.Error{Code: "server_error", Description: "The sandbox produced a response that does not match the contract: " + strings.Join(locs, "; ")})
		}
	}
	oauthserver.WriteJSON(w, status, data)
	return status
}

// checkOAuthResponse validates an OAuth JSON response against the contract.
func checkOAuthResponse(op string, status int, data []byte) []schema.Problem {
	ptr := ""
	switch {
	case op == "" && status == http.StatusOK:
		ptr = "#/components/schemas/ProtectedResourceMetadata"
	case op == "":
		ptr = "#/components/schemas/OAuthError"
	default:
		o, ok := schema.Lookup(op)
		if !ok {
			return []schema.Problem{{InstanceLocation: "/", Message: "no operation " + op + " in the contract"}}
		}
		resp, ok := o.Response(status)
		if !ok || resp.Status != status || resp.Schema == "" {
			return []schema.Problem{{InstanceLocation: "/", Message: fmt.Sprintf("status %d with a body is not documented for %s", status, op)}}
		}
		ptr = resp.Schema
	}
	return validateAgainst(ptr, data)
}

// ---- Registration (RFC 7591) ----

// register creates a public client.
func (s *Service) register(w http.ResponseWriter, r *http.Request) int {
	const op = "registerClient"
	fail := func(code, desc string) int { return s.writeOAuthError(w, op, http.StatusBadRequest, code, desc) }
	in, e := oauthserver.ReadClientMetadata(w, r)
	if e == nil {
		e = in.CheckRedirectURIs(isLoopbackHost)
	}
	if e != nil {
		return fail(e.Code, e.Description)
	}
	if m := in.TokenEndpointAuthMethod; m != nil && *m != "none" {
		return fail("invalid_client_metadata", "Only public clients can register: token_endpoint_auth_method must be \"none\" (PKCE protects the code).")
	}
	grants, e := in.Grants(true, oauthserver.DeviceGrantType)
	if e == nil {
		e = in.CheckResponseTypes()
	}
	if e != nil {
		return fail(e.Code, e.Description)
	}
	scope := ""
	if in.Scope != nil {
		list, ok := parseScope(*in.Scope)
		if !ok {
			return fail("invalid_client_metadata", "scope may contain only "+strings.Join(supportedScopes, " ")+".")
		}
		scope = strings.Join(list, " ")
	}
	name, e := in.Name()
	if e != nil {
		return fail(e.Code, e.Description)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &oauthClient{ID: newID("c_"), Name: name, RedirectURIs: slices.Clone(in.RedirectURIs),
		GrantTypes: grants, Scope: scope, IssuedAt: s.now().Unix()}
	for s.st.OAuth.Clients[c.ID] != nil {
		c.ID = newID("c_")
	}
	s.st.OAuth.Clients[c.ID] = c
	if err := s.persist(); err != nil {
		delete(s.st.OAuth.Clients, c.ID)
		s.log.Error("sandbox: persist state", "op", op, "err", err)
		return s.writeOAuthError(w, op, http.StatusInternalServerError, "server_error", "The sandbox could not save the registration.")
	}
	s.log.Info("sandbox: oauth client registered", "client_id", c.ID)
	return s.writeOAuthJSON(w, op, http.StatusCreated, oauthserver.RegisteredClient{ID: c.ID, IssuedAt: c.IssuedAt, Name: c.Name,
		RedirectURIs: c.RedirectURIs, GrantTypes: c.GrantTypes, Scope: c.Scope}.Response())
}

func isLoopbackHost(h string) bool {
	h = strings.ToLower(h)
	return h == "127.0.0.1" || h == "::1" || h == "localhost"
}

// redirectAllowed reports whether uri is one of the client's registered redirect URIs: the same
// string, or for a loopback http URI the same URI on any port (RFC 8252 section 7.3).
func (c *oauthClient) redirectAllowed(uri string) bool {
	for _, reg := range c.RedirectURIs {
		if reg == uri || loopbackMatch(reg, uri) {
			return true
		}
	}
	return false
}

func loopbackMatch(registered, got string) bool {
	r, err := url.Parse(registered)
	if err != nil || r.Scheme != "http" || !isLoopbackHost(r.Hostname()) {
		return false
	}
	g, err := url.Parse(got)
	if err != nil || len(got) > oauthserver.MaxURILength || strings.Contains(got, "#") || g.User != nil || g.Opaque != "" {
		return false
	}
	return g.Scheme == r.Scheme && g.Hostname() == r.Hostname() && oauthserver.ValidPort(g.Port()) &&
		g.EscapedPath() == r.EscapedPath() && g.RawQuery == r.RawQuery && g.ForceQuery == r.ForceQuery
}

func (c *oauthClient) allowsGrant(g string) bool { return slices.Contains(c.GrantTypes, g) }

// displayName is how pages name the client.
func (c *oauthClient) displayName() string {
	if c.Name != "" {
		return c.Name
	}
	return "An unnamed application"
}

// ---- Authorization endpoint ----

// authorize validates an authorization request (RFC 6749 section 4.1.1, RFC 7636, RFC 8707) and
// sends the browser to the sign-in page. A request whose client or redirect URI cannot be trusted
// gets an error page; any other problem is redirected to the client with an error.
func (s *Service) authorize(w http.ResponseWriter, r *http.Request) int {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return s.writeErrorPage(w, http.StatusBadRequest, "Invalid sign-in request", "The request's query string is malformed.")
	}
	clientID, redirectURI := q.Get("client_id"), q.Get("redirect_uri")
	if clientID == "" || len(q["client_id"]) > 1 {
		return s.writeErrorPage(w, http.StatusBadRequest, "Invalid sign-in request", "The request must name exactly one client_id.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.st.OAuth.Clients[clientID]
	if c == nil {
		return s.writeErrorPage(w, http.StatusBadRequest, "Unknown application",
			"No application is registered with this client_id. The application must register with the card service first.")
	}
	if redirectURI == "" || len(q["redirect_uri"]) > 1 || !c.redirectAllowed(redirectURI) {
		return s.writeErrorPage(w, http.StatusBadRequest, "Invalid redirect URI",
			"The redirect_uri is missing or is not one the application registered, so the result cannot be sent back safely. Nothing was shared.")
	}
	state := q.Get("state")
	fail := func(code, desc string) int {
		params := url.Values{"error": {code}, "error_description": {desc}, "iss": {s.issuer()}}
		if state != "" && len(q["state"]) == 1 {
			params.Set("state", state)
		}
		return redirect(w, http.StatusFound, oauthserver.WithQuery(redirectURI, params))
	}
	if k := oauthserver.RepeatedParam(q); k != "" {
		return fail("invalid_request", "The parameter "+k+" is given more than once.")
	}
	if e := oauthserver.CheckResponseType(q); e != nil {
		return fail(e.Code, e.Description)
	}
	if state == "" {
		return fail("invalid_request", "state is required.")
	}
	if e := oauthserver.CheckChallenge(q); e != nil {
		return fail(e.Code, e.Description)
	}
	challenge := q.Get("code_challenge")
	resource := q.Get("resource")
	if resource == "" {
		return fail("invalid_target", "resource is required and must be "+s.resourceID()+".")
	}
	if res, ok := oauthserver.CanonicalResource(resource); !ok || res != s.resourceID() {
		return fail("invalid_target", "resource must be "+s.resourceID()+".")
	}
	scopes, ok := parseScope(q.Get("scope"))
	if !ok {
		return fail("invalid_scope", "The only scope is "+cardScope+".")
	}
	if len(scopes) == 0 {
		scopes = supportedScopes
	}
	if c.Scope != "" {
		for _, sc := range scopes {
			if !oauthserver.CoversScope(c.Scope, sc) {
				return fail("invalid_scope", "The application did not register the scope "+sc+".")
			}
		}
	}
	now := s.now()
	s.oauth.sweep(now)
	if len(s.oauth.pending) >= maxPending {
		return fail("temporarily_unavailable", "Too many sign-ins are in progress; try again in a few minutes.")
	}
	ar := &authRequest{ID: oauthserver.NewSecret(""), ClientID: c.ID, RedirectURI: redirectURI, Scope: strings.Join(scopes, " "),
		Resource: s.resourceID(), State: state, Challenge: challenge, Expires: now.Add(authRequestTTL)}
	s.oauth.pending[ar.ID] = ar
	return redirect(w, http.StatusFound, loginPath+"?request="+url.QueryEscape(ar.ID))
}

// redirect answers with a redirect to loc, never cached.
func redirect(w http.ResponseWriter, status int, loc string) int {
	h := w.Header()
	h.Set("Location", loc)
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	return status
}

// parseScope splits a scope string; it fails on a scope the sandbox does not know.
func parseScope(sc string) ([]string, bool) {
	var out []string
	for _, v := range strings.Fields(sc) {
		if !slices.Contains(supportedScopes, v) {
			return nil, false
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, true
}

// ---- Token endpoint ----

// publicClient identifies the calling public client by client_id; a request with client
// credentials is refused (oauthserver.PublicClientID).
func (s *Service) publicClient(w http.ResponseWriter, r *http.Request, op string, f url.Values, required bool) (*oauthClient, int) {
	id, e := oauthserver.PublicClientID(w, r, f, "sandbox", required)
	if e != nil {
		return nil, s.writeOAuthJSON(w, op, e.Status, e)
	}
	if id == "" {
		return nil, 0
	}
	c := s.st.OAuth.Clients[id]
	if c == nil {
		e := oauthserver.UnknownClient()
		return nil, s.writeOAuthJSON(w, op, e.Status, e)
	}
	return c, 0
}

// clientForm reads a form posted by a public client to op's endpoint and takes s.mu: the
// client, the form and the unlock, or the status of the error answer already written.
func (s *Service) clientForm(w http.ResponseWriter, r *http.Request, op string) (*oauthClient, url.Values, func(), int) {
	f, fe := oauthserver.ReadForm(w, r)
	if fe != nil {
		return nil, nil, nil, s.writeOAuthJSON(w, op, fe.Status, fe)
	}
	s.mu.Lock()
	c, status := s.publicClient(w, r, op, f, true)
	if status != 0 {
		s.mu.Unlock()
		return nil, nil, nil, status
	}
	return c, f, s.mu.Unlock, 0
}

// token is the RFC 6749 token endpoint.
func (s *Service) token(w http.ResponseWriter, r *http.Request) int {
	const op = "exchangeToken"
	c, f, unlock, status := s.clientForm(w, r, op)
	if status != 0 {
		return status
	}
	defer unlock()
	grantType := f.Get("grant_type")
	if e := oauthserver.CheckGrantType(grantType, c.GrantTypes, oauthserver.DeviceGrantType); e != nil {
		return s.writeOAuthJSON(w, op, e.Status, e)
	}
	now := s.now()
	s.oauth.sweep(now)
	s.dirty = s.st.OAuth.sweep(now)
	var resp *oauthserver.TokenResponse
	var e *oauthserver.Error
	switch grantType {
	case "authorization_code":
		resp, e = s.exchangeCode(c, f, now)
	case oauthserver.DeviceGrantType:
		resp, e = s.exchangeDevice(c, f, now)
	default:
		resp, e = s.refresh(c, f, now)
	}
	if s.dirty {
		s.dirty = false
		if err := s.persist(); err != nil {
			s.log.Error("sandbox: persist state", "op", op, "err", err)
			return s.writeOAuthError(w, op, http.StatusInternalServerError, "server_error", "The sandbox could not save the tokens.")
		}
	}
	if e != nil {
		return s.writeOAuthJSON(w, op, http.StatusBadRequest, e)
	}
	return s.writeOAuthJSON(w, op, http.StatusOK, resp)
}

// exchangeCode redeems an authorization code. The caller holds s.mu. Any presentation of a code uses
// it up; presenting a used code again revokes the grant it produced (RFC 6749 section 4.1.2).
func (s *Service) exchangeCode(c *oauthClient, f url.Values, now time.Time) (*oauthserver.TokenResponse, *oauthserver.Error) {
	cr, e := oauthserver.ReadCodeRequest(f)
	if e != nil {
		return nil, e
	}
	ac := s.oauth.codes[oauthserver.Digest(cr.Code)]
	if ac == nil {
		return nil, oauthserver.BadRequest("invalid_grant", "The authorization code is unknown or expired.")
	}
	if ac.Used {
		if ac.GrantID != "" {
			s.st.OAuth.revokeGrant(ac.GrantID)
			s.changed()
			s.log.Warn("sandbox: authorization code reused; its tokens are revoked", "client_id", ac.ClientID)
		}
		return nil, oauthserver.BadRequest("invalid_grant", "The authorization code was already used; the tokens issued for it are revoked.")
	}
	ac.Used = true
	ic := oauthserver.IssuedCode{ClientID: ac.ClientID, RedirectURI: ac.RedirectURI, Challenge: ac.Challenge, Resource: ac.Resource, Expires: ac.Expires}
	if _, e := ic.CheckRedemption(now, c.ID, cr, f); e != nil {
		return nil, e
	}
	if s.st.Users[ac.UserID] == nil {
		return nil, oauthserver.BadRequest("invalid_grant", "The user of the authorization code no longer exists.")
	}
	g := s.newGrant(c, ac.UserID, ac.Scope, ac.Resource, now)
	ac.GrantID = g.ID
	return s.issueTokens(c, g, g.Scope, now), nil
}

// newGrant records a user's consent to a client, from which tokens are issued. The caller holds s.mu.
func (s *Service) newGrant(c *oauthClient, userID, scope, resource string, now time.Time) *oauthGrant {
	g := &oauthGrant{ID: newID("g_"), ClientID: c.ID, UserID: userID, Scope: scope, Resource: resource, Created: now}
	for s.st.OAuth.Grants[g.ID] != nil {
		g.ID = newID("g_")
	}
	s.st.OAuth.Grants[g.ID] = g
	s.changed()
	return g
}

// refresh exchanges a refresh token for new tokens and rotates it; presenting a rotated refresh
// token again revokes the whole grant. The caller holds s.mu.
func (s *Service) refresh(c *oauthClient, f url.Values, now time.Time) (*oauthserver.TokenResponse, *oauthserver.Error) {
	rt := f.Get("refresh_token")
	if rt == "" {
		return nil, oauthserver.BadRequest("invalid_request", "refresh_token is required.")
	}
	h := oauthserver.Digest(rt)
	t := s.st.OAuth.RefreshTokens[h]
	var g *oauthGrant
	if t != nil {
		g = s.st.OAuth.Grants[t.GrantID]
	}
	switch {
	case t == nil || g == nil:
		return nil, oauthserver.BadRequest("invalid_grant", "The refresh token is unknown, expired or revoked.")
	case g.ClientID != c.ID:
		return nil, oauthserver.BadRequest("invalid_grant", "The refresh token was issued to another client.")
	case t.Rotated:
		s.st.OAuth.revokeGrant(g.ID)
		s.changed()
		s.log.Warn("sandbox: rotated refresh token reused; the grant is revoked", "client_id", c.ID)
		return nil, oauthserver.BadRequest("invalid_grant", "The refresh token was already used; every token of this grant is revoked. Sign in again.")
	case !now.Before(t.Expires):
		return nil, oauthserver.BadRequest("invalid_grant", "The refresh token has expired.")
	case g.Resource != s.resourceID():
		return nil, oauthserver.BadRequest("invalid_grant", "The refresh token was issued for another resource ("+g.Resource+"). Sign in again.")
	}
	if e := oauthserver.CheckResourceParam(f, g.Resource); e != nil {
		return nil, e
	}
	scope := g.Scope
	if sc := f.Get("scope"); sc != "" {
		list, ok := parseScope(sc)
		if !ok {
			return nil, oauthserver.BadRequest("invalid_scope", "The only scope is "+cardScope+".")
		}
		for _, v := range list {
			if !oauthserver.CoversScope(g.Scope, v) {
				return nil, oauthserver.BadRequest("invalid_scope", "The scope "+v+" was not granted.")
			}
		}
		scope = strings.Join(list, " ")
	}
	t.Rotated = true
	s.changed()
	return s.issueTokens(c, g, scope, now), nil
}

// issueTokens issues an access token with scope and, when the client may refresh, a new refresh token.
func (s *Service) issueTokens(c *oauthClient, g *oauthGrant, scope string, now time.Time) *oauthserver.TokenResponse {
	access := oauthserver.NewSecret("")
	s.st.OAuth.AccessTokens[oauthserver.Digest(access)] = &oauthToken{GrantID: g.ID, Scope: scope, Expires: now.Add(s.opts.AccessTokenTTL)}
	resp := &oauthserver.TokenResponse{AccessToken: access, TokenType: "Bearer", Scope: scope,
		ExpiresIn: max(int64(s.opts.AccessTokenTTL/time.Second), 1)}
	if c.allowsGrant("refresh_token") {
		rt := oauthserver.NewSecret("")
		s.st.OAuth.RefreshTokens[oauthserver.Digest(rt)] = &oauthToken{GrantID: g.ID, Expires: now.Add(s.opts.RefreshTokenTTL)}
		resp.RefreshToken = rt
	}
	return resp
}

// ---- Revocation (RFC 7009) ----

// revoke revokes an access token, or a refresh token with its whole grant. Unknown tokens, and
// tokens of another client than the client_id given, are answered 200 and left alone.
func (s *Service) revoke(w http.ResponseWriter, r *http.Request) int {
	const op = "revokeToken"
	f, fe := oauthserver.ReadForm(w, r)
	if fe != nil {
		return s.writeOAuthJSON(w, op, fe.Status, fe)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, status := s.publicClient(w, r, op, f, false)
	if status != 0 {
		return status
	}
	tok := f.Get("token")
	if tok == "" {
		return s.writeOAuthError(w, op, http.StatusBadRequest, "invalid_request", "token is required.")
	}
	h := oauthserver.Digest(tok)
	ownedBy := func(t *oauthToken) bool {
		g := s.st.OAuth.Grants[t.GrantID]
		return c == nil || g == nil || g.ClientID == c.ID
	}
	changed := false
	if t := s.st.OAuth.AccessTokens[h]; t != nil && ownedBy(t) {
		delete(s.st.OAuth.AccessTokens, h)
		changed = true
	}
	if t := s.st.OAuth.RefreshTokens[h]; t != nil && ownedBy(t) {
		s.st.OAuth.revokeGrant(t.GrantID)
		delete(s.st.OAuth.RefreshTokens, h)
		changed = true
	}
	if changed {
		if err := s.persist(); err != nil {
			s.log.Error("sandbox: persist state", "op", op, "err", err)
			return s.writeOAuthError(w, op, http.StatusInternalServerError, "server_error", "The sandbox could not save the revocation.")
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	return http.StatusOK
}
