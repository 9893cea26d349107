// Package tokens counts tokens the way the models reading cardwriter-mcp's results do: with a
// real BPE tokenizer (cl100k_base), whose vocabulary ships in the binary (no download).
package tokens

import (
	"fmt"
	"sync"

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

// Count returns the number of cl100k_base tokens of s.
func Count(s string) (int, error) {
	encOnce.Do(func() {
		tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
		enc, encErr = tiktoken.GetEncoding(Encoding)
	})
	if encErr != nil {
		return 0, fmt.Errorf("tokenizer %s: %w", Encoding, encErr)
	}
	return len(enc.Encode(s, nil, nil)), nil
}

// Within reports whether s has at most limit tokens. A token is at least one byte, so a string
// of at most limit bytes is within it without being tokenized.
func Within(s string, limit int) (bool, error) {
	if len(s) <= limit {
		return true, nil
	}
	n, err := Count(s)
	return n <= limit, err
}
