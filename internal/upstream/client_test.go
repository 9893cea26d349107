package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		host    string
		opts    []upstream.Option
		nilTS   bool
		want    string // BaseURL, "" when an error is expected
		wantErr string
	}{
		{host: "https://api.example.com", want: "https://api.example.com/open/v1"},
		{host: "https://API.Example.com/", want: "https://api.example.com/open/v1"},
		{host: "http://127.0.0.1:8080", want: "http://127.0.0.1:8080/open/v1"},
		{host: "http://[::1]:8080", want: "http://[::1]:8080/open/v1"},
		{host: "ftp://api.example.com", wantErr: "http:// or https://"},
		{host: "api.example.com", wantErr: "http:// or https://"},
		// A mistyped address is answered with a valid one to copy.
		{host: "api.example.com", wantErr: "e.g. https://api.example.com"},
		{host: "localhost:8090", wantErr: "e.g. http://localhost:8090"},
		{host: "127.0.0.1:8090/open/v1", wantErr: "e.g. http://127.0.0.1:8090"},
		{host: "ftp://cards.example.org", wantErr: "e.g. https://cards.example.org"},
		{host: "user:pass-SECRET@api.example.com", wantErr: "user information"},
		{host: "https://api.example.com/open/v1/", wantErr: "give https://api.example.com"},
		{host: "https://", wantErr: "no host"},
		{host: "https://user:pass-SECRET@api.example.com", wantErr: "user information"},
		{host: "https://api.example.com/open/v1", wantErr: "no path"},
		{host: "https://api.example.com?x=1", wantErr: "no path"},
		{host: "https://api.example.com#f", wantErr: "no path"},
		{host: "https://api.example.com", nilTS: true, wantErr: "TokenSource"},
		{host: "https://api.example.com", opts: []upstream.Option{upstream.WithRetry(upstream.RetryPolicy{})}, wantErr: "MaxAttempts"},
		{host: "https://api.example.com", opts: []upstream.Option{upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 2, BaseDelay: 2, MaxDelay: 1})}, wantErr: "MaxDelay"},
		{host: "https://api.example.com", opts: []upstream.Option{upstream.WithTimeout(-1)}, wantErr: "timeout"},
		{host: "https://api.example.com", opts: []upstream.Option{upstream.WithMaxResponseBytes(0)}, wantErr: "size cap"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			t.Parallel()
			var ts upstream.TokenSource = upstream.StaticToken(secret)
			if tt.nilTS {
				ts = nil
			}
			c, err := upstream.New(tt.host, ts, tt.opts...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "SECRET") {
					t.Errorf("err echoes the credentials: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.BaseURL() != tt.want {
				t.Errorf("BaseURL = %q, want %q", c.BaseURL(), tt.want)
			}
		})
	}
}

// TestHeaders checks the headers sent to the configured host.
func TestHeaders(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(200, `{"roleId":"r1","ok":true}`))
	c, _ := newClient(t, srv.URL, upstream.WithUserAgent("cardwriter-mcp/1.2.3"))
	if _, err := c.SetOpeningLines(context.Background(), "r1", upstream.OpeningLinesInput{RoleWelcome: "Hi"}); err != nil {
		t.Fatal(err)
	}
	r := sc.requests()[0]
	for h, want := range map[string]string{
		"Authorization": "Bearer " + secret,
		"User-Agent":    "cardwriter-mcp/1.2.3",
		"Accept":        "application/json",
		"Content-Type":  "application/json",
	} {
		if got := r.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	if r.Method != http.MethodPatch || r.Path != "/open/v1/role/r1/welcome" {
		t.Errorf("request = %s %s", r.Method, r.Path)
	}
	if string(r.Body) != `{"roleWelcome":"Hi"}` {
		t.Errorf("body = %s", r.Body)
	}
}

func TestDefaultUserAgentAndNoBodyHeaders(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(200, cardJSON))
	c, _ := newClient(t, srv.URL)
	if _, err := c.GetCard(context.Background(), "r 1"); err != nil {
		t.Fatal(err)
	}
	r := sc.requests()[0]
	if got := r.Header.Get("User-Agent"); got != upstream.DefaultUserAgent {
		t.Errorf("User-Agent = %q", got)
	}
	if got := r.Header.Get("Content-Type"); got != "" {
		t.Errorf("Content-Type = %q on a request without a body", got)
	}
	if r.EscapedURI != "/open/v1/role/detail?roleId=r+1" {
		t.Errorf("URI = %q", r.EscapedURI)
	}
}

