package proxy

// The authorization flow of an MCP client, in the order of the MCP security best practices
// (2025-11-25, "Confused Deputy Problem"): per-client consent first, then the card service.
//
//	GET  /authorize      validate client, redirect URI (exact), PKCE S256, resource, scope.
//	                     Consent remembered for the browser's signed-in user, client and
//	                     redirect URI -> straight to the card service; else -> /consent.
//	GET  /consent        the consent page (client name, redirect URI, scope); Allow or Deny,
//	                     with a CSRF token bound to the browser's cookie and the request.
//	POST /consent        Allow -> the proxy's own state (stored only now) and PKCE, the
//	                     browser to the card service's authorization endpoint. Deny -> the
//	                     client's redirect URI with access_denied.
//	GET  /oauth/callback state checked (single use, bound to the same browser), the card
//	                     service's code exchanged, GET /me says who the user is, the consent
//	                     remembered for that user, a grant and a code of the proxy's own ->
//	                     the client's redirect URI (with its state and iss).

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/cardwriter/cardwriter-mcp/auth"
	"github.com/cardwriter/cardwriter-mcp/internal/oauthserver"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

const (
	browserCookie = "cwm_browser" // binds authorization requests to one browser
	userCookie    = "cwm_user"    // the card service user who last signed in with this browser
)

func (s *Server) cookieName(base string) string {
	if s.secure {
		return "__Host-" + base
	}
	return base
}

func (s *Server) setCookie(w http.ResponseWriter, name, value string, ttl time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(name), Value: value, Path: "/", MaxAge: int(ttl / time.Second),
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
}

func (s *Server) clearCookie(w http.ResponseWriter, name string) {
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(name), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
}

// browserID returns the browser's binding cookie value, setting a new one when it has none.
func (s *Server) browserID(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(s.cookieName(browserCookie)); err == nil && len(c.Value) == 43 {
		return c.Value
	}
	v := oauthserver.NewSecret("")
	s.setCookie(w, browserCookie, v, browserCookieTTL)
	return v
}

// sameBrowser reports whether the request comes from the browser an authorization request
// is bound to.
func (s *Server) sameBrowser(r *http.Request, ar *AuthRequest) bool {
	c, err := r.Cookie(s.cookieName(browserCookie))
	return err == nil && ar.Browser != "" && oauthserver.Digest(c.Value) == ar.Browser
}

// signedInUser returns the user of the browser's user cookie: the card service user who
// signed in through this server last, signed by the server.
func (s *Server) signedInUser(r *http.Request) string {
	c, err := r.Cookie(s.cookieName(userCookie))
	if err != nil {
		return ""
	}
	parts := strings.Split(c.Value, ".")
	if len(parts) != 3 {
		return ""
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || s.now().Unix() >= exp || !s.keys.verify(parts[2], "user", parts[0], parts[1]) {
		return ""
	}
	user, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return ""
	}
	return string(user)
}

func (s *Server) setUser(w http.ResponseWriter, userID string) {
	u := base64.RawURLEncoding.EncodeToString([]byte(userID))
	exp := strconv.FormatInt(s.now().Add(userCookieTTL).Unix(), 10)
	s.setCookie(w, userCookie, u+"."+exp+"."+s.keys.sign("user", u, exp), userCookieTTL)
}

