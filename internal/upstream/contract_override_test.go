package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

// TestWithContractChangesTheRequest: a corrected contract changes the request the service
// receives (here the trial upsert as POST), and nothing else.
func TestWithContractChangesTheRequest(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPut {
			w.WriteHeader(http.StatusMethodNotAllowed)
			_, _ = w.Write([]byte(`{"error":"method_not_allowed","message":"Use POST."}`))
			return
		}
		_, _ = w.Write([]byte(`{"clientKey":"k-1","roleId":"r1"}`))
	}))
	defer srv.Close()
	table, err := schema.LoadOverride("fix.json", []byte(`{"openapi":"3.1.0","paths":{"/trial-cards/{clientKey}":{"post":{
		"operationId":"upsertTrialCard","parameters":[{"$ref":"#/components/parameters/ClientKeyPath"}],
		"requestBody":{"required":true,"content":{"application/json":{"schema":{"$ref":"#/components/schemas/TrialUpsertInput"}}}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	body := json.RawMessage(`{"card":{"roleName":"Mira"}}`)
	for _, tc := range []struct {
		name   string
		opts   []upstream.Option
		want   string
		status int
	}{
		{"embedded contract", nil, "PUT /open/v1/trial-cards/k-1", http.StatusMethodNotAllowed},
		{"corrected contract", []upstream.Option{upstream.WithContract(table)}, "POST /open/v1/trial-cards/k-1", 0},
	} {
		c, err := upstream.New(srv.URL, upstream.StaticToken("t"), append(tc.opts, upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 1}))...)
		if err != nil {
			t.Fatal(err)
		}
		var out json.RawMessage
		err = c.Call(context.Background(), "upsertTrialCard", map[string]string{"clientKey": "k-1"}, body, &out)
		var apiErr *upstream.Error
		switch {
		case tc.status == 0 && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.status != 0 && (!errors.As(err, &apiErr) || apiErr.Status != tc.status):
			t.Errorf("%s: %v, want status %d", tc.name, err, tc.status)
		}
		mu.Lock()
		last := seen[len(seen)-1]
		mu.Unlock()
		if last != tc.want {
			t.Errorf("%s: the service saw %s, want %s", tc.name, last, tc.want)
		}
	}
}

// TestDeleteAfterLostAnswer: a DELETE whose answer was lost (the connection broke after the
// service applied it) and whose retry finds nothing succeeded; a DELETE of nothing at the
// first attempt is still not found.
func TestDeleteAfterLostAnswer(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 && r.URL.Path == "/open/v1/trial-cards/lost" {
			// Applied, then the connection breaks before the answer.
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Close()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"trial_not_found","message":"No live trial card exists under this clientKey."}`))
	}))
	defer srv.Close()
	c, err := upstream.New(srv.URL, upstream.StaticToken("t"), upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 3}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Call(context.Background(), "deleteTrialCard", map[string]string{"clientKey": "lost"}, nil, nil); err != nil {
		t.Errorf("the delete whose answer was lost: %v, want success", err)
	}
	var apiErr *upstream.Error
	err = c.Call(context.Background(), "deleteTrialCard", map[string]string{"clientKey": "never"}, nil, nil)
	if !errors.As(err, &apiErr) || apiErr.Code != "trial_not_found" {
		t.Errorf("the delete of nothing: %v, want trial_not_found", err)
	}
}
