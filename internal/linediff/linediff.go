// Package linediff shows how one text became another, line by line: the lines taken out
// ("- "), put in ("+ ") and, around each change, a line of context ("  "), as a model or a
// person reads a diff.
package linediff

import (
	"fmt"
	"strings"
)

// maxCells bounds the work of the longest-common-subsequence table (lines of a times lines of
// b); past it, the diff takes every line out and puts every line in.
const maxCells = 4 << 20

// context is how many unchanged lines are shown around a change.
const context = 1

// Diff returns the line diff from a to b, "" when they are equal. Runs of unchanged lines
// beyond the context are shown as "@@ N lines unchanged".
func Diff(a, b string) string {
	if a == b {
		return ""
	}
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	ops := script(x, y)
	var out strings.Builder
	for i := 0; i < len(ops); {
		if ops[i].kind != ' ' {
			fmt.Fprintf(&out, "%c %s\n", ops[i].kind, ops[i].line)
			i++
			continue
		}
		j := i
		for j < len(ops) && ops[j].kind == ' ' {
			j++
		}
		// Unchanged lines i..j-1: show context after the change before and before the next.
		head, tail := context, context
		if i == 0 {
			head = 0
		}
		if j == len(ops) {
			tail = 0
		}
		if j-i <= head+tail {
			for k := i; k < j; k++ {
				fmt.Fprintf(&out, "  %s\n", ops[k].line)
			}
		} else {
			for k := i; k < i+head; k++ {
				fmt.Fprintf(&out, "  %s\n", ops[k].line)
			}
			fmt.Fprintf(&out, "@@ %d lines unchanged\n", j-i-head-tail)
			for k := j - tail; k < j; k++ {
				fmt.Fprintf(&out, "  %s\n", ops[k].line)
			}
		}
		i = j
	}
	return strings.TrimSuffix(out.String(), "\n")
}

type op struct {
	kind byte // ' ', '-' or '+'
	line string
}

// script returns the edit script from x to y by their longest common subsequence.
func script(x, y []string) []op {
	// Common head and tail first: most edits touch a few lines of a long text.
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	var ops []op
	for _, l := range x[:pre] {
		ops = append(ops, op{' ', l})
	}
	ops = append(ops, middle(x[pre:len(x)-suf], y[pre:len(y)-suf])...)
	for _, l := range x[len(x)-suf:] {
		ops = append(ops, op{' ', l})
	}
	return ops
}

func middle(x, y []string) []op {
	var ops []op
	if len(x)*len(y) > maxCells {
		for _, l := range x {
			ops = append(ops, op{'-', l})
		}
		for _, l := range y {
			ops = append(ops, op{'+', l})
		}
		return ops
	}
	// lcs[i][j]: the longest common subsequence of x[i:] and y[j:].
	lcs := make([][]int32, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			ops = append(ops, op{' ', x[i]})
			i, j = i+1, j+1
		case j < len(y) && (i == len(x) || lcs[i][j+1] > lcs[i+1][j]):
			ops = append(ops, op{'+', y[j]})
			j++
		default:
			ops = append(ops, op{'-', x[i]})
			i++
		}
	}
	return ops
}