// redirectTo sends the browser to the client's redirect URI with params (and iss, RFC 9207).
func (s *Server) redirectTo(w http.ResponseWriter, r *http.Request, redirectURI string, params url.Values) {
	params.Set("iss", s.issuer)
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, oauthserver.WithQuery(redirectURI, params), http.StatusFound)
}

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		s.errorPage(w, http.StatusMethodNotAllowed, "Wrong method", "The authorization endpoint takes a browser's GET request.")
		return
	}
	ctx := r.Context()
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		s.errorPage(w, http.StatusBadRequest, "Invalid authorization request", "The request's query string is malformed.")
		return
	}
	clientID, redirectURI := q.Get("client_id"), q.Get("redirect_uri")
	if clientID == "" || len(q["client_id"]) > 1 {
		s.errorPage(w, http.StatusBadRequest, "Invalid authorization request", "The request must name exactly one client_id.")
		return
	}
	c, err := s.client(ctx, clientID)
	if err != nil && isMetadataURL(clientID) {
		// What went wrong (the network error, the address a name resolved to, the document's
		// status) is for the server's log only: shown to the browser, it would let anyone probe
		// hosts and ports through this server.
		s.log.Warn("authorization refused: client metadata document", "client_id", auth.Printable(clientID, 200), "err", err.Error())
		s.errorPage(w, http.StatusBadRequest, "Unknown application",
			"The application's client metadata document could not be fetched or is not valid. The application's developer can find why in this server's log.")
		return
	}
	if err != nil {
		s.errorPage(w, http.StatusBadRequest, "Unknown application",
			"No application is registered with this client_id. The application must register with this server first (a registration not used to sign in expires after a while: the application should register again).")
		return
	}
	// The redirect URI must be one the client registered, compared as exact strings: only
	// then may errors be sent to it.
	if redirectURI == "" || len(q["redirect_uri"]) > 1 || !slices.Contains(c.RedirectURIs, redirectURI) {
		s.log.Warn("authorization refused: redirect URI not registered", "client_id", c.ID)
		s.errorPage(w, http.StatusBadRequest, "Invalid redirect URI",
			"The redirect_uri is missing or is not one the application registered, so the answer cannot be sent back safely. Nothing was shared.")
		return
	}
	state := q.Get("state")
	// The browser's user, from the signed cookie, and whether that user allowed this client at
	// this redirect URI before: only then is an error sent to the redirect URI. Before anyone
	// allowed it, the redirect URI is only what the client registered, and sending the browser
	// there would make this server an open redirector (RFC 9700 section 4.11.2).
	user := s.signedInUser(r)
	var consent *Consent
	if user != "" {
		if cs, err := s.store.GetConsent(ctx, user, c.ID, redirectURI); err == nil {
			consent = cs
		}
	}
	fail := func(code, desc string) {
		if consent == nil {
			s.log.Info("authorization refused before consent: an error page rather than a redirect", "client_id", c.ID, "error", code)
			s.errorPage(w, http.StatusBadRequest, "Invalid authorization request",
				desc+" Nothing was shared. You were not sent back to the application, since you have not allowed it yet.")
			return
		}
		params := url.Values{"error": {code}, "error_description": {desc}}
		if state != "" && len(q["state"]) == 1 {
			params.Set("state", state)
		}
		s.redirectTo(w, r, redirectURI, params)
	}
	if k := oauthserver.RepeatedParam(q); k != "" {
		fail("invalid_request", "The parameter "+k+" is given more than once.")
		return
	}
	if e := oauthserver.CheckResponseType(q); e != nil {
		fail(e.Code, e.Description)
		return
	}
	if e := oauthserver.CheckChallenge(q); e != nil {
		fail(e.Code, e.Description)
		return
	}
	resource, ok := s.acceptedResource(q.Get("resource"))
	if q.Get("resource") == "" {
		fail("invalid_target", "resource is required (RFC 8707) and must be "+s.resource+".")
		return
	}
	if !ok {
		fail("invalid_target", "resource must be "+s.resource+": this server accepts tokens for itself only.")
		return
	}
	scope, ok := grantedScope(q.Get("scope"), c.Scope)
	if !ok {
		fail("invalid_scope", "The client did not register the scope "+Scope+".")
		return
	}
	if s.requestCount(r.Context()) >= s.opts.MaxPending {
		fail("temporarily_unavailable", "Too many authorizations are in progress; try again in a few minutes.")
		return
	}
	now := s.now()
	ar := &AuthRequest{ID: oauthserver.NewSecret(""), ClientID: c.ID, RedirectURI: redirectURI, Scope: scope, Resource: resource,
		State: state, Challenge: q.Get("code_challenge"), Expires: now.Add(s.opts.RequestTTL)}
	// The source's requests in progress are bounded: its oldest ones make room, so that one
	// source cannot fill the server-wide bound.
	evicted, err := s.store.Admit(ctx, keySourceRequests, s.source(r), ar.ID, ar.Expires, s.opts.MaxPendingPerSource)
	if err != nil {
		s.log.Error("proxy: count a source's authorization requests", "err", err)
		fail("server_error", "The server could not store the request.")
		return
	}
	for _, id := range evicted {
		if err := s.store.DropRequest(ctx, id); err != nil {
			s.log.Warn("proxy: drop an authorization request", "err", err)
		}
	}

	// Consent is remembered per user, client and redirect URI; the user is known from the
	// browser's signed user cookie. Without it, the person at the browser decides.
	if user != "" {
		if cs := consent; cs != nil && oauthserver.CoversScope(cs.Scope, scope) {
			ar.Browser = oauthserver.Digest(s.browserID(w, r))
			ar.RememberedFor = user
			s.log.Info("authorization: consent remembered", "client_id", c.ID, "user", user)
			s.toUpstream(w, r, ar)
			return
		}
	}
	if err := s.store.PutRequest(ctx, ar); err != nil {
		s.log.Error("proxy: store an authorization request", "err", err)
		fail(unavailableOr(err, "server_error"), "The server could not store the request.")
		return
	}
	http.Redirect(w, r, consentPath+"?request="+url.QueryEscape(ar.ID), http.StatusSeeOther)
}

