// Package machine tells the tests how fast the machine under them is, so that a slow or busy
// machine is told apart from a defect. make test measures the machine once (Calibrate, from
// cmd/calibrate) and chooses from it how much runs at once (Choose); the tests then read the
// measured slowness from the environment (Slowness) to give the machine's own parts (API servers,
// real nodes, a real cloud) the time they need to start, and, when a test fails, print what the
// machine was doing (Report): its load and how long each part took to start.
//
// Only start-ups and hang guards scale with the machine. A product's promise ("repaired within
// seconds of the API server's return") is measured from what it depends on and keeps its bound.
package machine

import (
	"crypto/sha256"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"
)

// ReferenceCores is how many cores a machine of this kind has: a machine that does the
// calibration's work as fast as the reference machine on this many cores at once has a capacity
// of ReferenceCores.
const ReferenceCores = 2

// referenceRound is how long one calibration round takes on the reference machine, a quiet one of
// this kind (two cores, Go 1.26): make test's calibration measured 166 ms after its build with
// nothing else running, 354 ms beside other tests (pinned to one CPU, at a lower
// priority) and 690 to 726 ms beside a cold build. A machine this fast has a slowness of 1; in
// make test-slow's cgroup of one of its CPUs both workers share it, and a round took 335 ms
// (capacity 1.01, the slower plan).
const referenceRound = 170 * time.Millisecond

// roundWork is one worker's work in a round: hashing this many bytes with SHA-256.
const roundWork = 256 << 20

// SlownessEnv carries the calibrated slowness from make test to the tests it runs.
const SlownessEnv = "TEST_MACHINE_SLOWNESS"

// Calibration is what Calibrate measured.
type Calibration struct {
	// CPUs is how many processors this process may run on (its affinity, a cpuset).
	CPUs int
	// Rounds are the rounds' times: ReferenceCores workers hashing at once, each roundWork bytes.
	Rounds []time.Duration
	// Load1 is the one-minute load average when the calibration began.
	Load1 float64
}

// Round is the median round.
func (c Calibration) Round() time.Duration {
	r := slices.Clone(c.Rounds)
	slices.Sort(r)
	return r[len(r)/2]
}

// Capacity is the machine's throughput in cores of the reference machine: ReferenceCores on a
// machine as fast and as idle as the reference one, less on a slower, busier or narrower one (a
// cgroup limited to one of two cores measures about 1).
func (c Calibration) Capacity() float64 {
	return ReferenceCores * referenceRound.Seconds() / c.Round().Seconds()
}

// Slowness is how many times longer the machine takes for the same work than the reference
// machine, at least 1.
func (c Calibration) Slowness() float64 {
	return max(1, ReferenceCores/c.Capacity())
}

// Calibrate runs rounds rounds of ReferenceCores workers hashing at once and measures each. On
// the reference machine a round takes referenceRound; it takes as long as the machine is slower.
func Calibrate(rounds int) Calibration {
	c := Calibration{CPUs: runtime.NumCPU(), Load1: Load()[0]}
	buf := make([]byte, 1<<20)
	for range max(rounds, 1) {
		start := time.Now()
		var wg sync.WaitGroup
		for range ReferenceCores {
			wg.Go(func() {
				h := sha256.New()
				for range roundWork / len(buf) {
					h.Write(buf)
				}
				_ = h.Sum(nil)
			})
		}
		wg.Wait()
		c.Rounds = append(c.Rounds, time.Since(start))
	}
	return c
}

// Plan is how much of make test runs at once.
type Plan struct {
	// StorageWorlds is how many real-node worlds the storage phase runs at once (at least two:
	// the real cloud's two worlds run in step).
	StorageWorlds int
	// Beside says whether the phases on local clusters run beside the real-node phases.
	Beside bool
	// BesideAfter is how long after the real-node phases begin the phases on local clusters
	// start beside them: zero starts both at once.
	BesideAfter time.Duration
	// TestParallel is go test's -parallel for the phases on local clusters.
	TestParallel int
	// Slowness is the machine's (Calibration.Slowness), passed on to the tests.
	Slowness float64
	// Why says what the plan was chosen from.
	Why string
}

