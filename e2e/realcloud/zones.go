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
	computeazs "github.com/gophercloud/gophercloud/v2/openstack/compute/v2/availabilityzones"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/hypervisors"
	computeservices "github.com/gophercloud/gophercloud/v2/openstack/compute/v2/services"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/machine"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// FlavorName is the flavor servers are created with: tiny, diskless (servers boot from volumes)
// and public.
const FlavorName = "realcloud.tiny"

// zonesSetupTimeout bounds setupZones on the reference machine: Nova's and Cinder's services
// reporting up, both compute hosts mapped, both backends reported.
// It stretches with the machine's slowness, as every start-up does.
const zonesSetupTimeout = 4 * time.Minute

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
	ctx, cancel := context.WithTimeout(ctx, machine.Scale(zonesSetupTimeout))
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

// SetComputeZone sets the availability zone of compute host index (0 or 1) to name: the zone of
// the host's aggregate, which is how a cloud's administrator renames a zone. Nova refuses while
// the host runs a server, whose zone would change under its user; the error then carries Nova's
// message. It returns once the member's zone list (GET os-availability-zone) names the zone,
// and ComputeZones names it from then on; the volume zones stay as they are.
//
// nova-api keeps a cache of each host's zone (availability_zones.py, an hour), but the zone
// list does not read it, and the aggregate update resets it in the process that made it: with
// one API worker the list follows at once.
func (c *Cloud) SetComputeZone(ctx context.Context, index int, name string) error {
	if index < 0 || index >= len(computeHosts) {
		return fmt.Errorf("setting a compute zone: no compute host %d (have %d)", index, len(computeHosts))
	}
	host := computeHosts[index]
	// gophercloud leaves an empty zone out of the request, which Nova would take as no change.
	if name == "" {
		return fmt.Errorf("setting the zone of compute host %s: empty name", host)
	}
	admin, err := c.adminClient(ctx)
	if err != nil {
		return err
	}
	compute, err := openstack.NewComputeV2(admin, gophercloud.EndpointOpts{Region: c.opts.Region})
	if err != nil {
		return err
	}
	agg, err := hostAggregate(ctx, compute, host)
	if err != nil {
		return err
	}
	if _, err := aggregates.Update(ctx, compute, agg.ID, aggregates.UpdateOpts{AvailabilityZone: name}).Extract(); err != nil {
		return fmt.Errorf("setting the zone of compute host %s to %q: %w", host, name, refusal(err))
	}
	c.mu.Lock()
	old := c.opts.ComputeZones[index]
	c.opts.ComputeZones[index] = name
	// The old name stays listed while the other host is in it.
	oldStays := c.opts.ComputeZones[1-index] == old
	c.mu.Unlock()

	start := time.Now()
	memberCompute, err := c.memberCompute(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last error
	if err := procs.Poll(ctx, procs.Wait{What: fmt.Sprintf("the member's compute zones to list %q", name), Interval: 500 * time.Millisecond,
		Last: func() error { return last }},
		func() (bool, error) {
			pages, err := computeazs.List(memberCompute).AllPages(ctx)
			if err != nil {
				return false, err
			}
			zones, err := computeazs.ExtractAvailabilityZones(pages)
			if err != nil {
				return false, err
			}
			var names []string
			for _, z := range zones {
				names = append(names, z.ZoneName)
			}
			last = fmt.Errorf("listed: %v", names)
			return slices.Contains(names, name) && (old == name || oldStays || !slices.Contains(names, old)), nil
		}); err != nil {
		return err
	}
	c.logf("Real OpenStack: compute host %s in zone %q (was %q); the member's zone list followed in %s",
		host, name, old, time.Since(start).Round(time.Millisecond))
	return nil
}

// hostAggregate finds the aggregate setupZones put host into.
func hostAggregate(ctx context.Context, compute *gophercloud.ServiceClient, host string) (*aggregates.Aggregate, error) {
	pages, err := aggregates.List(compute).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing aggregates: %w", err)
	}
	list, err := aggregates.ExtractAggregates(pages)
	if err != nil {
		return nil, fmt.Errorf("listing aggregates: %w", err)
	}
	for i := range list {
		if slices.Contains(list[i].Hosts, host) {
			return &list[i], nil
		}
	}
	return nil, fmt.Errorf("no aggregate holds compute host %s", host)
}
