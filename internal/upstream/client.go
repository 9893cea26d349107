// Package upstream is the client of the card service's open API. Every operation it calls is
// looked up in the contract (package schema): method, path, parameters, retry safety and the
// idempotency key all come from there. It adds the bearer token only for the configured
// origin, turns every non-2xx answer into an *Error carrying the service's error envelope,
// and retries what is safe to retry.
package upstream

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/cardwriter/cardwriter-mcp/schema"
)

const (
	// DefaultUserAgent is the User-Agent of a client made without WithUserAgent.
	DefaultUserAgent = "cardwriter-mcp/dev"
	// DefaultTimeout is the deadline of a call whose context has none, unless WithTimeout says otherwise.
	DefaultTimeout = 60 * time.Second
	// DefaultMaxResponseBytes caps a success body unless WithMaxResponseBytes says otherwise.
	DefaultMaxResponseBytes int64 = 10 << 20

	maxErrorBodyBytes = 64 << 10 // an error body is read up to this size
	maxRedirects      = 3        // same-origin redirects followed per attempt
)

// Client calls the card service's open API; it is safe for concurrent use.
type Client struct {
	baseURL   string // {api_host}/open/v1, no trailing slash
	origin    string // scheme://host:port of baseURL, the only place the token goes
	http      *http.Client
	userAgent string
	logger    *slog.Logger
	retry     RetryPolicy
	timeout   time.Duration
	maxBytes  int64
	refresher Refresher                            // the TokenSource when it is one; nil otherwise
	tokenOf   func(context.Context) (Token, error) // the TokenSource's Token (a func: never printed)
	limiter   *limiter                             // nil: no limits
	observer  Observer                             // nil: none
	tracer    trace.Tracer                         // nil: no tracing
	users     *knownUsers                          // the user of each token GET /me named
	table     *schema.Table
	// sleep waits between attempts; tests replace it to record the delays instead.
	sleep func(ctx context.Context, d time.Duration) error
}

// Option configures a Client made by New.
type Option func(*options)

type options struct {
	transport http.RoundTripper
	userAgent string
	logger    *slog.Logger
	retry     RetryPolicy
	timeout   time.Duration
	maxBytes  int64
	table     *schema.Table
	limits    *Limits
	observer  Observer
	tracer    trace.TracerProvider
}

// Observer is told of every attempt of a card service call (status 0: no answer) and every
// retry, for metrics; its methods must be fast and safe for concurrent use.
type Observer interface {
	Attempt(operation string, status int, d time.Duration)
	Retry(operation, reason string)
	Refresh(outcome string) // "ok", "signed_out" or "failed"
}

// WithObserver reports the client's attempts, retries and token refreshes to o.
func WithObserver(o Observer) Option { return func(o2 *options) { o2.observer = o } }

// WithContract makes the client call the operations of t (the embedded contract with a user's
// corrections, schema.LoadOverride) instead of the embedded contract's.
func WithContract(t *schema.Table) Option { return func(o *options) { o.table = t } }

// WithTransport sends requests through rt (for example an in-process handler) instead of
// the default HTTP transport; the client still adds the token and follows its redirect rules.
func WithTransport(rt http.RoundTripper) Option { return func(o *options) { o.transport = rt } }

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option { return func(o *options) { o.userAgent = ua } }

// WithLogger sets the logger of attempts (Debug) and retries (Warn); nil discards.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithRetry sets the retry policy; RetryPolicy{MaxAttempts: 1} disables retries.
func WithRetry(p RetryPolicy) Option { return func(o *options) { o.retry = p } }

// WithTimeout sets the deadline of a call whose context has none; 0 means no deadline.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithMaxResponseBytes caps the size of a success body; a larger one is an error.
func WithMaxResponseBytes(n int64) Option { return func(o *options) { o.maxBytes = n } }

