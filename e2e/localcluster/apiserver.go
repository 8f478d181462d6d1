package localcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"
)

// apiServerName is the component name of the API server process.
const apiServerName = "kube-apiserver"

// StopAPIServer stops the cluster's API server (SIGTERM, then SIGKILL after a few seconds) and
// leaves every other component running, etcd with its data included. Until StartAPIServer,
// clients dialling the API server's address get "connection refused", as during an API server
// outage or upgrade; the controller-manager, scheduler and kwok wait for it like any client.
func (c *Cluster) StopAPIServer() error {
	p := c.component(apiServerName)
	if p == nil || p.exited() {
		return fmt.Errorf("cluster %s has no running %s", c.name, apiServerName)
	}
	p.stop()
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
	if !old.exited() {
		return fmt.Errorf("the %s of cluster %s is still running", apiServerName, c.name)
	}
	p, err := startProcess(apiServerName, old.cmd.Path, old.cmd.Args[1:], nil, filepath.Dir(old.logPath))
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.procs[slices.Index(c.procs, old)] = p
	c.mu.Unlock()
	c.logf("Cluster %s: started %s again (pid %d)", c.name, apiServerName, p.pid())
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	begin := time.Now()
	cfg := c.restConfig
	if err := c.waitAPIServer(ctx, cfg.Host, cfg.CAData, cfg.BearerToken); err != nil {
		return err
	}
	c.logf("Cluster %s: API server ready again after %s", c.name, time.Since(begin).Round(time.Millisecond))
	return nil
}

// component returns the latest process of the named component, or nil.
func (c *Cluster) component(name string) *process {
	procs := c.processes()
	for i := len(procs) - 1; i >= 0; i-- {
		if procs[i].name == name {
			return procs[i]
		}
	}
	return nil
}
