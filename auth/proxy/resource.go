package proxy

// The MCP endpoint as an OAuth resource server (RFC 6750, RFC 9728), for both HTTP modes:
// every request carries a bearer token, checked on every request (a session is never
// authentication); a missing or bad one gets 401 with the challenge that points to the
// protected-resource metadata; a session belongs to the user who opened it.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/oauthserver"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// Principal is who an MCP request acts for: the card service's user and, in proxy mode, the
// grant and the MCP client. It travels in the request's context as the upstream.Identity that
// upstream.Client.Identity and Principal read, so that the tools, the audit lines and the
// per-user limits all know the user by the card service's user id.
type Principal = upstream.Identity

// PrincipalFrom returns the principal of an authenticated request's context.
func PrincipalFrom(ctx context.Context) *Principal { return upstream.IdentityFrom(ctx) }

// requestState is what a request learns while it is served: whether its authorization
// ended (the card service refused the token for good).
type requestState struct {
	ended atomic.Bool
}

type requestStateKey struct{}

// HTTPContext copies what the bearer middleware put in the request's context (the principal
// and the card service token source) into ctx. It is the mcp-go HTTPContextFunc of the
// streamable HTTP server (server.WithHTTPContextFunc), so that tool handlers see the request's
// credentials however the server derives their context.
func HTTPContext(ctx context.Context, r *http.Request) context.Context {
	rc := r.Context()
	if p := PrincipalFrom(rc); p != nil {
		ctx = upstream.WithIdentity(ctx, p)
	}
	if ts := upstream.TokenSourceFrom(rc); ts != nil {
		ctx = upstream.WithTokenSource(ctx, ts)
	}
	if st, ok := rc.Value(requestStateKey{}).(*requestState); ok {
		ctx = context.WithValue(ctx, requestStateKey{}, st)
	}
	return ctx
}

// authFailure is why a request was not authenticated.
type authFailure struct {
	status int    // 401, 429 when the source checks too many tokens, or 503 when the card service could not be asked
	retry  int    // with 429: Retry-After, in seconds
	token  bool   // a token was sent (the challenge then says invalid_token)
	reason string // for the log and error_description
}

// authenticator checks a request's bearer token; on success it returns the principal and the
// token source of the request's calls to the card service.
type authenticator func(r *http.Request, token string) (*Principal, upstream.TokenSource, *authFailure)

// resourceServer guards the MCP endpoint.
type resourceServer struct {
	metadataURL  string
	authenticate authenticator
	sessions     *sessionOwners
	log          *slog.Logger
	next         http.Handler
}

// Protect returns the MCP endpoint behind the proxy's bearer tokens.
func (s *Server) Protect(next http.Handler) http.Handler {
	return &resourceServer{metadataURL: s.ResourceMetadataURL(), authenticate: s.authenticate, sessions: s.sessions, log: s.log, next: next}
}

// authenticate accepts a live access token of this server, issued for this resource with the
// scope mcp:card-writer, of an active grant.
func (s *Server) authenticate(r *http.Request, token string) (*Principal, upstream.TokenSource, *authFailure) {
	ctx := r.Context()
	bad := func(reason string) (*Principal, upstream.TokenSource, *authFailure) {
		return nil, nil, &authFailure{status: http.StatusUnauthorized, token: true, reason: reason}
	}
	sec, err := s.store.GetSecret(ctx, oauthserver.Digest(token))
	switch {
	case errors.Is(err, ErrNotFound) || (err == nil && sec.Kind != KindAccess):
		return bad("The access token is unknown or revoked.")
	case err != nil:
		s.log.Error("proxy: look up an access token", "err", err)
		return nil, nil, &authFailure{status: http.StatusServiceUnavailable, token: true, reason: "The token could not be checked."}
	case !s.now().Before(sec.Expires):
		return bad("The access token has expired.")
	case !oauthserver.CoversScope(sec.Scope, Scope):
		return bad("The access token lacks the scope " + Scope + ".")
	}
	if _, ok := s.acceptedResource(sec.Resource); !ok {
		return bad("The access token was issued for another resource.")
	}
	g, err := s.store.GetGrant(ctx, sec.GrantID)
	switch {
	case errors.Is(err, ErrNotFound) || (err == nil && !g.Active):
		return bad("The authorization of this access token has ended.")
	case err != nil:
		// The store cannot say (a Redis failing over): try again, the sign-in is not over.
		s.log.Error("proxy: look up a grant", "err", err)
		return nil, nil, &authFailure{status: http.StatusServiceUnavailable, token: true, reason: "The token could not be checked."}
	}
	p := &Principal{UserID: g.UserID, ClientID: g.ClientID, GrantID: g.ID}
	return p, &grantSource{s: s, grantID: g.ID}, nil
}

