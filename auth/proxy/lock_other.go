//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package proxy

// lockDir is a no-op where flock(2) is missing: there, run one server per state directory.
func lockDir(string) (func(), error) { return func() {}, nil }
