//go:build realcloud

package realcloud

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	volumeazs "github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/availabilityzones"
	volservices "github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/services"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	computeazs "github.com/gophercloud/gophercloud/v2/openstack/compute/v2/availabilityzones"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	. "github.com/onsi/gomega"
)

// The admin operations a test runs on a running cloud, checked through the public API as the
// member sees it. TestRealCloud runs them in one cloud, in this order.

// testAppCredentials makes an application credential, authenticates with it, deletes it and
// authenticates no more.
func testAppCredentials(t *testing.T, c *Cloud) {
	g := NewWithT(t)
	ctx := t.Context()
	cred, id, err := c.NewAppCredential(ctx, "checked")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cred.AuthInfo.ApplicationCredentialID).To(Equal(id))
	g.Expect(cred.AuthInfo.AuthURL).To(Equal(c.AuthURL()))
	cl := newClients(t, c, cred)
	_, err = volumes.List(cl.volume, nil).AllPages(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "listing volumes with the new credential")

	g.Expect(c.DeleteAppCredential(ctx, id)).To(Succeed())
	_, err = c.Client(ctx, cred)
	t.Logf("Authenticating with the deleted credential: %v", err)
	// Keystone says the credential is not found rather than that authentication failed.
	g.Expect(gophercloud.ResponseCodeIs(err, http.StatusNotFound)).To(BeTrue(), "%v", err)
	g.Expect(c.DeleteAppCredential(ctx, id)).To(Succeed(), "deleting it again")
	_, err = c.Client(ctx, c.AppCredential())
	g.Expect(err).NotTo(HaveOccurred(), "the cloud's own application credential")
}

// testServiceListing grants and revokes the role the cloud's Cinder policy lets list Cinder's
// services, and checks which credentials see them: Keystone computes a token's roles when it
// validates it, an application credential's are at most those it was made with, and
// cinder-api's keystonemiddleware keeps a validation for token_cache_time (300 s).
func testServiceListing(t *testing.T, c *Cloud) {
	g := NewWithT(t)
	ctx := t.Context()
	var ids []string
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		if err := c.AllowServiceListing(ctx, false); err != nil {
			t.Errorf("revoking the service listing: %v", err)
		}
		for _, id := range ids {
			if err := c.DeleteAppCredential(ctx, id); err != nil {
				t.Error(err)
			}
		}
	})
	newCred := func(name string) clouds.Cloud {
		cred, id, err := c.NewAppCredential(ctx, name)
		g.Expect(err).NotTo(HaveOccurred())
		ids = append(ids, id)
		return cred
	}
	// session authenticates once; its token is what a long-running client holds.
	session := func(cloud clouds.Cloud) *gophercloud.ServiceClient {
		provider, err := c.Client(ctx, cloud)
		g.Expect(err).NotTo(HaveOccurred())
		provider.ReauthFunc = nil
		volume, err := openstack.NewBlockStorageV3(provider, gophercloud.EndpointOpts{Region: c.Region()})
		g.Expect(err).NotTo(HaveOccurred())
		return volume
	}
	list := func(what string, volume *gophercloud.ServiceClient) (int, []volservices.Service) {
		pages, err := volservices.List(volume, nil).AllPages(ctx)
		if err != nil {
			var refused gophercloud.ErrUnexpectedResponseCode
			g.Expect(errors.As(err, &refused)).To(BeTrue(), "%s: %v", what, err)
			t.Logf("%s: Cinder's services: %d", what, refused.Actual)
			return refused.Actual, nil
		}
		svcs, err := volservices.ExtractServices(pages)
		g.Expect(err).NotTo(HaveOccurred())
		t.Logf("%s: Cinder's services: %d, %d listed", what, http.StatusOK, len(svcs))
		return http.StatusOK, svcs
	}

	before := newCred("before-allow")
	seen := session(c.Member())
	code, _ := list("a password session, before the grant", seen)
	g.Expect(code).To(Equal(http.StatusForbidden))
	unseen := session(c.Member())

	start := time.Now()
	g.Expect(c.AllowServiceListing(ctx, true)).To(Succeed())
	t.Logf("AllowServiceListing(true) took %s", time.Since(start).Round(time.Millisecond))
	after := newCred("after-allow")
	afterSession := session(after)
	code, svcs := list("a credential made after the grant", afterSession)
	g.Expect(code).To(Equal(http.StatusOK))
	var binaries []string
	for _, s := range svcs {
		binaries = append(binaries, s.Binary+"@"+s.Host+" "+s.Zone+" "+s.State)
	}
	t.Logf("Cinder's services as the member: %v", binaries)
	g.Expect(binaries).To(ContainElement(HavePrefix(ServiceCinderBackup + "@")))
	code, _ = list("a credential made before the grant", session(before))
	g.Expect(code).To(Equal(http.StatusForbidden), "an application credential keeps the roles it was made with")
	code, _ = list("the password session cinder-api validated before the grant", seen)
	g.Expect(code).To(Equal(http.StatusForbidden), "cinder-api's cached validation of the token")
	code, _ = list("a password session made before the grant, first seen by cinder-api after it", unseen)
	g.Expect(code).To(Equal(http.StatusOK), "Keystone computes a token's roles when it validates it")

	start = time.Now()
	g.Expect(c.AllowServiceListing(ctx, false)).To(Succeed())
	t.Logf("AllowServiceListing(false) took %s", time.Since(start).Round(time.Millisecond))
	code, _ = list("a credential made after the revocation", session(newCred("after-revoke")))
	g.Expect(code).To(Equal(http.StatusForbidden))
	code, _ = list("a new token of the credential made during the grant", session(after))
	g.Expect(code).To(Equal(http.StatusForbidden), "its roles are at most the member's")
	code, _ = list("the token of the credential made during the grant that cinder-api validated then", afterSession)
	g.Expect(code).To(Equal(http.StatusOK), "cinder-api's cached validation of the token")
}

