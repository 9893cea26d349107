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

// TestCountLongText: text counted a chunk at a time counts as it does whole (cut before words),
// and a long run without spaces is counted in bounded time, about as whole.
func TestCountLongText(t *testing.T) {
	t.Parallel()
	enc, err := get(Encoding)
	if err != nil {
		t.Fatal(err)
	}
	prose := strings.Repeat("The keeper of the old harbour lights a lantern for every ship lost at sea. ", 200)
	whole := len(enc.Encode(prose, nil, nil))
	if n, err := Count(prose); err != nil || n != whole {
		t.Errorf("Count(prose) = %d, %v; whole %d", n, err, whole)
	}
	run := strings.Repeat("a", 60_000)
	n, err := Count(run)
	if err != nil || n < len(run)/16 || n > len(run)/4 {
		t.Errorf("Count of %d letters = %d, %v", len(run), n, err)
	}
	if ok, err := Within(run, 100); ok || err != nil {
		t.Errorf("Within(run, 100) = %v, %v", ok, err)
	}
}

// TestCut: chunks end before a word, within chunk bytes, or at a rune boundary in a long run.
func TestCut(t *testing.T) {
	t.Parallel()
	prose := strings.Repeat("keeper ", 1000)
	if i := cut(prose); i > chunk || prose[i] != ' ' || prose[i-1] == ' ' {
		t.Errorf("cut(prose) = %d", i)
	}
	runes := strings.Repeat("é", 3000) // two bytes each
	if i := cut(runes); i > chunk || i%2 != 0 {
		t.Errorf("cut(runes) = %d, not at a rune boundary", i)
	}
	if i := cut("short"); i != 5 {
		t.Errorf("cut(short) = %d", i)
	}
}

// TestCountWith: o200k_base is shipped and differs from cl100k_base where their vocabularies do;
// an encoding not shipped is an error.
func TestCountWith(t *testing.T) {
	t.Parallel()
	s := "Ущелье теней: путники шепчут заклинания"
	c, err := CountWith(Encoding, s)
	if err != nil {
		t.Fatal(err)
	}
	o, err := CountWith(O200k, s)
	if err != nil {
		t.Fatal(err)
	}
	if c == o || o == 0 {
		t.Errorf("cl100k %d, o200k %d: want two different, non-zero counts", c, o)
	}
	if n, _ := Count(s); n != c {
		t.Errorf("Count = %d, CountWith(cl100k) = %d", n, c)
	}
	if _, err := CountWith("p99k", s); err == nil {
		t.Error("an encoding not shipped counted")
	}
}

// TestCountAddsAtLineBreaks: text ending in a line break and text starting with a character that
// is not white space count, joined, as the sum of their counts, in both encodings (the World Info
// budget counts a step's entries this way, each once).
func TestCountAddsAtLineBreaks(t *testing.T) {
	t.Parallel()
	pieces := []string{"The harbour lights.\n", "'s a ship's bell.\n", "42 ships, 7 wrecks!\n", "\"Quoted,\" she said.\n",
		"龍が来る。\n", "Ünïcödé façade\n", "x\n\n", "...\n", "end.  \n", "@@note\n", "café\r\n", "tab\there\n"}
	for _, enc := range Encodings {
		for _, a := range pieces {
			for _, b := range pieces {
				na, _ := CountWith(enc, a)
				nb, _ := CountWith(enc, b)
				nab, _ := CountWith(enc, a+b)
				if na+nb != nab {
					t.Errorf("%s: %q + %q: %d + %d, joined %d", enc, a, b, na, nb, nab)
				}
			}
		}
	}
}

// TestCountUpTo: within the limit the count is Count's; past it, counting stops soon after the
// limit rather than at the end of the text.
func TestCountUpTo(t *testing.T) {
	t.Parallel()
	short := "The lighthouse keeper counts the ships."
	want, err := Count(short)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := CountUpTo(short, 1000); err != nil || got != want {
		t.Errorf("within the limit: %d %v, want %d", got, err, want)
	}
	long := strings.Repeat("lighthouse keeper ", 100_000)
	got, err := CountUpTo(long, 1000)
	if err != nil || got <= 1000 || got > 1000+chunk {
		t.Errorf("past the limit: %d %v, want just over 1000", got, err)
	}
}
