// Package tokens counts tokens the way the models reading cardwriter-mcp's results do: with a
// real BPE tokenizer (cl100k_base), whose vocabulary ships in the binary (no download).
package tokens

import (
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// Encoding names the tokenizer the counts use.
const Encoding = "cl100k_base"

var (
	encOnce sync.Once
	enc     *tiktoken.Tiktoken
	encErr  error
)

// chunk is the most bytes tokenized at once. The BPE merge of one long run without spaces
// takes time quadratic in its length (50,000 letters: seconds), so longer text is tokenized a
// chunk at a time, cut before a word (" word") where the tokenizer would split it anyway; a run
// longer than chunk is cut inside, which may count a token more per cut.
const chunk = 2048

// Count returns the number of cl100k_base tokens of s.
func Count(s string) (int, error) { return count(s, -1) }

// count counts the tokens of s a chunk at a time, stopping once past limit (-1: none).
func count(s string, limit int) (int, error) {
	encOnce.Do(func() {
		tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
		enc, encErr = tiktoken.GetEncoding(Encoding)
	})
	if encErr != nil {
		return 0, fmt.Errorf("tokenizer %s: %w", Encoding, encErr)
	}
	n := 0
	for len(s) > 0 {
		end := cut(s)
		n += len(enc.Encode(s[:end], nil, nil))
		s = s[end:]
		if limit >= 0 && n > limit {
			break
		}
	}
	return n, nil
}

// cut returns where the next chunk of s ends: all of s when short, else before the last
// " word" in the first chunk bytes, else at the last rune boundary there.
func cut(s string) int {
	if len(s) <= chunk {
		return len(s)
	}
	for i := chunk; i > chunk/2; i-- {
		if s[i] == ' ' && i+1 < len(s) && !isSpace(s[i+1]) && !isSpace(s[i-1]) {
			return i
		}
	}
	i := chunk
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// CountUpTo returns the number of cl100k_base tokens of s when it is at most limit, else a
// number over limit: it tokenizes s only until it is past limit, so its cost is bounded by
// limit and not by s. A token is at least one byte: a string of at most limit bytes counts as
// its length without being tokenized.
func CountUpTo(s string, limit int) (int, error) {
	if len(s) <= limit {
		return len(s), nil
	}
	return count(s, limit)
}

// Within reports whether s has at most limit tokens. A token is at least one byte, so a string
// of at most limit bytes is within it without being tokenized; a longer one is tokenized only
// until it is past the limit.
func Within(s string, limit int) (bool, error) {
	if len(s) <= limit {
		return true, nil
	}
	n, err := count(s, limit)
	return n <= limit, err
}
