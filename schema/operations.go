package schema

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Server says which base address an operation's path is relative to.
type Server string

const (
	// ServerAPI is {api_host}/open/v1, the base address of the open API.
	ServerAPI Server = "api"
	// ServerHost is {api_host} itself (the OAuth endpoints and discovery).
	ServerHost Server = "host"
)

// Operation is one operation of the contract, with pointers to its schemas.
type Operation struct {
	ID         string // operationId
	Method     string // upper case
	Path       string // template relative to its server, e.g. /role/{roleId}/welcome
	Server     Server
	Summary    string
	Idempotent bool // x-idempotent: safe to repeat
	// IdempotencyKey names the body field (x-idempotency-key) a client fills when the caller leaves it out.
	IdempotencyKey string
	Assumed        bool // x-assumed: decided by design.md, not shown by the API document
	// Ack (x-ack): the document shows the answer only as "saved", "deleted" or "revoked", or not
	// at all, and the caller needs nothing from it: any 2xx is success, whatever its body.
	Ack       bool
	Note      string // x-assumed-note
	Secured   bool   // needs a bearer token
	Params    []Param
	Body      *Body
	Responses []Response // sorted by status; Status 0 is "default"
}

// Param is one path or query parameter.
type Param struct {
	Name     string
	In       string // "path" or "query"
	Required bool
	Schema   string // JSON pointer of its schema
}

// Body is an operation's request body.
type Body struct {
	ContentType string
	Required    bool
	Schema      string // JSON pointer of its schema
}

// Response is one documented response.
type Response struct {
	Status      int    // 0 for "default"
	ContentType string // "" when the response has no body
	Schema      string // JSON pointer of its schema, "" when none
}

// Response returns the documented response for status, falling back to "default".
func (o Operation) Response(status int) (Response, bool) {
	var def *Response
	for i, r := range o.Responses {
		if r.Status == status {
			return r, true
		}
		if r.Status == 0 {
			def = &o.Responses[i]
		}
	}
	if def != nil {
		return *def, true
	}
	return Response{}, false
}

// SuccessStatus returns the lowest documented 2xx status.
func (o Operation) SuccessStatus() int {
	for _, r := range o.Responses {
		if r.Status >= 200 && r.Status < 300 {
			return r.Status
		}
	}
	return http.StatusOK
}

var (
	opsOnce sync.Once
	ops     []Operation
	opsErr  error
)

// Operations returns every operation of the contract, sorted by path then method.
func Operations() ([]Operation, error) {
	opsOnce.Do(func() { ops, opsErr = parseOperations(contract) })
	return slices.Clone(ops), opsErr
}

// Lookup returns the operation with the given operationId.
func Lookup(id string) (Operation, bool) {
	// Called on every upstream call: search the parsed list in place instead of a copy
	// (Operations' copy is shallow too, so the result shares the same slices either way).
	opsOnce.Do(func() { ops, opsErr = parseOperations(contract) })
	if opsErr != nil {
		return Operation{}, false
	}
	for _, o := range ops {
		if o.ID == id {
			return o, true
		}
	}
	return Operation{}, false
}

// MustLookup is Lookup for operation ids known at build time; it panics when the contract lacks one.
func MustLookup(id string) Operation {
	o, ok := Lookup(id)
	if !ok {
		panic(fmt.Sprintf("schema: contract has no operation %q", id))
	}
	return o
}

type rawParam struct {
	Ref      string          `json:"$ref"`
	Name     string          `json:"name"`
	In       string          `json:"in"`
	Required bool            `json:"required"`
	Schema   json.RawMessage `json:"schema"`
}

type rawMedia map[string]struct {
	Schema json.RawMessage `json:"schema"`
}

type rawOp struct {
	OperationID string          `json:"operationId"`
	Summary     string          `json:"summary"`
	Idempotent  bool            `json:"x-idempotent"`
	IdemKey     string          `json:"x-idempotency-key"`
	Assumed     bool            `json:"x-assumed"`
	Ack         bool            `json:"x-ack"`
	Note        string          `json:"x-assumed-note"`
	Security    json.RawMessage `json:"security"`
	Parameters  []rawParam      `json:"parameters"`
	RequestBody *struct {
		Required bool     `json:"required"`
		Content  rawMedia `json:"content"`
	} `json:"requestBody"`
	Responses map[string]struct {
		Ref     string   `json:"$ref"`
		Content rawMedia `json:"content"`
	} `json:"responses"`
}

