package localcluster

import (
	"fmt"
	"syscall"
)

// Pause freezes one component (for example "kube-apiserver") with SIGSTOP on its process group.
// A frozen API server keeps its port and its open connections but answers nothing, which is how
// an unreachable API server looks to a client: requests hang until the client gives up, rather
// than failing fast with "connection refused". Resume thaws it with all its state intact.
//
// Resume a paused component before Stop: a frozen process cannot act on SIGTERM, so Stop would
// wait out its grace period and kill it.
func (c *Cluster) Pause(component string) error {
	return c.signal(component, syscall.SIGSTOP)
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
