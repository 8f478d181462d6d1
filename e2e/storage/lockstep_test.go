package storage

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/machine"
)

// lockstep keeps the worlds that share one real cloud in step where a scenario changes the cloud
// for all of them: a service stopped or started, a zone renamed, the member's password changed.
// Every world runs the same scenarios in the same order, each world's checks on its own; at such a
// change every world still running waits for the others, the change is made once, and all go on.
// So one outage, one rename, is observed by every world at once, and no world meets a change it
// did not ask for in the middle of another scenario.
//
// A world whose scenario fails leaves (its scenarios after that are skipped), and so does a world
// whose test ends; the others then go on without it.
type lockstep struct {
	mu   sync.Mutex
	cond *sync.Cond
	// parties are the worlds still in step; arrived of them wait at step.
	parties, arrived int
	step             string
	// round counts the changes made; err is the last one's outcome.
	round int
	err   error
	// afterAll undoes, once every world has ended, what a change left in the cloud.
	afterAll []func() error
	// wait bounds how long a world waits for the others at a change.
	wait time.Duration
}

// lockstepWait bounds how long a world waits for the others at a change: longer than any
// scenario takes between two changes on the reference machine, stretched on a slower one.
var lockstepWait = machine.Scale(25 * time.Minute)

func newLockstep(wait time.Duration) *lockstep {
	l := &lockstep{wait: wait}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// join adds a world and returns what takes it out again (idempotent).
func (l *lockstep) join() (leave func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.parties++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.parties--
			l.cond.Broadcast()
		})
	}
}

// runAfterAll runs what the changes registered to undo once every world has ended, last first.
func (l *lockstep) runAfterAll() error {
	l.mu.Lock()
	fns := l.afterAll
	l.afterAll = nil
	l.mu.Unlock()
	var errs []error
	for _, fn := range slices.Backward(fns) {
		errs = append(errs, fn())
	}
	return errors.Join(errs...)
}

// together waits until every world in step has reached step, has the last one to arrive run
// change, and returns its error to all of them. A world that reaches a different step than the
// others wait at fails: the worlds ran out of step.
func (l *lockstep) together(t testing.TB, step string, change func() error) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.arrived > 0 && l.step != step {
		t.Fatalf("out of step with the other worlds on the shared cloud: here %q, there %q", step, l.step)
	}
	l.step = step
	l.arrived++
	round := l.round
	timer := time.AfterFunc(l.wait, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.cond.Broadcast()
	})
	defer timer.Stop()
	deadline := time.Now().Add(l.wait)
	start := time.Now()
	for l.round == round {
		if l.arrived >= l.parties {
			l.err = change()
			l.arrived = 0
			l.round++
			l.cond.Broadcast()
			break
		}
		if time.Now().After(deadline) {
			l.arrived--
			t.Fatalf("waited %s at %q for the other worlds on the shared cloud", l.wait, step)
		}
		l.cond.Wait()
	}
	if waited := time.Since(start); waited > time.Second {
		t.Logf("Shared cloud: %s after %s waiting for the other worlds", step, waited.Round(time.Second))
	}
	if l.err != nil {
		t.Fatalf("%s: %v", step, l.err)
	}
}

// TestLockstep has two worlds meet at each change: it is made once, by the last to arrive, and
// both get its outcome; a world that leaves lets the other go on alone; one that arrives at
// another step fails; the undos run once, last first.
func TestLockstep(t *testing.T) {
	l := newLockstep(time.Minute)
	leaveA, leaveB := l.join(), l.join()
	var made []string
	var mu sync.Mutex
	change := func(name string) func() error {
		return func() error {
			mu.Lock()
			defer mu.Unlock()
			made = append(made, name)
			return nil
		}
	}
	var wg sync.WaitGroup
	var seenB []string
	wg.Go(func() {
		defer leaveB()
		for _, step := range []string{"stop nova-api", "start nova-api"} {
			l.together(t, step, change(step))
			mu.Lock()
			seenB = append(seenB, slices.Clone(made)...)
			mu.Unlock()
		}
	})
	for _, step := range []string{"stop nova-api", "start nova-api"} {
		l.together(t, step, change(step))
	}
	wg.Wait()
	if want := []string{"stop nova-api", "start nova-api"}; !slices.Equal(made, want) {
		t.Fatalf("changes made %q, want each once: %q", made, want)
	}
	if len(seenB) == 0 || seenB[0] != "stop nova-api" {
		t.Errorf("the second world went on before the first change was made: saw %q", seenB)
	}

	// B has left: A goes on alone, at once.
	start := time.Now()
	l.together(t, "rename zone", change("rename zone"))
	if waited := time.Since(start); waited > 30*time.Second {
		t.Errorf("waited %s for a world that had left", waited)
	}

	// A change's error reaches every world.
	rec := &recordingTB{TB: t}
	runTB(func() { l.together(rec, "fail", func() error { return errors.New("refused") }) })
	if !strings.Contains(rec.fatal, "fail: refused") {
		t.Errorf("a failed change: got %q", rec.fatal)
	}

	// Out of step: C waits at one step, D arrives at another and fails; C then goes on alone.
	leaveC := l.join()
	defer leaveC()
	leaveA()
	leaveD := l.join()
	done := make(chan struct{})
	go func() {
		defer close(done)
		rec := &recordingTB{TB: t}
		runTB(func() { l.together(rec, "stop cinder-api", change("stop cinder-api")) })
		if rec.fatal != "" {
			t.Errorf("the world in step failed: %s", rec.fatal)
		}
	}()
	for {
		l.mu.Lock()
		arrived := l.arrived
		l.mu.Unlock()
		if arrived == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	recD := &recordingTB{TB: t}
	runTB(func() { l.together(recD, "start cinder-api", change("start cinder-api")) })
	if !strings.Contains(recD.fatal, "out of step") {
		t.Errorf("a world at another step: got %q", recD.fatal)
	}
	leaveD()
	leaveD()
	<-done
	if made[len(made)-1] != "stop cinder-api" {
		t.Errorf("the change of the world left in step was not made: %q", made)
	}

	var undone []string
	l.afterAll = append(l.afterAll, func() error { undone = append(undone, "first"); return nil },
		func() error { undone = append(undone, "second"); return errors.New("still there") })
	if err := l.runAfterAll(); err == nil || !slices.Equal(undone, []string{"second", "first"}) {
		t.Errorf("undos: ran %q, error %v; want last first and the error", undone, err)
	}
	if err := l.runAfterAll(); err != nil || len(undone) != 2 {
		t.Errorf("undos ran again: %q, %v", undone, err)
	}
}

// recordingTB records a Fatalf instead of failing the test; runTB runs fn as the test
// goroutine of such a TB would, so that the Fatalf's Goexit ends only fn.
type recordingTB struct {
	testing.TB
	fatal string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Logf(string, ...any) {}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func runTB(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
}