// bearerToken returns the token of an "Authorization: Bearer" header; ok is false when the
// header is there but malformed.
func bearerToken(r *http.Request) (token string, sent bool) {
	h := r.Header.Values("Authorization")
	if len(h) == 0 {
		return "", false
	}
	scheme, tok, found := strings.Cut(strings.TrimSpace(h[0]), " ")
	if len(h) > 1 || !found || !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(tok), true
}

func (rs *resourceServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token, sent := bearerToken(r)
	if token == "" {
		reason := "An access token is required."
		if sent {
			reason = "The Authorization header is not a bearer token."
		}
		rs.challenge(w, r, &authFailure{status: http.StatusUnauthorized, token: sent, reason: reason})
		return
	}
	p, ts, fail := rs.authenticate(r, token)
	if fail != nil {
		rs.challenge(w, r, fail)
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	owned := true
	if sid != "" {
		var err error
		if owned, err = rs.sessions.owned(r.Context(), sid, sessionOwner(p)); err != nil {
			rs.log.Error("mcp request refused: the session could not be checked", "err", err)
			rs.challenge(w, r, &authFailure{status: http.StatusServiceUnavailable, token: true, reason: "The session could not be checked; try again."})
			return
		}
	}
	if !owned {
		// Unknown, or another grant's (another user's, or another MCP client's of the same
		// user): the same answer, so that session ids cannot be probed.
		rs.log.Warn("mcp request refused: the session is not this grant's", "session", sessionTag(sid), "user", p.UserID, "grant", p.GrantID, "client_id", p.ClientID)
		writeJSONRPCError(w, http.StatusNotFound, "Session not found")
		return
	}
	st := &requestState{}
	if gs, ok := ts.(*grantSource); ok {
		gs.state = st
	}
	if ps, ok := ts.(*passthroughSource); ok {
		ps.state = st
	}
	ctx := upstream.WithIdentity(r.Context(), p)
	ctx = upstream.WithTokenSource(ctx, ts)
	ctx = context.WithValue(ctx, requestStateKey{}, st)
	rw := &responseWriter{ResponseWriter: w, rs: rs, r: r, state: st, owner: sessionOwner(p), sid: sid}
	rs.next.ServeHTTP(rw, r.WithContext(ctx))
	if r.Method == http.MethodDelete && sid != "" && rw.status/100 == 2 {
		if err := rs.sessions.forget(context.WithoutCancel(r.Context()), sid); err != nil {
			rs.log.Warn("forget a deleted session", "err", err)
		}
	}
}

// challenge answers 401 (or 503) with WWW-Authenticate: Bearer resource_metadata=..., scope=...
func (rs *resourceServer) challenge(w http.ResponseWriter, r *http.Request, f *authFailure) {
	c := `Bearer resource_metadata="` + rs.metadataURL + `", scope="` + Scope + `"`
	if f.token {
		c += `, error="invalid_token", error_description="` + strings.ReplaceAll(f.reason, `"`, `'`) + `"`
	}
	if f.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", c)
	}
	if f.retry > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(f.retry))
	}
	w.Header().Set("Access-Control-Expose-Headers", "WWW-Authenticate")
	if f.token {
		rs.log.Info("mcp request refused", "status", f.status, "method", r.Method, "reason", f.reason)
	}
	body := map[string]string{"error": "invalid_token", "error_description": f.reason}
	if !f.token {
		body["error"] = "unauthorized"
	}
	if f.status != http.StatusUnauthorized {
		body["error"] = "temporarily_unavailable"
	}
	writeJSON(w, f.status, body)
}

