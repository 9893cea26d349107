//go:build !linux

package unread

// pending cannot tell outside Linux. On macOS (and the BSDs) FIONREAD on a pipe's write end
// reports the pipe buffer of that end, which carries the data flowing the other way, so it is 0
// whatever the reader has left; a Unix socket's writes go straight to the peer's receive buffer,
// so the sender's send queue (SO_NWRITE) is 0 as well. Believing either would answer at once,
// so they are ErrUnsupported, and so is every other platform.
func pending(int) (int, error) {
	return 0, ErrUnsupported
}
