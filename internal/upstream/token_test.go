package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

func TestTokenRedacted(t *testing.T) {
	t.Parallel()
	tok := upstream.Token(secret)
	st := upstream.StaticToken(secret)
	for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3s"} {
		for _, v := range []any{tok, st, &tok, &st, []upstream.Token{tok}, map[string]upstream.Token{"t": tok}, struct{ T upstream.Token }{tok}} {
			got := fmt.Sprintf(format, v)
			assertNoSecret(t, fmt.Sprintf("Sprintf(%q, %T)", format, v), got)
		}
	}
	if tok.String() != "[redacted]" || tok.GoString() != "[redacted]" || tok.LogValue().String() != "[redacted]" {
		t.Errorf("Token prints as %q / %q / %q", tok.String(), tok.GoString(), tok.LogValue())
	}
	if tok.Reveal() != secret {
		t.Errorf("Reveal = %q", tok.Reveal())
	}
	got, err := st.Token(context.Background())
	if err != nil || got.Reveal() != secret {
		t.Errorf("StaticToken.Token = %v, %v", got, err)
	}
}

// TestNoTokenLeaks drives successes, retries, errors and refusals through a client that logs
// at Debug level, and looks for the token in every error, printout and log line.
func TestNoTokenLeaks(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	other, _ := serve(t, reply(200, cardJSON))
	srv, sc := serve(t,
		reply(200, cardJSON),
		reply(503, env503), reply(200, cardJSON),
		reply(404, `{"error":"role_not_found","message":"No card."}`),
		func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, other.URL+"/x", http.StatusFound) },
	)
	c, _ := newClient(t, srv.URL, upstream.WithLogger(logger))
	var errs []error
	ctx := context.Background()
	for range 4 {
		_, err := c.GetCard(ctx, "r1?secret=no")
		errs = append(errs, err)
	}
	dead, _ := newClient(t, "http://"+closedAddr(t), upstream.WithLogger(logger))
	_, err := dead.GetMe(ctx)
	errs = append(errs, err)
	_, err = c.SetOpeningLines(ctx, "../x", upstream.OpeningLinesInput{})
	errs = append(errs, err)

	if got := sc.requests()[0].Header.Get("Authorization"); got != "Bearer "+secret {
		t.Fatalf("the server saw Authorization %q; the test token is not in play", got)
	}
	nonNil := 0
	for _, err := range errs {
		if err != nil {
			nonNil++
			assertNoSecret(t, "error", err.Error())
			assertNoSecret(t, "error %+v", fmt.Sprintf("%+v", err))
			assertNoSecret(t, "error %#v", fmt.Sprintf("%#v", err))
		}
	}
	if nonNil != 4 {
		t.Errorf("%d errors, want 4 (404, redirect, refused, bad path)", nonNil)
	}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		assertNoSecret(t, "client "+format, fmt.Sprintf(format, c))
		assertNoSecret(t, "client value "+format, fmt.Sprintf(format, *c))
	}
	logger.Info("token", "token", upstream.Token(secret), "static", upstream.StaticToken(secret))

	out := logs.String()
	assertNoSecret(t, "logs", out)
	if strings.Contains(out, "Authorization") || strings.Contains(out, "Bearer") {
		t.Errorf("logs mention a header: %s", out)
	}
	if strings.Contains(out, "secret=no") {
		t.Errorf("logs carry the query: %s", out)
	}
	// The logs carry what they should: a Debug line per attempt, a Warn line per retry.
	var debug, warn int
	for line := range strings.Lines(out) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		switch rec["level"] {
		case "DEBUG":
			debug++
			for _, k := range []string{"operation", "method", "path", "status", "attempt", "duration"} {
				if _, ok := rec[k]; !ok {
					t.Errorf("debug line lacks %s: %s", k, line)
				}
			}
			if rec["operation"] == "getCard" && rec["path"] != "/role/detail" {
				t.Errorf("path = %v, want the template", rec["path"])
			}
		case "WARN":
			warn++
			if rec["reason"] == nil {
				t.Errorf("warn line lacks a reason: %s", line)
			}
		}
	}
	if debug < 9 || warn < 4 {
		t.Errorf("%d debug and %d warn lines, want at least 9 and 4:\n%s", debug, warn, out)
	}
}
