package taverntest

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what Errorf reports.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

type options struct{ Whole bool }

type entry struct {
	Name    string
	Keys    []string
	Options *options
	Extra   map[string]any
}

type book struct {
	Name    string
	Entries []entry
}

type hidden struct{ n int }

func TestDiffFields(t *testing.T) {
	t.Parallel()
	base := func() *book {
		return &book{Name: "b", Entries: []entry{{Name: "e", Keys: []string{"k"}, Options: &options{}, Extra: map[string]any{"x": 1}}}}
	}
	tests := []struct {
		name    string
		nilWant bool
		edit    func(*book) *book
		fails   []string // how the failures start, in order
	}{
		{name: "same", edit: func(b *book) *book { return b }},
		{name: "nil both", nilWant: true, edit: func(*book) *book { return nil }},
		{name: "nil got", edit: func(*book) *book { return nil }, fails: []string{"book:"}},
		{name: "name", edit: func(b *book) *book { b.Name = "c"; return b }, fails: []string{"book.Name:"}},
		{name: "entry count", edit: func(b *book) *book { b.Entries = append(b.Entries, entry{}); return b }, fails: []string{"book.Entries: want 1 elements, got 2"}},
		{name: "entry key", edit: func(b *book) *book { b.Entries[0].Keys = []string{"j"}; return b }, fails: []string{"book.Entries[0].Keys:"}},
		{name: "nil keys", edit: func(b *book) *book { b.Entries[0].Keys = nil; return b }, fails: []string{"book.Entries[0].Keys:"}},
		{name: "option", edit: func(b *book) *book { b.Entries[0].Options.Whole = true; return b }, fails: []string{"book.Entries[0].Options.Whole:"}},
		{name: "no options", edit: func(b *book) *book { b.Entries[0].Options = nil; return b }, fails: []string{"book.Entries[0].Options:"}},
		{name: "extra", edit: func(b *book) *book { b.Entries[0].Extra["x"] = 2; return b }, fails: []string{"book.Entries[0].Extra:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := base()
			if tc.nilWant {
				want = nil
			}
			r := &recorder{TB: t}
			DiffFields(r, "book", want, tc.edit(base()))
			if len(r.errs) != len(tc.fails) {
				t.Fatalf("reported %q, want failures at %q", r.errs, tc.fails)
			}
			for i, f := range tc.fails {
				if !strings.HasPrefix(r.errs[i], f) {
					t.Errorf("failure %d = %q, want it to start %q", i, r.errs[i], f)
				}
			}
		})
	}
	t.Run("unexported fields compared whole", func(t *testing.T) {
		t.Parallel()
		r := &recorder{TB: t}
		DiffFields(r, "h", hidden{1}, hidden{2})
		if len(r.errs) != 1 {
			t.Errorf("reported %q, want one failure", r.errs)
		}
	})
}

type card struct {
	Name   string
	Avatar []byte
	Book   *book
}

func TestDiffFieldsExcept(t *testing.T) {
	t.Parallel()
	base := func() *card {
		return &card{Name: "c", Avatar: []byte("png"), Book: &book{Name: "b"}}
	}
	tests := []struct {
		name  string
		skip  []string
		edit  func(*card) *card
		fails []string
	}{
		{name: "same", edit: func(c *card) *card { return c }},
		{name: "image skipped", skip: []string{"Avatar"}, edit: func(c *card) *card { c.Avatar = nil; return c }},
		{name: "image compared by size", edit: func(c *card) *card { c.Avatar = []byte("jpeg"); return c }, fails: []string{"card.Avatar: want 3 bytes, got 4 bytes"}},
		{name: "other field still compared", skip: []string{"Avatar"}, edit: func(c *card) *card { c.Book.Name = "x"; return c }, fails: []string{"card.Book.Name:"}},
		{name: "nil got", edit: func(*card) *card { return nil }, fails: []string{"card:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &recorder{TB: t}
			want := base()
			DiffFieldsExcept(r, "card", want, tc.edit(base()), tc.skip...)
			if want.Avatar == nil {
				t.Error("the skipped field was cleared on the caller's value")
			}
			if len(r.errs) != len(tc.fails) {
				t.Fatalf("reported %q, want failures at %q", r.errs, tc.fails)
			}
			for i, f := range tc.fails {
				if !strings.HasPrefix(r.errs[i], f) {
					t.Errorf("failure %d = %q, want it to start %q", i, r.errs[i], f)
				}
			}
		})
	}
}
