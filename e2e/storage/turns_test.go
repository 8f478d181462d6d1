//go:build e2e

package storage

import (
	"flag"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The storage tests' worlds run as many at once as -worlds allows (make test chooses it from the
// machine, see package machine): three on a machine with the reference's two cores, two on a
// slower or busier one, where a third world would only make every wait of the other two longer.
// Each world has clusters and nodes of its own and mostly waits on pods and volumes.
//
// The worlds start in a fixed order, each once those before it have started and a place is free:
// the real cloud's two worlds (TestStorageRealCloud), which run in step and so take two places
// together, first, as the longest (its HyperShift world ends with the upstream suite's CI subset);
// then the fake cloud's standalone world, the longer of its two; then its HyperShift world. A world
// gives its place back when it ends, so with three places the HyperShift world fills the place of
// the first world to end, and with two the fake cloud's worlds follow the real cloud's, the longer
// one in the place its standalone world leaves when its scenarios end.
var worldsAtOnce = flag.Int("worlds", 3, "storage worlds that run at once (at least 2: the real cloud's two run in step)")

// worldOrder is the order in which the storage tests' worlds start.
var worldOrder = []string{"TestStorageRealCloud", "TestStorageStandalone", "TestStorageHyperShift"}

var places = struct {
	mu   sync.Mutex
	cond *sync.Cond
	// taken counts the places of running worlds; started the tests whose worlds have their places.
	taken   int
	started map[string]bool
}{started: map[string]bool{}}

func init() { places.cond = sync.NewCond(&places.mu) }

// takePlaces waits until the worlds of the tests before t in worldOrder have started and n places
// are free (all of them, when -worlds is below n), and takes them. Each place is given back by
// calling the function it returns once per place, or by t's end for those still held.
func takePlaces(t *testing.T, n int) (giveBack func()) {
	start := time.Now()
	want := min(n, max(*worldsAtOnce, 1))
	before := worldOrder[:max(0, slices.Index(worldOrder, t.Name()))]
	places.mu.Lock()
	for !placeFree(before, want) {
		places.cond.Wait()
	}
	places.taken += want
	places.started[t.Name()] = true
	places.cond.Broadcast()
	places.mu.Unlock()
	if waited := time.Since(start); waited > time.Second {
		t.Logf("Waited %s for a storage world's place (%d at once)", waited.Round(time.Second), *worldsAtOnce)
	}
	var mu sync.Mutex
	held := want
	giveBack = func() {
		mu.Lock()
		defer mu.Unlock()
		if held == 0 {
			return
		}
		held--
		places.mu.Lock()
		places.taken--
		places.cond.Broadcast()
		places.mu.Unlock()
	}
	t.Cleanup(func() {
		for range want {
			giveBack()
		}
	})
	return giveBack
}

// placeFree says, with places.mu held, whether a world after the tests before may take want
// places now.
func placeFree(before []string, want int) bool {
	for _, name := range before {
		if selected(name) && !places.started[name] {
			return false
		}
	}
	return places.taken+want <= max(*worldsAtOnce, want)
}

// selected says whether go test's -run and -skip select the top-level test name. Only the
// patterns' first level counts: the subtests of a selected test may still be filtered out.
func selected(name string) bool {
	// go test has checked the patterns already; one that does not compile here matches nothing.
	match := func(flagName string, empty bool) bool {
		f := flag.Lookup(flagName)
		if f == nil || f.Value.String() == "" {
			return empty
		}
		top, _, _ := strings.Cut(f.Value.String(), "/")
		re, err := regexp.Compile(top)
		return err == nil && re.MatchString(name)
	}
	return match("test.run", true) && !match("test.skip", false)
}