// grantedScope is the scope an authorization grants: mcp:card-writer, the only one, whatever
// else was asked for (RFC 6749 section 3.3 lets the server grant less). It fails when the
// client registered a scope without it.
func grantedScope(_ string, registered string) (string, bool) {
	if registered != "" && !oauthserver.CoversScope(registered, Scope) {
		return "", false
	}
	return Scope, true
}

func (s *Server) expiredPage(w http.ResponseWriter) {
	s.errorPage(w, http.StatusBadRequest, "Authorization expired",
		"This authorization request is unknown, was already answered, or has expired. Go back to your application and connect again.")
}

// consent shows the consent page (GET) or takes its answer (POST).
func (s *Server) consent(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		s.consentPage(w, r)
	case http.MethodPost:
		s.consentAnswer(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		s.errorPage(w, http.StatusMethodNotAllowed, "Wrong method", "Use the consent page.")
	}
}

func (s *Server) liveRequest(ctx context.Context, id string) *AuthRequest {
	if id == "" {
		return nil
	}
	ar, err := s.store.GetRequest(ctx, id)
	if err != nil || !s.now().Before(ar.Expires) {
		return nil
	}
	return ar
}

func (s *Server) consentPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ar := s.liveRequest(ctx, r.URL.Query().Get("request"))
	if ar == nil || ar.Upstream != "" {
		s.expiredPage(w)
		return
	}
	bid := s.browserID(w, r)
	switch {
	case ar.Browser == "":
		// The first browser that opens the request owns it.
		ar.Browser = oauthserver.Digest(bid)
		if err := s.store.PutRequest(ctx, ar); err != nil {
			s.log.Error("proxy: store an authorization request", "err", err)
			s.errorPage(w, http.StatusInternalServerError, "Error", "The server could not store the request.")
			return
		}
	case oauthserver.Digest(bid) != ar.Browser:
		s.errorPage(w, http.StatusForbidden, "Request refused", "This authorization request belongs to another browser. Go back to your application and connect again.")
		return
	}
	c, err := s.client(ctx, ar.ClientID)
	if err != nil {
		s.expiredPage(w)
		return
	}
	ru, _ := url.Parse(ar.RedirectURI)
	name := c.Name
	if name == "" {
		name = "An unnamed application"
	}
	s.writePage(w, http.StatusOK, "consent", map[string]any{
		"Title": "Allow access to your cards?", "Client": name, "ClientID": c.ID, "Named": c.Name != "",
		"RedirectURI": ar.RedirectURI, "RedirectHost": ru.Host, "Loopback": isLoopbackHost(ru.Hostname()),
		"Scopes": strings.Fields(ar.Scope), "Resource": s.resource,
		"Request": ar.ID, "CSRF": s.keys.sign("consent", ar.ID, bid), "Action": consentPath,
	})
}

