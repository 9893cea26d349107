package upstream_test

// The harness of the contract tests: the typed client of package upstream against the card
// service emulator of package sandbox, in-process, with every response checked against the
// contract twice: by the sandbox itself (Options.CheckResponses) and by a recording transport
// here, which matches each request to its contract operation on its own and validates the
// status and body against what the contract documents for it.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/auth/authtest"
	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

// ctToken is the demo user's bearer token in every contract test.
const ctToken = "ct-demo-token-1234"

// ctStart is where the fake clock of every contract test starts.
var ctStart = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// ctStatusOf is the HTTP status of every error code, as design.md section 3 and the contract's
// Error response list them; written out here rather than taken from the sandbox.
var ctStatusOf = map[string]int{
	"invalid_request":      http.StatusBadRequest,
	"unauthorized":         http.StatusUnauthorized,
	"insufficient_credits": http.StatusPaymentRequired,
	"forbidden":            http.StatusForbidden,
	"not_found":            http.StatusNotFound,
	"role_not_found":       http.StatusNotFound,
	"worldbook_not_found":  http.StatusNotFound,
	"trial_not_found":      http.StatusNotFound,
	"conflict":             http.StatusConflict,
	"trial_slots_full":     http.StatusConflict,
	"payload_too_large":    http.StatusRequestEntityTooLarge,
	"validation_failed":    http.StatusUnprocessableEntity,
	"rate_limited":         http.StatusTooManyRequests,
	"internal":             http.StatusInternalServerError,
	"unavailable":          http.StatusServiceUnavailable,
}

// ctRoute is one ServerAPI operation of the contract with its path template split in segments.
type ctRoute struct {
	op   schema.Operation
	segs []string
}

// ctRoutes lists the open API's operations, read from the contract once.
var ctRoutes = sync.OnceValues(func() ([]ctRoute, error) {
	ops, err := schema.Operations()
	if err != nil {
		return nil, err
	}
	var out []ctRoute
	for _, op := range ops {
		if op.Server == schema.ServerAPI {
			out = append(out, ctRoute{op, strings.Split(strings.TrimPrefix(op.Path, "/"), "/")})
		}
	}
	return out, nil
})

// ctAPIOperationIDs returns the operationId of every ServerAPI operation of the contract.
func ctAPIOperationIDs(t *testing.T) []string {
	t.Helper()
	routes, err := ctRoutes()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range routes {
		ids = append(ids, r.op.ID)
	}
	slices.Sort(ids)
	return ids
}

// ctMatch finds the contract operation of a request by method and path template; a template
// segment that is a literal beats one that is a parameter (/role/detail before /role/{roleId}).
func ctMatch(method, escapedPath string) (schema.Operation, bool) {
	routes, err := ctRoutes()
	if err != nil {
		return schema.Operation{}, false
	}
	rest, ok := strings.CutPrefix(escapedPath, "/open/v1/")
	if !ok {
		return schema.Operation{}, false
	}
	segs := strings.Split(rest, "/")
	for i, s := range segs {
		u, err := url.PathUnescape(s)
		if err != nil {
			return schema.Operation{}, false
		}
		segs[i] = u
	}
	best, bestLiterals := -1, -1
	for i, r := range routes {
		if r.op.Method != method || len(r.segs) != len(segs) {
			continue
		}
		literals, ok := 0, true
		for j, t := range r.segs {
			if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
				continue
			}
			if t != segs[j] {
				ok = false
				break
			}
			literals++
		}
		if ok && literals > bestLiterals {
			best, bestLiterals = i, literals
		}
	}
	if best < 0 {
		return schema.Operation{}, false
	}
	return routes[best].op, true
}

// ctExchange is one request and its response as the wire carried them.
type ctExchange struct {
	Op         string // the contract operation the request matched, "" when none
	Method     string
	Path       string // escaped
	Query      url.Values
	ReqHeader  http.Header
	ReqBody    []byte
	Status     int
	RespHeader http.Header
	RespBody   []byte
	Dropped    bool // the response was thrown away and the client got a connection error
}

// ctRecorder is the transport under the client: it passes each request to the sandbox,
// records the exchange, and validates the response against the contract.
type ctRecorder struct {
	t    *testing.T
	next http.RoundTripper

	mu   sync.Mutex
	log  []ctExchange
	drop func(ctExchange) bool // when it returns true, the response is lost after the sandbox processed the request
}