// TestTokenPerAttempt checks that the token source is asked on every attempt.
func TestTokenPerAttempt(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(503, env503), reply(200, cardJSON))
	ts := &countingSource{}
	c, err := upstream.New(srv.URL, ts)
	if err != nil {
		t.Fatal(err)
	}
	upstream.SetSleep(c, (&sleeps{}).sleep)
	if _, err := c.GetCard(context.Background(), "r1"); err != nil {
		t.Fatal(err)
	}
	reqs := sc.requests()
	if reqs[0].Header.Get("Authorization") != "Bearer t1" || reqs[1].Header.Get("Authorization") != "Bearer t2" {
		t.Errorf("Authorization = %q, %q", reqs[0].Header.Get("Authorization"), reqs[1].Header.Get("Authorization"))
	}
}

type countingSource struct{ n int }

func (s *countingSource) Token(context.Context) (upstream.Token, error) {
	s.n++
	return upstream.Token(fmt.Sprintf("t%d", s.n)), nil
}

type failingSource struct{}

func (failingSource) Token(context.Context) (upstream.Token, error) {
	return "", errors.New("not signed in: run login")
}

func TestTokenSourceError(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(200, cardJSON))
	for _, ts := range []upstream.TokenSource{failingSource{}, upstream.StaticToken("")} {
		c, err := upstream.New(srv.URL, ts)
		if err != nil {
			t.Fatal(err)
		}
		sl := &sleeps{}
		upstream.SetSleep(c, sl.sleep)
		_, err = c.GetCard(context.Background(), "r1")
		if err == nil || !strings.Contains(err.Error(), "access token") {
			t.Errorf("err = %v, want a token error", err)
		}
		if len(sl.delays()) != 0 {
			t.Errorf("a token error was retried")
		}
	}
	if n := len(sc.requests()); n != 0 {
		t.Errorf("server saw %d requests without a token", n)
	}
}

func TestCallMisuse(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(200, cardJSON))
	c, _ := newClient(t, srv.URL)
	tests := []struct {
		name      string
		op        string
		params    map[string]string
		body      any
		wantErr   string
		wantParam string // for *ArgumentError
	}{
		{name: "unknown operation", op: "deleteEverything", wantErr: "no operation"},
		{name: "host operation", op: "exchangeToken", body: map[string]string{}, wantErr: "not part of the open API"},
		{name: "undeclared param", op: "getCard", params: map[string]string{"roleId": "r1", "roleID": "r1"}, wantParam: "roleID", wantErr: "not a parameter of getCard"},
		{name: "missing required query", op: "getCard", wantParam: "roleId", wantErr: "is required"},
		{name: "empty required query", op: "getCard", params: map[string]string{"roleId": ""}, wantParam: "roleId", wantErr: "must not be empty"},
		{name: "missing path param", op: "setOpeningLines", body: map[string]string{"roleWelcome": "x"}, wantParam: "roleId", wantErr: "is required"},
		{name: "invalid UTF-8 query", op: "getCard", params: map[string]string{"roleId": "\xff"}, wantParam: "roleId", wantErr: "UTF-8"},
		{name: "body on a GET", op: "getCard", params: map[string]string{"roleId": "r1"}, body: map[string]string{}, wantErr: "takes no request body"},
		{name: "missing required body", op: "createCard", wantErr: "request body is required"},
		{name: "nil typed body", op: "createCard", body: (*upstream.CardCreateInput)(nil), wantErr: "request body is required"},
		{name: "invalid raw body", op: "uploadImage", body: json.RawMessage(`{"purpose":`), wantErr: "encode the request body"},
		{name: "non-object create body", op: "createCard", body: json.RawMessage(`["x"]`), wantErr: "JSON object"},
		{name: "unencodable body", op: "uploadImage", body: map[string]any{"f": func() {}}, wantErr: "encode the request body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Call(context.Background(), tt.op, tt.params, tt.body, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
			if tt.wantParam != "" {
				var argErr *upstream.ArgumentError
				if !errors.As(err, &argErr) || argErr.Param != tt.wantParam {
					t.Errorf("err = %#v, want *ArgumentError for %s", err, tt.wantParam)
				}
			}
		})
	}
	if n := len(sc.requests()); n != 0 {
		t.Errorf("server saw %d requests, want none", n)
	}
}