// formFromSite reads a page's form POST; a cross-origin Origin is refused ("null", which
// browsers send in some contexts, is left to the CSRF token).
func (s *Server) formFromSite(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		if co, ok := oauthserver.CanonicalResource(o); !ok || co != s.issuer {
			return nil, false
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, oauthserver.MaxBodyBytes)
	if err := r.ParseForm(); err != nil {
		return nil, false
	}
	return r.PostForm, true
}

func (s *Server) consentAnswer(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f, ok := s.formFromSite(w, r)
	if !ok {
		s.log.Warn("consent refused: cross-site form")
		s.errorPage(w, http.StatusForbidden, "Request refused", "The consent form was not sent from this site. Nothing was shared.")
		return
	}
	ar := s.liveRequest(ctx, f.Get("request"))
	if ar == nil || ar.Upstream != "" {
		s.expiredPage(w)
		return
	}
	c, err := r.Cookie(s.cookieName(browserCookie))
	if err != nil || !s.sameBrowser(r, ar) || !s.keys.verify(f.Get("csrf"), "consent", ar.ID, c.Value) {
		s.log.Warn("consent refused: CSRF token or browser does not match", "client_id", ar.ClientID)
		s.errorPage(w, http.StatusForbidden, "Request refused",
			"The consent form is not valid for this browser. Nothing was shared. Go back to your application and connect again.")
		return
	}
	switch f.Get("decision") {
	case "allow":
		s.log.Info("authorization: consent given on the page", "client_id", ar.ClientID)
		s.toUpstream(w, r, ar)
	case "deny":
		if _, err := s.store.TakeRequest(ctx, ar.ID); err != nil {
			s.expiredPage(w)
			return
		}
		s.log.Info("authorization: denied on the consent page", "client_id", ar.ClientID)
		params := url.Values{"error": {"access_denied"}, "error_description": {"The user denied access."}}
		if ar.State != "" {
			params.Set("state", ar.State)
		}
		s.redirectTo(w, r, ar.RedirectURI, params)
	default:
		s.errorPage(w, http.StatusBadRequest, "Invalid answer", "Choose Allow or Deny.")
	}
}

// toUpstream starts the card service leg of an authorization request whose consent is given:
// the proxy's own PKCE verifier (sealed into the request) and state (stored only now, by its
// digest, single use), then the browser to the card service.
func (s *Server) toUpstream(w http.ResponseWriter, r *http.Request, ar *AuthRequest) {
	ctx := r.Context()
	md, err := s.up.metadata(ctx)
	var clientID string
	if err == nil {
		clientID, err = s.up.clientID(ctx, md)
	}
	if err != nil {
		s.log.Error("authorization: the card service's authorization server is not usable", "err", err)
		s.errorPage(w, http.StatusBadGateway, "Card service unavailable",
			"The card service's sign-in could not be reached just now. Go back to your application and try again in a moment.")
		return
	}
	verifier := oauth2.GenerateVerifier()
	state := oauthserver.NewSecret("")
	ar.Upstream = s.keys.seal([]byte(verifier), "request:"+ar.ID)
	if err := s.store.PutRequest(ctx, ar); err == nil {
		err = s.store.PutSecret(ctx, oauthserver.Digest(state), &Secret{Kind: KindState, RequestID: ar.ID, ClientID: ar.ClientID, Expires: ar.Expires})
	}
	if err != nil {
		s.log.Error("proxy: store an authorization request", "err", err)
		s.errorPage(w, http.StatusInternalServerError, "Error", "The server could not store the request.")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, s.up.authURL(md, clientID, state, verifier), http.StatusSeeOther)
}