// Thresholds of Choose, in reference cores. The phases on local clusters run beside the
// real-node phases only on a machine that does the calibration's work half again as fast as the
// reference's two cores (a capacity of 3; the calibration runs two workers): on the reference
// machine itself that overloaded both cores (CI, everything at once: real nodes Ready after 2m10s
// to 2m18s instead of about 20 s, the real cloud's Nova past its four minutes to map both compute
// hosts, a switch from csi-operator past its four minutes for the driver). With nearly two cores
// the storage phase's three worlds at once, on their own, keep both busy; with less, the same work
// only makes every wait longer, so less runs at once.
//
// Between the two, the phases on local clusters start beside the storage phase once its worlds
// are up and past their upgrades (besideAfter on the reference machine, stretched by the
// slowness): from then on its worlds mostly wait (alerts' five minutes, Cinder, the upstream
// suite's pods) and leave most of a core idle, measured on the reference machine at 0.8 to 1.1 of
// its two cores in the storage phase's second half, against 1.4 during its start-ups.
const (
	besideCapacity = 3.0
	fullCapacity   = 1.5
	besideAfter    = 12 * time.Minute
)

// Choose picks the plan for a calibrated machine. On a machine half again as fast as the
// reference, everything at once. With (nearly) the reference's two cores: three storage worlds at
// once, the phases on local clusters beside the real-node phases from BesideAfter on, four tests per package at once
// (they mostly wait on idle windows and outages). With less: two storage worlds at a time (the
// real cloud's pair, then the fake cloud's worlds) and three tests per package at a time.
func Choose(c Calibration) Plan {
	capacity := c.Capacity()
	p := Plan{Slowness: round2(c.Slowness())}
	measured := fmt.Sprintf("%d CPUs available, load %.1f; a calibration round took %s against %s on the reference machine: capacity %.2f of its %d cores, slowness %.2f",
		c.CPUs, c.Load1, c.Round().Round(time.Millisecond), referenceRound, capacity, ReferenceCores, p.Slowness)
	switch {
	case capacity >= besideCapacity:
		p.StorageWorlds, p.Beside, p.TestParallel = 3, true, 4
		p.Why = measured + fmt.Sprintf(" (at least %.1f: everything at once)", besideCapacity)
	case capacity >= fullCapacity:
		p.StorageWorlds, p.Beside, p.TestParallel = 3, true, 4
		p.BesideAfter = (time.Duration(float64(besideAfter)*max(p.Slowness, 1)) + time.Second - 1).Truncate(time.Second)
		p.Why = measured + fmt.Sprintf(" (%.1f to %.1f: three storage worlds at once, the phases on local clusters beside the real-node phases once those are %s in, past the storage worlds' start-ups)", fullCapacity, besideCapacity, p.BesideAfter)
	default:
		p.StorageWorlds, p.Beside, p.TestParallel = 2, false, 3
		p.Why = measured + fmt.Sprintf(" (below %.1f: less at once, so that each wait gets the machine it was written for)", fullCapacity)
	}
	return p
}

// Slowness is the slowness make test measured (SlownessEnv), 1 when it is not set: a test run
// on its own, outside make test, assumes the reference machine.
func Slowness() float64 {
	s, err := strconv.ParseFloat(os.Getenv(SlownessEnv), 64)
	if err != nil || s < 1 || math.IsInf(s, 0) || math.IsNaN(s) {
		return 1
	}
	return s
}

// Scale returns d stretched by the machine's slowness. It is for waits on the machine's own parts
// (a cluster, a real node, a real cloud starting) and for hang guards, never for a bound the
// product promises.
func Scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * Slowness())
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }
