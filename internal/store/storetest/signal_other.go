//go:build !unix

package storetest

import "os"

// Pausing a process needs SIGSTOP; elsewhere Pause kills it.
var stopSignal, contSignal = os.Kill, os.Kill
