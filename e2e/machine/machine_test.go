package machine

import (
	"strings"
	"testing"
	"time"
)

func TestChoose(t *testing.T) {
	for _, tc := range []struct {
		name          string
		round         time.Duration
		worlds        int
		beside        bool
		parallel      int
		after         bool
		slownessAbove float64
	}{
		{name: "When the machine has twice the reference's capacity, it should run everything at once", round: referenceRound / 2, worlds: 3, beside: true, parallel: 4},
		{name: "When the machine is as fast as the reference, it should run three worlds and the phases on local clusters beside the storage worlds once they are up", round: referenceRound, worlds: 3, beside: true, parallel: 4, after: true},
		{name: "When the machine is a little slower, it should still run three worlds, the phases beside them later", round: referenceRound * 5 / 4, worlds: 3, beside: true, parallel: 4, after: true, slownessAbove: 1.2},
		{name: "When the machine has one core of the reference's two, it should run two worlds and the phases in turn", round: 2 * referenceRound, worlds: 2, beside: false, parallel: 3, slownessAbove: 1.9},
		{name: "When the machine is three times slower, it should run two worlds and the phases in turn", round: 3 * referenceRound, worlds: 2, beside: false, parallel: 3, slownessAbove: 2.9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Choose(Calibration{CPUs: 2, Rounds: []time.Duration{tc.round, 10 * tc.round, tc.round / 10}})
			if p.StorageWorlds != tc.worlds || p.Beside != tc.beside || p.TestParallel != tc.parallel {
				t.Errorf("got %d worlds, beside %v, parallel %d; want %d, %v, %d", p.StorageWorlds, p.Beside, p.TestParallel, tc.worlds, tc.beside, tc.parallel)
			}
			if (p.BesideAfter > 0) != tc.after || p.BesideAfter > 0 && p.BesideAfter < besideAfter {
				t.Errorf("beside after %s, want %v (and at least %s when later)", p.BesideAfter, tc.after, besideAfter)
			}
			if p.Slowness < 1 || p.Slowness <= tc.slownessAbove {
				t.Errorf("slowness %.2f, want at least 1 and above %.2f", p.Slowness, tc.slownessAbove)
			}
			if !strings.Contains(p.Why, "capacity") {
				t.Errorf("the reason does not say what was measured: %q", p.Why)
			}
		})
	}
}

func TestCalibrationMedian(t *testing.T) {
	c := Calibration{Rounds: []time.Duration{3 * time.Second, time.Second, 2 * time.Second}}
	if got := c.Round(); got != 2*time.Second {
		t.Errorf("median round %s, want 2s", got)
	}
	if c.Rounds[0] != 3*time.Second {
		t.Error("Round reordered the rounds")
	}
}

func TestSlownessFromEnvironment(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  float64
	}{
		{"", 1}, {"2.5", 2.5}, {"0.5", 1}, {"garbage", 1}, {"NaN", 1}, {"+Inf", 1},
	} {
		t.Run("When "+SlownessEnv+" is "+tc.value+", it should be as measured or 1", func(t *testing.T) {
			t.Setenv(SlownessEnv, tc.value)
			if got := Slowness(); got != tc.want {
				t.Errorf("Slowness() = %v, want %v", got, tc.want)
			}
			if got, want := Scale(time.Minute), time.Duration(float64(time.Minute)*tc.want); got != want {
				t.Errorf("Scale(1m) = %s, want %s", got, want)
			}
		})
	}
}

func TestCalibrateMeasures(t *testing.T) {
	if testing.Short() {
		t.Skip("hashes half a GiB")
	}
	c := Calibrate(1)
	if len(c.Rounds) != 1 || c.Rounds[0] <= 0 || c.CPUs < 1 {
		t.Fatalf("calibration %+v", c)
	}
	if c.Capacity() <= 0 || c.Slowness() < 1 {
		t.Errorf("capacity %.2f, slowness %.2f", c.Capacity(), c.Slowness())
	}
}

func TestReport(t *testing.T) {
	Started("cluster test: API server", 1500*time.Millisecond)
	state.mu.Lock()
	state.samples = append(state.samples, sample{at: time.Now(), load1: 3.5, busy: 0.97, steal: 0.02})
	state.mu.Unlock()
	r := Report()
	for _, want := range []string{"load now", "CPUs", "slowness", "3.5, 97%, 2%", "cluster test: API server, 1.5s"} {
		if !strings.Contains(r, want) {
			t.Errorf("the report lacks %q:\n%s", want, r)
		}
	}
}

func TestReadCPU(t *testing.T) {
	c, ok := readCPU()
	if !ok {
		t.Skip("no /proc/stat here")
	}
	if c.total == 0 || c.idle > c.total || c.steal > c.total {
		t.Errorf("implausible CPU times %+v", c)
	}
}
