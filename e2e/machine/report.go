package machine

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A failed wait on a slow machine looks like a defect unless the failure says what the machine
// was doing. The process samples the load and the CPU's use every sampleEvery while a test
// watches (Watch), keeps the last sampleKeep of it, and records how long the parts of its worlds
// took to start (Started); Report prints both.
const (
	sampleEvery = 10 * time.Second
	sampleKeep  = 10 * time.Minute
	// reportSpan is how much of the samples a report shows: the last minutes before a failure,
	// where a wait that failed has spent its time.
	reportSpan = 3 * time.Minute
	// reportStartups is how many of the latest start-ups a report lists. With the samples of
	// reportSpan that keeps a report within the 45 lines the failure summary copies of it.
	reportStartups = 16
)

type sample struct {
	at    time.Time
	load1 float64
	// busy and steal are the shares of the CPUs' time since the previous sample spent running
	// something and taken by the hypervisor for other machines (NaN for the first sample).
	busy, steal float64
}

type startup struct {
	at   time.Time
	part string
	took time.Duration
}

var state struct {
	once     sync.Once
	mu       sync.Mutex
	samples  []sample
	startups []startup
}

// Watch starts the sampling of this process, once; every environment of a test calls it.
func Watch() {
	state.once.Do(func() {
		go func() {
			prev, _ := readCPU()
			for {
				now, ok := readCPU()
				s := sample{at: time.Now(), load1: Load()[0], busy: -1, steal: -1}
				if ok && prev.total > 0 && now.total > prev.total {
					d := float64(now.total - prev.total)
					s.busy = float64((now.total-now.idle)-(prev.total-prev.idle)) / d
					s.steal = float64(now.steal-prev.steal) / d
				}
				prev = now
				state.mu.Lock()
				state.samples = append(state.samples, s)
				if n := int(sampleKeep / sampleEvery); len(state.samples) > n {
					state.samples = slices.Delete(state.samples, 0, len(state.samples)-n)
				}
				state.mu.Unlock()
				time.Sleep(sampleEvery)
			}
		}()
	})
}

// Started records that part took took to start, for Report; the caller logs it too.
func Started(part string, took time.Duration) {
	state.mu.Lock()
	defer state.mu.Unlock()
	state.startups = append(state.startups, startup{at: time.Now(), part: part, took: took})
}

// Report describes the machine for a failure: its CPUs, the calibrated slowness, the load and
// CPU use of the last minutes, and how long the latest parts took to start.
func Report() string {
	var b strings.Builder
	l := Load()
	fmt.Fprintf(&b, "load now %.2f %.2f %.2f on %d CPUs, slowness %.2f (%s)", l[0], l[1], l[2], runtime.NumCPU(), Slowness(), slownessSource())
	state.mu.Lock()
	samples := slices.Clone(state.samples)
	startups := slices.Clone(state.startups)
	state.mu.Unlock()
	if len(samples) > 0 {
		b.WriteString("\nthe last minutes (time: load1, CPU busy, stolen):")
		for _, s := range samples {
			if time.Since(s.at) > reportSpan {
				continue
			}
			fmt.Fprintf(&b, "\n  %s: %.1f", s.at.Format("15:04:05"), s.load1)
			if s.busy >= 0 {
				fmt.Fprintf(&b, ", %.0f%%, %.0f%%", 100*s.busy, 100*s.steal)
			}
		}
	}
	if len(startups) > 0 {
		b.WriteString("\nstart-ups of this test binary (when it ended: part, time it took):")
		for _, s := range startups[max(0, len(startups)-reportStartups):] {
			fmt.Fprintf(&b, "\n  %s: %s, %s", s.at.Format("15:04:05"), s.part, s.took.Round(100*time.Millisecond))
		}
	}
	return b.String()
}

// ReportOnFailure has t log Report when it ends failed, as a "MACHINE:" block that make test's
// failure summary shows next to the tests' own "WHY:" lines.
func ReportOnFailure(t testing.TB) {
	Watch()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("MACHINE: %s", Report())
		}
	})
}

func slownessSource() string {
	if os.Getenv(SlownessEnv) == "" {
		return "not calibrated: " + SlownessEnv + " unset"
	}
	return "calibrated by make test"
}

// Load returns the load averages over one, five and fifteen minutes (zeros where they cannot be
// read).
func Load() [3]float64 {
	var l [3]float64
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	for i, f := range strings.Fields(string(data)) {
		if i >= len(l) {
			break
		}
		l[i], _ = strconv.ParseFloat(f, 64)
	}
	return l
}

type cpuTimes struct{ total, idle, steal uint64 }

// readCPU reads the machine's CPU time from /proc/stat: the sum of every column, the idle and
// waiting-for-I/O time, and the stolen time.
func readCPU() (cpuTimes, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, false
	}
	var c cpuTimes
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return cpuTimes{}, false
		}
		// guest and guest_nice (columns 9 and 10) are counted in user time already.
		if i < 8 {
			c.total += n
		}
		switch i {
		case 3, 4:
			c.idle += n
		case 7:
			c.steal = n
		}
	}
	return c, true
}
