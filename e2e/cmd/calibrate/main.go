// Command calibrate measures the machine and chooses how much of make test runs at once
// (package machine): it prints the choice as shell assignments for make test's recipe, and on
// standard error what it measured and why it chose so. A value given on make's command line
// (STORAGE_WORLDS, BESIDE, TEST_PARALLEL) is kept and said to be the user's.
//
// With -rounds=9 and nothing else running, it measures the reference round of package machine.
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/machine"
)

func main() {
	rounds := flag.Int("rounds", 3, "calibration rounds (the median counts)")
	worlds := flag.String("storage-worlds", "", "storage worlds at once; empty: chosen from the machine")
	beside := flag.String("beside", "", "yes or no: the phases on local clusters beside the real-node phases; empty: chosen from the machine")
	parallel := flag.String("test-parallel", "", "go test -parallel of the phases on local clusters; empty: chosen from the machine")
	testTimeout := flag.Duration("test-timeout", 40*time.Minute, "go test -timeout of a Go test phase on the reference machine")
	storageTimeout := flag.Duration("storage-test-timeout", 80*time.Minute, "go test -timeout of the storage phase on the reference machine, three worlds at once")
	flag.Parse()

	c := machine.Calibrate(*rounds)
	p := machine.Choose(c)
	from := map[string]string{"STORAGE_WORLDS": "the machine", "BESIDE": "the machine", "TEST_PARALLEL": "the machine"}
	if *worlds != "" {
		n, err := strconv.Atoi(*worlds)
		if err != nil || n < 1 {
			fail("STORAGE_WORLDS=%q: want a positive number", *worlds)
		}
		p.StorageWorlds, from["STORAGE_WORLDS"] = n, "make's command line"
	}
	switch *beside {
	case "":
	case "yes", "no":
		p.Beside, from["BESIDE"] = *beside == "yes", "make's command line"
		p.BesideAfter = 0
	default:
		fail("BESIDE=%q: want yes or no", *beside)
	}
	if *parallel != "" {
		n, err := strconv.Atoi(*parallel)
		if err != nil || n < 1 {
			fail("TEST_PARALLEL=%q: want a positive number", *parallel)
		}
		p.TestParallel, from["TEST_PARALLEL"] = n, "make's command line"
	}

	// The timeouts only stop a hang: they stretch with the machine, and the storage phase's also
	// with fewer worlds at once.
	scaledTest := stretch(*testTimeout, p.Slowness)
	scaledStorage := stretch(*storageTimeout, p.Slowness*3/float64(min(p.StorageWorlds, 3)))

	besideWord := map[bool]string{true: "yes", false: "no"}[p.Beside]
	if p.Beside && p.BesideAfter > 0 {
		besideWord = "yes, once the real-node phases are " + p.BesideAfter.String() + " in"
	}
	fmt.Fprintf(os.Stderr, "==> machine: %s\n", p.Why)
	fmt.Fprintf(os.Stderr, "==> chosen: %d storage worlds at once (from %s); local-cluster phases beside the real-node phases: %s (from %s); %d tests per package at once (from %s); start-up waits stretched %.2f times; timeouts %s per test phase, %s for storage\n",
		p.StorageWorlds, from["STORAGE_WORLDS"], besideWord, from["BESIDE"], p.TestParallel, from["TEST_PARALLEL"], p.Slowness, scaledTest, scaledStorage)
	fmt.Printf("STORAGE_WORLDS=%d\nBESIDE=%s\nBESIDE_AFTER=%d\nTEST_PARALLEL=%d\nTEST_TIMEOUT=%s\nSTORAGE_TEST_TIMEOUT=%s\n%s=%.2f\n",
		p.StorageWorlds, map[bool]string{true: "yes", false: "no"}[p.Beside], int(p.BesideAfter.Seconds()), p.TestParallel, scaledTest, scaledStorage, machine.SlownessEnv, p.Slowness)
}

// stretch returns d times f, whole minutes rounded up.
func stretch(d time.Duration, f float64) time.Duration {
	m := math.Ceil(d.Minutes() * max(f, 1))
	return time.Duration(m) * time.Minute
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "calibrate: "+format+"\n", args...)
	os.Exit(2)
}
