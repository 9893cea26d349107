package sandbox

import (
	"net/http"
	"strings"

	"github.com/cardwriter/cardwriter-mcp/schema"
)

// Error codes of the envelope, as the contract's Error response lists them.
const (
	codeInvalidRequest    = "invalid_request"
	codeUnauthorized      = "unauthorized"
	codeForbidden         = "forbidden"
	codeNotFound          = "not_found"
	codeRoleNotFound      = "role_not_found"
	codeWorldbookNotFound = "worldbook_not_found"
	codeTrialNotFound     = "trial_not_found"
	codeConflict          = "conflict"
	codeTrialSlotsFull    = "trial_slots_full"
	codePayloadTooLarge   = "payload_too_large"
	codeValidationFailed  = "validation_failed"
	codeInternal          = "internal"
	codeRateLimited       = "rate_limited" // the faults only (faults.go)
	codeUnavailable       = "unavailable"  // the faults only (faults.go)
)

// statusOf maps an error code to its HTTP status (design.md section 3).
var statusOf = map[string]int{
	codeInvalidRequest:    http.StatusBadRequest,
	codeUnauthorized:      http.StatusUnauthorized,
	codeForbidden:         http.StatusForbidden,
	codeNotFound:          http.StatusNotFound,
	codeRoleNotFound:      http.StatusNotFound,
	codeWorldbookNotFound: http.StatusNotFound,
	codeTrialNotFound:     http.StatusNotFound,
	codeConflict:          http.StatusConflict,
	codeTrialSlotsFull:    http.StatusConflict,
	codePayloadTooLarge:   http.StatusRequestEntityTooLarge,
	codeValidationFailed:  http.StatusUnprocessableEntity,
	codeInternal:          http.StatusInternalServerError,
	codeRateLimited:       http.StatusTooManyRequests,
	codeUnavailable:       http.StatusServiceUnavailable,
}

// apiError is an error the sandbox answers with the error envelope.
type apiError struct {
	code    string
	message string
	detail  map[string]any
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

// status returns the HTTP status of the error's code.
func (e *apiError) status() int {
	if st, ok := statusOf[e.code]; ok {
		return st
	}
	return http.StatusInternalServerError
}

// envelope is the contract's ErrorEnvelope.
type envelope struct {
	Error     string         `json:"error"`
	Message   string         `json:"message"`
	Retryable bool           `json:"retryable,omitempty"`
	Detail    map[string]any `json:"detail,omitempty"`
}

func (e *apiError) envelope() envelope {
	return envelope{Error: e.code, Message: e.message, Retryable: e.status() >= 500 || e.status() == http.StatusTooManyRequests, Detail: e.detail}
}

func newError(code, message string, detail map[string]any) *apiError {
	return &apiError{code: code, message: message, detail: detail}
}

func errInternal() *apiError {
	return newError(codeInternal, "The sandbox failed to handle the request; try again.", nil)
}

func errRoleNotFound(detail map[string]any) *apiError {
	return newError(codeRoleNotFound, "No card with this roleId exists.", detail)
}

func errWorldbookNotFound() *apiError {
	return newError(codeWorldbookNotFound, "No worldbook with this worldbookId exists.", nil)
}

func errTrialNotFound() *apiError {
	return newError(codeTrialNotFound, "No live trial card exists under this clientKey.", nil)
}

func errField(field, message string) *apiError {
	return newError(codeInvalidRequest, message, map[string]any{"field": field})
}

// errProblems reports a request part (body, query or path) failing its schema, naming the first problem.
func errProblems(part string, problems []schema.Problem) *apiError {
	list := make([]map[string]any, len(problems))
	for i, p := range problems {
		list[i] = map[string]any{"instanceLocation": p.InstanceLocation, "message": p.Message}
	}
	msg := "The request " + part + " is invalid."
	if len(problems) > 0 {
		msg = "The request " + part + " is invalid at " + problems[0].InstanceLocation + ": " +
			strings.TrimSuffix(problems[0].Message, ".") + "."
	}
	return newError(codeInvalidRequest, msg, map[string]any{"part": part, "problems": list})
}
