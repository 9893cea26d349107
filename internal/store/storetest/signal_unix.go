//go:build unix

package storetest

import "syscall"

var stopSignal, contSignal = syscall.SIGSTOP, syscall.SIGCONT
