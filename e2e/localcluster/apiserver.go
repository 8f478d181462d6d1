package localcluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/machine"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// apiServerName is the component name of the API server process.
const apiServerName = "kube-apiserver"

// StopAPIServer stops the cluster's API server (SIGTERM, then SIGKILL after a few seconds) and
// leaves every other component running, etcd with its data included. Until StartAPIServer,
// clients dialling the API server's address get "connection refused", as during an API server
// outage or upgrade; the controller-manager, scheduler and kwok wait for it like any client.
func (c *Cluster) StopAPIServer() error {
	p := c.component(apiServerName)
	if p == nil || p.Exited() {
		return fmt.Errorf("cluster %s has no running %s", c.name, apiServerName)
	}
	p.Stop(stopGrace)
	c.logf("Cluster %s: stopped %s", c.name, apiServerName)
	return nil
}

// StartAPIServer starts the API server stopped by StopAPIServer again, with the same arguments:
// the same port, certificates and etcd, so clients reconnect to the address they know and find
// every object as it was. It returns once /readyz answers 200.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	old := c.component(apiServerName)
	if old == nil {
		return fmt.Errorf("cluster %s has no %s", c.name, apiServerName)
	}
	if !old.Exited() {
		return fmt.Errorf("the %s of cluster %s is still running", apiServerName, c.name)
	}
	p, err := old.Restart()
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.procs[slices.Index(c.procs, old)] = p
	c.mu.Unlock()
	c.logf("Cluster %s: started %s again (pid %d)", c.name, apiServerName, p.Pid())
	ctx, cancel := context.WithTimeout(ctx, machine.Scale(startTimeout))
	defer cancel()
	begin := time.Now()
	cfg := c.restConfig
	if err := c.waitAPIServer(ctx, cfg.Host, cfg.CAData, cfg.BearerToken); err != nil {
		return err
	}
	c.logf("Cluster %s: API server ready again after %s", c.name, time.Since(begin).Round(time.Millisecond))
	machine.Started("cluster "+c.name+": API server again", time.Since(begin))
	return nil
}

// component returns the latest process of the named component, or nil.
func (c *Cluster) component(name string) *procs.Process {
	started := c.processes()
	for i := len(started) - 1; i >= 0; i-- {
		if started[i].Name() == name {
			return started[i]
		}
	}
	return nil
}