// writeJSONRPCError answers with a JSON-RPC error without an id.
func writeJSONRPCError(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32600, "message": message}})
}

// sessionTag identifies a session in logs without its id.
func sessionTag(sid string) string {
	sum := sha256.Sum256([]byte(sid))
	return hex.EncodeToString(sum[:4])
}

// responseWriter records the session a response opens (initialize answers Mcp-Session-Id)
// as the user's, and turns the answer of a request whose authorization ended into a 401 with
// the challenge, as long as nothing was sent yet (an SSE stream already under way keeps the
// tool's error result instead).
type responseWriter struct {
	http.ResponseWriter
	rs      *resourceServer
	r       *http.Request
	state   *requestState
	owner   string // sessionOwner of the request's principal
	sid     string
	status  int
	swallow bool
}

func (w *responseWriter) WriteHeader(status int) {
	if w.status != 0 {
		return
	}
	if w.state.ended.Load() && status/100 == 2 && !strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		w.status = http.StatusUnauthorized
		w.swallow = true
		h := w.Header()
		h.Del("Mcp-Session-Id")
		h.Del("Content-Type")
		w.rs.challenge(w.ResponseWriter, w.r, &authFailure{status: http.StatusUnauthorized, token: true,
			reason: "The authorization ended: the card service no longer accepts it."})
		return
	}
	w.status = status
	if id := w.Header().Get("Mcp-Session-Id"); id != "" && id != w.sid && status/100 == 2 {
		if err := w.rs.sessions.own(context.WithoutCancel(w.r.Context()), id, w.owner); err != nil {
			// The session cannot be bound to its user: refuse it rather than open it unbound.
			w.rs.log.Error("a new session could not be recorded", "err", err)
			w.status = http.StatusServiceUnavailable
			w.swallow = true
			h := w.Header()
			h.Del("Mcp-Session-Id")
			h.Del("Content-Type")
			w.rs.challenge(w.ResponseWriter, w.r, &authFailure{status: http.StatusServiceUnavailable, token: true,
				reason: "The session could not be recorded; try again."})
			return
		}
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.swallow {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// Flush keeps streaming (SSE) working through the wrapper.
func (w *responseWriter) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.swallow {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// sessionOwner is who a session belongs to: the grant that opened it in proxy mode (one user's
// one MCP client: another client of the same user has another grant), the user in passthrough
// mode (where the card service's tokens tell users apart, not clients).
func sessionOwner(p *Principal) string {
	if p.GrantID != "" {
		return "grant:" + p.GrantID + "\x00" + p.UserID
	}
	return p.UserID
}

// sessionOwners binds MCP session ids to the grant (or user) that opened them, in the KV shared by every
// replica; a binding idle longer than the session idle time (plus a margin) expires, as the
// MCP server drops the sessions.
type sessionOwners struct {
	kv      store.KV
	idle    time.Duration
	toucher *store.Toucher
}

func newSessionOwners(kv store.KV, idle time.Duration) *sessionOwners {
	return &sessionOwners{kv: kv, idle: idle + time.Minute, toucher: &store.Toucher{KV: kv, Every: idle / 10}}
}

// own binds a new session to owner; a session already bound keeps its owner.
func (so *sessionOwners) own(ctx context.Context, sid, owner string) error {
	_, err := so.kv.Create(ctx, keySession+hashKey(sid), []byte(owner), so.idle)
	return err
}

// owned reports whether sid is a known session of owner, and keeps the binding alive.
func (so *sessionOwners) owned(ctx context.Context, sid, owner string) (bool, error) {
	key := keySession + hashKey(sid)
	v, err := so.kv.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if string(v) != owner {
		return false, nil
	}
	if err := so.toucher.Touch(ctx, key, so.idle); err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	return true, nil
}

func (so *sessionOwners) forget(ctx context.Context, sid string) error {
	return so.kv.Delete(ctx, keySession+hashKey(sid))
}
