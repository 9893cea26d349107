package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

// codeUnexpectedResponse is the error of a 2xx answer of the card service that cannot be read
// as the tool's result: the call reached the service, so a write may have been applied.
const codeUnexpectedResponse = "unexpected_response"

// readResult turns what a handler returned into the tool's result object and its JSON, read
// tolerantly (the tool's output schema, see schema.Tolerant): an Ack operation succeeds with any
// body, the ids it acted on and ok added; any other answer must validate against the output
// schema, or it is a Failure saying what could not be read and, for a write, how to find out
// whether it was applied. A custom handler's own object that fails is a defect of ours.
func (t *Tool) readResult(data json.RawMessage, params map[string]string, body json.RawMessage) (map[string]any, json.RawMessage, error) {
	if t.op.Ack {
		return t.ackResult(data, params)
	}
	out, err := decodeObject(data)
	if err == nil {
		err = t.output.Validate(out)
	}
	if err == nil {
		return out, data, nil
	}
	if t.Operation == "" {
		return nil, nil, fmt.Errorf("the result of %s fails its output schema: %w", t.Name, err)
	}
	return nil, nil, t.unreadable(data, body, err)
}

// ackResult is the result of an Ack operation: the answer's fields when it is a JSON object
// that fits the output schema, the path parameters the call acted on, and ok.
func (t *Tool) ackResult(data json.RawMessage, params map[string]string) (map[string]any, json.RawMessage, error) {
	out, err := decodeObject(data)
	if err != nil {
		out = map[string]any{}
	}
	t.addActedOn(out, params)
	if t.output.Validate(out) != nil {
		// Fields of the answer that are not what the contract names them: keep only what
		// is certain.
		out = map[string]any{}
		t.addActedOn(out, params)
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the result of %s: %w", t.Name, err)
	}
	return out, raw, nil
}

// addActedOn sets in out the path parameters the call acted on, and ok.
func (t *Tool) addActedOn(out map[string]any, params map[string]string) {
	for _, p := range t.op.Params {
		if v, ok := params[p.Name]; ok && p.In == "path" {
			out[p.Name] = v
		}
	}
	out["ok"] = true
}

// unreadable is the Failure of a 2xx answer that is no result of the tool's operation.
func (t *Tool) unreadable(data, body json.RawMessage, cause error) *Failure {
	detail := map[string]any{"operation": t.Operation}
	what := "its answer is empty"
	var ve *schema.ValidationError
	var de *upstream.UnreadableError
	switch {
	case errors.As(cause, &de):
		what = "its answer is not the JSON it should be"
		detail["operation"] = de.Operation
	case len(bytes.TrimSpace(data)) == 0:
	case errors.As(cause, &ve):
		parts := make([]string, 0, len(ve.Problems))
		for _, p := range ve.Problems {
			parts = append(parts, p.String())
		}
		what = "its answer does not fit: " + firstOf(parts, "; ")
	default:
		what = "its answer is not a JSON object"
	}
	msg := fmt.Sprintf("The card service accepted the %s call, but cardwriter-mcp could not read the answer (%s).", t.Name, what)
	if !t.ReadOnly() {
		msg += " " + t.mayHaveApplied(body, detail)
	}
	return &Failure{Code: codeUnexpectedResponse, Message: msg, Detail: detail}
}

// lostAnswer returns, for a write, the Failure of a call whose answer was lost on the way (the
// connection broke or the deadline passed after the request may have reached the service):
// never "could not be reached". A write safe to repeat says so; any other says how to find out
// whether it was applied (not "try again", which could apply it twice). nil for any other error.
func (t *Tool) lostAnswer(ctx context.Context, err error, body json.RawMessage) *Failure {
	// A repeat of an idempotent write changes nothing more, except a create whose key the
	// caller does not know yet (it was picked for the call): that one must be named.
	repeatable := (t.op.Idempotent && t.op.IdempotencyKey == "") ||
		(t.Operation == "" && t.Annotations.IdempotentHint != nil && *t.Annotations.IdempotentHint)
	if t.ReadOnly() {
		return nil
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil // the caller cancelled: reported as such
	}
	var apiErr *upstream.Error
	var argErr *upstream.ArgumentError
	var f *Failure
	if errors.As(err, &apiErr) || errors.As(err, &argErr) || errors.As(err, &f) || !unreachable(err) || upstream.NotSent(err) ||
		localFault(err) || store.IsUnavailable(err) {
		return nil
	}
	detail := map[string]any{"operation": t.Operation}
	what := fmt.Sprintf("The card service did not answer the %s call (the connection broke or time ran out after the request was sent).", t.Name)
	if repeatable {
		return &Failure{Code: codeUnavailable, Retryable: true, Detail: detail,
			Message: what + " It may have been applied; repeating the same call is safe: it changes nothing more."}
	}
	return &Failure{Code: codeUnavailable, Detail: detail, Message: what + " " + t.mayHaveApplied(body, detail)}
}

// mayHaveApplied says, for a write whose outcome is unknown, how to settle it without applying
// it twice: the idempotency key to repeat it with, or the read that shows it.
func (t *Tool) mayHaveApplied(body json.RawMessage, detail map[string]any) string {
	switch key := idempotencyKeyOf(t, body); {
	case key != "":
		detail["idempotencyKey"] = key
		return fmt.Sprintf("It may have been applied: repeat the call with idempotencyKey %q, which returns what it made instead of making it twice.", key)
	case t.Check != "":
		return fmt.Sprintf("It may have been applied: check with %s before repeating it.", t.Check)
	}
	return "It may have been applied: read it back before repeating it."
}

// idempotencyKeyOf returns the idempotency key the call's body carried, "" when none.
func idempotencyKeyOf(t *Tool, body json.RawMessage) string {
	if t.op.IdempotencyKey == "" || body == nil {
		return ""
	}
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	key, _ := m[t.op.IdempotencyKey].(string)
	return key
}

// withIdempotencyKey returns the body of a call of an operation with an idempotency key, with a
// fresh key in it when the caller gave none: the call's retries carry it, and an error can
// name it, so that the caller can repeat the call without making a second card.
func withIdempotencyKey(t *Tool, body json.RawMessage) json.RawMessage {
	if t.op.IdempotencyKey == "" || body == nil || idempotencyKeyOf(t, body) != "" {
		return body
	}
	key := upstream.NewIdempotencyKey()
	field, _ := json.Marshal(t.op.IdempotencyKey) // strings: these cannot fail
	value, _ := json.Marshal(key)
	rest := bytes.TrimSpace(body)[1:] // after the object's "{"
	out := append(append(append(append([]byte("{"), field...), ':'), value...), ',')
	if len(bytes.TrimSpace(rest)) == 1 { // "}": the object was empty
		out = out[:len(out)-1]
	}
	return append(out, rest...)
}