// testPasswordChange changes the member's password and checks both passwords, the cloud's
// application credential and the cloud's own member-side view.
func testPasswordChange(t *testing.T, c *Cloud) {
	g := NewWithT(t)
	ctx := t.Context()
	old := c.Member()
	password := fmt.Sprintf("changed-%d", time.Now().UnixNano())
	start := time.Now()
	g.Expect(c.SetMemberPassword(ctx, password)).To(Succeed())
	t.Logf("SetMemberPassword took %s", time.Since(start).Round(time.Millisecond))
	g.Expect(c.Member().AuthInfo.Password).To(Equal(password))
	_, err := c.Client(ctx, old)
	t.Logf("Authenticating with the old password: %v", err)
	g.Expect(gophercloud.ResponseCodeIs(err, http.StatusUnauthorized)).To(BeTrue(), "%v", err)
	cl := newClients(t, c, c.Member())
	_, err = volumes.List(cl.volume, nil).AllPages(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "listing volumes with the new password")
	cl = newClients(t, c, c.AppCredential())
	_, err = volumes.List(cl.volume, nil).AllPages(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "listing volumes with the cloud's application credential")
}

// testZoneRename renames the zone of the host without servers and back, and checks that Nova
// refuses for the host with one.
func testZoneRename(t *testing.T, c *Cloud) {
	g := NewWithT(t)
	ctx := t.Context()
	zones := c.ComputeZones()
	cl := newClients(t, c, c.Member())
	cl.compute.Microversion = NetworksNoneMicroversion
	id, err := c.CreateServer(ctx, "zone-holder", zones[0])
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		if id != "" {
			if err := servers.Delete(ctx, cl.compute, id).ExtractErr(); err != nil {
				t.Errorf("deleting server %s: %v", id, err)
			} else if err := WaitServerGone(ctx, cl.compute, id); err != nil {
				t.Error(err)
			}
		}
		if now := c.ComputeZones(); now[1] != zones[1] {
			if err := c.SetComputeZone(ctx, 1, zones[1]); err != nil {
				t.Errorf("naming the zone back: %v", err)
			}
		}
	})
	g.Expect(err).NotTo(HaveOccurred())

	err = c.SetComputeZone(ctx, 0, zones[0]+"-renamed")
	t.Logf("Renaming the zone of the host with a server: %v", err)
	g.Expect(err).To(MatchError(ContainSubstring("One or more hosts contain instances in this zone")))
	g.Expect(c.ComputeZones()).To(Equal(zones))

	listed := func() []string {
		pages, err := computeazs.List(cl.compute).AllPages(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		azs, err := computeazs.ExtractAvailabilityZones(pages)
		g.Expect(err).NotTo(HaveOccurred())
		return zoneNames(azs, func(z computeazs.AvailabilityZone) string { return z.ZoneName })
	}
	renamed := zones[1] + "-renamed"
	start := time.Now()
	g.Expect(c.SetComputeZone(ctx, 1, renamed)).To(Succeed())
	t.Logf("SetComputeZone(1, %q) took %s", renamed, time.Since(start).Round(time.Millisecond))
	g.Expect(c.ComputeZones()).To(Equal([]string{zones[0], renamed}))
	g.Expect(c.VolumeZones()[1]).NotTo(Equal(renamed), "the volume zones stay")
	g.Expect(listed()).To(ConsistOf(zones[0], renamed))
	s, err := servers.Get(ctx, cl.compute, id).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.AvailabilityZone).To(Equal(zones[0]))

	start = time.Now()
	g.Expect(c.SetComputeZone(ctx, 1, zones[1])).To(Succeed())
	t.Logf("SetComputeZone(1, %q) took %s", zones[1], time.Since(start).Round(time.Millisecond))
	g.Expect(c.ComputeZones()).To(Equal(zones))
	g.Expect(listed()).To(ConsistOf(zones))
}

