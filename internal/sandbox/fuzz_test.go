package sandbox_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

var fuzzMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}

// FuzzRequest sends arbitrary methods, paths and bodies to the handler: no 5xx, and every 4xx is a valid envelope.
func FuzzRequest(f *testing.F) {
	seeds := []struct {
		method byte
		path   string
		body   string
	}{
		{0, "me", ""},
		{1, "role", `{"roleName":"Mira","idempotencyKey":"k"}`},
		{1, "role", `{"roleName":"Mira","idempotencyKey":"k","language":"x"}`},
		{0, "role/detail?roleId=r_1", ""},
		{3, "role/r_1/welcome", `{"roleWelcome":"hi","alternates":[],"prologue":null}`},
		{3, "role/r_1", `{"avatarImageId":""}`},
		{1, "role/r_1/document", `{"sections":{"description":""}}`},
		{1, "role/r_1/publish", `{}`},
		{1, "image/upload", `{"purpose":"avatar","contentType":"image/png","dataBase64":"iVBORw0KGgo="}`},
		{1, "worldbook", `{"name":"w","format":"tavern"}`},
		{1, "worldbook/wb_1/document", `{"entries":[{"op":"create","name":"a","content":"b","keywords":[],"priority":1.0}]}`},
		{1, "worldbook/wb_1/document", `{"entries":[{"op":"update","entryId":"e","sortOrder":1e40}]}`},
		{0, "worldbook/entry/list?worldbookId=w&category=%E2%9C%93", ""},
		{2, "trial-cards/k1", `{"card":{"roleName":"x","sections":{"scenario":"<&>"}},"worldbook":{"entries":[]}}`},
		{4, "trial-cards/k1", ""},
		{0, "trial-cards/%2e%2e", ""},
		{0, "role/detail?roleId=%zz;x", ""},
		{1, "role", "\xff\xfe"},
		{1, "role", `{"roleName":"\ud800"}`},
		{0, "../images/x", ""},
		{0, "role//welcome", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, []byte(s.body))
	}
	svc, err := sandbox.New(sandbox.Options{CheckResponses: true, DemoToken: testToken})
	if err != nil {
		f.Fatal(err)
	}
	h := svc.Handler()
	envelope := schema.Component("ErrorEnvelope")
	f.Fuzz(func(t *testing.T, m byte, path string, body []byte) {
		method := fuzzMethods[int(m)%len(fuzzMethods)]
		req, err := http.NewRequest(method, "http://sandbox.localhost/open/v1/"+path, bytes.NewReader(body))
		if err != nil {
			t.Skip()
		}
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %q %q: %d %s", method, path, body, rec.Code, rec.Body.Bytes())
		}
		if rec.Code >= 400 {
			if !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
				t.Fatalf("%d without JSON", rec.Code)
			}
			if err := envelope.ValidateJSON(rec.Body.Bytes()); err != nil {
				t.Fatalf("%d: not an envelope: %v: %s", rec.Code, err, rec.Body.Bytes())
			}
			var env struct{ Error, Message string }
			if json.Unmarshal(rec.Body.Bytes(), &env) != nil || env.Error == "" || env.Message == "" {
				t.Fatalf("%d: empty envelope %s", rec.Code, rec.Body.Bytes())
			}
		}
	})
}
