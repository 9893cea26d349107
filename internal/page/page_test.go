package page

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// list returns n items with ids id000, id001, ... (every version "v1").
func list(n int) []Item {
	items := make([]Item, n)
	for i := range items {
		items[i] = Item{Order: fmt.Sprintf("id%03d", i), Version: "v1"}
	}
	return items
}

// walk pages through the list get returns before each page (it may change between pages) and
// returns the Orders given, in order, and whether any page reported a change.
func walk(t *testing.T, get func(page int) []Item, req Request, size func(i int) int) (given []string, changed bool) {
	t.Helper()
	for n := 0; ; n++ {
		if n > 1000 {
			t.Fatal("paging does not end")
		}
		items := get(n)
		p, err := Make(items, req, size)
		if err != nil {
			t.Fatalf("page %d: %v", n, err)
		}
		if p.Count() == 0 && p.Start < len(items) {
			t.Fatalf("page %d is empty with items left", n)
		}
		for _, it := range items[p.Start:p.End] {
			given = append(given, it.Order)
		}
		changed = changed || p.Changed
		if p.Given+p.Count() != len(given) {
			t.Fatalf("page %d: Given %d + Count %d, %d given so far", n, p.Given, p.Count(), len(given))
		}
		if p.Next == "" {
			return given, changed
		}
		req.Cursor = p.Next
	}
}

func TestMakeEveryItemOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		n      int
		limit  int
		budget int
		size   func(i int) int
	}{
		{"empty", 0, 10, 0, nil},
		{"one page", 5, 10, 0, nil},
		{"exact pages", 30, 10, 0, nil},
		{"limit 1", 7, 1, 0, nil},
		{"budget", 100, 0, 50, func(i int) int { return 3 + i%7 }},
		{"budget and limit", 100, 4, 50, func(i int) int { return 3 + i%7 }},
		{"items over budget", 5, 0, 10, func(int) int { return 20 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			items := list(tc.n)
			got, changed := walk(t, func(int) []Item { return items }, Request{Scope: "s", Limit: tc.limit, Budget: tc.budget}, tc.size)
			want := make([]string, len(items))
			for i, it := range items {
				want[i] = it.Order
			}
			if !slices.Equal(got, want) || changed {
				t.Fatalf("given %v (changed %v), want %v", got, changed, want)
			}
		})
	}
}

func TestMakeBudget(t *testing.T) {
	t.Parallel()
	items := list(10)
	p, err := Make(items, Request{Scope: "s", Budget: 10}, func(int) int { return 4 })
	if err != nil {
		t.Fatal(err)
	}
	if p.Count() != 2 || !p.Cut || p.Next == "" || p.Total != 10 {
		t.Fatalf("page %+v, want 2 items cut by the budget", p)
	}
}

// TestMakeChangedList: items added and deleted between pages; every item that stayed is given
// exactly once, and the change is reported.
func TestMakeChangedList(t *testing.T) {
	t.Parallel()
	base := list(50)
	deleted := map[string]bool{"id003": true, "id020": true, "id021": true, "id049": true}
	get := func(page int) []Item {
		if page == 0 {
			return base
		}
		var now []Item
		for _, it := range base {
			if !deleted[it.Order] {
				now = append(now, it)
			}
		}
		now = append(now, Item{Order: "id020a", Version: "v1"}, Item{Order: "id999", Version: "v1"})
		if page > 2 {
			now[10].Version = "v2" // an edit
		}
		slices.SortFunc(now, func(a, b Item) int { return strings.Compare(a.Order, b.Order) })
		return now
	}
	got, changed := walk(t, get, Request{Scope: "s", Limit: 7}, nil)
	if !changed {
		t.Fatal("the change was not reported")
	}
	seen := map[string]int{}
	for _, o := range got {
		seen[o]++
	}
	for _, it := range base {
		if deleted[it.Order] {
			continue
		}
		if seen[it.Order] != 1 {
			t.Errorf("%s given %d times", it.Order, seen[it.Order])
		}
	}
	for o, n := range seen {
		if n != 1 {
			t.Errorf("%s given %d times", o, n)
		}
	}
	if seen["id999"] != 1 {
		t.Error("an item added after the position was not given")
	}
}

func TestMakeCursorErrors(t *testing.T) {
	t.Parallel()
	items := list(10)
	p, err := Make(items, Request{Scope: "s", Limit: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, scope, cursor string
		want                error
	}{
		{"other scope", "t", p.Next, ErrScope},
		{"garbage", "s", "not a cursor!", ErrInvalid},
		{"cut", "s", p.Next[:len(p.Next)-3], ErrInvalid},
		{"edited", "s", edit(p.Next), ErrInvalid},
		{"empty base64", "s", "AAAA", ErrInvalid},
		{"too long", "s", strings.Repeat("A", maxCursor+1), ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Make(items, Request{Scope: tc.scope, Cursor: tc.cursor}, nil); !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := Make([]Item{{Order: "b"}, {Order: "a"}}, Request{}, nil); err == nil {
		t.Fatal("unsorted items were paged")
	}
}

// edit changes one character in the middle of s.
func edit(s string) string {
	b := []byte(s)
	if b[len(b)/2] == 'x' {
		b[len(b)/2] = 'y'
	} else {
		b[len(b)/2] = 'x'
	}
	return string(b)
}

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	c := Cursor{Scope: Scope("list_worldbook_entries", "wb_1", ""), After: Ranked(7, "e_1"), Given: 40, Total: 1000, List: Fingerprint(list(3))}
	got, err := Decode(c.Encode())
	if err != nil || got != c {
		t.Fatalf("Decode(Encode(%+v)) = %+v, %v", c, got, err)
	}
}

func TestScopeSeparatesParts(t *testing.T) {
	t.Parallel()
	if Scope("ab", "c") == Scope("a", "bc") || Scope("a") == Scope("a", "") {
		t.Fatal("different parts give the same scope")
	}
}

func TestRankedOrder(t *testing.T) {
	t.Parallel()
	got := []string{Ranked(1, "b"), Ranked(5, "z"), Ranked(1, "a"), Ranked(-3, "c"), Ranked(5, "y")}
	slices.Sort(got)
	want := []string{Ranked(5, "y"), Ranked(5, "z"), Ranked(1, "a"), Ranked(1, "b"), Ranked(0, "c")}
	if !slices.Equal(got, want) {
		t.Fatalf("order %q, want %q", got, want)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Cursor{Scope: "s", After: "id003", Given: 3, Total: 10, List: "ab"}.Encode())
	f.Add("")
	f.Add("AQ")
	f.Add("not a cursor")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Decode(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if c.Given < 0 || c.Total < 0 {
			t.Fatalf("decoded negative counts: %+v", c)
		}
		if _, err := Make(list(5), Request{Scope: c.Scope, Cursor: s, Limit: 2}, nil); err != nil {
			t.Fatalf("a decoded cursor does not page: %v", err)
		}
	})
}