// testServiceRestarts stops and starts cinder-api, Keystone and cinder-backup, and checks what
// clients see meanwhile.
func testServiceRestarts(t *testing.T, c *Cloud) {
	g := NewWithT(t)
	ctx := t.Context()
	t.Cleanup(func() {
		// Whatever a failed step left stopped runs again for the steps after this one.
		for _, name := range []string{ServiceKeystone, ServiceCinderAPI, ServiceCinderBackup} {
			if err := c.StartService(context.WithoutCancel(ctx), name); err != nil {
				t.Errorf("starting %s: %v", name, err)
			}
		}
	})
	cl := newClients(t, c, c.Member())
	restart := func(name string) {
		t.Helper()
		p, err := c.proc(name)
		g.Expect(err).NotTo(HaveOccurred())
		logBefore := fileSize(p.LogPath())
		start := time.Now()
		g.Expect(c.StartService(ctx, name)).To(Succeed())
		t.Logf("StartService(%s) took %s", name, time.Since(start).Round(100*time.Millisecond))
		q, err := c.proc(name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(q.Pid()).NotTo(Equal(p.Pid()), "a new process")
		g.Expect(q.LogPath()).To(Equal(p.LogPath()))
		g.Expect(fileSize(q.LogPath())).To(BeNumerically(">", logBefore), "the log appended to")
	}

	g.Expect(c.StopService(ServiceCinderAPI)).To(Succeed())
	g.Expect(c.StopService(ServiceCinderAPI)).To(Succeed(), "stopping a stopped service")
	_, err := volumes.List(cl.volume, nil).AllPages(ctx)
	t.Logf("Listing volumes while cinder-api is stopped: %v", err)
	g.Expect(gophercloud.ResponseCodeIs(err, http.StatusBadGateway)).To(BeTrue(), "%v", err)
	restart(ServiceCinderAPI)
	_, err = volumes.List(cl.volume, nil).AllPages(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "listing volumes after cinder-api's restart")

	g.Expect(c.StopService(ServiceKeystone)).To(Succeed())
	_, err = c.Client(ctx, c.Member())
	t.Logf("Authenticating while Keystone is stopped: %v", err)
	g.Expect(err).To(HaveOccurred())
	restart(ServiceKeystone)
	_, err = c.Client(ctx, c.Member())
	g.Expect(err).NotTo(HaveOccurred(), "authenticating after Keystone's restart")

	g.Expect(c.StopService(ServiceCinderBackup)).To(Succeed())
	stopped := time.Now()
	g.Eventually(func() (string, error) {
		s, err := c.backupService(ctx)
		return s.State, err
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Equal("down"))
	t.Logf("os-services listed cinder-backup down %s after StopService", time.Since(stopped).Round(time.Second))
	restart(ServiceCinderBackup)
	s, err := c.backupService(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.State).To(Equal("up"))
	g.Expect(c.StartService(ctx, ServiceCinderBackup)).To(Succeed(), "starting a running service")
}

// testVolumeZoneRename renames one volume zone, then the other (the cloud's default zone), then
// both back, and checks what the member sees each time: the zone list, a new volume in a new
// name accepted at once and the old name refused, an existing volume in the zone it was created
// in, and the default zone and cinder-backup's following the first zone.
func testVolumeZoneRename(t *testing.T, c *Cloud) {
	g := NewWithT(t)
	ctx := t.Context()
	zones := c.VolumeZones()
	cl := newClients(t, c, c.Member())
	var ids []string
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		if !slices.Equal(c.VolumeZones(), zones) {
			if err := c.SetVolumeZones(ctx, zones); err != nil {
				t.Errorf("naming the volume zones back: %v", err)
			}
		}
		for _, id := range ids {
			if err := volumes.Delete(ctx, cl.volume, id, nil).ExtractErr(); err != nil {
				t.Errorf("deleting volume %s: %v", id, err)
			}
		}
	})
	g.Expect(c.SetVolumeZones(ctx, zones[:1])).To(MatchError(ContainSubstring("1 names for 2 backends")))
	g.Expect(c.SetVolumeZones(ctx, []string{zones[0], ""})).To(MatchError(ContainSubstring("empty name")))
	g.Expect(c.VolumeZones()).To(Equal(zones))

	// create makes a volume in zone ("": none given) and returns it once it is available.
	create := func(zone string) *volumes.Volume {
		t.Helper()
		v, err := volumes.Create(ctx, cl.volume, volumes.CreateOpts{Name: "zone-" + zone, Size: 1, AvailabilityZone: zone}, nil).Extract()
		g.Expect(err).NotTo(HaveOccurred(), "creating a volume in %q", zone)
		ids = append(ids, v.ID)
		g.Expect(WaitVolume(ctx, cl.volume, v.ID, "available")).To(Succeed())
		v, err = volumes.Get(ctx, cl.volume, v.ID).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		return v
	}
	listed := func() []string {
		pages, err := volumeazs.List(cl.volume).AllPages(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		azs, err := volumeazs.ExtractAvailabilityZones(pages)
		g.Expect(err).NotTo(HaveOccurred())
		return zoneNames(azs, func(z volumeazs.AvailabilityZone) string { return z.ZoneName })
	}
	backup := func() volservices.Service {
		s, err := c.backupService(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		return s
	}
	pid := func(name string) int {
		p, err := c.proc(name)
		g.Expect(err).NotTo(HaveOccurred())
		return p.Pid()
	}
	rename := func(to []string) {
		t.Helper()
		start := time.Now()
		g.Expect(c.SetVolumeZones(ctx, to)).To(Succeed())
		t.Logf("SetVolumeZones(%q) took %s", to, time.Since(start).Round(100*time.Millisecond))
		g.Expect(c.VolumeZones()).To(Equal(to))
		g.Expect(listed()).To(ConsistOf(to))
	}

	existing := create(zones[1])
	renamed := []string{zones[0] + "-renamed", zones[1] + "-renamed"}
	backupPid := pid(ServiceCinderBackup)
	rename([]string{zones[0], renamed[1]})
	g.Expect(pid(ServiceCinderBackup)).To(Equal(backupPid), "cinder-backup runs on while the first zone stays")
	v, err := volumes.Get(ctx, cl.volume, existing.ID).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.AvailabilityZone).To(Equal(zones[1]), "a volume keeps the zone it was created in")
	v = create(renamed[1])
	g.Expect(v.AvailabilityZone).To(Equal(renamed[1]))
	g.Expect(filepath.Join(c.exportDir(1), "volume-"+v.ID)).To(BeAnExistingFile(), "the renamed zone's backend holds it")
	_, err = volumes.Create(ctx, cl.volume, volumes.CreateOpts{Name: "zone-gone", Size: 1, AvailabilityZone: zones[1]}, nil).Extract()
	t.Logf("Creating a volume in the old name: %v", err)
	g.Expect(err).To(MatchError(ContainSubstring("is invalid")), "the old name is no zone any more")

	rename([]string{renamed[0], zones[1]})
	g.Expect(pid(ServiceCinderBackup)).NotTo(Equal(backupPid), "cinder-backup restarts with the first zone")
	g.Expect(backup().Zone).To(Equal(renamed[0]), "cinder-backup's zone is the first one")
	g.Expect(create("").AvailabilityZone).To(Equal(renamed[0]), "a volume without a zone goes to the first one")
	g.Expect(create(zones[1]).AvailabilityZone).To(Equal(zones[1]), "a name given back is a zone again")

	rename(zones)
	g.Expect(backup().Zone).To(Equal(zones[0]))
	g.Expect(create("").AvailabilityZone).To(Equal(zones[0]))
}
