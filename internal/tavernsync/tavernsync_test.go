package tavernsync

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

func TestReadSourceFormsAndRefusals(t *testing.T) {
	ctx := context.Background()
	ptr := func(s string) *string { return &s }
	for _, tt := range []struct {
		name string
		src  Source
		want string // the data, or the failure's code
		code bool
	}{
		{name: "nothing", src: Source{}, want: CodeInvalidArguments, code: true},
		{name: "two forms", src: Source{DataBase64: ptr("eA=="), JSON: []byte(`{}`)}, want: CodeInvalidArguments, code: true},
		{name: "base64 with line breaks", src: Source{DataBase64: ptr("eyJh\nIjox fQ==")}, want: `{"a":1}`},
		{name: "unpadded base64", src: Source{DataBase64: ptr("eyJhIjoxfQ")}, want: `{"a":1}`},
		{name: "not base64", src: Source{DataBase64: ptr("*")}, want: CodeInvalidArguments, code: true},
		{name: "json object", src: Source{JSON: []byte(` {"a":1} `)}, want: `{"a":1}`},
		{name: "json as a string", src: Source{JSON: []byte(`"{\"a\":1}"`)}, want: `{"a":1}`},
		{name: "path without local files", src: Source{Path: ptr("/etc/passwd")}, want: CodePathNotAllowed, code: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data, err := readSource(ctx, Env{}, tt.src)
			if !tt.code {
				if err != nil || string(data) != tt.want {
					t.Fatalf("readSource = %q, %v; want %q", data, err, tt.want)
				}
				return
			}
			var f *Failure
			if !errors.As(err, &f) || f.Code != tt.want {
				t.Fatalf("readSource error = %v; want a Failure %s", err, tt.want)
			}
		})
	}
}

func TestReadSourceAsksRootsOnlyOutsideAllowedDirs(t *testing.T) {
	allowed, other := t.TempDir(), t.TempDir()
	for _, d := range []string{allowed, other} {
		if err := os.WriteFile(filepath.Join(d, "card.json"), []byte(`{"a":1}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	asked := 0
	env := Env{LocalFiles: &LocalFiles{AllowDirs: []string{allowed}}, Roots: func(context.Context) ([]string, error) {
		asked++
		return nil, nil
	}}
	data, err := readSource(context.Background(), env, Source{Path: ptr(filepath.Join(allowed, "card.json"))})
	if err != nil || string(data) != `{"a":1}` || asked != 0 {
		t.Fatalf("inside an allowed folder: %q, %v, roots asked %d times", data, err, asked)
	}
	_, err = readSource(context.Background(), env, Source{Path: ptr(filepath.Join(other, "card.json"))})
	var f *Failure
	if !errors.As(err, &f) || f.Code != CodePathNotAllowed || asked != 1 {
		t.Fatalf("outside the allowed folder: %v, roots asked %d times", err, asked)
	}
}

func ptr(s string) *string { return &s }

func TestInsideAny(t *testing.T) {
	dirs := []string{"/a/b"}
	for path, want := range map[string]bool{"/a/b/c": true, "/a/b/c/d": true, "/a/b": false, "/a/bc": false, "/a": false, "/x/a/b/c": false} {
		if got := insideAny(path, dirs); got != want {
			t.Errorf("insideAny(%q) = %v, want %v", path, got, want)
		}
	}
}

func TestOrderEntriesKeepsTheImportedBlockInFileOrder(t *testing.T) {
	list := func(ids ...string) []upstream.WorldbookEntry {
		out := make([]upstream.WorldbookEntry, len(ids))
		for i, id := range ids {
			out[i] = upstream.WorldbookEntry{EntryID: id}
		}
		return out
	}
	// The service lists by sortOrder: x (added later) first, then the imported c, a, b, then y.
	got := orderEntries(list("x", "c", "a", "b", "y"), []string{"a", "b", "c", "gone"})
	var ids []string
	for _, e := range got {
		ids = append(ids, e.EntryID)
	}
	if want := []string{"x", "a", "b", "c", "y"}; !slices.Equal(ids, want) {
		t.Fatalf("orderEntries = %v, want %v", ids, want)
	}
}

func TestFailureEnvelope(t *testing.T) {
	f := &Failure{Code: CodeInvalidFile, Message: "No card.", Detail: map[string]any{"argument": "source"}}
	env := f.Envelope()
	if env["error"] != "invalid_file" || env["message"] != "No card." || env["retryable"] != false || env["detail"] == nil {
		t.Fatalf("Envelope = %v", env)
	}
	if (&Failure{Code: "x"}).Envelope()["detail"] != nil {
		t.Fatal("an envelope without detail has one")
	}
}

func TestOutcomeWithoutTheCallersClassification(t *testing.T) {
	ctx := context.Background()
	if _, code, internal := (Env{}).outcome(ctx, &Failure{Code: CodeConflict}); code != CodeConflict || internal {
		t.Errorf("a Failure: %s, internal %v", code, internal)
	}
	if _, code, internal := (Env{}).outcome(ctx, &upstream.Error{Code: "not_found", Status: 404}); code != "not_found" || internal {
		t.Errorf("an upstream error: %s, internal %v", code, internal)
	}
	if _, code, internal := (Env{}).outcome(ctx, errors.New("boom")); code != "internal" || !internal {
		t.Errorf("another error: %s, internal %v", code, internal)
	}
	called := false
	env := Env{Outcome: func(context.Context, error) (map[string]any, string, bool) { called = true; return nil, "x", false }}
	if _, code, _ := env.outcome(ctx, errors.New("boom")); code != "x" || !called {
		t.Errorf("the caller's classification was not used: %s", code)
	}
}
