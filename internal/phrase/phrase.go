// Package phrase words the small English phrases of the summaries and messages the model reads:
// a count with its noun, one of two wordings.
package phrase

import "fmt"

// Count renders "1 entry" or "2 entries" from n and the noun's singular and plural forms.
func Count(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// Either returns one when cond holds, else other.
func Either(cond bool, one, other string) string {
	if cond {
		return one
	}
	return other
}
