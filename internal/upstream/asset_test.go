package upstream_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

func TestFetchAsset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	img := "\x89PNG\r\n\x1a\nrest-of-image"
	srv, rec := serve(t,
		replyRaw(http.StatusOK, "image/png", img),
		reply(http.StatusNotFound, `{"error":"not_found","message":"No image with this imageId exists.","retryable":false}`),
		replyRaw(http.StatusOK, "image/png", strings.Repeat("x", 100)),
		replyRaw(http.StatusServiceUnavailable, "text/plain", "busy"),
		replyRaw(http.StatusOK, "image/png", img),
	)
	c, sleeps := newClient(t, srv.URL)

	data, ct, err := c.FetchAsset(ctx, srv.URL+"/images/img_1", 1<<20)
	if err != nil || string(data) != img || ct != "image/png" {
		t.Fatalf("FetchAsset = %q, %q, %v", data, ct, err)
	}
	reqs := rec.requests()
	if reqs[0].Method != http.MethodGet || reqs[0].Path != "/images/img_1" || reqs[0].Header.Get("Authorization") != "Bearer "+secret {
		t.Errorf("request: %+v", reqs[0])
	}

	_, _, err = c.FetchAsset(ctx, srv.URL+"/images/img_2", 1<<20)
	var apiErr *upstream.Error
	if !errors.As(err, &apiErr) || apiErr.Code != "not_found" || apiErr.Status != http.StatusNotFound {
		t.Errorf("404: %v", err)
	}
	if _, _, err := c.FetchAsset(ctx, srv.URL+"/images/big", 10); err == nil || !strings.Contains(err.Error(), "larger than 10 bytes") {
		t.Errorf("over the cap: %v", err)
	}
	// A 503 is retried like a read.
	if data, _, err := c.FetchAsset(ctx, srv.URL+"/images/img_1", 1<<20); err != nil || string(data) != img || len(sleeps.delays()) != 1 {
		t.Errorf("after a 503: %q, %v, %d waits", data, err, len(sleeps.delays()))
	}

	before := len(rec.requests())
	for _, u := range []string{"https://cdn.example.com/images/img_1", "/images/img_1", "http://user:pw@" + strings.TrimPrefix(srv.URL, "http://") + "/x"} {
		_, _, err := c.FetchAsset(ctx, u, 1<<20)
		if err == nil {
			t.Errorf("%s: fetched", u)
		}
		assertNoSecret(t, "error", err.Error())
	}
	if _, _, err := c.FetchAsset(ctx, "https://cdn.example.com/a.png", 0); !errors.Is(err, upstream.ErrForeignAsset) {
		t.Errorf("foreign origin: %v", err)
	}
	if n := len(rec.requests()) - before; n != 0 {
		t.Errorf("%d requests sent for refused URLs", n)
	}
}
