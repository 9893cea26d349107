package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

const (
	env429 = `{"error":"rate_limited","message":"Too many requests.","retryable":true}`
	env503 = `{"error":"unavailable","message":"The service is busy.","retryable":true}`
)

func TestRetryIdempotent(t *testing.T) {
	t.Parallel()
	httpDate := func() string { return time.Now().Add(5 * time.Second).UTC().Format(http.TimeFormat) }
	ok := reply(200, cardJSON)
	tests := []struct {
		name         string
		steps        []step
		wantAttempts int
		wantStatus   int // 0: success expected
		checkDelays  func(t *testing.T, d []time.Duration)
	}{
		{
			name:  "429 Retry-After seconds",
			steps: []step{reply(429, env429, "Retry-After", "2"), ok}, wantAttempts: 2,
			checkDelays: wantDelays(2 * time.Second),
		},
		{
			name: "429 Retry-After HTTP date",
			steps: []step{func(w http.ResponseWriter, r *http.Request) {
				reply(429, env429, "Retry-After", httpDate())(w, r)
			}, ok},
			wantAttempts: 2,
			checkDelays: func(t *testing.T, d []time.Duration) {
				if len(d) != 1 || d[0] < 3*time.Second || d[0] > 5*time.Second {
					t.Errorf("delays = %v, want one of about 5s", d)
				}
			},
		},
		{
			name:  "Retry-After capped at 30s",
			steps: []step{reply(429, env429, "Retry-After", "600"), ok}, wantAttempts: 2,
			checkDelays: wantDelays(30 * time.Second),
		},
		{
			name:  "429 without envelope",
			steps: []step{replyRaw(429, "text/plain", "slow down"), ok}, wantAttempts: 2,
		},
		{name: "503 then success", steps: []step{reply(503, env503), ok}, wantAttempts: 2, checkDelays: backoffWithin(100 * time.Millisecond)},
		{name: "502 HTML then success", steps: []step{replyRaw(502, "text/html", "<html>Bad Gateway</html>"), ok}, wantAttempts: 2},
		{name: "504 empty then success", steps: []step{replyRaw(504, "", ""), ok}, wantAttempts: 2},
		{
			name:  "retryable envelope then success",
			steps: []step{reply(409, `{"error":"conflict","message":"Busy, try again.","retryable":true}`), ok}, wantAttempts: 2,
		},
		{name: "connection closed then success", steps: []step{hangUp(false), ok}, wantAttempts: 2},
		{name: "connection reset then success", steps: []step{hangUp(true), ok}, wantAttempts: 2},
		{
			name:  "not retried: 404",
			steps: []step{reply(404, `{"error":"role_not_found","message":"No such card."}`)}, wantAttempts: 1, wantStatus: 404,
		},
		{
			name:  "not retried: 500 with retryable false",
			steps: []step{reply(500, `{"error":"internal","message":"Broken.","retryable":false}`)}, wantAttempts: 1, wantStatus: 500,
		},
		{
			name: "exhausted after MaxAttempts", steps: []step{reply(503, env503)}, wantAttempts: 4, wantStatus: 503,
			checkDelays: func(t *testing.T, d []time.Duration) {
				caps := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
				if len(d) != len(caps) {
					t.Fatalf("delays = %v, want %d", d, len(caps))
				}
				for i := range d {
					if d[i] < 0 || d[i] > caps[i] {
						t.Errorf("delay %d = %v, want within [0, %v]", i, d[i], caps[i])
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, sc := serve(t, tt.steps...)
			c, sl := newClient(t, srv.URL)
			card, err := c.GetCard(context.Background(), "r1")
			if got := len(sc.requests()); got != tt.wantAttempts {
				t.Errorf("attempts = %d, want %d", got, tt.wantAttempts)
			}
			if tt.wantStatus == 0 {
				if err != nil {
					t.Fatalf("GetCard: %v", err)
				}
				if card.RoleID != "r1" {
					t.Errorf("card = %+v", card)
				}
			} else {
				var apiErr *upstream.Error
				if !errors.As(err, &apiErr) || apiErr.Status != tt.wantStatus {
					t.Fatalf("err = %v, want *Error with status %d", err, tt.wantStatus)
				}
			}
			if tt.checkDelays != nil {
				tt.checkDelays(t, sl.delays())
			}
		})
	}
}

func wantDelays(want ...time.Duration) func(*testing.T, []time.Duration) {
	return func(t *testing.T, got []time.Duration) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("delays = %v, want %v", got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("delays = %v, want %v", got, want)
			}
		}
	}
}

