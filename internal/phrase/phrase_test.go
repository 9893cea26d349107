package phrase

import "testing"

func TestCount(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 entries"},
		{1, "1 entry"},
		{2, "2 entries"},
		{-1, "-1 entries"},
	}
	for _, tt := range tests {
		if got := Count(tt.n, "entry", "entries"); got != tt.want {
			t.Errorf("Count(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestEither(t *testing.T) {
	t.Parallel()
	if got := Either(true, "it", "them"); got != "it" {
		t.Errorf("Either(true) = %q", got)
	}
	if got := Either(false, "it", "them"); got != "them" {
		t.Errorf("Either(false) = %q", got)
	}
}
