package realcloud

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	volumeazs "github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/availabilityzones"
	volservices "github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/services"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// cinderVolume is the supervised process of Cinder's volume service, one process for both
// backends, and the binary its service records carry.
const cinderVolume = "cinder-volume"

// SetVolumeZones renames Cinder's availability zones: zones[i] becomes the zone of backend i,
// the first also the cloud's default zone, as a cloud's administrators rename them: in
// cinder.conf, then restarting the services that read it. Both zones change in one restart;
// pass VolumeZones with one name replaced to rename one.
//
// What this Cinder (Zed) makes of it, read in its source:
//   - cinder-volume reads backend_availability_zone when it starts, and its service record takes
//     the new zone at the first heartbeat after (Service.report_state, report_interval after the
//     start). os-availability-zone lists the zones of the volume services' records, read from
//     the database at every request: the old name goes with the last record that carried it.
//   - Volumes keep the zone they were created in.
//   - cinder-api checks a new volume's zone against a list it caches for an hour
//     (az_cache_duration; a zone it refuses refreshes the list), always accepts
//     storage_availability_zone, and gives a volume without a zone default_availability_zone,
//     all read when it starts: it restarts too, so that a volume in a new zone is accepted at
//     once and none goes to a zone no backend serves.
//   - cinder-backup's zone is storage_availability_zone, the first zone: it restarts when that
//     one changes. cinder-scheduler, whose own record keeps the old name (nothing reads it),
//     runs on and keeps the backends' capabilities, so scheduling does not wait for a report.
//
// A volume being created while cinder-volume restarts ends in error, as on any restart of it:
// rename when nothing is in flight. A service StopService stopped stays stopped and reads the
// new names when StartService starts it, but cinder-api must run: the zone list is read through
// it. SetVolumeZones returns once os-services lists each backend up in its new zone with a
// heartbeat of the new process (cinder-backup too when it restarted) and the member's zone list
// (GET os-availability-zone) names exactly zones; VolumeZones names them from then on.
func (c *Cloud) SetVolumeZones(ctx context.Context, zones []string) error {
	if len(zones) != len(backends) {
		return fmt.Errorf("setting the volume zones: %d names for %d backends", len(zones), len(backends))
	}
	if slices.Contains(zones, "") {
		return fmt.Errorf("setting the volume zones to %q: empty name", zones)
	}
	c.svcMu.Lock()
	defer c.svcMu.Unlock()
	old := c.VolumeZones()
	if slices.Equal(old, zones) {
		return nil
	}
	names := []string{cinderVolume, ServiceCinderAPI}
	if zones[0] != old[0] {
		names = append(names, ServiceCinderBackup)
	}
	var running []*procs.Process
	for _, name := range names {
		p, err := c.proc(name)
		if err != nil {
			return fmt.Errorf("setting the volume zones: %s: %w", name, err)
		}
		if !p.Exited() {
			running = append(running, p)
		} else if name != ServiceCinderBackup {
			return fmt.Errorf("setting the volume zones: %s is stopped", name)
		}
	}
	admin, member, err := c.volumeClients(ctx)
	if err != nil {
		return fmt.Errorf("setting the volume zones: %w", err)
	}
	// What the restarted services' first heartbeats must be newer than: a record's zone can be
	// the new one already (a backend renamed back before its next heartbeat) and prove nothing.
	before, err := volumeServices(ctx, admin)
	if err != nil {
		return fmt.Errorf("setting the volume zones: %w", err)
	}
	if err := c.writeCinderConf(zones); err != nil {
		return err
	}
	c.mu.Lock()
	c.opts.VolumeZones = slices.Clone(zones)
	c.mu.Unlock()

	start := time.Now()
	var wg sync.WaitGroup
	for _, p := range running {
		wg.Go(func() { p.Stop(restartGrace) })
	}
	wg.Wait()
	stopped := time.Since(start)
	started := map[string]*procs.Process{}
	for _, p := range running {
		q, err := c.restart(p.Name())
		if err != nil {
			return fmt.Errorf("setting the volume zones: %w", err)
		}
		started[q.Name()] = q
	}
	if err := c.waitHTTP(ctx, ServiceCinderAPI, c.internalURL(c.ports.cinder)+"/", started[ServiceCinderAPI]); err != nil {
		return fmt.Errorf("setting the volume zones: %w", err)
	}
	if err := waitVolumeZones(ctx, admin, member, zones, before, started); err != nil {
		return fmt.Errorf("setting the volume zones to %q: %w", zones, err)
	}
	c.logf("Real OpenStack: volume zones %q (were %q); restarted %s (stopped in %s), the member's zone list followed in %s",
		zones, old, strings.Join(slices.Sorted(maps.Keys(started)), ", "), stopped.Round(100*time.Millisecond),
		time.Since(start).Round(100*time.Millisecond))
	return nil
}

