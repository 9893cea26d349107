package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"

	"github.com/cardwriter/cardwriter-mcp/schema"
)

// writeError writes the error envelope; op is nil outside any operation.
func (s *Service) writeError(w http.ResponseWriter, op *schema.Operation, e *apiError) int {
	data, err := jsontext.Marshal(e.envelope())
	if err != nil { // a detail the encoder refuses: drop it
		data, _ = jsontext.Marshal(envelope{Error: e.code, Message: e.message, Retryable: e.status() >= 500})
	}
	return s.writeJSON(w, op, e.status(), data)
}

// writeJSON writes a JSON response, first checking it against the contract when CheckResponses is set.
func (s *Service) writeJSON(w http.ResponseWriter, op *schema.Operation, status int, data []byte) int {
	if s.opts.CheckResponses {
		if problems := checkResponse(op, status, data); len(problems) > 0 {
			id := ""
			if op != nil {
				id = op.ID
			}
			locs := make([]string, len(problems))
			for i, p := range problems {
				locs[i] = p.InstanceLocation
			}
			s.log.Error("sandbox: response does not match the contract", "op", id, "status", status, "locations", locs)
			e := errInternal()
			e.message = "The sandbox produced a response that does not match the contract."
			e.detail = map[string]any{"status": status, "problems": problems}
			status = e.status()
			data, _ = jsontext.Marshal(e.envelope())
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(data)
	return status
}

// checkResponse validates a response body against the schema the contract documents for status.
func checkResponse(op *schema.Operation, status int, data []byte) []schema.Problem {
	ptr := "#/components/schemas/ErrorEnvelope"
	if op != nil {
		resp, ok := op.Response(status)
		if !ok || (status < 400 && resp.Status != status) {
			return []schema.Problem{{InstanceLocation: "/", Message: fmt.Sprintf("status %d is not documented for %s", status, op.ID)}}
		}
		if resp.Schema == "" {
			return []schema.Problem{{InstanceLocation: "/", Message: fmt.Sprintf("status %d of %s documents no body", status, op.ID)}}
		}
		ptr = resp.Schema
	}
	if problems := validateAgainst(ptr, data); problems != nil {
		return problems
	}
	if status >= 400 {
		var env envelope
		if json.Unmarshal(data, &env) != nil || statusOf[env.Error] != status && status < 500 {
			return []schema.Problem{{InstanceLocation: "/error", Message: fmt.Sprintf("code does not match status %d", status)}}
		}
	}
	return nil
}

// validateAgainst validates data against the contract's schema at ptr; nil means it conforms.
func validateAgainst(ptr string, data []byte) []schema.Problem {
	v, err := schema.Compile(ptr)
	if err != nil {
		return []schema.Problem{{InstanceLocation: "/", Message: err.Error()}}
	}
	if err := v.ValidateJSON(data); err != nil {
		var ve *schema.ValidationError
		if errors.As(err, &ve) {
			return ve.Problems
		}
		return []schema.Problem{{InstanceLocation: "/", Message: err.Error()}}
	}
	return nil
}
