package realcloud

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/schedulerstats"
	volservices "github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/services"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/aggregates"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/hypervisors"
	computeservices "github.com/gophercloud/gophercloud/v2/openstack/compute/v2/services"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// FlavorName is the flavor servers are created with: tiny, diskless (servers boot from volumes)
// and public.
const FlavorName = "realcloud.tiny"

// setupZones waits for every compute and volume service to report up, puts each compute host
// into an aggregate carrying its zone (Nova's zones are aggregates' metadata; nova-api mirrors
// the membership to Placement, whose prefilter places servers by zone), waits for both Cinder
// backends to reach the scheduler, and creates the flavor.
func (c *Cloud) setupZones(ctx context.Context) error {
	admin, err := c.adminClient(ctx)
	if err != nil {
		return err
	}
	eo := gophercloud.EndpointOpts{Region: c.opts.Region}
	compute, err := openstack.NewComputeV2(admin, eo)
	if err != nil {
		return err
	}
	volume, err := openstack.NewBlockStorageV3(admin, eo)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	alive := func() error { return procs.FirstExit(c.processes()...) }

	var last error
	if err := procs.Poll(ctx, procs.Wait{What: "Nova's services up", Interval: time.Second, Alive: alive, Last: func() error { return last }},
		func() (bool, error) {
			last = upServices(ctx, compute, volume, false)
			return last == nil, nil
		}); err != nil {
		return err
	}
	// A compute host is usable once it is mapped to its cell, which nova-manage's discovery
	// does for the compute nodes it finds there; each nova-compute writes its node at its first
	// resource update, a moment after its service reports up. os-hypervisors lists only mapped
	// nodes, so it tells when the discovery has seen both.
	if err := procs.Poll(ctx, procs.Wait{What: "both compute hosts mapped to cell1", Interval: time.Second, Alive: alive, Last: func() error { return last }},
		func() (bool, error) {
			if last = c.runPython(ctx, "nova-manage", "nova-manage", "--config-file", filepath.Join(c.dir, "nova", "nova.conf"),
				"cell_v2", "discover_hosts", "--verbose"); last != nil {
				return false, nil //nolint:nilerr // not yet: poll again, last says why
			}
			last = mappedComputeHosts(ctx, compute)
			return last == nil, nil
		}); err != nil {
		return err
	}
	for i, host := range computeHosts {
		agg, err := aggregates.Create(ctx, compute, aggregates.CreateOpts{Name: c.opts.ComputeZones[i], AvailabilityZone: c.opts.ComputeZones[i]}).Extract()
		if err != nil {
			return fmt.Errorf("creating aggregate %s: %w", c.opts.ComputeZones[i], err)
		}
		if _, err := aggregates.AddHost(ctx, compute, agg.ID, aggregates.AddHostOpts{Host: host}).Extract(); err != nil {
			return fmt.Errorf("adding %s to aggregate %s: %w", host, agg.Name, err)
		}
	}
	disk := 0
	if _, err := flavors.Create(ctx, compute, flavors.CreateOpts{Name: FlavorName, RAM: 128, VCPUs: 1, Disk: &disk}).Extract(); err != nil {
		return fmt.Errorf("creating flavor: %w", err)
	}
	return procs.Poll(ctx, procs.Wait{What: "Cinder's services up and both backends reported", Interval: time.Second, Alive: alive, Last: func() error { return last }},
		func() (bool, error) {
			if last = upServices(ctx, compute, volume, true); last != nil {
				return false, nil //nolint:nilerr // not yet: poll again, last says why
			}
			last = c.poolsReported(ctx, volume)
			return last == nil, nil
		})
}

// mappedComputeHosts fails until os-hypervisors lists every compute host.
func mappedComputeHosts(ctx context.Context, compute *gophercloud.ServiceClient) error {
	pages, err := hypervisors.List(compute, nil).AllPages(ctx)
	if err != nil {
		return err
	}
	list, err := hypervisors.ExtractHypervisors(pages)
	if err != nil {
		return err
	}
	var have []string
	for _, h := range list {
		have = append(have, h.HypervisorHostname)
	}
	for _, h := range computeHosts {
		if !slices.Contains(have, h) {
			return fmt.Errorf("no compute node %s yet (have %v)", h, have)
		}
	}
	return nil
}

// upServices returns an error naming the services not up yet, of Nova or (volume) of Cinder.
func upServices(ctx context.Context, compute, volume *gophercloud.ServiceClient, cinder bool) error {
	var states map[string]string
	if cinder {
		pages, err := volservices.List(volume, nil).AllPages(ctx)
		if err != nil {
			return err
		}
		list, err := volservices.ExtractServices(pages)
		if err != nil {
			return err
		}
		states = map[string]string{}
		for _, s := range list {
			states[s.Binary+"@"+s.Host] = s.State
		}
		for _, b := range backends {
			if _, ok := states["cinder-volume@"+volumeHost+"@"+b]; !ok {
				states["cinder-volume@"+volumeHost+"@"+b] = "missing"
			}
		}
		for _, b := range []string{"cinder-scheduler", "cinder-backup"} {
			if _, ok := states[b+"@"+volumeHost]; !ok {
				states[b+"@"+volumeHost] = "missing"
			}
		}
	} else {
		pages, err := computeservices.List(compute, nil).AllPages(ctx)
		if err != nil {
			return err
		}
		list, err := computeservices.ExtractServices(pages)
		if err != nil {
			return err
		}
		states = map[string]string{"nova-conductor@controller": "missing", "nova-scheduler@controller": "missing"}
		for _, h := range computeHosts {
			states["nova-compute@"+h] = "missing"
		}
		for _, s := range list {
			states[s.Binary+"@"+s.Host] = s.State
		}
	}
	var down []string
	for name, state := range states {
		if state != "up" {
			down = append(down, name+" "+state)
		}
	}
	if len(down) > 0 {
		slices.Sort(down)
		return fmt.Errorf("not up: %s", strings.Join(down, ", "))
	}
	return nil
}

// poolsReported fails until the scheduler knows both backends' pools: cinder-volume reports its
// capabilities after its start, and a volume created before that finds no valid backend.
func (c *Cloud) poolsReported(ctx context.Context, volume *gophercloud.ServiceClient) error {
	pages, err := schedulerstats.List(volume, schedulerstats.ListOpts{Detail: true}).AllPages(ctx)
	if err != nil {
		return err
	}
	pools, err := schedulerstats.ExtractStoragePools(pages)
	if err != nil {
		return err
	}
	var names []string
	for _, p := range pools {
		names = append(names, p.Name)
	}
	for _, b := range backends {
		if !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, volumeHost+"@"+b+"#") }) {
			return fmt.Errorf("pool of %s not reported yet (have %v)", b, names)
		}
	}
	return nil
}
