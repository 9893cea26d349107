package authtest

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestSecretsFind(t *testing.T) {
	t.Parallel()
	var s Secrets
	s.Add("", "rt-short-secret")
	tokenish := strings.Repeat("Ab0_-", 9)
	tests := []struct {
		out          string
		known, shape int
	}{
		{`{"msg":"refreshed","client":"c1"}`, 0, 0},
		{`{"msg":"oops","token":"rt-short-secret"}`, 1, 0},
		{"line one\n" + `{"code":"` + tokenish + `"}`, 0, 1},
		{"Authorization: Bearer abcdefghijklmnopqrstuvwxyz", 0, 1},
	}
	for _, tt := range tests {
		if got := len(s.find(tt.out, false)); got != tt.known {
			t.Errorf("find(%q, false): %d findings, want %d", tt.out, got, tt.known)
		}
		if got := len(s.find(tt.out, true)); got != tt.known+tt.shape {
			t.Errorf("find(%q, true): %d findings, want %d", tt.out, got, tt.known+tt.shape)
		}
	}
}

func TestClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	c := NewClock(start)
	c.Advance(time.Hour)
	if got := c.Now(); !got.Equal(start.Add(time.Hour)) {
		t.Errorf("Now = %v, want an hour after %v", got, start)
	}
}

func TestServe(t *testing.T) {
	t.Parallel()
	var named string
	url := Serve(t, func(u string) http.Handler {
		named = u
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, named) })
	})
	resp, err := http.Get(url + "/x")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if named != url || string(body) != url {
		t.Errorf("the handler was given %q and served %q; the server is at %q", named, body, url)
	}
}