// New returns a client of the open API at apiHost (scheme://host[:port], http or https) + the
// contract's base path "/open/v1", authenticated with the tokens of ts.
func New(apiHost string, ts TokenSource, opts ...Option) (*Client, error) {
	if ts == nil {
		return nil, errors.New("upstream: a TokenSource is required")
	}
	host, err := parseAPIHost(apiHost)
	if err != nil {
		return nil, err
	}
	basePath, err := apiBasePath()
	if err != nil {
		return nil, err
	}
	o := options{
		userAgent: DefaultUserAgent,
		retry:     defaultRetryPolicy,
		timeout:   DefaultTimeout,
		maxBytes:  DefaultMaxResponseBytes,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if err := o.retry.validate(); err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	if o.timeout < 0 {
		return nil, errors.New("upstream: the timeout must not be negative")
	}
	if o.maxBytes <= 0 {
		return nil, errors.New("upstream: the response size cap must be positive")
	}
	if o.userAgent == "" {
		o.userAgent = DefaultUserAgent
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if o.transport == nil {
		o.transport = defaultTransport()
	}
	if o.table == nil {
		o.table = schema.Embedded()
	}
	c := &Client{
		baseURL:   host.String() + basePath,
		origin:    originOf(host),
		userAgent: o.userAgent,
		logger:    o.logger,
		retry:     o.retry,
		timeout:   o.timeout,
		maxBytes:  o.maxBytes,
		table:     o.table,
		observer:  o.observer,
		tokenOf:   ts.Token,
		users:     &knownUsers{},
		sleep:     sleepCtx,
	}
	if o.limits != nil {
		c.limiter = newLimiter(*o.limits)
	}
	if o.tracer != nil {
		c.tracer = o.tracer.Tracer("github.com/cardwriter/cardwriter-mcp/internal/upstream")
	}
	c.refresher, _ = ts.(Refresher)
	c.http = &http.Client{
		Transport:     &authTransport{next: o.transport, origin: c.origin, tokens: ts},
		CheckRedirect: c.checkRedirect,
	}
	return c, nil
}

// BaseURL returns the base address of the open API, {api_host}/open/v1.
func (c *Client) BaseURL() string { return c.baseURL }

// String describes the client by its base address; it never shows the token.
func (c *Client) String() string { return "upstream.Client(" + c.baseURL + ")" }

// GoString is String, so that %#v shows no internals.
func (c *Client) GoString() string { return c.String() }

// Format prints String for every fmt verb.
func (c *Client) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }

// Call performs the contract operation operationID: params fill its path and query
// parameters, body (a Go value or json.RawMessage; nil for none) is sent as JSON, and a
// 2xx answer is decoded into out (a pointer, *json.RawMessage included; nil discards it).
// A non-2xx answer is an *Error; a refused parameter is an *ArgumentError, found before any
// request is sent. An operation with an idempotency key gets a fresh one in its body when
// the body has none, and every retry carries the same key (a caller that needs to know the
// key fills it beforehand with NewIdempotencyKey). When the TokenSource is a Refresher, a 401
// "unauthorized" answer makes Call refresh the token once and send the request once more. A
// DELETE retried after an attempt whose answer was lost, and then answered 404, succeeded (the
// lost attempt deleted it), and Call returns nil with out untouched. A
// token source that reports an *AuthError makes Call return an *Error "unauthorized" with the
// AuthError's message; any other failure of the token source is an *Error "unavailable".
func (c *Client) Call(ctx context.Context, operationID string, params map[string]string, body any, out any) error {
	op, ok := c.table.Lookup(operationID)
	if !ok {
		return fmt.Errorf("upstream: the contract has no operation %q", operationID)
	}
	if op.Server != schema.ServerAPI {
		return fmt.Errorf("upstream: operation %s is not part of the open API", operationID)
	}
	target, err := c.target(op, params)
	if err != nil {
		return fmt.Errorf("card service: %s: %w", op.ID, err)
	}
	payload, err := encodeBody(op, body)
	if err != nil {
		return fmt.Errorf("card service: %s: %w", op.ID, err)
	}
	if _, has := ctx.Deadline(); !has && c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	if c.limiter != nil {
		token, err := c.tokenOf(ctx)
		if err == nil { // without a token the call fails below, with the token source's error
			release, err := c.limiter.acquire(ctx, op.ID, c.limitKey(ctx, token))
			if err != nil {
				return err
			}
			defer release()
		}
	}
	refreshed := 0        // 1 once the token was refreshed; that retry is not the RetryPolicy's
	maybeApplied := false // an earlier attempt may have reached the service before it failed
	for attempt := 1; ; attempt++ {
		sent := &sentToken{}
		err := c.attempt(context.WithValue(ctx, sentTokenKey{}, sent), op, target, payload, out, attempt)
		if err == nil {
			return nil
		}
		if maybeApplied && op.Method == http.MethodDelete && isNotFound(err) {
			// The attempt whose answer was lost deleted it: the delete is done.
			c.logger.LogAttrs(ctx, slog.LevelInfo, "card service delete retried after a lost answer found it done",
				slog.String("operation", op.ID), slog.Int("attempt", attempt))
			return nil
		}
		var authErr *AuthError
		if errors.As(err, &authErr) {
			return signInError(op, authErr)
		}
		if ctx.Err() != nil {
			return withContextError(ctx, op, err)
		}
		var tokErr *tokenError
		if errors.As(err, &tokErr) {
			return c.noTokenError(ctx, op, tokErr)
		}
		if c.refresher != nil && refreshed == 0 && isUnauthorized(err) {
			refreshed = 1
			if rerr := c.refresh(ctx, op, sent.get(), attempt); rerr != nil {
				return rerr
			}
			continue
		}
		if attempt-refreshed >= c.retry.MaxAttempts {
			return err
		}
		retry, reason := retryDecision(err, op.Idempotent)
		if !retry {
			return err
		}
		var apiAnswer *Error
		if !errors.As(err, &apiAnswer) && !NotSent(err) {
			maybeApplied = true
		}
		wait := c.retry.backoff(attempt - refreshed)
		var apiErr *Error
		if errors.As(err, &apiErr) && apiErr.RetryAfter > 0 {
			wait = min(apiErr.RetryAfter, maxRetryAfter)
		}
		if deadline, has := ctx.Deadline(); has && time.Until(deadline) <= wait {
			c.logger.LogAttrs(ctx, slog.LevelWarn, "card service call not retried: the deadline comes first",
				slog.String("operation", op.ID), slog.String("method", op.Method), slog.String("path", op.Path),
				slog.Int("attempt", attempt),
				slog.String("reason", reason), slog.Duration("delay", wait))
			return err
		}
		if c.observer != nil {
			c.observer.Retry(op.ID, reason)
		}
		c.logger.LogAttrs(ctx, slog.LevelWarn, "card service call retried",
			slog.String("operation", op.ID), slog.String("method", op.Method), slog.String("path", op.Path),
			slog.Int("attempt", attempt), slog.String("reason", reason), slog.Duration("delay", wait))
		if serr := c.sleep(ctx, wait); serr != nil {
			return fmt.Errorf("card service: %s: %w; last attempt: %w", op.ID, serr, err)
		}
	}
}

// observe reports a token refresh's outcome to the observer, if any.
func (c *Client) observe(outcome string) {
	if c.observer != nil {
		c.observer.Refresh(outcome)
	}
}

// isNotFound reports a 404 answer.
func isNotFound(err error) bool {
	var apiErr *Error
	return errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound
}

// isUnauthorized reports a 401 "unauthorized" answer: the service refused the token.
func isUnauthorized(err error) bool {
	var apiErr *Error
	return errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized && apiErr.Code == "unauthorized"
}

// refresh asks the token source for a token to replace rejected, after a 401. Its error is
// what Call returns: an *Error "unauthorized" saying how to sign in again when the grant is
// dead (an *AuthError), the context's error when the call was cancelled, and otherwise an
// *Error "unavailable" (the token endpoint failed; trying again later may work).
func (c *Client) refresh(ctx context.Context, op schema.Operation, rejected Token, attempt int) error {
	_, err := c.refresher.Refresh(ctx, rejected)
	attrs := []slog.Attr{slog.String("operation", op.ID), slog.String("method", op.Method), slog.String("path", op.Path), slog.Int("attempt", attempt)}
	if err == nil {
		c.observe("ok")
		c.logger.LogAttrs(ctx, slog.LevelInfo, "card service refused the access token; retrying with a refreshed one", attrs...)
		return nil
	}
	var authErr *AuthError
	switch {
	case errors.As(err, &authErr):
		c.observe("signed_out")
		c.logger.LogAttrs(ctx, slog.LevelWarn, "card service refused the access token and it cannot be refreshed", append(attrs, slog.String("err", err.Error()))...)
		return signInError(op, authErr)
	case ctx.Err() != nil:
		return withContextError(ctx, op, fmt.Errorf("refresh the access token: %w", err))
	}
	c.observe("failed")
	c.logger.LogAttrs(ctx, slog.LevelWarn, "card service refused the access token and refreshing it failed", append(attrs, slog.String("err", err.Error()))...)
	return &Error{
		Operation: op.ID, Status: http.StatusServiceUnavailable, Code: "unavailable", Retryable: true,
		Message: "The card service refused the access token and a new one could not be obtained just now; try again in a moment.",
	}
}

// noTokenError reports a token source that failed for another reason than a dead grant (its
// token endpoint is down, say): the call was not sent, and trying again later may work.
func (c *Client) noTokenError(ctx context.Context, op schema.Operation, e *tokenError) *Error {
	c.logger.LogAttrs(ctx, slog.LevelWarn, "card service call not sent: no access token",
		slog.String("operation", op.ID), slog.String("method", op.Method), slog.String("path", op.Path),
		slog.String("err", e.err.Error()))
	return &Error{
		Operation: op.ID, Status: http.StatusServiceUnavailable, Code: "unavailable", Retryable: true,
		Message: "No access token for the card service could be obtained just now, so the call was not sent; try again in a moment.",
	}
}

// signInError reports that the user must sign in again, as the service's own 401 would be.
func signInError(op schema.Operation, e *AuthError) *Error {
	msg := e.Message
	if msg == "" {
		msg = "Your card service sign-in has expired or was revoked; sign in again."
	}
	return &Error{Operation: op.ID, Status: http.StatusUnauthorized, Code: "unauthorized", Message: msg}
}

// withContextError makes sure an error of a call whose context is done wraps the context's error.
func withContextError(ctx context.Context, op schema.Operation, err error) error {
	if errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("card service: %s: %w; last attempt: %w", op.ID, ctx.Err(), err)
}

// attempt sends the request once and reads the answer.
func (c *Client) attempt(ctx context.Context, op schema.Operation, target string, payload []byte, out any, n int) (err error) {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, op.Method, target, body)
	if err != nil {
		return fmt.Errorf("card service: %s: build request: %w", op.ID, err)
	}
	req.Header.Set("User-Agent", c.userAgent)
	req.Header.Set("Accept", "application/json")
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	spanCtx, span := c.startAttempt(ctx, op, req, n)
	req = req.WithContext(spanCtx)
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		err = c.transportError(op, err)
		c.logAttempt(ctx, op, n, 0, start, err)
		endAttempt(span, 0, err)
		return err
	}
	defer resp.Body.Close()
	defer func() { endAttempt(span, resp.StatusCode, err) }()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		data, rerr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBodyBytes))
		if rerr != nil && ctx.Err() != nil {
			err = c.transportError(op, rerr)
		} else {
			err = decodeError(op.ID, resp.StatusCode, resp.Header, data)
		}
		c.logAttempt(ctx, op, n, resp.StatusCode, start, err)
		return err
	}
	data, err := readAll(resp.Body, c.maxBytes+1, resp.ContentLength)
	if err != nil {
		err = c.transportError(op, fmt.Errorf("read the response: %w", err))
		c.logAttempt(ctx, op, n, resp.StatusCode, start, err)
		return err
	}
	c.logAttempt(ctx, op, n, resp.StatusCode, start, nil)
	if int64(len(data)) > c.maxBytes {
		return fmt.Errorf("card service: %s: the %s response is larger than %d bytes", op.ID, statusName(resp.StatusCode), c.maxBytes)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok && json.Valid(data) {
		*raw = data // data is this call's own buffer: no copy needed
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &UnreadableError{Operation: op.ID, Status: resp.StatusCode, Err: err}
	}
	return nil
}

