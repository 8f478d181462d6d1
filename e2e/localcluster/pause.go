package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// stopWait bounds how long Pause waits for a component's threads to stop.
const stopWait = 30 * time.Second

// Pause freezes one component (for example "kube-apiserver") with SIGSTOP on its process group.
// A frozen API server keeps its port and its open connections but answers nothing, which is how
// an unreachable API server looks to a client: requests hang until the client gives up, rather
// than failing fast with "connection refused". Resume thaws it with all its state intact.
//
// The kernel stops a process only once one of its threads has been scheduled to take the
// signal, and the others after it; on a busy machine that takes a while, during which the
// process still serves. Pause therefore returns only once every thread of the component is
// stopped.
//
// Resume a paused component before Stop: a frozen process cannot act on SIGTERM, so Stop would
// wait out its grace period and kill it.
func (c *Cluster) Pause(component string) error {
	if err := c.signal(component, syscall.SIGSTOP); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), stopWait)
	defer cancel()
	var running int
	return procs.Poll(ctx, procs.Wait{
		What:     fmt.Sprintf("every thread of %s of cluster %s to stop after SIGSTOP", component, c.name),
		Interval: 5 * time.Millisecond,
		Last:     func() error { return fmt.Errorf("%d threads still run", running) },
	}, func() (bool, error) {
		var err error
		running, err = c.runningThreads(component)
		return running == 0, err
	})
}

// Resume thaws a component frozen by Pause. Resuming a running component does nothing.
func (c *Cluster) Resume(component string) error {
	return c.signal(component, syscall.SIGCONT)
}

// signal sends sig to the process group of every running process of component.
func (c *Cluster) signal(component string, sig syscall.Signal) error {
	found := false
	for _, p := range c.processes() {
		if p.Name() != component || p.Exited() {
			continue
		}
		found = true
		if err := p.Signal(sig); err != nil {
			return fmt.Errorf("sending %s to %s of cluster %s: %w", sig, component, c.name, err)
		}
	}
	if !found {
		return fmt.Errorf("cluster %s has no running %s", c.name, component)
	}
	return nil
}

// runningThreads counts the threads of component's running processes that are not stopped.
func (c *Cluster) runningThreads(component string) (int, error) {
	n := 0
	for _, p := range c.processes() {
		if p.Name() != component || p.Exited() {
			continue
		}
		states, err := threadStates(p.Pid())
		if err != nil {
			return 0, fmt.Errorf("reading the threads of %s of cluster %s: %w", component, c.name, err)
		}
		for _, s := range states {
			if !stoppedState(s) {
				n++
			}
		}
	}
	return n, nil
}

// threadStates returns the state letter of each thread of process pid, from /proc. A thread
// that ends while being read is left out.
func threadStates(pid int) ([]byte, error) {
	dirs, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil {
		return nil, err
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("process %d has no threads in /proc", pid)
	}
	var states []byte
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if s, ok := procs.StatState(string(b)); ok {
			states = append(states, s)
		}
	}
	return states, nil
}

// stoppedState says whether a thread state letter is a stop: by a signal (T) or, for a traced
// thread, by its tracer (t). A dead or zombie thread (X, Z) serves nothing either.
func stoppedState(s byte) bool {
	return s == 'T' || s == 't' || s == 'X' || s == 'Z'
}