// callback receives the card service's answer.
func (s *Server) callback(w http.ResponseWriter, r *http.Request) {
	outcome := "failed" // what the sign-in came to: ok, denied (by the card service or the user), failed
	if s.opts.OnSignIn != nil {
		defer func() { s.opts.OnSignIn(outcome) }()
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		s.errorPage(w, http.StatusMethodNotAllowed, "Wrong method", "This address takes the browser's return from the card service.")
		return
	}
	ctx := r.Context()
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" || len(q["state"]) != 1 {
		s.errorPage(w, http.StatusBadRequest, "Unknown sign-in", "The card service's answer carries no state, so it was ignored.")
		return
	}
	// The state is single use: whatever happens next, it is spent.
	sec, err := s.store.UseSecret(ctx, oauthserver.Digest(state))
	if store.IsUnavailable(err) {
		s.storeDownPage(w)
		return
	}
	if err != nil || sec.Kind != KindState || sec.Used || !s.now().Before(sec.Expires) {
		s.log.Warn("callback refused: unknown, replayed or expired state")
		s.errorPage(w, http.StatusBadRequest, "Unknown sign-in",
			"This answer does not belong to a sign-in in progress (its state is unknown, expired or already used), so it was ignored. Go back to your application and connect again.")
		return
	}
	_ = s.store.DeleteSecret(ctx, oauthserver.Digest(state))
	ar, err := s.store.TakeRequest(ctx, sec.RequestID)
	if store.IsUnavailable(err) {
		s.storeDownPage(w)
		return
	}
	if err != nil || !s.now().Before(ar.Expires) || ar.Upstream == "" {
		s.expiredPage(w)
		return
	}
	if !s.sameBrowser(r, ar) {
		s.log.Warn("callback refused: another browser than the one that started the authorization", "client_id", ar.ClientID)
		s.errorPage(w, http.StatusForbidden, "Request refused",
			"This sign-in was started in another browser, so it was refused. Nothing was shared. Go back to your application and connect again.")
		return
	}
	backToClient := func(params url.Values, message string) {
		if ar.State != "" {
			params.Set("state", ar.State)
		}
		params.Set("iss", s.issuer)
		s.returnPage(w, oauthserver.WithQuery(ar.RedirectURI, params), message)
	}
	md, err := s.up.metadata(ctx)
	if err != nil {
		backToClient(url.Values{"error": {"temporarily_unavailable"}, "error_description": {"The card service could not be reached."}},
			"The card service could not be reached; the application is told so.")
		return
	}
	if iss := q.Get("iss"); (iss != "" && strings.TrimSuffix(iss, "/") != md.Issuer) || (iss == "" && md.AuthorizationResponseIssParameterSupported) {
		s.log.Warn("callback refused: the answer names another issuer (RFC 9207)")
		s.errorPage(w, http.StatusBadRequest, "Sign-in refused", "The answer did not come from the card service, so it was refused. Nothing was shared.")
		return
	}
	if e := q.Get("error"); e != "" {
		code := "access_denied"
		if e == "temporarily_unavailable" || e == "server_error" {
			code = e
		}
		outcome = "denied"
		s.log.Info("authorization: the card service did not grant access", "client_id", ar.ClientID, "error", auth.Printable(e, 64))
		backToClient(url.Values{"error": {code}, "error_description": {"The card service did not grant access."}},
			"The card service did not grant access; the application is told so.")
		return
	}
	code := q.Get("code")
	if code == "" || len(q["code"]) != 1 {
		s.errorPage(w, http.StatusBadRequest, "Sign-in failed", "The card service's answer carries no code.")
		return
	}
	verifier, err := s.keys.open(ar.Upstream, "request:"+ar.ID)
	if err != nil {
		s.expiredPage(w)
		return
	}
	clientID, err := s.up.clientID(ctx, md)
	if err != nil {
		s.errorPage(w, http.StatusBadGateway, "Card service unavailable", "The card service could not be reached. Go back to your application and try again.")
		return
	}
	toks, err := s.up.exchange(ctx, md, clientID, code, string(verifier))
	if err != nil {
		var f *auth.OAuthError
		if errors.As(err, &f) && f.Code == "invalid_client" {
			s.up.forgetClient(ctx, md)
		}
		s.log.Error("authorization: exchange the card service's code", "client_id", ar.ClientID, "err", err)
		backToClient(url.Values{"error": {"server_error"}, "error_description": {"The card service's sign-in could not be completed."}},
			"The card service's sign-in could not be completed; the application is told so.")
		return
	}
	me, err := s.up.me(ctx, toks.Access)
	if identityMissing(err) {
		// The service names nobody: the grant is the user (revisions, exports, limits), and
		// no consent is remembered for a user nobody named.
		s.log.Warn("authorization: the card service has no identity operation where the contract says; the grant stands for the user", "err", err)
		me, err = &upstream.Me{}, nil
	} else if err == nil && me.UserID == "" {
		err = errors.New("the identity operation named no userId")
	}
	if err != nil {
		s.log.Error("authorization: ask the card service who signed in", "err", err)
		s.up.revoke(ctx, toks)
		backToClient(url.Values{"error": {"server_error"}, "error_description": {"The card service did not say who signed in."}},
			"The card service did not say who signed in; the application is told so.")
		return
	}
	if ar.RememberedFor != "" && me.UserID != ar.RememberedFor {
		// The consent that let the request skip the page was another user's.
		if cs, err := s.store.GetConsent(ctx, me.UserID, ar.ClientID, ar.RedirectURI); err != nil || !oauthserver.CoversScope(cs.Scope, ar.Scope) {
			s.log.Warn("authorization refused: signed in as another user than the one whose consent was remembered", "client_id", ar.ClientID, "user", me.UserID)
			s.up.revoke(ctx, toks)
			s.clearCookie(w, userCookie)
			s.errorPage(w, http.StatusForbidden, "Signed in as someone else",
				"You signed in to the card service as another user than before, who has not allowed this application yet. Go back to your application and connect again to see the consent page.")
			return
		}
	}
	now := s.now()
	if ar.RememberedFor == "" && me.UserID != "" {
		if err := s.store.PutConsent(ctx, &Consent{UserID: me.UserID, ClientID: ar.ClientID, RedirectURI: ar.RedirectURI, Scope: ar.Scope, Granted: now.UTC()}); err != nil {
			s.log.Warn("proxy: remember a consent", "err", err)
		}
	}
	g := &Grant{ID: newID("g_"), ClientID: ar.ClientID, UserID: me.UserID, Nickname: me.Nickname, Scope: ar.Scope,
		Resource: ar.Resource, Created: now.UTC()}
	s.sealTokens(g, toks)
	ourCode := oauthserver.NewSecret(codePrefix)
	err = s.store.PutGrant(ctx, g)
	if err == nil {
		err = s.store.PutSecret(ctx, oauthserver.Digest(ourCode), &Secret{Kind: KindCode, GrantID: g.ID, ClientID: ar.ClientID, Scope: ar.Scope,
			Resource: ar.Resource, RedirectURI: ar.RedirectURI, Challenge: ar.Challenge, Expires: now.Add(s.opts.CodeTTL)})
	}
	if err != nil {
		s.log.Error("proxy: store a grant", "err", err)
		s.up.revoke(ctx, toks)
		backToClient(url.Values{"error": {unavailableOr(err, "server_error")}, "error_description": {"The server could not store the authorization."}},
			"The server could not store the authorization; the application is told so.")
		return
	}
	if err := s.store.UseClient(ctx, ar.ClientID); err != nil {
		s.log.Warn("proxy: keep a registration used to sign in", "client_id", ar.ClientID, "err", err)
	}
	if me.UserID != "" {
		s.setUser(w, me.UserID)
	}
	outcome = "ok"
	s.log.Info("authorization granted", "grant", g.ID, "client_id", g.ClientID, "user", g.UserID)
	signedIn := "Signed in"
	if me.Nickname != "" {
		signedIn += " as " + me.Nickname
	}
	backToClient(url.Values{"code": {ourCode}}, signedIn+". Returning to the application…")
}

// storeDownPage answers a browser's return when the store could not be read or written (Redis
// failing over): 503, and connect again; nothing of the sign-in was kept.
func (s *Server) storeDownPage(w http.ResponseWriter) {
	s.errorPage(w, http.StatusServiceUnavailable, "Try again",
		"This server could not check the sign-in for a moment (its store is unavailable). Go back to your application and connect again.")
}
