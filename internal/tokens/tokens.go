// Package tokens counts tokens the way the models reading cardwriter-mcp's results do: with a
// real BPE tokenizer (cl100k_base, and o200k_base for prompts of newer models), whose
// vocabularies ship in the binary (no download).
package tokens

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// Encoding names the tokenizer the counts use.
const Encoding = "cl100k_base"

// O200k names the tokenizer of OpenAI's GPT-4o and later models.
const O200k = "o200k_base"

// Encodings are the tokenizers the binary ships, the default first.
var Encodings = []string{Encoding, O200k}

// encoder is one tokenizer, loaded on first use.
type encoder struct {
	once sync.Once
	enc  *tiktoken.Tiktoken
	err  error
}

var (
	loaderOnce sync.Once
	encoders   = map[string]*encoder{Encoding: {}, O200k: {}}
)

// get loads the named tokenizer.
func get(name string) (*tiktoken.Tiktoken, error) {
	e, ok := encoders[name]
	if !ok {
		return nil, fmt.Errorf("tokenizer %q is not shipped (have %v)", name, Encodings)
	}
	loaderOnce.Do(func() { tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader()) })
	e.once.Do(func() { e.enc, e.err = tiktoken.GetEncoding(name) })
	if e.err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", name, e.err)
	}
	return e.enc, nil
}

// CountWith returns the number of tokens of s in the named encoding (one of Encodings).
func CountWith(encoding, s string) (int, error) {
	enc, err := get(encoding)
	if err != nil {
		return 0, err
	}
	return countEnc(enc, s, -1), nil
}

// chunk is the most bytes tokenized at once. The BPE merge of one long run without spaces
// takes time quadratic in its length (50,000 letters: seconds), so longer text is tokenized a
// chunk at a time, cut before a word (" word") where the tokenizer would split it anyway; a run
// longer than chunk is cut inside, which may count a token more per cut.
const chunk = 2048

// Count returns the number of cl100k_base tokens of s.
func Count(s string) (int, error) { return count(s, -1) }

// count counts the tokens of s a chunk at a time, stopping once past limit (-1: none).
func count(s string, limit int) (int, error) {
	enc, err := get(Encoding)
	if err != nil {
		return 0, err
	}
	return countEnc(enc, s, limit), nil
}

// encoded counts the bytes every count has tokenized (Encoded).
var encoded atomic.Int64

// Encoded returns how many bytes of text the counts of this process have tokenized so far: a
// deterministic measure of their cost, for tests that guard it.
func Encoded() int64 { return encoded.Load() }

// countEnc counts with enc a chunk at a time, stopping once past limit (-1: none).
func countEnc(enc *tiktoken.Tiktoken, s string, limit int) int {
	n := 0
	for len(s) > 0 {
		end := cut(s)
		encoded.Add(int64(end))
		n += len(enc.Encode(s[:end], nil, nil))
		s = s[end:]
		if limit >= 0 && n > limit {
			break
		}
	}
	return n
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
// limit and not by s.
func CountUpTo(s string, limit int) (int, error) { return count(s, limit) }

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