func backoffWithin(ceiling time.Duration) func(*testing.T, []time.Duration) {
	return func(t *testing.T, got []time.Duration) {
		t.Helper()
		if len(got) != 1 || got[0] < 0 || got[0] > ceiling {
			t.Errorf("delays = %v, want one within [0, %v]", got, ceiling)
		}
	}
}

// TestRetryNonIdempotent checks that POSTs the contract does not mark idempotent are retried
// only when the request was certainly not processed: 429 and a refused connection.
func TestRetryNonIdempotent(t *testing.T) {
	t.Parallel()
	calls := []struct {
		op     string
		okBody string
		call   func(context.Context, *upstream.Client) error
	}{
		{"uploadImage", `{"imageId":"i1","url":"https://cdn.example.com/i1.png","width":1,"height":1}`, func(ctx context.Context, c *upstream.Client) error {
			_, err := c.UploadImage(ctx, upstream.ImageUploadInput{Purpose: "avatar", ContentType: "image/png", DataBase64: "iVBORw0KGgo="})
			return err
		}},
		{"writeWorldbookDocument", `{"createdEntryIds":[],"updatedCount":0,"deletedCount":0,"bound":true}`, func(ctx context.Context, c *upstream.Client) error {
			_, err := c.WriteWorldbookDocument(ctx, "w1", upstream.WorldbookDocumentInput{Binding: &upstream.WorldbookBinding{RoleID: "r1"}})
			return err
		}},
	}
	faults := []struct {
		name         string
		first        step
		refuseDial   bool
		wantAttempts int // requests the server saw
		wantOK       bool
	}{
		{name: "503 not retried", first: reply(503, env503), wantAttempts: 1},
		{name: "502 HTML not retried", first: replyRaw(502, "text/html", "<h1>Bad Gateway</h1>"), wantAttempts: 1},
		{name: "connection closed not retried", first: hangUp(false), wantAttempts: 1},
		{name: "connection reset not retried", first: hangUp(true), wantAttempts: 1},
		{name: "retryable envelope not retried", first: reply(409, `{"error":"conflict","message":"x","retryable":true}`), wantAttempts: 1},
		{name: "429 retried", first: reply(429, env429, "Retry-After", "1"), wantAttempts: 2, wantOK: true},
		{name: "connection refused retried", refuseDial: true, wantAttempts: 1, wantOK: true},
	}
	for _, cl := range calls {
		for _, f := range faults {
			t.Run(cl.op+"/"+f.name, func(t *testing.T) {
				t.Parallel()
				steps := []step{reply(200, cl.okBody)}
				if f.first != nil {
					steps = append([]step{f.first}, steps...)
				}
				srv, sc := serve(t, steps...)
				var opts []upstream.Option
				if f.refuseDial {
					opts = append(opts, upstream.WithTransport(refuseFirstDials(t, 1)))
				}
				c, sl := newClient(t, srv.URL, opts...)
				err := cl.call(context.Background(), c)
				if got := len(sc.requests()); got != f.wantAttempts {
					t.Errorf("server saw %d requests, want %d", got, f.wantAttempts)
				}
				if f.wantOK && err != nil {
					t.Fatalf("err = %v, want success after a retry", err)
				}
				if !f.wantOK && err == nil {
					t.Fatal("err = nil, want the first failure")
				}
				if f.wantOK && len(sl.delays()) != 1 {
					t.Errorf("delays = %v, want one retry", sl.delays())
				}
				if !f.wantOK && len(sl.delays()) != 0 {
					t.Errorf("delays = %v, want no retry", sl.delays())
				}
			})
		}
	}
}