// readAll reads r up to limit bytes, sizing its buffer from the Content-Length when known.
func readAll(r io.Reader, limit, contentLength int64) ([]byte, error) {
	var buf bytes.Buffer
	if contentLength > 0 && contentLength < limit {
		buf.Grow(int(contentLength) + bytes.MinRead) // +MinRead: ReadFrom then needs no second buffer to see EOF
	}
	_, err := buf.ReadFrom(io.LimitReader(r, limit))
	return buf.Bytes(), err
}

// transportError describes a failed exchange by operation, method and path template, without
// the request URL (its query) that *url.Error would print.
func (c *Client) transportError(op schema.Operation, err error) error {
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("card service: %s: %s %s: the connection closed before the answer was complete: %w", op.ID, op.Method, op.Path, err)
	}
	return fmt.Errorf("card service: %s: %s %s: %w", op.ID, op.Method, op.Path, err)
}

func (c *Client) logAttempt(ctx context.Context, op schema.Operation, n, status int, start time.Time, err error) {
	if c.observer != nil {
		c.observer.Attempt(op.ID, status, time.Since(start))
	}
	level := slog.LevelDebug
	if !c.logger.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("operation", op.ID), slog.String("method", op.Method), slog.String("path", op.Path),
		slog.Int("status", status), slog.Int("attempt", n), slog.Duration("duration", time.Since(start)),
	}
	if err != nil {
		var apiErr *Error
		if errors.As(err, &apiErr) {
			attrs = append(attrs, slog.String("code", apiErr.Code))
		} else {
			attrs = append(attrs, slog.String("failure", failureKind(err)))
		}
	}
	c.logger.LogAttrs(ctx, level, "card service call", attrs...)
}

