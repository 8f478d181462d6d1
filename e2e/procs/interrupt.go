package procs

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// An interrupt (Ctrl-C, SIGTERM) ends a test binary without running its tests' cleanups. Its
// children die with it (Pdeathsig), but what they leave on the host stays: a real node's mounts,
// loop devices and network namespace, a real cloud's bind mounts, an environment's directory.
// OnInterrupt is how the harness still undoes them: every stop function registered and not yet
// cancelled runs, all at once, and then the binary exits. One handler serves the whole binary,
// so that no stop is cut short by another's exit.

// interruptExitCode is what an interrupted test binary exits with, as a shell reports SIGINT.
const interruptExitCode = 130

var interrupt struct {
	once  sync.Once
	mu    sync.Mutex
	next  int
	stops map[int]func()
}

// OnInterrupt registers stop to run when the test binary is interrupted, until cancel is called.
// stop runs at most once, from the interrupt or not at all; cancel does not run it.
func OnInterrupt(what string, stop func()) (cancel func()) {
	interrupt.once.Do(func() {
		interrupt.stops = map[int]func(){}
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
		go func() {
			sig := <-sigs
			signal.Stop(sigs)
			// The same signal may have ended what reads the binary's output (go test, make, a
			// shell's pipe): a write to that pipe would then kill the binary with SIGPIPE, and
			// the stops with it, at the first line they print.
			signal.Ignore(syscall.SIGPIPE)
			os.Exit(runInterruptStops(sig))
		}()
	})
	interrupt.mu.Lock()
	defer interrupt.mu.Unlock()
	id := interrupt.next
	interrupt.next++
	interrupt.stops[id] = func() {
		fmt.Fprintf(os.Stderr, "Interrupted: stopping %s\n", what)
		stop()
	}
	return func() {
		interrupt.mu.Lock()
		defer interrupt.mu.Unlock()
		delete(interrupt.stops, id)
	}
}

// runInterruptStops runs every registered stop at once, waits for them and returns the exit code.
// Nothing can register or cancel meanwhile: the registry stays locked.
func runInterruptStops(sig os.Signal) int {
	interrupt.mu.Lock()
	defer interrupt.mu.Unlock()
	fmt.Fprintf(os.Stderr, "%v: stopping what %d running tests made before exiting\n", sig, len(interrupt.stops))
	var wg sync.WaitGroup
	for _, stop := range interrupt.stops {
		wg.Go(stop)
	}
	wg.Wait()
	interrupt.stops = map[int]func(){}
	return interruptExitCode
}