func TestRetryRefusedIdempotent(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(200, cardJSON))
	c, sl := newClient(t, srv.URL, upstream.WithTransport(refuseFirstDials(t, 2)))
	if _, err := c.GetCard(context.Background(), "r1"); err != nil {
		t.Fatalf("GetCard: %v", err)
	}
	if got := len(sc.requests()); got != 1 {
		t.Errorf("server saw %d requests, want 1", got)
	}
	if got := len(sl.delays()); got != 2 {
		t.Errorf("retries = %d, want 2", got)
	}
}

func TestRetryRefusedExhausted(t *testing.T) {
	t.Parallel()
	c, sl := newClient(t, "http://"+closedAddr(t))
	_, err := c.GetMe(context.Background())
	if err == nil {
		t.Fatal("GetMe against a closed port succeeded")
	}
	if !strings.Contains(err.Error(), "card service: getMe: GET /me:") {
		t.Errorf("err = %q, want it to name the operation and path template", err)
	}
	if got := len(sl.delays()); got != 3 {
		t.Errorf("retries = %d, want 3", got)
	}
}

// TestCreateCardIdempotencyKey checks that every attempt of a create carries one key.
func TestCreateCardIdempotencyKey(t *testing.T) {
	t.Parallel()
	created := `{"roleId":"r9","roleVisibility":"private","reviewStatus":"none"}`
	tests := []struct {
		name    string
		call    func(context.Context, *upstream.Client) (string, error) // returns the key it knows, "" when none
		wantKey string                                                  // "" means generated
	}{
		{"typed, generated", func(ctx context.Context, c *upstream.Client) (string, error) {
			_, key, err := c.CreateCard(ctx, upstream.CardCreateInput{RoleName: "Mira"})
			return key, err
		}, ""},
		{"typed, caller's key", func(ctx context.Context, c *upstream.Client) (string, error) {
			_, key, err := c.CreateCard(ctx, upstream.CardCreateInput{RoleName: "Mira", IdempotencyKey: "mine-1"})
			return key, err
		}, "mine-1"},
		{"raw, generated", func(ctx context.Context, c *upstream.Client) (string, error) {
			var out json.RawMessage
			return "", c.Call(ctx, "createCard", nil, json.RawMessage(`{"roleName":"Mira <3 & co"}`), &out)
		}, ""},
		{"raw, empty key replaced", func(ctx context.Context, c *upstream.Client) (string, error) {
			return "", c.Call(ctx, "createCard", nil, json.RawMessage(`{"roleName":"Mira","idempotencyKey":""}`), nil)
		}, ""},
		{"raw, caller's key", func(ctx context.Context, c *upstream.Client) (string, error) {
			return "", c.Call(ctx, "createCard", nil, json.RawMessage(`{"idempotencyKey":"mine-2","roleName":"Mira"}`), nil)
		}, "mine-2"},
		{"map body, generated", func(ctx context.Context, c *upstream.Client) (string, error) {
			return "", c.Call(ctx, "createCard", nil, map[string]any{"roleName": "Mira"}, nil)
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, sc := serve(t, reply(503, env503), hangUp(true), reply(429, env429), reply(201, created))
			c, _ := newClient(t, srv.URL)
			known, err := tt.call(context.Background(), c)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			reqs := sc.requests()
			if len(reqs) != 4 {
				t.Fatalf("server saw %d requests, want 4", len(reqs))
			}
			keys := map[string]bool{}
			for _, r := range reqs {
				var body map[string]any
				if err := json.Unmarshal(r.Body, &body); err != nil {
					t.Fatalf("body %q: %v", r.Body, err)
				}
				if body["roleName"] == nil {
					t.Errorf("body %s lost roleName", r.Body)
				}
				k, _ := body["idempotencyKey"].(string)
				keys[k] = true
			}
			if len(keys) != 1 {
				t.Fatalf("server saw keys %v, want exactly one", keys)
			}
			var key string
			for k := range keys {
				key = k
			}
			switch {
			case tt.wantKey != "" && key != tt.wantKey:
				t.Errorf("key = %q, want the caller's %q", key, tt.wantKey)
			case tt.wantKey == "" && (!strings.HasPrefix(key, "cw-") || len(key) != 35):
				t.Errorf("key = %q, want cw- and 32 hex digits", key)
			}
			if known != "" && known != key {
				t.Errorf("CreateCard returned key %q, server saw %q", known, key)
			}
			if strings.Contains(string(reqs[0].Body), `\u003c`) {
				t.Errorf("body was HTML-escaped: %s", reqs[0].Body)
			}
		})
	}
}

