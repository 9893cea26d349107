//go:build benchprofile

package main

// Built only with -tags benchprofile (cmd/cardwriter-bench -server-cpuprofile): a CPU profile of
// the server process over exactly the harness's measured calls. With
// CARDWRITER_BENCH_CPUPROFILE=FILE set, SIGUSR1 starts the profile into FILE.tmp and SIGUSR2
// stops it and renames it to FILE, which tells the harness that it is complete.

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

func init() {
	path := os.Getenv("CARDWRITER_BENCH_CPUPROFILE")
	if path == "" {
		return
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		var f *os.File
		for s := range sig {
			switch {
			case s == syscall.SIGUSR1 && f == nil:
				var err error
				if f, err = os.Create(path + ".tmp"); err != nil {
					fmt.Fprintln(os.Stderr, "benchprofile:", err)
					continue
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					fmt.Fprintln(os.Stderr, "benchprofile:", err)
				}
			case s == syscall.SIGUSR2 && f != nil:
				pprof.StopCPUProfile()
				if err := f.Close(); err != nil {
					fmt.Fprintln(os.Stderr, "benchprofile:", err)
				}
				if err := os.Rename(path+".tmp", path); err != nil {
					fmt.Fprintln(os.Stderr, "benchprofile:", err)
				}
				f = nil
			}
		}
	}()
}
