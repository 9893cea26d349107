package sandbox_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

func TestAuth(t *testing.T) {
	t.Parallel()
	svc := newService(t, sandbox.Options{})
	c := overHTTP(t, svc)
	tests := []struct {
		name   string
		header string
		want   int
	}{
		{"missing", "", http.StatusUnauthorized},
		{"unknown token", "Bearer nope", http.StatusUnauthorized},
		{"other scheme", "Basic " + testToken, http.StatusUnauthorized},
		{"scheme only", "Bearer", http.StatusUnauthorized},
		{"empty token", "Bearer  ", http.StatusUnauthorized},
		{"bearer", "Bearer " + testToken, http.StatusOK},
		{"scheme case-insensitive", "bEaReR " + testToken, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := c.as("")
			c.t = t
			r := c.send("GET", "/open/v1/me", nil, map[string]string{"Authorization": tt.header})
			if r.status != tt.want {
				t.Fatalf("status %d, want %d: %s", r.status, tt.want, r.raw)
			}
			if tt.want == http.StatusUnauthorized {
				if r.obj["error"] != "unauthorized" {
					t.Errorf("error %v", r.obj["error"])
				}
				want := `Bearer resource_metadata="http://sandbox.localhost/.well-known/oauth-protected-resource/open/v1", scope="mcp:card-writer"`
				if strings.HasPrefix(tt.header, "Bearer ") && strings.TrimSpace(tt.header[len("Bearer "):]) != "" {
					want += `, error="invalid_token"` // a token was sent (RFC 6750 section 3.1)
				}
				if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, want) {
					t.Errorf("WWW-Authenticate %q, want %q", got, want)
				}
			}
		})
	}
}

func TestGetMe(t *testing.T) {
	t.Parallel()
	svc := newService(t, sandbox.Options{})
	me := inProcess(t, svc).call("GET", "/me", nil, http.StatusOK)
	if me["userId"] != "u_demo" || me["nickname"] != "Demo Author" || strings.Join(strs(me["scopes"]), ",") != "mcp:card-writer" {
		t.Fatalf("me = %v", me)
	}
}

func TestRandomDemoToken(t *testing.T) {
	t.Parallel()
	svc, err := sandbox.New(sandbox.Options{CheckResponses: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(svc.DemoToken()) != 43 { // 32 bytes, base64url without padding
		t.Fatalf("demo token %q", svc.DemoToken())
	}
	inProcess(t, svc).call("GET", "/me", nil, http.StatusOK)
}

func TestRequestValidation(t *testing.T) {
	t.Parallel()
	svc := newService(t, sandbox.Options{})
	c := inProcess(t, svc)
	tests := []struct {
		name    string
		method  string
		path    string
		body    any
		header  map[string]string
		status  int
		code    string
		part    string
		problem string // instanceLocation of the first problem
	}{
		{"bad body type", "POST", "/role", `{"roleName": 5}`, nil, 400, "invalid_request", "body", "/roleName"},
		{"missing required field", "POST", "/role", `{}`, nil, 400, "invalid_request", "body", "/"},
		{"unknown field", "POST", "/role", `{"roleName":"a","color":"red"}`, nil, 400, "invalid_request", "body", "/"},
		{"empty name", "POST", "/role", `{"roleName":""}`, nil, 400, "invalid_request", "body", "/roleName"},
		{"enum", "POST", "/role/r_x/visibility", `{"visibility":"public"}`, nil, 400, "invalid_request", "body", "/visibility"},
		{"invalid JSON", "POST", "/role", `{"roleName":`, nil, 400, "invalid_request", "body", "/"},
		{"trailing data", "POST", "/role", `{"roleName":"a"} {}`, nil, 400, "invalid_request", "body", "/"},
		{"empty body", "POST", "/role", ``, nil, 400, "invalid_request", "body", "/"},
		{"wrong content type", "POST", "/role", `{"roleName":"a"}`, map[string]string{"Content-Type": "text/plain"}, 400, "invalid_request", "header", ""},
		{"no content type", "POST", "/role", `{"roleName":"a"}`, map[string]string{"Content-Type": ""}, 400, "invalid_request", "header", ""},
		{"missing query", "GET", "/role/detail", nil, nil, 400, "invalid_request", "query", "/roleId"},
		{"empty query", "GET", "/role/detail?roleId=", nil, nil, 400, "invalid_request", "query", "/roleId"},
		{"repeated query", "GET", "/role/detail?roleId=a&roleId=b", nil, nil, 400, "invalid_request", "query", "/roleId"},
		{"malformed query", "GET", "/role/detail?roleId=%zz", nil, nil, 400, "invalid_request", "query", "/"},
		// The upsert names a trial of the caller's: its key has the contract's pattern. (The read
		// and the delete take any key: the document restricts none.)
		{"bad path param", "PUT", "/trial-cards/-dash", `{"card":{"roleName":"a"}}`, nil, 400, "invalid_request", "path", "/clientKey"},
		{"long path param", "PUT", "/trial-cards/" + strings.Repeat("k", 65), `{"card":{"roleName":"a"}}`, nil, 400, "invalid_request", "path", "/clientKey"},
		{"path before body", "PUT", "/trial-cards/-dash", `{}`, nil, 400, "invalid_request", "path", "/clientKey"},
		{"unknown path", "GET", "/nope", nil, nil, 404, "not_found", "", ""},
		{"unknown method", "DELETE", "/me", nil, nil, 404, "not_found", "", ""},
		{"trailing slash", "GET", "/me/", nil, nil, 404, "not_found", "", ""},
		{"prefix only", "GET", "", nil, nil, 404, "not_found", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := *c
			c.t = t
			r := c.send(tt.method, "/open/v1"+tt.path, tt.body, tt.header)
			if r.status != tt.status || r.obj["error"] != tt.code {
				t.Fatalf("got %d %v, want %d %s: %s", r.status, r.obj["error"], tt.status, tt.code, r.raw)
			}
			if tt.part == "" {
				return
			}
			d := detail(t, r.obj)
			if d["part"] != tt.part {
				t.Fatalf("detail.part %v, want %s", d["part"], tt.part)
			}
			if tt.part == "header" {
				if d["header"] != "Content-Type" {
					t.Fatalf("detail %v", d)
				}
				return
			}
			problems, _ := d["problems"].([]any)
			if len(problems) == 0 {
				t.Fatalf("no problems in %v", d)
			}
			first := problems[0].(map[string]any)
			if first["instanceLocation"] != tt.problem || first["message"] == "" {
				t.Fatalf("first problem %v, want at %s", first, tt.problem)
			}
			if tt.problem != "/" {
				if !strings.Contains(r.obj["message"].(string), first["instanceLocation"].(string)) {
					t.Errorf("message %q does not name the problem", r.obj["message"])
				}
			}
		})
	}
}

func TestContentTypeWithParameters(t *testing.T) {
	t.Parallel()
	c := inProcess(t, newService(t, sandbox.Options{}))
	r := c.send("POST", "/open/v1/role", `{"roleName":"a"}`, map[string]string{"Content-Type": "Application/JSON; charset=utf-8"})
	if r.status != http.StatusCreated {
		t.Fatalf("status %d: %s", r.status, r.raw)
	}
}

func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	c := overHTTP(t, newService(t, sandbox.Options{}))
	body := `{"roleName":"` + strings.Repeat("a", 16<<20) + `"}`
	obj := c.fail("POST", "/role", body, http.StatusRequestEntityTooLarge, "payload_too_large")
	if num(detail(t, obj)["limit"]) != 16<<20 {
		t.Fatalf("detail %v", obj["detail"])
	}
}