func TestCreateCardKeysDiffer(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, reply(201, `{"roleId":"r9","roleVisibility":"private","reviewStatus":"none"}`))
	c, _ := newClient(t, srv.URL)
	_, k1, err1 := c.CreateCard(context.Background(), upstream.CardCreateInput{RoleName: "A"})
	_, k2, err2 := c.CreateCard(context.Background(), upstream.CardCreateInput{RoleName: "A"})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if k1 == k2 {
		t.Errorf("two creates share the key %q", k1)
	}
}

// TestRetryStopsAtDeadline checks that a wait that would pass the deadline is not begun.
func TestRetryStopsAtDeadline(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(429, env429, "Retry-After", "20"), reply(200, cardJSON))
	c, sl := newClient(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := c.GetCard(ctx, "r1")
	var apiErr *upstream.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 429 || apiErr.RetryAfter != 20*time.Second {
		t.Fatalf("err = %v, want the 429 *Error with RetryAfter 20s", err)
	}
	if len(sc.requests()) != 1 || len(sl.delays()) != 0 {
		t.Errorf("requests = %d, delays = %v; want 1 and none", len(sc.requests()), sl.delays())
	}
}

// TestNoRetryOnCancel checks that a cancelled call returns the context's error at once.
func TestNoRetryOnCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	srv, sc := serve(t, func(w http.ResponseWriter, r *http.Request) {
		cancel()
		<-r.Context().Done()
	})
	c, sl := newClient(t, srv.URL)
	_, err := c.GetCard(ctx, "r1")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(sc.requests()) != 1 || len(sl.delays()) != 0 {
		t.Errorf("requests = %d, delays = %v; want 1 and none", len(sc.requests()), sl.delays())
	}
}

// TestCancelDuringWait checks that a cancellation during the wait ends the call with both errors.
func TestCancelDuringWait(t *testing.T) {
	t.Parallel()
	srv, _ := serve(t, reply(503, env503))
	c, _ := newClient(t, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	upstream.SetSleep(c, func(context.Context, time.Duration) error { cancel(); return context.Canceled })
	_, err := c.GetCard(ctx, "r1")
	var apiErr *upstream.Error
	if !errors.Is(err, context.Canceled) || !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want context.Canceled wrapping the last *Error", err)
	}
}

func TestRetryPolicyOption(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(503, env503))
	c, sl := newClient(t, srv.URL, upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Second, MaxDelay: time.Second}))
	if _, err := c.GetMe(context.Background()); err == nil {
		t.Fatal("want an error")
	}
	if len(sc.requests()) != 2 {
		t.Errorf("attempts = %d, want 2", len(sc.requests()))
	}
	if d := sl.delays(); len(d) != 1 || d[0] > time.Second {
		t.Errorf("delays = %v", d)
	}
}

// TestRealSleep runs one retry with the real wait, to cover it.
func TestRealSleep(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(503, env503), reply(200, cardJSON))
	c, err := upstream.New(srv.URL, upstream.StaticToken(secret),
		upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetCard(context.Background(), "r1"); err != nil {
		t.Fatal(err)
	}
	if len(sc.requests()) != 2 {
		t.Errorf("attempts = %d, want 2", len(sc.requests()))
	}
}
