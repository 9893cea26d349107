package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/cardwriter/cardwriter-mcp/schema"
)

// checkParams validates path parameters, then query parameters, each as a string against its schema.
func (rt *route) checkParams(rq *request, rawQuery string) *apiError {
	var pathProblems []schema.Problem
	for _, p := range rt.op.Params {
		if p.In == "path" {
			pathProblems = append(pathProblems, checkValue(rt.params[p.Name], p.Name, rq.path[p.Name])...)
		}
	}
	if len(pathProblems) > 0 {
		return errProblems("path", pathProblems)
	}
	values, err := url.ParseQuery(rawQuery)
	if err != nil {
		return errProblems("query", []schema.Problem{{InstanceLocation: "/", Message: "malformed query string"}})
	}
	var problems []schema.Problem
	for _, p := range rt.op.Params {
		if p.In != "query" {
			continue
		}
		loc := "/" + escapePointer(p.Name)
		vs, present := values[p.Name]
		switch {
		case !present && p.Required:
			problems = append(problems, schema.Problem{InstanceLocation: loc, Message: "missing required parameter"})
		case !present:
		case len(vs) > 1:
			problems = append(problems, schema.Problem{InstanceLocation: loc, Message: "parameter given more than once"})
		default:
			problems = append(problems, checkValue(rt.params[p.Name], p.Name, vs[0])...)
			rq.query[p.Name] = vs[0]
		}
	}
	if len(problems) > 0 {
		return errProblems("query", problems)
	}
	return nil
}

// checkValue validates one parameter value, locating its problems under "/name".
func checkValue(v *schema.Validator, name, value string) []schema.Problem {
	err := v.Validate(value)
	if err == nil {
		return nil
	}
	base := "/" + escapePointer(name)
	var ve *schema.ValidationError
	if !errors.As(err, &ve) {
		return []schema.Problem{{InstanceLocation: base, Message: "cannot be validated"}}
	}
	out := make([]schema.Problem, len(ve.Problems))
	for i, p := range ve.Problems {
		loc := base
		if p.InstanceLocation != "/" {
			loc += p.InstanceLocation
		}
		out[i] = schema.Problem{InstanceLocation: loc, Message: p.Message}
	}
	return out
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// readBody checks the Content-Type, the size cap, JSON syntax and the body schema.
func readBody(w http.ResponseWriter, r *http.Request, rt *route) ([]byte, *apiError) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return nil, newError(codeInvalidRequest, "The request body must be sent with Content-Type: application/json.",
			map[string]any{"part": "header", "header": "Content-Type"})
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, newError(codePayloadTooLarge, "The request body is larger than 16 MiB.",
				map[string]any{"limit": maxBodyBytes})
		}
		return nil, newError(codeInvalidRequest, "The request body could not be read.", map[string]any{"part": "body"})
	}
	if len(bytes.TrimSpace(data)) == 0 && !rt.op.Body.Required {
		return nil, nil
	}
	inst, err := schema.DecodeJSON(data)
	if err != nil {
		return nil, newError(codeInvalidRequest, "The request body is not valid JSON.", map[string]any{"part": "body",
			"problems": []schema.Problem{{InstanceLocation: "/", Message: err.Error()}}})
	}
	if err := rt.body.Validate(inst); err != nil {
		var ve *schema.ValidationError
		if errors.As(err, &ve) {
			return nil, errProblems("body", ve.Problems)
		}
		return nil, errProblems("body", []schema.Problem{{InstanceLocation: "/", Message: "cannot be validated"}})
	}
	return data, nil
}

// decodeBody decodes the validated body into v; a value the schema allows but Go cannot hold is a 400.
func decodeBody(rq *request, v any) error {
	if rq.body == nil {
		return nil
	}
	if err := json.Unmarshal(rq.body, v); err != nil {
		return newError(codeInvalidRequest, "The request body has a value the service cannot store.", map[string]any{
			"part": "body", "problems": []schema.Problem{{InstanceLocation: "/", Message: err.Error()}}})
	}
	return nil
}