// TestRawBodyAndOut checks the pass-through path the tools use: raw JSON in, raw JSON out.
func TestRawBodyAndOut(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(200, cardJSON))
	c, _ := newClient(t, srv.URL)
	in := json.RawMessage(`{"roleName": "<Mira> & co", "tags": []}`)
	var out json.RawMessage
	if err := c.Call(context.Background(), "updateCardProfile", map[string]string{"roleId": "r1"}, in, &out); err != nil {
		t.Fatal(err)
	}
	if string(out) != cardJSON {
		t.Errorf("out = %s, want the body as sent", out)
	}
	if got := string(sc.requests()[0].Body); got != `{"roleName":"<Mira> & co","tags":[]}` {
		t.Errorf("body = %s", got)
	}
}

// TestCompactJSONBody checks that a CompactJSON body goes out byte for byte.
func TestCompactJSONBody(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(200, cardJSON))
	c, _ := newClient(t, srv.URL)
	in := upstream.CompactJSON(`{"roleName":"<Mira> & co","tags":[]}`)
	if err := c.Call(context.Background(), "updateCardProfile", map[string]string{"roleId": "r1"}, in, nil); err != nil {
		t.Fatal(err)
	}
	if got := string(sc.requests()[0].Body); got != string(in) {
		t.Errorf("body = %s, want %s", got, in)
	}
}

// TestCardExtra checks that fields the contract does not name survive decoding and encoding.
func TestCardExtra(t *testing.T) {
	t.Parallel()
	body := `{"roleId":"r1","roleName":"M","roleDesc":"","roleWelcome":"","welcomeAlternates":[],"prologue":[],"likes":12,"nested":{"a":[1,2]}}`
	srv, _ := serve(t, reply(200, body))
	c, _ := newClient(t, srv.URL)
	card, err := c.GetCard(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	if string(card.Extra["likes"]) != "12" || string(card.Extra["nested"]) != `{"a":[1,2]}` || len(card.Extra) != 2 {
		t.Errorf("Extra = %v", card.Extra)
	}
	again, err := json.Marshal(card)
	if err != nil {
		t.Fatal(err)
	}
	var m1, m2 map[string]any
	_ = json.Unmarshal([]byte(body), &m1)
	_ = json.Unmarshal(again, &m2)
	if fmt.Sprint(m1) != fmt.Sprint(m2) {
		t.Errorf("round trip:\n got %s\nwant %s", again, body)
	}
}

func TestSuccessBodyProblems(t *testing.T) {
	t.Parallel()
	big := `{"roleId":"r1","roleName":"` + strings.Repeat("x", 4096) + `","roleDesc":"","roleWelcome":"","welcomeAlternates":[],"prologue":[]}`
	tests := []struct {
		name    string
		step    step
		opts    []upstream.Option
		wantErr string
	}{
		{name: "malformed JSON", step: reply(200, `{"roleId": "r1",`), wantErr: "decode the 200 OK response"},
		{name: "HTML 200", step: replyRaw(200, "text/html", "<html>hello</html>"), wantErr: "decode the 200 OK response"},
		{name: "empty 200", step: reply(200, ""), wantErr: "decode the 200 OK response"},
		{name: "over the cap", step: reply(200, big), opts: []upstream.Option{upstream.WithMaxResponseBytes(1024)}, wantErr: "larger than 1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, sc := serve(t, tt.step)
			c, _ := newClient(t, srv.URL, tt.opts...)
			_, err := c.GetCard(context.Background(), "r1")
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			var apiErr *upstream.Error
			if errors.As(err, &apiErr) {
				t.Errorf("err is an *Error; a 2xx problem is not the service's error envelope")
			}
			if n := len(sc.requests()); n != 1 {
				t.Errorf("attempts = %d, want 1", n)
			}
		})
	}
	t.Run("within the cap", func(t *testing.T) {
		t.Parallel()
		srv, _ := serve(t, reply(200, big))
		c, _ := newClient(t, srv.URL, upstream.WithMaxResponseBytes(int64(len(big))))
		if _, err := c.GetCard(context.Background(), "r1"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSlowBody checks that a body still arriving at the deadline ends the call promptly.
func TestSlowBody(t *testing.T) {
	t.Parallel()
	slow := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, `{"roleId":"r1",`)
		http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	}
	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		opts []upstream.Option
	}{
		{"context deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}, nil},
		{"client timeout", func() (context.Context, context.CancelFunc) {
			return context.Background(), func() {}
		}, []upstream.Option{upstream.WithTimeout(200 * time.Millisecond)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, sc := serve(t, slow)
			c, sl := newClient(t, srv.URL, tt.opts...)
			ctx, cancel := tt.ctx()
			defer cancel()
			start := time.Now()
			_, err := c.GetCard(ctx, "r1")
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want context.DeadlineExceeded", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v", d)
			}
			if len(sc.requests()) != 1 || len(sl.delays()) != 0 {
				t.Errorf("requests = %d, delays = %v: a deadline must not be retried", len(sc.requests()), sl.delays())
			}
		})
	}
}