// target builds the request URL from the operation's path template and params.
func (c *Client) target(op schema.Operation, params map[string]string) (string, error) {
	for _, name := range slices.Sorted(maps.Keys(params)) {
		if !slices.ContainsFunc(op.Params, func(p schema.Param) bool { return p.Name == name }) {
			return "", newArgumentError(name, params[name], "is not a parameter of "+op.ID)
		}
	}
	path := op.Path
	query := url.Values{}
	for _, p := range op.Params {
		v, present := params[p.Name]
		if !present || v == "" {
			switch {
			case p.Required && !present:
				return "", newArgumentError(p.Name, "", "is required")
			case p.Required || p.In == "path":
				return "", newArgumentError(p.Name, "", "must not be empty")
			}
			continue
		}
		switch p.In {
		case "path":
			seg, err := PathSegment(v)
			if err != nil {
				var argErr *ArgumentError
				if errors.As(err, &argErr) {
					argErr.Param = p.Name
				}
				return "", err
			}
			path = strings.ReplaceAll(path, "{"+p.Name+"}", seg)
		case "query":
			if reason := queryProblem(v); reason != "" {
				return "", newArgumentError(p.Name, v, reason)
			}
			query.Set(p.Name, v)
		default:
			return "", fmt.Errorf("parameter %s is in %q, which this client does not send", p.Name, p.In)
		}
	}
	if strings.ContainsAny(path, "{}") {
		return "", fmt.Errorf("path %s has a parameter the contract does not declare", op.Path)
	}
	u := c.baseURL + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	return u, nil
}