var methods = []string{"get", "put", "post", "delete", "patch"}

func parseOperations(doc []byte) ([]Operation, error) {
	var raw struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Parameters map[string]rawParam `json:"parameters"`
			Responses  map[string]struct {
				Content rawMedia `json:"content"`
			} `json:"responses"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &raw); err != nil {
		return nil, fmt.Errorf("parse contract: %w", err)
	}
	var out []Operation
	for path, item := range raw.Paths {
		pathPtr := "#/paths/" + escapePointer(path)
		server := ServerAPI
		if s, ok := item["servers"]; ok && !strings.Contains(string(s), "/open/v1") {
			server = ServerHost
		}
		var shared []rawParam
		if p, ok := item["parameters"]; ok {
			if err := json.Unmarshal(p, &shared); err != nil {
				return nil, fmt.Errorf("parse %s parameters: %w", path, err)
			}
		}
		for _, m := range methods {
			body, ok := item[m]
			if !ok {
				continue
			}
			var ro rawOp
			if err := json.Unmarshal(body, &ro); err != nil {
				return nil, fmt.Errorf("parse %s %s: %w", m, path, err)
			}
			opPtr := pathPtr + "/" + m
			op := Operation{
				ID: ro.OperationID, Method: strings.ToUpper(m), Path: path, Server: server,
				Summary: ro.Summary, Idempotent: ro.Idempotent, IdempotencyKey: ro.IdemKey, Assumed: ro.Assumed, Ack: ro.Ack, Note: ro.Note,
				Secured: ro.Security == nil || strings.TrimSpace(string(ro.Security)) != "[]",
			}
			addParams := func(list []rawParam, base string) error {
				for i, p := range list {
					ptr := fmt.Sprintf("%s/%d", base, i)
					if p.Ref != "" {
						name := strings.TrimPrefix(p.Ref, "#/components/parameters/")
						rp, ok := raw.Components.Parameters[name]
						if !ok {
							return fmt.Errorf("%s: unknown parameter %s", ptr, p.Ref)
						}
						p, ptr = rp, p.Ref
					}
					op.Params = append(op.Params, Param{Name: p.Name, In: p.In, Required: p.Required, Schema: ptr + "/schema"})
				}
				return nil
			}
			if err := addParams(shared, pathPtr+"/parameters"); err != nil {
				return nil, err
			}
			if err := addParams(ro.Parameters, opPtr+"/parameters"); err != nil {
				return nil, err
			}
			if rb := ro.RequestBody; rb != nil {
				for ct := range rb.Content {
					op.Body = &Body{ContentType: ct, Required: rb.Required,
						Schema: opPtr + "/requestBody/content/" + escapePointer(ct) + "/schema"}
				}
			}
			for code, r := range ro.Responses {
				status := 0
				if code != "default" {
					n, err := strconv.Atoi(code)
					if err != nil {
						return nil, fmt.Errorf("%s: bad response code %q", opPtr, code)
					}
					status = n
				}
				resp := Response{Status: status}
				base := opPtr + "/responses/" + code
				content := r.Content
				if r.Ref != "" {
					name := strings.TrimPrefix(r.Ref, "#/components/responses/")
					cr, ok := raw.Components.Responses[name]
					if !ok {
						return nil, fmt.Errorf("%s: unknown response %s", base, r.Ref)
					}
					content, base = cr.Content, r.Ref
				}
				for ct := range content {
					resp.ContentType = ct
					resp.Schema = base + "/content/" + escapePointer(ct) + "/schema"
				}
				op.Responses = append(op.Responses, resp)
			}
			slices.SortFunc(op.Responses, func(a, b Response) int { return a.Status - b.Status })
			if slices.ContainsFunc(op.Responses, func(r Response) bool { return r.Status == 0 }) {
				// keep "default" last
				op.Responses = append(op.Responses[1:], op.Responses[0])
			}
			out = append(out, op)
		}
	}
	slices.SortFunc(out, func(a, b Operation) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Method, b.Method)
	})
	return out, nil
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