func (r *ctRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		data, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		reqBody = data
	}
	fwd := req.Clone(req.Context())
	fwd.Body = io.NopCloser(bytes.NewReader(reqBody))
	fwd.ContentLength = int64(len(reqBody))
	resp, err := r.next.RoundTrip(fwd)
	if err != nil {
		return nil, err
	}
	respBody, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	op, matched := ctMatch(req.Method, req.URL.EscapedPath())
	ex := ctExchange{
		Method: req.Method, Path: req.URL.EscapedPath(), Query: req.URL.Query(),
		ReqHeader: req.Header.Clone(), ReqBody: reqBody,
		Status: resp.StatusCode, RespHeader: resp.Header.Clone(), RespBody: respBody,
	}
	if matched {
		ex.Op = op.ID
		if problems := ctCheckResponse(op, resp.StatusCode, resp.Header, respBody); len(problems) > 0 {
			r.t.Errorf("%s %s (%s) answered %d, which breaks the contract: %s\nbody: %s",
				req.Method, req.URL.EscapedPath(), op.ID, resp.StatusCode, strings.Join(problems, "; "), ctClip(respBody))
		}
	} else {
		r.t.Errorf("%s %s matches no operation of the contract", req.Method, req.URL.EscapedPath())
	}
	r.mu.Lock()
	drop := r.drop != nil && r.drop(ex)
	ex.Dropped = drop
	r.log = append(r.log, ex)
	r.mu.Unlock()
	if drop {
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	}
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	resp.ContentLength = int64(len(respBody))
	return resp, nil
}

// exchanges returns the recorded exchanges, in order.
func (r *ctRecorder) exchanges() []ctExchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// last returns the most recent exchange of operation opID.
func (r *ctRecorder) last(t *testing.T, opID string) ctExchange {
	t.Helper()
	log := r.exchanges()
	for i := len(log) - 1; i >= 0; i-- {
		if log[i].Op == opID {
			return log[i]
		}
	}
	t.Fatalf("no %s request was recorded", opID)
	return ctExchange{}
}

// count returns how many requests of operation opID were recorded.
func (r *ctRecorder) count(opID string) int {
	n := 0
	for _, ex := range r.exchanges() {
		if ex.Op == opID {
			n++
		}
	}
	return n
}

