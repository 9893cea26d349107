package sandbox

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"

	"github.com/cardwriter/cardwriter-mcp/schema"
)

const (
	apiPrefix    = "/open/v1"
	imagesPrefix = "/images/"
	maxBodyBytes = 16 << 20 // 16 MiB
)

// request is one validated API call as a handler sees it.
type request struct {
	op     schema.Operation
	userID string
	path   map[string]string // path parameters, validated
	query  map[string]string // query parameters present, validated
	body   []byte            // the body, valid JSON matching the operation's schema; nil when none
}

// handlerFunc runs one operation with s.mu held. status 0 means the operation's documented success status.
type handlerFunc func(s *Service, rq *request) (status int, body any, err error)

// handlers maps every ServerAPI operationId of the contract to its implementation; New refuses a mismatch.
var handlers = map[string]handlerFunc{
	"getMe":                  (*Service).getMe,
	"createCard":             (*Service).createCard,
	"getCard":                (*Service).getCard,
	"setOpeningLines":        (*Service).setOpeningLines,
	"updateCardProfile":      (*Service).updateCardProfile,
	"writeCardDocument":      (*Service).writeCardDocument,
	"setCardVisibility":      (*Service).setCardVisibility,
	"validateCard":           (*Service).validateCard,
	"publishCard":            (*Service).publishCard,
	"uploadImage":            (*Service).uploadImage,
	"listCardAssets":         (*Service).listCardAssets,
	"listWorldbooks":         (*Service).listWorldbooks,
	"createWorldbook":        (*Service).createWorldbook,
	"getWorldbook":           (*Service).getWorldbook,
	"listCardWorldbooks":     (*Service).listCardWorldbooks,
	"listWorldbookEntries":   (*Service).listWorldbookEntries,
	"writeWorldbookDocument": (*Service).writeWorldbookDocument,
	"listTrialCards":         (*Service).listTrialCards,
	"getTrialCard":           (*Service).getTrialCard,
	"upsertTrialCard":        (*Service).upsertTrialCard,
	"deleteTrialCard":        (*Service).deleteTrialCard,
}

// route is one ServerAPI operation with its compiled validators.
type route struct {
	op       schema.Operation
	segments []string // template segments; "{name}" for a parameter
	handle   handlerFunc
	params   map[string]*schema.Validator
	body     *schema.Validator
}

// buildRoutes derives the router from the contract: one route per ServerAPI operation.
func buildRoutes() ([]route, error) {
	ops, err := schema.Operations()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	var routes []route
	seen := map[string]bool{}
	for _, op := range ops {
		if op.Server != schema.ServerAPI {
			continue
		}
		h, ok := handlers[op.ID]
		if !ok {
			return nil, fmt.Errorf("sandbox: contract operation %s has no handler", op.ID)
		}
		seen[op.ID] = true
		rt := route{op: op, handle: h, params: map[string]*schema.Validator{},
			segments: strings.Split(strings.TrimPrefix(op.Path, "/"), "/")}
		for _, p := range op.Params {
			if rt.params[p.Name], err = schema.Compile(p.Schema); err != nil {
				return nil, fmt.Errorf("sandbox: %s: %w", op.ID, err)
			}
		}
		if op.Body != nil {
			if rt.body, err = schema.Compile(op.Body.Schema); err != nil {
				return nil, fmt.Errorf("sandbox: %s: %w", op.ID, err)
			}
		}
		for _, r := range op.Responses {
			if r.Schema == "" {
				continue
			}
			if _, err := schema.Compile(r.Schema); err != nil {
				return nil, fmt.Errorf("sandbox: %s: %w", op.ID, err)
			}
		}
		routes = append(routes, rt)
	}
	for id := range handlers {
		if !seen[id] {
			return nil, fmt.Errorf("sandbox: handler %s has no ServerAPI operation in the contract", id)
		}
	}
	return routes, nil
}

// match finds the route of method and the unescaped path segments; literal segments beat parameters.
func (s *Service) match(method string, segs []string) (*route, map[string]string) {
	var best *route
	var bestVals map[string]string
	for i := range s.routes {
		rt := &s.routes[i]
		if rt.op.Method != method || len(rt.segments) != len(segs) {
			continue
		}
		vals := map[string]string{}
		ok := true
		for j, t := range rt.segments {
			if name, isParam := paramName(t); isParam {
				vals[name] = segs[j]
			} else if t != segs[j] {
				ok = false
				break
			}
		}
		if ok && (best == nil || moreSpecific(rt.segments, best.segments)) {
			best, bestVals = rt, vals
		}
	}
	return best, bestVals
}

func paramName(seg string) (string, bool) {
	if len(seg) > 2 && seg[0] == '{' && seg[len(seg)-1] == '}' {
		return seg[1 : len(seg)-1], true
	}
	return "", false
}