func TestAuthBeforeValidation(t *testing.T) {
	t.Parallel()
	c := inProcess(t, newService(t, sandbox.Options{})).as("wrong")
	c.fail("POST", "/role", `{"bad":`, http.StatusUnauthorized, "unauthorized")
	c.fail("GET", "/nope", nil, http.StatusUnauthorized, "unauthorized")
}

func TestOutsideAPI(t *testing.T) {
	t.Parallel()
	c := overHTTP(t, newService(t, sandbox.Options{}))
	for _, p := range []string{"/", "/open", "/images/", "/images/a/b", "/oauth/nope", "/.well-known/oauth-protected-resource"} {
		r := c.send("GET", p, nil, nil)
		if r.status != http.StatusNotFound || r.obj["error"] != "not_found" {
			t.Errorf("GET %s: %d %s", p, r.status, r.raw)
		}
	}
}

// TestEveryOperationRouted sends a request to every ServerAPI operation of the contract and checks that the
// router found a handler (any answer but the router's own 404 not_found).
func TestEveryOperationRouted(t *testing.T) {
	t.Parallel()
	ops, err := schema.Operations()
	if err != nil {
		t.Fatal(err)
	}
	c := inProcess(t, newService(t, sandbox.Options{}))
	n := 0
	for _, op := range ops {
		if op.Server != schema.ServerAPI {
			continue
		}
		n++
		path := op.Path
		q := url.Values{}
		for _, p := range op.Params {
			switch p.In {
			case "path":
				path = strings.ReplaceAll(path, "{"+p.Name+"}", "x1")
			case "query":
				if p.Required {
					q.Set(p.Name, "x1")
				}
			}
		}
		if len(q) > 0 {
			path += "?" + q.Encode()
		}
		var body any
		if op.Body != nil {
			body = `{}`
		}
		r := c.send(op.Method, "/open/v1"+path, body, nil)
		if r.status == http.StatusNotFound && r.obj["error"] == "not_found" {
			t.Errorf("%s (%s %s) is not routed: %s", op.ID, op.Method, path, r.raw)
		}
		if r.status >= 500 {
			t.Errorf("%s: %d %s", op.ID, r.status, r.raw)
		}
	}
	if n != 21 {
		t.Errorf("%d ServerAPI operations, want 21", n)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	for _, opts := range []sandbox.Options{
		{BaseURL: "not a url"},
		{TrialSlots: -1},
		{TrialTTL: -1},
	} {
		if _, err := sandbox.New(opts); err == nil {
			t.Errorf("New(%+v) succeeded", opts)
		}
	}
}
