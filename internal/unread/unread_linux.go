package unread

import "golang.org/x/sys/unix"

// pending asks the kernel how much written to fd is unread. On Linux FIONREAD reports the bytes
// in a pipe from either end (both share one buffer); on a socket it reports what this end has to
// read, so for a Unix stream socket SIOCOUTQ is asked instead: the memory of the data sent and
// not yet consumed by the peer, which drops to 0 once the peer has read it all. Other files
// (regular files, terminals, TCP, whose SIOCOUTQ counts unacknowledged, not unread, bytes) are
// ErrUnsupported.
func pending(fd int) (int, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return unix.IoctlGetInt(fd, unix.TIOCINQ) // FIONREAD
	case unix.S_IFSOCK:
		domain, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
		if err != nil {
			return 0, err
		}
		if domain != unix.AF_UNIX {
			return 0, ErrUnsupported
		}
		return unix.IoctlGetInt(fd, unix.SIOCOUTQ)
	}
	return 0, ErrUnsupported
}
