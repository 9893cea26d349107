package upstream_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

func TestPathSegment(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want   string
		wantReason string // substring of the refusal, "" when accepted
	}{
		{in: "r1", want: "r1"},
		{in: "a b", want: "a%20b"},
		{in: "é", want: "%C3%A9"},
		{in: "a:b@c", want: "a:b@c"},
		{in: "a;b,c", want: "a%3Bb%2Cc"},
		{in: "...", want: "..."},
		{in: ".a", want: ".a"},
		{in: "", wantReason: "empty"},
		{in: ".", wantReason: `"."`},
		{in: "..", wantReason: `".."`},
		{in: "../x", wantReason: "'/'"},
		{in: "a/b", wantReason: "'/'"},
		{in: `a\b`, wantReason: `'\\'`},
		{in: "%2F", wantReason: "'%'"},
		{in: "a%2e", wantReason: "'%'"},
		{in: "a?b", wantReason: "'?'"},
		{in: "a#b", wantReason: "'#'"},
		{in: "a\x00b", wantReason: "control"},
		{in: "a\nb", wantReason: "control"},
		{in: "a\x7f", wantReason: "control"},
		{in: "a\u0085", wantReason: "control"},
		{in: "\xff", wantReason: "UTF-8"},
	}
	for _, tt := range tests {
		got, err := upstream.PathSegment(tt.in)
		if tt.wantReason == "" {
			if err != nil || got != tt.want {
				t.Errorf("PathSegment(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
			continue
		}
		var argErr *upstream.ArgumentError
		if !errors.As(err, &argErr) || !strings.Contains(argErr.Reason, tt.wantReason) {
			t.Errorf("PathSegment(%q) = %q, %v; want an *ArgumentError about %s", tt.in, got, err, tt.wantReason)
		}
	}
}

// TestPathParamsRefusedBeforeSending checks that no request leaves with an unsafe path parameter.
func TestPathParamsRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(200, `{}`))
	c, _ := newClient(t, srv.URL)
	ctx := context.Background()
	bad := []string{"../x", "a/b", "%2F", "..", ".", "", "a\x00b", "a\r\nb", `..\x`, "x?y=1", "x#y", "\xc3"}
	calls := map[string]func(string) error{
		"roleId": func(v string) error {
			_, err := c.SetOpeningLines(ctx, v, upstream.OpeningLinesInput{RoleWelcome: "x"})
			return err
		},
		"worldbookId": func(v string) error {
			_, err := c.WriteWorldbookDocument(ctx, v, upstream.WorldbookDocumentInput{})
			return err
		},
		"clientKey": func(v string) error {
			_, err := c.DeleteTrialCard(ctx, v)
			return err
		},
	}
	for param, call := range calls {
		for _, v := range bad {
			err := call(v)
			var argErr *upstream.ArgumentError
			if !errors.As(err, &argErr) || argErr.Param != param {
				t.Errorf("%s %q: err = %v, want *ArgumentError for %s", param, v, err, param)
			}
		}
	}
	if n := len(sc.requests()); n != 0 {
		t.Errorf("server saw %d requests, want none", n)
	}
}

func TestPathParamEscaped(t *testing.T) {
	t.Parallel()
	srv, sc := serve(t, reply(200, `{"roleId":"x","ok":true}`))
	c, _ := newClient(t, srv.URL)
	if _, err := c.SetOpeningLines(context.Background(), "a b;é", upstream.OpeningLinesInput{RoleWelcome: "x"}); err != nil {
		t.Fatal(err)
	}
	r := sc.requests()[0]
	if r.EscapedURI != "/open/v1/role/a%20b%3B%C3%A9/welcome" || r.Path != "/open/v1/role/a b;é/welcome" {
		t.Errorf("URI %q, path %q", r.EscapedURI, r.Path)
	}
}

func TestArgumentErrorCapsValue(t *testing.T) {
	t.Parallel()
	_, err := upstream.PathSegment(strings.Repeat("é", 200) + "/")
	var argErr *upstream.ArgumentError
	if !errors.As(err, &argErr) {
		t.Fatal(err)
	}
	if len(argErr.Value) > 100+len("…") || !utf8.ValidString(argErr.Value) {
		t.Errorf("Value = %q (%d bytes)", argErr.Value, len(argErr.Value))
	}
	if len(err.Error()) > 200 {
		t.Errorf("Error() is %d bytes", len(err.Error()))
	}
}

func FuzzPathSegment(f *testing.F) {
	for _, s := range []string{
		"r1", "", ".", "..", "...", "../x", "a/b", "%2F", "%2e%2e", `a\b`, "a?b", "a#b", "a\x00", "a\x7f",
		"é", "a b", "\xff", "\xc3", ":@!$&'()*+,;=", "~", "\u2215", "\uff0e\uff0e", "a\u0085b", "\ufeff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := upstream.PathSegment(s)
		if err != nil {
			var argErr *upstream.ArgumentError
			if !errors.As(err, &argErr) || argErr.Reason == "" {
				t.Fatalf("PathSegment(%q): %v is not an *ArgumentError with a reason", s, err)
			}
			return
		}
		if strings.ContainsAny(out, `/\?#`) {
			t.Fatalf("PathSegment(%q) = %q", s, out)
		}
		dec, err := url.PathUnescape(out)
		if err != nil || dec != s {
			t.Fatalf("PathSegment(%q) = %q, which unescapes to %q, %v", s, out, dec, err)
		}
		if dec == "." || dec == ".." || dec == "" {
			t.Fatalf("PathSegment(%q) accepted a dot segment", s)
		}
		u, err := url.Parse("https://h/open/v1/role/" + out + "/welcome")
		if err != nil {
			t.Fatalf("URL with %q: %v", out, err)
		}
		if u.Path != "/open/v1/role/"+s+"/welcome" || u.RawQuery != "" || u.Fragment != "" {
			t.Fatalf("URL with %q parses to path %q query %q fragment %q", out, u.Path, u.RawQuery, u.Fragment)
		}
	})
}
