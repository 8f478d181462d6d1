package realcloud

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// NetworksNoneMicroversion is the first compute microversion that takes networks "none": a
// server without ports, since the cloud runs no Neutron.
const NetworksNoneMicroversion = "2.37"

// buildAborted matches the fault Nova gives a server whose build it aborted.
var buildAborted = regexp.MustCompile(`Build of instance \S+ aborted: `)

// CreateServer creates a server as the member user in compute zone zone, booted from a new
// bootable 1 GiB volume in the matching volume zone, without networks, and returns its UUID
// once it is ACTIVE. The boot volume goes with the server when the server is deleted.
//
// A server whose build fails is logged with what the services logged of it, and one whose build
// Nova aborted is deleted and made once more. Two aborts were seen in CI runs on a loaded
// machine: "Failed to allocate the network(s)", although the server asks for no network (its
// logs went with the run), and "Unable to update the attachment. (HTTP 500)": Cinder answers
// 500 there for any error not its own, and the failures reproduced here under load were
// SQLite's "database is locked" (see sitecustomize).
func (c *Cloud) CreateServer(ctx context.Context, name, zone string) (string, error) {
	id, err := c.createServer(ctx, name, zone)
	if err != nil && id != "" {
		c.logf("Real OpenStack: server %s of %s failed; what the services logged of it:\n%s", id, name, c.Evidence(err.Error(), id))
	}
	if err == nil || id == "" || !buildAborted.MatchString(err.Error()) {
		return id, err
	}
	c.logf("Real OpenStack: %v; deleting that server and building it once more", err)
	if derr := c.DeleteServer(ctx, id); derr != nil {
		return id, fmt.Errorf("%w; deleting the failed build: %w", err, derr)
	}
	return c.createServer(ctx, name, zone)
}

// memberCompute is a Nova client of the member user.
func (c *Cloud) memberCompute(ctx context.Context) (*gophercloud.ServiceClient, error) {
	provider, err := c.Client(ctx, c.Member())
	if err != nil {
		return nil, err
	}
	return openstack.NewComputeV2(provider, gophercloud.EndpointOpts{Region: c.opts.Region})
}

// DeleteServer deletes a server as the member user and waits until it is gone.
func (c *Cloud) DeleteServer(ctx context.Context, id string) error {
	compute, err := c.memberCompute(ctx)
	if err != nil {
		return err
	}
	if err := servers.Delete(ctx, compute, id).ExtractErr(); err != nil && !gophercloud.ResponseCodeIs(err, 404) {
		return fmt.Errorf("deleting server %s: %w", id, err)
	}
	return WaitServerGone(ctx, compute, id)
}

// createServer makes one attempt of CreateServer.
func (c *Cloud) createServer(ctx context.Context, name, zone string) (string, error) {
	zones := c.ComputeZones()
	i := slices.Index(zones, zone)
	if i < 0 {
		return "", fmt.Errorf("no compute zone %q (have %v)", zone, zones)
	}
	provider, err := c.Client(ctx, c.Member())
	if err != nil {
		return "", err
	}
	eo := gophercloud.EndpointOpts{Region: c.opts.Region}
	compute, err := openstack.NewComputeV2(provider, eo)
	if err != nil {
		return "", err
	}
	compute.Microversion = NetworksNoneMicroversion
	volume, err := openstack.NewBlockStorageV3(provider, eo)
	if err != nil {
		return "", err
	}

	vol, err := volumes.Create(ctx, volume, volumes.CreateOpts{Name: name + "-boot", Size: 1, AvailabilityZone: c.VolumeZones()[i]}, nil).Extract()
	if err != nil {
		return "", fmt.Errorf("creating boot volume of %s: %w", name, err)
	}
	if err := WaitVolume(ctx, volume, vol.ID, "available"); err != nil {
		return "", err
	}
	if err := volumes.SetBootable(ctx, volume, vol.ID, volumes.BootableOpts{Bootable: true}).ExtractErr(); err != nil {
		return "", fmt.Errorf("marking volume %s bootable: %w", vol.ID, err)
	}
	flavorID, err := flavorID(ctx, compute)
	if err != nil {
		return "", err
	}
	srv, err := servers.Create(ctx, compute, servers.CreateOpts{
		Name: name, FlavorRef: flavorID, AvailabilityZone: zone, Networks: "none",
		BlockDevice: []servers.BlockDevice{{
			SourceType: servers.SourceVolume, DestinationType: servers.DestinationVolume,
			UUID: vol.ID, BootIndex: 0, DeleteOnTermination: true,
		}},
	}, nil).Extract()
	if err != nil {
		return "", fmt.Errorf("creating server %s: %w", name, err)
	}
	if err := WaitServer(ctx, compute, srv.ID, "ACTIVE"); err != nil {
		return srv.ID, err
	}
	return srv.ID, nil
}

// WaitServerGone waits up to three minutes for a deleted server to disappear; a server in
// ERROR ends the wait at once, with Nova's fault.
func WaitServerGone(ctx context.Context, client *gophercloud.ServiceClient, id string) error {
	return poll(ctx, 3*time.Minute, "server "+id+" deleted", func() (bool, error) {
		s, err := servers.Get(ctx, client, id).Extract()
		if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if s.Status == "ERROR" {
			return false, fmt.Errorf("server %s is ERROR: %s", id, s.Fault.Message)
		}
		return false, nil
	})
}

// flavorID finds FlavorName's ID.
func flavorID(ctx context.Context, compute *gophercloud.ServiceClient) (string, error) {
	pages, err := flavors.ListDetail(compute, nil).AllPages(ctx)
	if err != nil {
		return "", fmt.Errorf("listing flavors: %w", err)
	}
	list, err := flavors.ExtractFlavors(pages)
	if err != nil {
		return "", err
	}
	for _, f := range list {
		if f.Name == FlavorName {
			return f.ID, nil
		}
	}
	return "", fmt.Errorf("flavor %s not found", FlavorName)
}

// WaitVolume waits up to two minutes for a volume's status; "error" ends the wait at once.
func WaitVolume(ctx context.Context, client *gophercloud.ServiceClient, id, status string) error {
	return poll(ctx, 2*time.Minute, "volume "+id+" "+status, func() (bool, error) {
		v, err := volumes.Get(ctx, client, id).Extract()
		if err != nil {
			return false, err
		}
		if v.Status == "error" || v.Status == "error_deleting" {
			return false, fmt.Errorf("volume %s is %s", id, v.Status)
		}
		return v.Status == status, nil
	})
}

// WaitServer waits up to three minutes for a server's status; ERROR ends the wait at once,
// with Nova's fault.
func WaitServer(ctx context.Context, client *gophercloud.ServiceClient, id, status string) error {
	return poll(ctx, 3*time.Minute, "server "+id+" "+status, func() (bool, error) {
		s, err := servers.Get(ctx, client, id).Extract()
		if err != nil {
			return false, err
		}
		if s.Status == "ERROR" {
			return false, fmt.Errorf("server %s is ERROR: %s", id, s.Fault.Message)
		}
		return s.Status == status, nil
	})
}

// poll waits with procs.Poll, bounded by timeout, checking every half second.
func poll(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return procs.Poll(ctx, procs.Wait{What: what, Interval: 500 * time.Millisecond}, cond)
}
