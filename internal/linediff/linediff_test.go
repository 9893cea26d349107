package linediff

import (
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, a, b, want string
	}{
		{"equal", "a\nb", "a\nb", ""},
		{"one line changed", "a\nb\nc", "a\nB\nc", "  a\n- b\n+ B\n  c"},
		{"added at the end", "a", "a\nb", "  a\n+ b"},
		{"removed at the start", "a\nb", "b", "- a\n  b"},
		{"far apart", "1\n2\n3\n4\n5\n6\n7", "x\n2\n3\n4\n5\n6\ny",
			"- 1\n+ x\n  2\n@@ 3 lines unchanged\n  6\n- 7\n+ y"},
		{"empty to text", "", "hi", "- \n+ hi"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Diff(tt.a, tt.b); got != tt.want {
				t.Errorf("Diff = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestDiffLarge: past the table's bound, every line is taken out and put in.
func TestDiffLarge(t *testing.T) {
	t.Parallel()
	a := strings.Repeat("a\n", 3000) + "end"
	b := strings.Repeat("b\n", 3000) + "end"
	got := Diff(a, b)
	if strings.Count(got, "- a") != 3000 || strings.Count(got, "+ b") != 3000 {
		t.Errorf("large diff: %d -, %d +", strings.Count(got, "- a"), strings.Count(got, "+ b"))
	}
}

func FuzzDiff(f *testing.F) {
	f.Add("a\nb", "a\nc")
	f.Fuzz(func(t *testing.T, a, b string) {
		d := Diff(a, b)
		if (d == "") != (a == b) {
			t.Fatalf("Diff(%q, %q) = %q", a, b, d)
		}
		// The kept and removed lines make a; the kept and added lines make b.
		if a == b || strings.Contains(d, "@@") {
			return
		}
		var x, y []string
		for _, l := range strings.Split(d, "\n") {
			switch l[:2] {
			case "  ":
				x, y = append(x, l[2:]), append(y, l[2:])
			case "- ":
				x = append(x, l[2:])
			case "+ ":
				y = append(y, l[2:])
			}
		}
		if strings.Join(x, "\n") != a || strings.Join(y, "\n") != b {
			t.Fatalf("Diff(%q, %q) = %q does not rebuild them", a, b, d)
		}
	})
}
