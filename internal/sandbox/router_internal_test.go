package sandbox

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/schema"
)

// TestHandlersMatchContract checks that every ServerAPI operation of the contract has a handler and vice versa.
func TestHandlersMatchContract(t *testing.T) {
	t.Parallel()
	ops, err := schema.Operations()
	if err != nil {
		t.Fatal(err)
	}
	api := map[string]bool{}
	for _, op := range ops {
		if op.Server != schema.ServerAPI {
			continue
		}
		api[op.ID] = true
		if handlers[op.ID] == nil {
			t.Errorf("operation %s has no handler", op.ID)
		}
	}
	for id := range handlers {
		if !api[id] {
			t.Errorf("handler %s has no ServerAPI operation", id)
		}
	}
	if _, err := buildRoutes(); err != nil {
		t.Fatal(err)
	}
}

func TestCheckResponsesCatchesMismatch(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	s, err := New(Options{CheckResponses: true, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	op := schema.MustLookup("getMe")
	tests := []struct {
		name   string
		status int
		body   string
	}{
		{"wrong type", 200, `{"userId":1,"nickname":"n","scopes":[]}`},
		{"missing field", 200, `{"userId":"u","nickname":"n"}`},
		{"undocumented status", 201, `{"userId":"u","nickname":"n","scopes":[]}`},
		{"error code does not match status", 404, `{"error":"conflict","message":"m"}`},
		{"not an envelope", 400, `{"message":"m"}`},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		if got := s.writeJSON(rec, &op, tt.status, []byte(tt.body)); got != 500 || rec.Code != 500 {
			t.Errorf("%s: status %d", tt.name, rec.Code)
			continue
		}
		var env struct {
			Error     string `json:"error"`
			Retryable bool   `json:"retryable"`
			Detail    struct {
				Problems []schema.Problem `json:"problems"`
			} `json:"detail"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Error != "internal" || !env.Retryable || len(env.Detail.Problems) == 0 {
			t.Errorf("%s: %s", tt.name, rec.Body.Bytes())
		}
	}
	if !strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("mismatch not logged at error level: %s", logs.String())
	}
	rec := httptest.NewRecorder()
	if s.writeJSON(rec, &op, 200, []byte(`{"userId":"u","nickname":"n","scopes":[]}`)); rec.Code != 200 {
		t.Errorf("valid response rejected: %s", rec.Body.Bytes())
	}
}

func TestMatchPrefersLiterals(t *testing.T) {
	t.Parallel()
	mk := func(id, method, path string) route {
		return route{op: schema.Operation{ID: id, Method: method, Path: path}, segments: strings.Split(strings.TrimPrefix(path, "/"), "/")}
	}
	s := &Service{routes: []route{
		mk("param", "GET", "/role/{roleId}"),
		mk("literal", "GET", "/role/detail"),
		mk("deep", "GET", "/role/{roleId}/welcome"),
		mk("patch", "PATCH", "/role/{roleId}"),
	}}
	tests := []struct {
		method, path, want, param string
	}{
		{"GET", "/role/detail", "literal", ""},
		{"GET", "/role/r_1", "param", "r_1"},
		{"PATCH", "/role/detail", "patch", "detail"},
		{"GET", "/role/a/welcome", "deep", "a"},
		{"DELETE", "/role/detail", "", ""},
		{"GET", "/role", "", ""},
	}
	for _, tt := range tests {
		segs, _ := splitPath(tt.path)
		rt, vals := s.match(tt.method, segs)
		got := ""
		if rt != nil {
			got = rt.op.ID
		}
		if got != tt.want || (tt.param != "" && vals["roleId"] != tt.param) {
			t.Errorf("%s %s: %q %v, want %q", tt.method, tt.path, got, vals, tt.want)
		}
	}
}
