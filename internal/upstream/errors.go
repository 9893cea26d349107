package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Error is a non-2xx answer of the card service, with its error envelope
// {error, message, retryable, detail}; Code and Message are never empty.
type Error struct {
	Operation  string         // the contract's operationId, e.g. "getCard"
	Status     int            // the HTTP status code
	Code       string         // the envelope's "error", or one derived from Status
	Message    string         // the envelope's "message", one sentence fit to show a person
	Retryable  bool           // the envelope's "retryable", or true for 429 and 5xx when absent
	Detail     map[string]any // the envelope's "detail", nil when absent
	RetryAfter time.Duration  // the Retry-After header, 0 when absent
}

// Error renders the error as "card service: OPERATION: STATUS CODE: MESSAGE".
func (e *Error) Error() string {
	return fmt.Sprintf("card service: %s: %d %s: %s", e.Operation, e.Status, e.Code, e.Message)
}

// Envelope returns the error as the service's envelope {error, message, retryable, detail?}.
func (e *Error) Envelope() map[string]any {
	env := map[string]any{"error": e.Code, "message": e.Message, "retryable": e.Retryable}
	if e.Detail != nil {
		env["detail"] = e.Detail
	}
	return env
}

// UnreadableError is a 2xx answer whose body could not be decoded: the service accepted the call
// (a write may have been applied), but its answer cannot be read.
type UnreadableError struct {
	Operation string // the contract's operationId
	Status    int    // the HTTP status code, 2xx
	Err       error  // why the body could not be decoded
}

// Error renders the error as "card service: OPERATION: decode the STATUS response: ERR".
func (e *UnreadableError) Error() string {
	return fmt.Sprintf("card service: %s: decode the %s response: %v", e.Operation, statusName(e.Status), e.Err)
}

// Unwrap returns the decoding error.
func (e *UnreadableError) Unwrap() error { return e.Err }

// ArgumentError is a parameter refused before any request was sent.
type ArgumentError struct {
	Param  string // the parameter's name in the contract, "" when not known
	Value  string // the refused value, at most 100 bytes of it
	Reason string // why it was refused, e.g. "must not contain '/'"
}

// Error renders the error as `invalid PARAM "VALUE": REASON`.
func (e *ArgumentError) Error() string {
	name := e.Param
	if name == "" {
		name = "path segment"
	}
	if e.Value == "" {
		return fmt.Sprintf("invalid %s: %s", name, e.Reason)
	}
	return fmt.Sprintf("invalid %s %q: %s", name, e.Value, e.Reason)
}

// maxEchoedValue caps how much of a refused value an ArgumentError keeps.
const maxEchoedValue = 100

func newArgumentError(param, value, reason string) *ArgumentError {
	if len(value) > maxEchoedValue {
		cut := maxEchoedValue
		for cut > maxEchoedValue-utf8.UTFMax && !utf8.RuneStart(value[cut]) {
			cut--
		}
		value = value[:cut] + "…"
	}
	return &ArgumentError{Param: param, Value: value, Reason: reason}
}

// ErrCrossOriginRedirect is wrapped by the error returned when the service redirects to
// another origin: the redirect is not followed, so the token cannot be sent there.
var ErrCrossOriginRedirect = errors.New("redirect to another origin refused")

// maxRetryAfter caps how long a Retry-After header can make the client wait.
const maxRetryAfter = 30 * time.Second

// decodeError turns a non-2xx response into an *Error. The body may be anything: an
// envelope, an HTML page, empty or cut short; the result always has a Code and a Message.
func decodeError(operation string, status int, header http.Header, body []byte) *Error {
	e := &Error{
		Operation:  operation,
		Status:     status,
		Code:       codeForStatus(status),
		Retryable:  status == http.StatusTooManyRequests || status >= 500,
		RetryAfter: parseRetryAfter(header.Get("Retry-After"), time.Now()),
	}
	env, ok := parseEnvelope(body)
	if !ok {
		if len(bytes.TrimSpace(body)) == 0 {
			e.Message = fmt.Sprintf("The card service answered %s with an empty body.", statusName(status))
		} else {
			e.Message = fmt.Sprintf("The card service answered %s without an error envelope.", statusName(status))
		}
		return e
	}
	e.Code = env.code
	e.Message = env.message
	if e.Message == "" {
		e.Message = fmt.Sprintf("The card service answered %s (%s) without a message.", statusName(status), e.Code)
	}
	if env.retryable != nil {
		e.Retryable = *env.retryable
	}
	e.Detail = env.detail
	return e
}

type envelope struct {
	code, message string
	retryable     *bool
	detail        map[string]any
}

// parseEnvelope reads {error, message, retryable, detail}; it needs a JSON object whose
// "error" is a non-empty string, and ignores fields of the wrong type.
func parseEnvelope(body []byte) (envelope, bool) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || raw == nil {
		return envelope{}, false
	}
	var env envelope
	if err := json.Unmarshal(raw["error"], &env.code); err != nil || strings.TrimSpace(env.code) == "" {
		return envelope{}, false
	}
	if m, ok := raw["message"]; ok {
		_ = json.Unmarshal(m, &env.message)
	}
	if r, ok := raw["retryable"]; ok {
		var b bool
		if json.Unmarshal(r, &b) == nil && string(bytes.TrimSpace(r)) != "null" {
			env.retryable = &b
		}
	}
	if d, ok := raw["detail"]; ok {
		dec := json.NewDecoder(bytes.NewReader(d))
		dec.UseNumber()
		var detail map[string]any
		if dec.Decode(&detail) == nil && detail != nil {
			env.detail = detail
		}
	}
	return env, true
}

// codeForStatus is the error code a status stands for when the body has no envelope.
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusPaymentRequired:
		return "insufficient_credits"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusConflict:
		return "conflict"
	case http.StatusRequestEntityTooLarge:
		return "payload_too_large"
	case http.StatusUnprocessableEntity:
		return "validation_failed"
	case http.StatusTooManyRequests:
		return "rate_limited"
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return "unavailable"
	}
	if status >= 400 && status < 500 {
		return "invalid_request"
	}
	return "internal"
}

// statusName renders a status as "502 Bad Gateway", or just the number when it has no name.
func statusName(status int) string {
	if text := http.StatusText(status); text != "" {
		return strconv.Itoa(status) + " " + text
	}
	return strconv.Itoa(status)
}

// parseRetryAfter reads a Retry-After value, in seconds or as an HTTP date; 0 when absent or bad.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(time.Hour/time.Second) {
			return time.Hour
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