// volumeClients are block-storage clients of the admin, who may list Cinder's services, and of
// the member, whose zone list is what a cluster sees.
func (c *Cloud) volumeClients(ctx context.Context) (admin, member *gophercloud.ServiceClient, err error) {
	eo := gophercloud.EndpointOpts{Region: c.opts.Region}
	a, err := c.adminClient(ctx)
	if err != nil {
		return nil, nil, err
	}
	if admin, err = openstack.NewBlockStorageV3(a, eo); err != nil {
		return nil, nil, err
	}
	m, err := c.Client(ctx, c.Member())
	if err != nil {
		return nil, nil, err
	}
	if member, err = openstack.NewBlockStorageV3(m, eo); err != nil {
		return nil, nil, err
	}
	return admin, member, nil
}

// waitVolumeZones waits up to three minutes for os-services to list every backend up in its zone
// of zones with a heartbeat newer than before's, and cinder-backup so in the first zone when it
// restarted, then for the member's zone list to name exactly zones.
func waitVolumeZones(ctx context.Context, admin, member *gophercloud.ServiceClient, zones []string,
	before []volservices.Service, started map[string]*procs.Process) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	want := map[string]string{}
	for i, b := range backends {
		want[cinderVolume+"@"+volumeHost+"@"+b] = zones[i]
	}
	if started[ServiceCinderBackup] != nil {
		want[ServiceCinderBackup+"@"+volumeHost] = zones[0]
	}
	heartbeats := map[string]time.Time{}
	for _, s := range before {
		heartbeats[s.Binary+"@"+s.Host] = s.UpdatedAt
	}
	var ps []*procs.Process
	for _, p := range started {
		ps = append(ps, p)
	}
	var last error
	wait := procs.Wait{What: "Cinder's services in their new zones", Interval: time.Second,
		Log: started[cinderVolume].LogPath(), Alive: func() error { return procs.FirstExit(ps...) }, Last: func() error { return last }}
	if err := procs.Poll(ctx, wait, func() (bool, error) {
		list, err := volumeServices(ctx, admin)
		if err != nil {
			last = err
			return false, nil //nolint:nilerr // not yet: poll again, last says why
		}
		var pending []string
		for key, zone := range want {
			i := slices.IndexFunc(list, func(s volservices.Service) bool { return s.Binary+"@"+s.Host == key })
			switch {
			case i < 0:
				pending = append(pending, key+" not listed")
			case list[i].State != "up" || list[i].Zone != zone || !list[i].UpdatedAt.After(heartbeats[key]):
				pending = append(pending, fmt.Sprintf("%s %s in %q (heartbeat %s)", key, list[i].State, list[i].Zone,
					list[i].UpdatedAt.Format(time.RFC3339Nano)))
			}
		}
		slices.Sort(pending)
		last = errors.New(strings.Join(pending, ", "))
		return len(pending) == 0, nil
	}); err != nil {
		return err
	}
	wait = procs.Wait{What: fmt.Sprintf("the member's volume zones to be %q", zones), Interval: 500 * time.Millisecond,
		Last: func() error { return last }}
	return procs.Poll(ctx, wait, func() (bool, error) {
		pages, err := volumeazs.List(member).AllPages(ctx)
		if err != nil {
			return false, err
		}
		list, err := volumeazs.ExtractAvailabilityZones(pages)
		if err != nil {
			return false, err
		}
		var listed []string
		for _, z := range list {
			listed = append(listed, z.ZoneName)
		}
		last = fmt.Errorf("listed: %q", listed)
		slices.Sort(listed)
		return slices.Equal(listed, slices.Compact(slices.Sorted(slices.Values(zones)))), nil
	})
}

// volumeServices lists Cinder's services (os-services) with an admin's client.
func volumeServices(ctx context.Context, admin *gophercloud.ServiceClient) ([]volservices.Service, error) {
	pages, err := volservices.List(admin, nil).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing Cinder's services: %w", err)
	}
	list, err := volservices.ExtractServices(pages)
	if err != nil {
		return nil, fmt.Errorf("listing Cinder's services: %w", err)
	}
	return list, nil
}
