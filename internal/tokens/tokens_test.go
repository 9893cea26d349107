package tokens

import (
	"strings"
	"testing"
)

// TestCount: the counts are the tokenizer's, not a guess from lengths.
func TestCount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		want int
	}{{"", 0}, {"hello", 1}, {"Hello, world!", 4}} {
		if n, err := Count(tc.s); err != nil || n != tc.want {
			t.Errorf("Count(%q) = %d, %v; want %d", tc.s, n, err, tc.want)
		}
	}
}

func TestWithin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s     string
		limit int
		want  bool
	}{
		{"Hello, world!", 4, true},  // 13 bytes, 4 tokens
		{"Hello, world!", 3, false}, // tokenized: over
		{"abc", 3, true},            // short enough not to count
		{strings.Repeat(" token", 100), 100, true},
		{strings.Repeat(" token", 100), 99, false},
	} {
		if got, err := Within(tc.s, tc.limit); err != nil || got != tc.want {
			t.Errorf("Within(%.20q, %d) = %v, %v; want %v", tc.s, tc.limit, got, err, tc.want)
		}
	}
}