// encodeBody marshals body once, filling the operation's idempotency key when it has one.
func encodeBody(op schema.Operation, body any) ([]byte, error) {
	if isNoBody(body) {
		if op.Body != nil && op.Body.Required {
			return nil, errors.New("a request body is required")
		}
		return nil, nil
	}
	if op.Body == nil {
		return nil, errors.New("the operation takes no request body")
	}
	data, err := marshalJSON(body)
	if err != nil {
		return nil, fmt.Errorf("encode the request body: %w", err)
	}
	if op.IdempotencyKey != "" {
		data, err = ensureIdempotencyKey(data, op.IdempotencyKey)
		if err != nil {
			return nil, err
		}
	}
	return data, nil
}

// CompactJSON is a request body its caller guarantees to be valid JSON without insignificant
// whitespace: it is sent as it is, not compacted again.
type CompactJSON []byte

// isNoBody reports whether body stands for "no body": nil, a nil pointer or an empty RawMessage
// or CompactJSON.
func isNoBody(body any) bool {
	if body == nil {
		return true
	}
	switch raw := body.(type) {
	case json.RawMessage:
		return len(raw) == 0
	case CompactJSON:
		return len(raw) == 0
	}
	v := reflect.ValueOf(body)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// marshalJSON encodes v (json.RawMessage included, which is checked and compacted) without
// escaping <, > and & as encoding/json does by default.
func marshalJSON(v any) ([]byte, error) {
	if c, ok := v.(CompactJSON); ok {
		return c, nil
	}
	var buf bytes.Buffer
	if raw, ok := v.(json.RawMessage); ok {
		// What the encoder does with a RawMessage, without its reflection and extra copy.
		buf.Grow(len(raw))
		if err := json.Compact(&buf, raw); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// ensureIdempotencyKey returns body with field set to a fresh key when it is absent, null or "".
func ensureIdempotencyKey(body []byte, field string) ([]byte, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return nil, errors.New("the request body must be a JSON object")
	}
	if raw, ok := obj[field]; ok && string(raw) != "null" {
		var key string
		if err := json.Unmarshal(raw, &key); err != nil || key != "" {
			return body, nil // the caller's key; one that is not a string is the service's to refuse
		}
	}
	obj[field], _ = json.Marshal(NewIdempotencyKey())
	data, err := marshalJSON(obj)
	if err != nil {
		return nil, fmt.Errorf("encode the request body: %w", err)
	}
	return data, nil
}

// NewIdempotencyKey returns a fresh random key, "cw-" and 32 hex digits.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return "cw-" + hex.EncodeToString(b[:])
}

// checkRedirect follows at most maxRedirects redirects, all within the configured origin.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if o := originOf(req.URL); o != c.origin {
		return fmt.Errorf("%w: the card service redirected to %s; the token is only sent to %s", ErrCrossOriginRedirect, o, c.origin)
	}
	if len(via) > maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return nil
}

