package sandbox_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/auth/authtest"
	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

const testToken = "test-demo-token"

// newFakeClock returns a settable clock, for the sandbox's Options.Now, standing at a fixed time.
func newFakeClock() *authtest.Clock {
	return authtest.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
}

// newService returns a sandbox that validates every response it writes against the contract.
func newService(t testing.TB, opts sandbox.Options) *sandbox.Service {
	t.Helper()
	opts.CheckResponses = true
	if opts.DemoToken == "" {
		opts.DemoToken = testToken
	}
	svc, err := sandbox.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return svc
}

// client drives a sandbox over HTTP as one user.
type client struct {
	t     testing.TB
	hc    *http.Client
	base  string
	token string
}

// inProcess returns a client for the demo user going through the in-process RoundTripper.
func inProcess(t testing.TB, svc *sandbox.Service) *client {
	return &client{t: t, hc: &http.Client{Transport: svc.RoundTripper()}, base: "http://card.test", token: svc.DemoToken()}
}

// overHTTP returns a client for the demo user going through a real listener.
func overHTTP(t testing.TB, svc *sandbox.Service) *client {
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	return &client{t: t, hc: srv.Client(), base: srv.URL, token: svc.DemoToken()}
}

// on returns a copy of the client that reports failures to t (for subtests).
func (c *client) on(t testing.TB) *client {
	cp := *c
	cp.t = t
	return &cp
}

func (c *client) as(token string) *client {
	cp := *c
	cp.token = token
	return &cp
}

type response struct {
	status int
	header http.Header
	raw    []byte
	obj    map[string]any
}

// send makes a request; body is nil, a string or []byte of raw JSON, or a value to encode.
func (c *client) send(method, path string, body any, header map[string]string) *response {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = strings.NewReader(b)
		case []byte:
			rd = bytes.NewReader(b)
		default:
			data, err := json.Marshal(b)
			if err != nil {
				c.t.Fatalf("marshal: %v", err)
			}
			rd = bytes.NewReader(data)
		}
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatalf("new request: %v", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatalf("read body: %v", err)
	}
	r := &response{status: res.StatusCode, header: res.Header, raw: raw}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &r.obj); err != nil {
			c.t.Fatalf("%s %s: response is not a JSON object: %v: %s", method, path, err, raw)
		}
		if res.StatusCode >= 400 {
			if err := schema.Component("ErrorEnvelope").ValidateJSON(raw); err != nil {
				c.t.Fatalf("%s %s: error is not an envelope: %v: %s", method, path, err, raw)
			}
		}
	}
	return r
}

// call sends an API request (path relative to /open/v1) and requires the status.
func (c *client) call(method, path string, body any, want int) map[string]any {
	c.t.Helper()
	r := c.send(method, "/open/v1"+path, body, nil)
	if r.status != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.raw)
	}
	return r.obj
}

// fail sends an API request and requires an error envelope with the status and code.
func (c *client) fail(method, path string, body any, status int, code string) map[string]any {
	c.t.Helper()
	obj := c.call(method, path, body, status)
	if obj["error"] != code {
		c.t.Fatalf("%s %s: error %v, want %s: %v", method, path, obj["error"], code, obj)
	}
	if msg, _ := obj["message"].(string); msg == "" {
		c.t.Fatalf("%s %s: empty message", method, path)
	}
	return obj
}

// detail returns the detail object of an error envelope.
func detail(t testing.TB, obj map[string]any) map[string]any {
	t.Helper()
	d, ok := obj["detail"].(map[string]any)
	if !ok {
		t.Fatalf("no detail in %v", obj)
	}
	return d
}

func (c *client) newCard(name string) string {
	c.t.Helper()
	return c.call("POST", "/role", map[string]any{"roleName": name}, http.StatusCreated)["roleId"].(string)
}

func (c *client) newWorldbook(name, format string) string {
	c.t.Helper()
	body := map[string]any{"name": name}
	if format != "" {
		body["format"] = format
	}
	return c.call("POST", "/worldbook", body, http.StatusCreated)["worldbookId"].(string)
}

func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

func strs(v any) []string {
	list, _ := v.([]any)
	out := make([]string, len(list))
	for i, x := range list {
		out[i], _ = x.(string)
	}
	return out
}