// moreSpecific reports whether template a has a literal where b first has a parameter.
func moreSpecific(a, b []string) bool {
	for i := range a {
		_, pa := paramName(a[i])
		_, pb := paramName(b[i])
		if pa != pb {
			return !pa
		}
	}
	return false
}

// splitPath splits an escaped path ("/a/b%2Fc") into unescaped segments.
func splitPath(escaped string) ([]string, bool) {
	parts := strings.Split(strings.TrimPrefix(escaped, "/"), "/")
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil {
			return nil, false
		}
		parts[i] = u
	}
	return parts, true
}

func (s *Service) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	status, opID := http.StatusInternalServerError, ""
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("sandbox: handler panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
			status = s.writeError(w, nil, errInternal())
		}
		s.log.Debug("sandbox request", "method", r.Method, "path", r.URL.Path, "op", opID,
			"status", status, "duration", time.Since(start))
	}()
	p := r.URL.EscapedPath()
	switch {
	case p == apiPrefix || strings.HasPrefix(p, apiPrefix+"/"):
		opID, status = s.serveAPI(w, r, strings.TrimPrefix(p, apiPrefix))
	case strings.HasPrefix(p, imagesPrefix) && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		status = s.serveImage(w, r, strings.TrimPrefix(p, imagesPrefix))
	case isOAuthPath(p):
		opID, status = s.serveOAuth(w, r, p)
	default:
		status = s.writeError(w, nil, errNoRoute())
	}
}

func errNoRoute() *apiError {
	return newError(codeNotFound, "No operation of the open API has this method and path.", nil)
}

// serveAPI runs the generic checks (auth, path, query, body) and then the operation's handler.
func (s *Service) serveAPI(w http.ResponseWriter, r *http.Request, rest string) (string, int) {
	var rt *route
	var pathVals map[string]string
	if segs, ok := splitPath(rest); ok && rest != "" {
		rt, pathVals = s.match(r.Method, segs)
	}
	var op *schema.Operation
	if rt != nil {
		op = &rt.op
	}
	rq := &request{path: pathVals, query: map[string]string{}}
	if rt == nil || rt.op.Secured {
		uid, ok := s.authenticate(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", s.bearerChallenge(r))
			return "", s.writeError(w, op, newError(codeUnauthorized,
				"Authentication failed; sign in again to get a new access token.", nil))
		}
		rq.userID = uid
	}
	if rt == nil {
		return "", s.writeError(w, nil, errNoRoute())
	}
	rq.op = rt.op
	if err := rt.checkParams(rq, r.URL.RawQuery); err != nil {
		return rt.op.ID, s.writeError(w, op, err)
	}
	if rt.body != nil {
		body, err := readBody(w, r, rt)
		if err != nil {
			return rt.op.ID, s.writeError(w, op, err)
		}
		rq.body = body
	}
	respond := func(w http.ResponseWriter) int {
		status, data, err := s.run(rt, rq)
		if err != nil {
			return s.writeError(w, op, err)
		}
		return s.writeJSON(w, op, status, data)
	}
	if f := s.opts.Faults; f != nil && f.applies(rt.op.ID) {
		return rt.op.ID, s.serveFaulty(w, r, rt.op.ID, respond)
	}
	return rt.op.ID, respond(w)
}

// authenticate maps the bearer token of r to its user: a pre-issued token, or a live OAuth access
// token issued for this API ({base_url}) with the scope mcp:card-writer.
func (s *Service) authenticate(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	uid, ok := s.tokens[token]
	if !ok {
		uid, ok = s.oauthUser(token)
	}
	return uid, ok
}

// run calls the handler with the state locked, persists a changed state and encodes the reply.
func (s *Service) run(rt *route, rq *request) (status int, data []byte, aerr *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("sandbox: handler panic", "op", rt.op.ID, "panic", fmt.Sprint(v))
			status, data, aerr = 0, nil, errInternal()
		}
	}()
	s.dirty = false
	status, body, err := rt.handle(s, rq)
	if s.dirty {
		s.dirty = false
		if perr := s.persist(); perr != nil {
			s.log.Error("sandbox: persist state", "op", rt.op.ID, "err", perr)
			return 0, nil, errInternal()
		}
	}
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return 0, nil, ae
		}
		s.log.Error("sandbox: handler failed", "op", rt.op.ID, "err", err)
		return 0, nil, errInternal()
	}
	if status == 0 {
		status = rt.op.SuccessStatus()
	}
	data, err = jsontext.Marshal(body)
	if err != nil {
		s.log.Error("sandbox: encode response", "op", rt.op.ID, "err", err)
		return 0, nil, errInternal()
	}
	return status, data, nil
}