// ctCheckResponse validates one response against the contract's documentation of op and
// returns its problems: the status must be documented (a 2xx exactly, an error by "default"),
// the body must match the schema documented for it, and an error's code must be one whose
// status is the one answered.
func ctCheckResponse(op schema.Operation, status int, header http.Header, body []byte) []string {
	var problems []string
	doc, ok := op.Response(status)
	switch {
	case !ok:
		return []string{fmt.Sprintf("status %d is not documented", status)}
	case status < 400 && doc.Status != status:
		return []string{fmt.Sprintf("success status %d is not documented", status)}
	case doc.Schema == "":
		return []string{fmt.Sprintf("status %d documents no body", status)}
	}
	if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, doc.ContentType) {
		problems = append(problems, fmt.Sprintf("Content-Type %q, want %q", ct, doc.ContentType))
	}
	v, err := schema.Compile(doc.Schema)
	if err != nil {
		return append(problems, err.Error())
	}
	if err := v.ValidateJSON(body); err != nil {
		problems = append(problems, "body: "+err.Error())
	}
	if status >= 400 {
		var env struct {
			Error     string `json:"error"`
			Message   string `json:"message"`
			Retryable *bool  `json:"retryable"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			return append(problems, "envelope: "+err.Error())
		}
		if want, known := ctStatusOf[env.Error]; !known || want != status {
			problems = append(problems, fmt.Sprintf("code %q does not go with status %d", env.Error, status))
		}
		if strings.TrimSpace(env.Message) == "" {
			problems = append(problems, "the envelope's message is empty")
		}
		if status < 500 && status != http.StatusTooManyRequests && env.Retryable != nil && *env.Retryable {
			problems = append(problems, "a 4xx error says retryable")
		}
		if status == http.StatusUnauthorized && !strings.HasPrefix(header.Get("WWW-Authenticate"), "Bearer") {
			problems = append(problems, "a 401 without WWW-Authenticate: Bearer")
		}
	}
	return problems
}

func ctClip(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "…"
	}
	return string(b)
}

// ctEnv is one fresh sandbox with its clock, recorder and a client of the demo user.
type ctEnv struct {
	t     *testing.T
	ctx   context.Context
	svc   *sandbox.Service
	clock *authtest.Clock
	rec   *ctRecorder
	c     *upstream.Client // the demo user's client
}

// newCTEnv starts a fresh sandbox that checks its own responses, and a client of its demo user.
func newCTEnv(t *testing.T, tweak ...func(*sandbox.Options)) *ctEnv {
	t.Helper()
	clock := authtest.NewClock(ctStart)
	opts := sandbox.Options{CheckResponses: true, DemoToken: ctToken, Clock: clock.Now}
	for _, f := range tweak {
		f(&opts)
	}
	svc, err := sandbox.New(opts)
	if err != nil {
		t.Fatalf("sandbox.New: %v", err)
	}
	e := &ctEnv{t: t, ctx: t.Context(), svc: svc, clock: clock,
		rec: &ctRecorder{t: t, next: svc.RoundTripper()}}
	e.c = e.client(ctToken)
	return e
}

// client returns a client of the sandbox with token, over the recording transport; retries
// wait nothing, so that a retried call does not slow the tests down.
func (e *ctEnv) client(token string, opts ...upstream.Option) *upstream.Client {
	e.t.Helper()
	all := append([]upstream.Option{
		upstream.WithTransport(e.rec),
		upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 3}),
	}, opts...)
	c, err := upstream.New(sandbox.DefaultBaseURL, upstream.StaticToken(token), all...)
	if err != nil {
		e.t.Fatalf("upstream.New: %v", err)
	}
	return c
}

// user adds a second signed-in user to the sandbox and returns its client and userId.
func (e *ctEnv) user(nickname string) (*upstream.Client, string) {
	e.t.Helper()
	token := "ct-token-" + strings.ToLower(strings.ReplaceAll(nickname, " ", "-"))
	id := e.svc.AddUser(token, nickname)
	return e.client(token), id
}

// card creates a card of c named name and returns its roleId.
func (e *ctEnv) card(t *testing.T, c *upstream.Client, name string) string {
	t.Helper()
	out, _, err := c.CreateCard(e.ctx, upstream.CardCreateInput{RoleName: name})
	ctOK(t, "createCard", out, err)
	return out.RoleID
}

// worldbook creates a worldbook of c and returns its worldbookId.
func (e *ctEnv) worldbook(t *testing.T, c *upstream.Client, name, format string) string {
	t.Helper()
	out, err := c.CreateWorldbook(e.ctx, upstream.WorldbookCreateInput{Name: name, Format: format})
	ctOK(t, "createWorldbook", out, err)
	return out.WorldbookID
}

// ctOK fails the test on err, and validates the typed result, encoded again, against the
// success schema of opID: what the client decoded keeps everything the contract requires.
func ctOK(t *testing.T, opID string, out any, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", opID, err)
	}
	op, ok := schema.Lookup(opID)
	if !ok {
		t.Fatalf("the contract has no operation %s", opID)
	}
	doc, ok := op.Response(op.SuccessStatus())
	if !ok || doc.Schema == "" {
		t.Fatalf("%s documents no success body", opID)
	}
	data, err := json.Marshal(out)
	if err != nil {
		t.Fatalf("%s: encode the typed result: %v", opID, err)
	}
	if err := schema.MustCompile(doc.Schema).ValidateJSON(data); err != nil {
		t.Errorf("%s: the typed result, encoded again, breaks the contract: %v\n%s", opID, err, ctClip(data))
	}
}

// ctWantErr asserts that err is an *upstream.Error of operation opID with the given status
// and code, a message to show, and retryable false; it returns the error for more checks.
func ctWantErr(t *testing.T, err error, opID string, status int, code string) *upstream.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded; want %d %s", opID, status, code)
	}
	var apiErr *upstream.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("%s: error %v (%T) is not an *upstream.Error; want %d %s", opID, err, err, status, code)
	}
	if apiErr.Operation != opID || apiErr.Status != status || apiErr.Code != code {
		t.Fatalf("%s: got %s %d %s (%s); want %s %d %s", opID, apiErr.Operation, apiErr.Status, apiErr.Code,
			apiErr.Message, opID, status, code)
	}
	if apiErr.Message == "" || apiErr.Retryable {
		t.Errorf("%s: message %q, retryable %v; want a message and not retryable", opID, apiErr.Message, apiErr.Retryable)
	}
	if want := ctStatusOf[code]; want != status {
		t.Errorf("%s: code %s goes with status %d, not %d", opID, code, want, status)
	}
	return apiErr
}

// ctDetail returns detail[key] of an error, with JSON numbers as int.
func ctDetail(t *testing.T, e *upstream.Error, key string) any {
	t.Helper()
	v, ok := e.Detail[key]
	if !ok {
		t.Fatalf("%s: detail %v has no %q", e.Operation, e.Detail, key)
	}
	if n, isNum := v.(json.Number); isNum {
		i, err := n.Int64()
		if err != nil {
			t.Fatalf("detail %s = %v is not an integer", key, n)
		}
		return int(i)
	}
	return v
}

// ctRaw decodes a recorded JSON body into generic values.
func ctRaw(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("decode %s: %v", ctClip(body), err)
	}
	return m
}

// ctPtr returns a pointer to v.
func ctPtr[T any](v T) *T { return &v }

// ctB64 encodes image bytes as uploadImage takes them: standard base64.
func ctB64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// ctImage is a small image with a colour gradient.
func ctImage(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, color.RGBA{uint8(x * 30), uint8(y * 30), 180, 255})
		}
	}
	return img
}

func ctPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, ctImage(w, h)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func ctJPEG(t *testing.T, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, ctImage(w, h), nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func ctGIF(t *testing.T, w, h int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := gif.Encode(&buf, ctImage(w, h), nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// ctWebP is a 1x1 lossless WebP: a RIFF header, a VP8L chunk, one pixel.
var ctWebP = []byte{
	0x52, 0x49, 0x46, 0x46, 0x1a, 0x00, 0x00, 0x00, 0x57, 0x45, 0x42, 0x50, 0x56, 0x50, 0x38, 0x4c,
	0x0d, 0x00, 0x00, 0x00, 0x2f, 0x00, 0x00, 0x00, 0x00, 0x28, 0x60, 0xff, 0x0b, 0xd2, 0xff, 0x02,
	0x00, 0x00,
}
