//go:build e2e

package storage

import (
	"flag"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The storage tests run three at once (go test -parallel): the real cloud's, whose two worlds run
// together for all of it, and the fake cloud's two. On two cores four worlds at once would mostly
// add contention, so the fake cloud's worlds take turns: one runs at a time, plus one for each of
// the real cloud's worlds that has ended, which leaves its share of the processors. The HyperShift
// world, the longer of the two, goes first, so that the standalone world is the one that fills a
// real-cloud world's place when it ends before the HyperShift world.

var fakeTurns = struct {
	mu   sync.Mutex
	cond *sync.Cond
	// running counts the fake-cloud worlds that run, allowed how many may.
	running, allowed int
	// firstTaken says the world that goes first has its turn.
	firstTaken bool
}{allowed: 1}

func init() { fakeTurns.cond = sync.NewCond(&fakeTurns.mu) }

// takeFakeCloudTurn waits for a fake-cloud world's turn and gives it back when t ends. first is
// the world that goes first: the other waits for it while it is one this run selects.
func takeFakeCloudTurn(t *testing.T, first bool) {
	start := time.Now()
	waitFirst := !first && selected("TestStorageHyperShift")
	fakeTurns.mu.Lock()
	for fakeTurns.running >= fakeTurns.allowed || (waitFirst && !fakeTurns.firstTaken) {
		fakeTurns.cond.Wait()
	}
	fakeTurns.running++
	if first {
		fakeTurns.firstTaken = true
		fakeTurns.cond.Broadcast()
	}
	fakeTurns.mu.Unlock()
	t.Cleanup(func() {
		fakeTurns.mu.Lock()
		fakeTurns.running--
		fakeTurns.cond.Broadcast()
		fakeTurns.mu.Unlock()
	})
	if waited := time.Since(start); waited > time.Second {
		t.Logf("Waited %s for a fake-cloud world's turn", waited.Round(time.Second))
	}
}

// realCloudWorldEnded lets one more fake-cloud world run: a real-cloud world has ended.
func realCloudWorldEnded() {
	fakeTurns.mu.Lock()
	fakeTurns.allowed++
	fakeTurns.cond.Broadcast()
	fakeTurns.mu.Unlock()
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
