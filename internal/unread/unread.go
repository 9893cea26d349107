// Package unread tells whether the reader of a pipe or a socket has read what this process wrote
// to it: over stdio, whether the client has taken in the messages written to stdout so far.
package unread

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// ErrUnsupported is returned where the platform or the kind of file cannot tell how much is
// unread: a regular file, a terminal, a TCP socket, macOS, Windows.
var ErrUnsupported = errors.ErrUnsupported

// ErrTimeout is returned by Wait when the reader has not read everything within its limit.
var ErrTimeout = errors.New("unread: the reader did not read everything in time")

// Polling starts at firstPoll and doubles up to lastPoll: a reader that is keeping up is seen at
// once, a slow one costs a few hundred checks a second at the most.
const (
	firstPoll = 200 * time.Microsecond
	lastPoll  = 2 * time.Millisecond
)

// Bytes returns how much of what was written to f its reader has not read yet: the bytes in a
// pipe, or for a Unix stream socket the memory its unread data still holds (0 once all is read).
func Bytes(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("unread: %s: %w", f.Name(), ErrUnsupported)
	}
	var n int
	var qerr error
	if err := rc.Control(func(fd uintptr) { n, qerr = pending(int(fd)) }); err != nil {
		return 0, fmt.Errorf("unread: %s: %w", f.Name(), err)
	}
	if qerr != nil {
		return 0, fmt.Errorf("unread: %s: %w", f.Name(), qerr)
	}
	return n, nil
}

// Wait returns nil once the reader of f has read all that was written to it, ErrUnsupported at
// once where that cannot be told (see Bytes), ErrTimeout when limit passes first, or the
// context's error when ctx ends first.
func Wait(ctx context.Context, f *os.File, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var t *time.Timer
	for poll := firstPoll; ; poll = min(2*poll, lastPoll) {
		n, err := Bytes(f)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w (%d bytes left after %v)", ErrTimeout, n, limit)
		}
		if t == nil {
			t = time.NewTimer(min(poll, left))
			defer t.Stop()
		} else {
			t.Reset(min(poll, left))
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