// TestTimeoutOnlyWithoutDeadline checks that WithTimeout does not shorten a caller's deadline.
func TestTimeoutOnlyWithoutDeadline(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(150 * time.Millisecond)
		reply(200, cardJSON)(w, r)
	})
	c, _ := newClient(t, srv.URL, upstream.WithTimeout(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.GetCard(ctx, "r1"); err != nil {
		t.Fatalf("GetCard with the caller's deadline: %v", err)
	}
}

func TestRedirects(t *testing.T) {
	t.Parallel()

	t.Run("to another origin is refused", func(t *testing.T) {
		t.Parallel()
		other, otherSc := serve(t, reply(200, cardJSON))
		for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
			srv, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.URL+r.URL.RequestURI(), code)
			})
			c, sl := newClient(t, srv.URL)
			_, err := c.GetCard(context.Background(), "r1")
			if !errors.Is(err, upstream.ErrCrossOriginRedirect) {
				t.Fatalf("%d: err = %v, want ErrCrossOriginRedirect", code, err)
			}
			if !strings.Contains(err.Error(), other.URL) {
				t.Errorf("err = %q, want it to name the other origin", err)
			}
			if len(sl.delays()) != 0 {
				t.Errorf("a refused redirect was retried")
			}
		}
		for _, r := range otherSc.requests() {
			if r.Header.Get("Authorization") != "" {
				t.Errorf("the other origin saw Authorization")
			}
		}
		if n := len(otherSc.requests()); n != 0 {
			t.Errorf("the other origin saw %d requests", n)
		}
	})

	t.Run("same origin is followed with the token", func(t *testing.T) {
		t.Parallel()
		srv, sc := serve(t,
			func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/open/v1/role/moved?"+r.URL.RawQuery, http.StatusTemporaryRedirect)
			},
			reply(200, `{"roleId":"r1","ok":true}`))
		c, _ := newClient(t, srv.URL)
		if _, err := c.SetOpeningLines(context.Background(), "r1", upstream.OpeningLinesInput{RoleWelcome: "Hi"}); err != nil {
			t.Fatal(err)
		}
		reqs := sc.requests()
		if len(reqs) != 2 {
			t.Fatalf("server saw %d requests, want 2", len(reqs))
		}
		second := reqs[1]
		if second.Path != "/open/v1/role/moved" || second.Header.Get("Authorization") != "Bearer "+secret {
			t.Errorf("redirected request: %s, Authorization %q", second.Path, second.Header.Get("Authorization"))
		}
		if string(second.Body) != `{"roleWelcome":"Hi"}` || second.Method != http.MethodPatch {
			t.Errorf("307 redirect lost the body or method: %s %s", second.Method, second.Body)
		}
	})

	t.Run("at most three", func(t *testing.T) {
		t.Parallel()
		srv, sc := serve(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, r.URL.RequestURI(), http.StatusFound)
		})
		c, _ := newClient(t, srv.URL, upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 1}))
		_, err := c.GetCard(context.Background(), "r1")
		if err == nil || !strings.Contains(err.Error(), "stopped after 3 redirects") {
			t.Fatalf("err = %v", err)
		}
		if n := len(sc.requests()); n != 4 {
			t.Errorf("server saw %d requests, want 4 (the call and 3 redirects)", n)
		}
	})
}