// authTransport adds the bearer token to requests for the configured origin, and only those.
type authTransport struct {
	next   http.RoundTripper
	origin string
	tokens TokenSource
}

// RoundTrip fetches the token for this attempt and sends the request with it.
func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if originOf(req.URL) != t.origin {
		return t.next.RoundTrip(req)
	}
	tok, err := t.tokens.Token(req.Context())
	if err == nil && tok == "" {
		err = errors.New("the token source returned an empty token")
	}
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, &tokenError{err: err}
	}
	if sent, ok := req.Context().Value(sentTokenKey{}).(*sentToken); ok {
		sent.set(tok)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok.Reveal())
	return t.next.RoundTrip(r)
}

// originOf renders scheme://host:port with the scheme and host in lower case and the
// default port made explicit, so that equal origins compare equal.
func originOf(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// parseAPIHost checks that s is an http(s) origin and returns it normalised. Its errors show
// a valid address: s corrected when it can be (a scheme added, a path dropped), else an example.
func parseAPIHost(s string) (*url.URL, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "@") {
		return nil, errors.New("upstream: the API host must not carry user information")
	}
	u, err := url.Parse(s)
	if err == nil && u.Scheme != "" && u.Host == "" && u.Opaque != "" {
		err = errors.New("no scheme") // "localhost:8090" parses as scheme "localhost"
	}
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("upstream: the API host %q has no scheme: it must start with http:// or https://, e.g. %s", s, SuggestAPIHost(s))
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return nil, fmt.Errorf("upstream: the API host %q must start with http:// or https://, e.g. %s", s, SuggestAPIHost(u.Host))
	case u.Host == "" || u.Hostname() == "":
		return nil, fmt.Errorf("upstream: the API host %q has no host name; give e.g. https://api.example.com", s)
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, fmt.Errorf("upstream: the API host must be scheme://host[:port], with no path, query or fragment (the API's /open/v1 is added): give %s", scheme+"://"+u.Host)
	}
	return &url.URL{Scheme: scheme, Host: strings.ToLower(u.Host)}, nil
}

// SuggestAPIHost is a valid API host made of what the user typed as host[:port][/path]: http://
// for this machine, https:// elsewhere; https://api.example.com when nothing usable is there.
func SuggestAPIHost(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	host, _, _ := strings.Cut(s, "/")
	if host == "" || strings.ContainsAny(host, " @?#") {
		return "https://api.example.com"
	}
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	if h == "localhost" || net.ParseIP(strings.Trim(h, "[]")) != nil && net.ParseIP(strings.Trim(h, "[]")).IsLoopback() {
		return "http://" + host
	}
	return "https://" + host
}

// apiBasePath is the contract's server path, "/open/v1", read from its servers list.
var apiBasePath = sync.OnceValues(func() (string, error) {
	var doc struct {
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
	}
	if err := json.Unmarshal(schema.Contract(), &doc); err != nil {
		return "", fmt.Errorf("upstream: parse the contract: %w", err)
	}
	for _, s := range doc.Servers {
		if p, ok := strings.CutPrefix(s.URL, "{api_host}"); ok && strings.HasPrefix(p, "/") {
			return strings.TrimSuffix(p, "/"), nil
		}
	}
	return "", errors.New("upstream: the contract has no {api_host}/... server")
})

// defaultTransport is the HTTP transport of a client made without WithTransport.
func defaultTransport() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   64,
	}
}
