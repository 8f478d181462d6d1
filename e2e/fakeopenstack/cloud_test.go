package fakeopenstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/backups"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/snapshots"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/volumeattach"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/pagination"
	. "github.com/onsi/gomega"
)

// clusterKey is the metadata key the driver tags its volumes and snapshots with.
const clusterKey = "cinder.csi.openstack.org/cluster"

// driverClients are the clients the driver builds: one provider, Nova and Cinder from the catalog,
// and helpers that copy the Cinder client with a microversion as the driver does per call.
type driverClients struct {
	pc      *gophercloud.ProviderClient
	eo      gophercloud.EndpointOpts
	compute *gophercloud.ServiceClient
	volume  *gophercloud.ServiceClient
}

// newDriverClients authenticates against authURL (the server's, or an extra listener's) the way
// the driver's client package does: password, project scope, AllowReauth.
func newDriverClients(t *testing.T, g Gomega, s *Server, authURL string) *driverClients {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CACertPEM())
	ao := gophercloud.AuthOptions{
		IdentityEndpoint: authURL, Username: DefaultUserName, Password: DefaultPassword,
		DomainName: "Default", TenantID: DefaultProjectID, AllowReauth: true,
	}
	pc, err := config.NewProviderClient(t.Context(), ao,
		config.WithTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	g.Expect(err).NotTo(HaveOccurred())
	c := &driverClients{pc: pc, eo: gophercloud.EndpointOpts{Region: s.Region()}}
	c.compute, err = openstack.NewComputeV2(pc, c.eo)
	g.Expect(err).NotTo(HaveOccurred())
	c.volume, err = openstack.NewBlockStorageV3(pc, c.eo)
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// volumeAt returns a new Cinder client that sends microversion mv.
func (c *driverClients) volumeAt(g Gomega, mv string) *gophercloud.ServiceClient {
	bs, err := openstack.NewBlockStorageV3(c.pc, c.eo)
	g.Expect(err).NotTo(HaveOccurred())
	bs.Microversion = mv
	return bs
}

// volumesByName is the driver's GetVolumesByName: microversion 3.34, GET /volumes/detail?name=.
func (c *driverClients) volumesByName(ctx context.Context, g Gomega, name string) []volumes.Volume {
	pages, err := volumes.List(c.volumeAt(g, "3.34"), volumes.ListOpts{Name: name}).AllPages(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	vols, err := volumes.ExtractVolumes(pages)
	g.Expect(err).NotTo(HaveOccurred())
	return vols
}

// createVolume is the driver's CreateVolume for a plain volume.
func (c *driverClients) createVolume(ctx context.Context, g Gomega, name string, size int) *volumes.Volume {
	v, err := volumes.Create(ctx, c.volume, &volumes.CreateOpts{
		Name: name, Size: size, Description: "Created by OpenStack Cinder CSI driver",
		Metadata: map[string]string{clusterKey: "kubernetes"},
	}, nil).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	return v
}

func (c *driverClients) getVolume(ctx context.Context, g Gomega, id string) *volumes.Volume {
	v, err := volumes.Get(ctx, c.volume, id).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	return v
}

func (c *driverClients) attach(ctx context.Context, server, volumeID string) (*volumeattach.VolumeAttachment, error) {
	return volumeattach.Create(ctx, c.compute, server, &volumeattach.CreateOpts{VolumeID: volumeID}).Extract()
}

func isStatus(err error, code int) bool {
	return gophercloud.ResponseCodeIs(err, code)
}

func TestCinderVolumes(t *testing.T) {
	t.Parallel()

	t.Run("When the driver creates a volume, it should be found by name, carry the cluster tag and be deleted", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		ctx := t.Context()
		s := newTestServer(t, Options{})
		c := newDriverClients(t, g, s, s.AuthURL())

		g.Expect(c.volumesByName(ctx, g, "pvc-1")).To(BeEmpty())
		created := c.createVolume(ctx, g, "pvc-1", 1)
		g.Expect(created.ID).To(MatchRegexp(`^[a-z0-9]{8}-[a-z0-9]{4}-4[a-z0-9]{3}-[a-z0-9]{4}-[a-z0-9]{12}$`))
		g.Expect(created.Status).To(Equal(StatusCreating))
		g.Expect(created.AvailabilityZone).To(Equal(DefaultZone))
		g.Expect(created.Size).To(Equal(1))

		found := c.volumesByName(ctx, g, "pvc-1")
		g.Expect(found).To(HaveLen(1))
		g.Expect(found[0].ID).To(Equal(created.ID))
		g.Expect(found[0].Status).To(Equal(StatusAvailable))
		g.Expect(found[0].Metadata).To(HaveKeyWithValue(clusterKey, "kubernetes"))
		g.Expect(found[0].CreatedAt).To(BeTemporally("~", time.Now(), time.Minute))
		g.Expect(c.volumesByName(ctx, g, "pvc-2")).To(BeEmpty())

		// The request log shows the lookup by name with the microversion the driver sends.
		g.Expect(s.CountFunc(func(r Request) bool {
			return strings.HasSuffix(r.Path, "/volumes/detail") && r.Query == "name=pvc-1" && r.APIVersion == "volume 3.34"
		})).To(Equal(2))

		g.Expect(volumes.Delete(ctx, c.volume, created.ID, nil).ExtractErr()).To(Succeed())
		_, err := volumes.Get(ctx, c.volume, created.ID).Extract()
		g.Expect(isStatus(err, http.StatusNotFound)).To(BeTrue(), "error: %v", err)
		// The driver's DeleteVolume takes 404 as "already deleted".
		err = volumes.Delete(ctx, c.volume, created.ID, nil).ExtractErr()
		g.Expect(isStatus(err, http.StatusNotFound)).To(BeTrue(), "error: %v", err)
	})

	cases := []struct {
		name  string
		opts  Options
		req   volumes.CreateOpts
		code  int
		check func(g Gomega, v *volumes.Volume)
	}{
		{
			name: "When a zone is requested, it should be the volume's zone",
			opts: Options{VolumeZones: []Zone{{Name: "az1", Available: true}, {Name: "az2", Available: true}}},
			req:  volumes.CreateOpts{Name: "v", Size: 2, AvailabilityZone: "az2"},
			check: func(g Gomega, v *volumes.Volume) {
				g.Expect(v.AvailabilityZone).To(Equal("az2"))
				g.Expect(v.Size).To(Equal(2))
			},
		},
		{
			name: "When no zone is requested, it should use the first available volume zone",
			opts: Options{VolumeZones: []Zone{{Name: "down"}, {Name: "az1", Available: true}}},
			req:  volumes.CreateOpts{Name: "v", Size: 1},
			check: func(g Gomega, v *volumes.Volume) {
				g.Expect(v.AvailabilityZone).To(Equal("az1"))
				g.Expect(v.VolumeType).To(Equal(defaultVolumeType))
			},
		},
		{
			name: "When the requested zone is not a volume zone, it should answer 400 as Cinder does",
			opts: Options{VolumeZones: []Zone{{Name: "az1", Available: true}}},
			req:  volumes.CreateOpts{Name: "v", Size: 1, AvailabilityZone: "compute-only"},
			code: http.StatusBadRequest,
		},
		{
			name: "When the volume type is unknown, it should answer 404",
			opts: Options{VolumeTypes: []string{"ssd"}},
			req:  volumes.CreateOpts{Name: "v", Size: 1, VolumeType: "gold"},
			code: http.StatusNotFound,
		},
		{
			name: "When the volume type is known, it should be the volume's type",
			opts: Options{VolumeTypes: []string{"ssd"}},
			req:  volumes.CreateOpts{Name: "v", Size: 1, VolumeType: "ssd"},
			check: func(g Gomega, v *volumes.Volume) {
				g.Expect(v.VolumeType).To(Equal("ssd"))
			},
		},
		{
			name: "When the quota would be exceeded, it should answer 413, which the driver maps to ResourceExhausted",
			opts: Options{QuotaGigabytes: 5},
			req:  volumes.CreateOpts{Name: "v", Size: 6},
			code: http.StatusRequestEntityTooLarge,
		},
		{
			name: "When the size is zero, it should answer 400",
			req:  volumes.CreateOpts{Name: "v"},
			code: http.StatusBadRequest,
		},
		{
			name: "When the source snapshot does not exist, it should answer 404",
			req:  volumes.CreateOpts{Name: "v", Size: 1, SnapshotID: "00000000-0000-4000-8000-000000000000"},
			code: http.StatusNotFound,
		},
		{
			name: "When the source backup does not exist, it should answer 404",
			req:  volumes.CreateOpts{Name: "v", Size: 1, BackupID: "00000000-0000-4000-8000-000000000000"},
			code: http.StatusNotFound,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := newTestServer(t, tc.opts)
			c := newDriverClients(t, g, s, s.AuthURL())
			v, err := volumes.Create(t.Context(), c.volume, &tc.req, nil).Extract()
			if tc.code != 0 {
				g.Expect(isStatus(err, tc.code)).To(BeTrue(), "error: %v", err)
				g.Expect(s.Volumes()).To(BeEmpty())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			tc.check(g, c.getVolume(t.Context(), g, v.ID))
		})
	}

	t.Run("When volumes are listed with a limit, it should page with a marker as the driver's ListVolumes reads it", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		ctx := t.Context()
		s := newTestServer(t, Options{})
		c := newDriverClients(t, g, s, s.AuthURL())
		var ids []string
		for _, name := range []string{"a", "b", "c"} {
			ids = append(ids, c.createVolume(ctx, g, name, 1).ID)
		}
		// The driver's ListVolumes with a limit reads one page and keeps the next marker.
		firstPage := func(marker string) ([]volumes.Volume, string) {
			var vols []volumes.Volume
			var next string
			err := volumes.List(c.volume, volumes.ListOpts{Limit: 2, Marker: marker}).EachPage(ctx,
				func(_ context.Context, page pagination.Page) (bool, error) {
					var err error
					if vols, err = volumes.ExtractVolumes(page); err != nil {
						return false, err
					}
					nextURL, err := page.NextPageURL()
					if err != nil || nextURL == "" {
						return false, err
					}
					u, err := url.Parse(nextURL)
					if err != nil {
						return false, err
					}
					next = u.Query().Get("marker")
					return false, nil
				})
			g.Expect(err).NotTo(HaveOccurred())
			return vols, next
		}
		page1, marker := firstPage("")
		g.Expect(page1).To(HaveLen(2))
		// Newest first, as Cinder sorts by default.
		g.Expect([]string{page1[0].ID, page1[1].ID}).To(Equal([]string{ids[2], ids[1]}))
		g.Expect(marker).To(Equal(ids[1]))
		page2, marker := firstPage(marker)
		g.Expect(page2).To(HaveLen(1))
		g.Expect(page2[0].ID).To(Equal(ids[0]))
		g.Expect(marker).To(BeEmpty())

		// Without a limit (ControllerListVolumes with max_entries 0) every volume comes at once.
		pages, err := volumes.List(c.volume, nil).AllPages(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		all, err := volumes.ExtractVolumes(pages)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(all).To(HaveLen(3))
	})

	t.Run("When a volume is extended, it should need microversion 3.42 while in use and grow the backend", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		ctx := t.Context()
		disks := NewMemoryDisks()
		s := newTestServer(t, Options{Disks: disks})
		g.Expect(s.AddServer(ServerInfo{ID: "node-1"})).To(Succeed())
		c := newDriverClients(t, g, s, s.AuthURL())
		v := c.createVolume(ctx, g, "pvc", 1)

		// Available: the driver extends without a microversion.
		g.Expect(volumes.ExtendSize(ctx, c.volume, v.ID, volumes.ExtendSizeOpts{NewSize: 2}).ExtractErr()).To(Succeed())
		g.Expect(c.getVolume(ctx, g, v.ID).Size).To(Equal(2))
		size, _ := disks.Size(v.ID)
		g.Expect(size).To(Equal(2 * GiB))

		err := volumes.ExtendSize(ctx, c.volume, v.ID, volumes.ExtendSizeOpts{NewSize: 2}).ExtractErr()
		g.Expect(isStatus(err, http.StatusBadRequest)).To(BeTrue(), "not larger: %v", err)

		_, err = c.attach(ctx, "node-1", v.ID)
		g.Expect(err).NotTo(HaveOccurred())
		err = volumes.ExtendSize(ctx, c.volume, v.ID, volumes.ExtendSizeOpts{NewSize: 3}).ExtractErr()
		g.Expect(isStatus(err, http.StatusBadRequest)).To(BeTrue(), "in use without 3.42: %v", err)

		g.Expect(volumes.ExtendSize(ctx, c.volumeAt(g, "3.42"), v.ID, volumes.ExtendSizeOpts{NewSize: 3}).ExtractErr()).To(Succeed())
		got := c.getVolume(ctx, g, v.ID)
		g.Expect(got.Size).To(Equal(3))
		g.Expect(got.Status).To(Equal(StatusInUse))
		size, _ = disks.Size(v.ID)
		g.Expect(size).To(Equal(3 * GiB))
	})

	t.Run("When a volume is attached, it should refuse deletion with 400 until detached", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		ctx := t.Context()
		s := newTestServer(t, Options{})
		g.Expect(s.AddServer(ServerInfo{ID: "node-1"})).To(Succeed())
		c := newDriverClients(t, g, s, s.AuthURL())
		v := c.createVolume(ctx, g, "pvc", 1)
		_, err := c.attach(ctx, "node-1", v.ID)
		g.Expect(err).NotTo(HaveOccurred())
		err = volumes.Delete(ctx, c.volume, v.ID, nil).ExtractErr()
		g.Expect(isStatus(err, http.StatusBadRequest)).To(BeTrue(), "error: %v", err)
		g.Expect(volumeattach.Delete(ctx, c.compute, "node-1", v.ID).ExtractErr()).To(Succeed())
		g.Expect(volumes.Delete(ctx, c.volume, v.ID, nil).ExtractErr()).To(Succeed())
	})

	t.Run("When a microversion is out of range, it should answer 406; latest should be served", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		ctx := t.Context()
		s := newTestServer(t, Options{})
		c := newDriverClients(t, g, s, s.AuthURL())
		_, err := volumes.List(c.volumeAt(g, "3.99"), nil).AllPages(ctx)
		g.Expect(isStatus(err, http.StatusNotAcceptable)).To(BeTrue(), "error: %v", err)
		_, err = volumes.List(c.volumeAt(g, "latest"), nil).AllPages(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Requests()[len(s.Requests())-1].APIVersion).To(Equal("volume latest"))
	})

	t.Run("When the volume endpoint has an injected fault, it should fail the driver's call once", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		ctx := t.Context()
		s := newTestServer(t, Options{})
		c := newDriverClients(t, g, s, s.AuthURL())
		s.SetFaultN(EndpointVolume, FaultServerError, 1)
		_, err := volumes.Create(ctx, c.volume, &volumes.CreateOpts{Name: "v", Size: 1}, nil).Extract()
		g.Expect(isStatus(err, http.StatusInternalServerError)).To(BeTrue(), "error: %v", err)
		g.Expect(s.Volumes()).To(BeEmpty())
		c.createVolume(ctx, g, "v", 1)

		// An expired token makes gophercloud re-authenticate once and retry.
		s.ExpireTokens()
		tokens := s.CountTokenRequests()
		g.Expect(c.volumesByName(ctx, g, "v")).To(HaveLen(1))
		g.Expect(s.CountTokenRequests()).To(Equal(tokens + 1))
	})
}

func TestCinderSnapshots(t *testing.T) {
	t.Parallel()

	inUse := []struct {
		name  string
		mv    string
		force bool
		code  int
	}{
		{name: "When an in-use volume is snapshotted without force below 3.66, it should answer Cinder's 400", mv: "3.65", code: http.StatusBadRequest},
		{name: "When an in-use volume is snapshotted with force below 3.66, it should be taken", mv: "3.65", force: true},
		{name: "When an in-use volume is snapshotted without force from 3.66, it should be taken", mv: "3.66"},
	}
	for _, tc := range inUse {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ctx := t.Context()
			s := newTestServer(t, Options{})
			g.Expect(s.AddServer(ServerInfo{ID: "node-1"})).To(Succeed())
			c := newDriverClients(t, g, s, s.AuthURL())
			v := c.createVolume(ctx, g, "pvc", 1)
			_, err := c.attach(ctx, "node-1", v.ID)
			g.Expect(err).NotTo(HaveOccurred())
			_, err = snapshots.Create(ctx, c.volumeAt(g, tc.mv), &snapshots.CreateOpts{VolumeID: v.ID, Name: "s", Force: tc.force}).Extract()
			if tc.code != 0 {
				g.Expect(isStatus(err, tc.code)).To(BeTrue(), "error: %v", err)
				g.Expect(faultMessage(g, err)).To(Equal("Invalid volume: Volume " + v.ID + " status must be available, but current status is: in-use."))
				g.Expect(s.Snapshots()).To(BeEmpty())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Snapshots()).To(HaveLen(1))
		})
	}

	t.Run("When a snapshot is taken and restored, it should follow Cinder's rules and copy the backend", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		ctx := t.Context()
		disks := NewMemoryDisks()
		s := newTestServer(t, Options{VolumeZones: []Zone{{Name: "az1", Available: true}, {Name: "az2", Available: true}}, Disks: disks})
		g.Expect(s.AddServer(ServerInfo{ID: "node-1"})).To(Succeed())
		c := newDriverClients(t, g, s, s.AuthURL())
		v := c.createVolume(ctx, g, "pvc", 2)
		_, err := c.attach(ctx, "node-1", v.ID)
		g.Expect(err).NotTo(HaveOccurred())

		// In use: without force-create the driver's request fails, as on a real Cinder.
		opts := snapshots.CreateOpts{VolumeID: v.ID, Name: "snap-1", Description: "Created by OpenStack Cinder CSI driver",
			Metadata: map[string]string{clusterKey: "kubernetes"}}
		_, err = snapshots.Create(ctx, c.volume, &opts).Extract()
		g.Expect(isStatus(err, http.StatusBadRequest)).To(BeTrue(), "error: %v", err)
		opts.Force = true
		snap, err := snapshots.Create(ctx, c.volume, &opts).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(snap.Status).To(Equal(StatusCreating))
		g.Expect(snap.Size).To(Equal(2))
		g.Expect(snap.VolumeID).To(Equal(v.ID))

		// The driver looks the name up with snapshots.List and waits on GET.
		var listed []snapshots.Snapshot
		err = snapshots.List(c.volume, snapshots.ListOpts{Name: "snap-1"}).EachPage(ctx,
			func(_ context.Context, page pagination.Page) (bool, error) {
				var err error
				listed, err = snapshots.ExtractSnapshots(page)
				return false, err
			})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(listed).To(HaveLen(1))
		g.Expect(listed[0].ID).To(Equal(snap.ID))
		got, err := snapshots.Get(ctx, c.volume, snap.ID).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Status).To(Equal(StatusAvailable))
		g.Expect(got.Metadata).To(HaveKeyWithValue(clusterKey, "kubernetes"))
		g.Expect(got.CreatedAt).To(BeTemporally("~", time.Now(), time.Minute))
		pages, err := snapshots.ListDetail(c.volume, snapshots.ListOpts{VolumeID: v.ID, Status: StatusAvailable}).AllPages(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		detail, err := snapshots.ExtractSnapshots(pages)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(detail).To(HaveLen(1))

		// Restore: not smaller than the snapshot, same zone as its volume.
		_, err = volumes.Create(ctx, c.volume, &volumes.CreateOpts{Name: "small", Size: 1, SnapshotID: snap.ID}, nil).Extract()
		g.Expect(isStatus(err, http.StatusBadRequest)).To(BeTrue(), "smaller: %v", err)
		_, err = volumes.Create(ctx, c.volume, &volumes.CreateOpts{Name: "far", Size: 2, SnapshotID: snap.ID, AvailabilityZone: "az2"}, nil).Extract()
		g.Expect(isStatus(err, http.StatusBadRequest)).To(BeTrue(), "other zone: %v", err)
		restored, err := volumes.Create(ctx, c.volume, &volumes.CreateOpts{Name: "restored", Size: 3, SnapshotID: snap.ID}, nil).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(restored.SnapshotID).To(Equal(snap.ID))
		g.Expect(restored.AvailabilityZone).To(Equal("az1"))
		size, ok := disks.Size(restored.ID)
		g.Expect(ok).To(BeTrue())
		g.Expect(size).To(Equal(3 * GiB))

		// Clone from a volume (CSI volume content source).
		clone, err := volumes.Create(ctx, c.volume, &volumes.CreateOpts{Name: "clone", Size: 2, SourceVolID: v.ID}, nil).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(clone.SourceVolID).To(Equal(v.ID))

		// A volume with snapshots cannot be deleted; its snapshot can.
		g.Expect(volumeattach.Delete(ctx, c.compute, "node-1", v.ID).ExtractErr()).To(Succeed())
		err = volumes.Delete(ctx, c.volume, v.ID, nil).ExtractErr()
		g.Expect(isStatus(err, http.StatusBadRequest)).To(BeTrue(), "with snapshots: %v", err)
		// The driver's DeleteSnapshot first asks whether the ID is a backup; 404 means no.
		_, err = backups.Get(ctx, c.volume, snap.ID).Extract()
		g.Expect(isStatus(err, http.StatusNotFound)).To(BeTrue(), "backup: %v", err)
		g.Expect(snapshots.Delete(ctx, c.volume, snap.ID).ExtractErr()).To(Succeed())
		_, err = snapshots.Get(ctx, c.volume, snap.ID).Extract()
		g.Expect(isStatus(err, http.StatusNotFound)).To(BeTrue(), "deleted: %v", err)
		g.Expect(volumes.Delete(ctx, c.volume, v.ID, nil).ExtractErr()).To(Succeed())
		g.Expect(s.Snapshots()).To(BeEmpty())
	})
}

func TestNova(t *testing.T) {
	t.Parallel()

	t.Run("When a server is unknown, it should answer 404 so that the driver reports NotFound", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{})
		c := newDriverClients(t, g, s, s.AuthURL())
		_, err := servers.Get(t.Context(), c.compute, "missing").Extract()
		g.Expect(isStatus(err, http.StatusNotFound)).To(BeTrue(), "error: %v", err)
	})

	t.Run("When volumes are attached and detached, it should track status, attachments and devices", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		ctx := t.Context()
		s := newTestServer(t, Options{ComputeZones: []Zone{{Name: "zone-a", Available: true}}})
		g.Expect(s.AddServer(ServerInfo{ID: "node-1", Name: "worker-1"})).To(Succeed())
		g.Expect(s.AddServer(ServerInfo{ID: "node-2", Zone: "zone-b"})).To(Succeed())
		c := newDriverClients(t, g, s, s.AuthURL())

		srv, err := servers.Get(ctx, c.compute, "node-1").Extract()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(srv.Name).To(Equal("worker-1"))
		g.Expect(srv.AvailabilityZone).To(Equal("zone-a"))
		g.Expect(srv.Status).To(Equal("ACTIVE"))
		srv2, err := servers.Get(ctx, c.compute, "node-2").Extract()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(srv2.AvailabilityZone).To(Equal("zone-b"))

		v1 := c.createVolume(ctx, g, "pvc-1", 1)
		v2 := c.createVolume(ctx, g, "pvc-2", 1)
		a1, err := c.attach(ctx, "node-1", v1.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a1.Device).To(Equal("/dev/vdb"))
		g.Expect(a1.ServerID).To(Equal("node-1"))
		g.Expect(a1.VolumeID).To(Equal(v1.ID))
		a2, err := c.attach(ctx, "node-1", v2.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a2.Device).To(Equal("/dev/vdc"))

		// What the driver's WaitDiskAttached and GetAttachmentDiskPath read.
		got := c.getVolume(ctx, g, v1.ID)
		g.Expect(got.Status).To(Equal(StatusInUse))
		g.Expect(got.Attachments).To(HaveLen(1))
		g.Expect(got.Attachments[0].ServerID).To(Equal("node-1"))
		g.Expect(got.Attachments[0].Device).To(Equal("/dev/vdb"))
		g.Expect(got.Attachments[0].AttachmentID).NotTo(BeEmpty())
		g.Expect(got.Attachments[0].AttachedAt).To(BeTemporally("~", time.Now(), time.Minute))

		pages, err := volumeattach.List(c.compute, "node-1").AllPages(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		list, err := volumeattach.ExtractVolumeAttachments(pages)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(list).To(HaveLen(2))
		one, err := volumeattach.Get(ctx, c.compute, "node-1", v2.ID).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(one.Device).To(Equal("/dev/vdc"))
		srv, err = servers.Get(ctx, c.compute, "node-1").Extract()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(srv.AttachedVolumes).To(HaveLen(2))

		_, err = c.attach(ctx, "node-2", v1.ID)
		g.Expect(isStatus(err, http.StatusBadRequest)).To(BeTrue(), "in use elsewhere: %v", err)
		_, err = c.attach(ctx, "node-1", v1.ID)
		g.Expect(isStatus(err, http.StatusBadRequest)).To(BeTrue(), "already attached: %v", err)
		_, err = c.attach(ctx, "missing", v1.ID)
		g.Expect(isStatus(err, http.StatusNotFound)).To(BeTrue(), "unknown server: %v", err)
		_, err = c.attach(ctx, "node-1", "00000000-0000-4000-8000-000000000000")
		g.Expect(isStatus(err, http.StatusNotFound)).To(BeTrue(), "unknown volume: %v", err)

		g.Expect(volumeattach.Delete(ctx, c.compute, "node-1", v1.ID).ExtractErr()).To(Succeed())
		got = c.getVolume(ctx, g, v1.ID)
		g.Expect(got.Status).To(Equal(StatusAvailable))
		g.Expect(got.Attachments).To(BeEmpty())
		err = volumeattach.Delete(ctx, c.compute, "node-1", v1.ID).ExtractErr()
		g.Expect(isStatus(err, http.StatusNotFound)).To(BeTrue(), "not attached: %v", err)

		// The freed device name is reused, as libvirt does.
		a1, err = c.attach(ctx, "node-1", v1.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a1.Device).To(Equal("/dev/vdb"))

		// Removing a server detaches its volumes, as deleting an instance does.
		g.Expect(s.RemoveServer("node-1")).To(Succeed())
		g.Expect(c.getVolume(ctx, g, v1.ID).Status).To(Equal(StatusAvailable))
		g.Expect(c.getVolume(ctx, g, v2.ID).Status).To(Equal(StatusAvailable))
		_, err = servers.Get(ctx, c.compute, "node-1").Extract()
		g.Expect(isStatus(err, http.StatusNotFound)).To(BeTrue(), "removed: %v", err)
	})

	t.Run("When the compute endpoint has an injected fault, it should fail one call and then serve", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{})
		g.Expect(s.AddServer(ServerInfo{ID: "node-1"})).To(Succeed())
		c := newDriverClients(t, g, s, s.AuthURL())
		s.SetFaultN(EndpointCompute, FaultServerError, 1)
		_, err := servers.Get(t.Context(), c.compute, "node-1").Extract()
		g.Expect(isStatus(err, http.StatusInternalServerError)).To(BeTrue(), "error: %v", err)
		_, err = servers.Get(t.Context(), c.compute, "node-1").Extract()
		g.Expect(err).NotTo(HaveOccurred())
	})

	t.Run("When the multiattach microversion is sent, it should be accepted", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{})
		g.Expect(s.AddServer(ServerInfo{ID: "node-1"})).To(Succeed())
		c := newDriverClients(t, g, s, s.AuthURL())
		v := c.createVolume(t.Context(), g, "pvc", 1)
		compute, err := openstack.NewComputeV2(c.pc, c.eo)
		g.Expect(err).NotTo(HaveOccurred())
		compute.Microversion = "2.60"
		a, err := volumeattach.Create(t.Context(), compute, "node-1", &volumeattach.CreateOpts{VolumeID: v.ID}).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a.ID).To(Equal(v.ID))
	})
}

// driverMetadata mirrors the fields of the driver's pkg/util/metadata.Metadata.
type driverMetadata struct {
	UUID             string `json:"uuid"`
	Name             string `json:"name"`
	AvailabilityZone string `json:"availability_zone"`
	Devices          []struct {
		Type   string `json:"type"`
		Bus    string `json:"bus,omitempty"`
		Serial string `json:"serial,omitempty"`
	} `json:"devices,omitempty"`
}

func TestMetadata(t *testing.T) {
	t.Parallel()

	get := func(g Gomega, url string) (int, string) {
		resp, err := http.Get(url)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, string(body)
	}

	t.Run("When a node reads meta_data.json, it should get its own uuid and zone in the driver's shape", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{})
		g.Expect(s.AddServer(ServerInfo{ID: "11111111-2222-4333-8444-555555555555", Name: "worker-1", Zone: "zone a/1"})).To(Succeed())
		g.Expect(s.AddServer(ServerInfo{ID: "node-2", Zone: "zone-b"})).To(Succeed())
		node1 := httptest.NewServer(s.MetadataHandler("11111111-2222-4333-8444-555555555555"))
		t.Cleanup(node1.Close)
		node2 := httptest.NewServer(s.MetadataHandler("node-2"))
		t.Cleanup(node2.Close)

		code, body := get(g, node1.URL+"/openstack/latest/meta_data.json")
		g.Expect(code).To(Equal(http.StatusOK))
		var md driverMetadata
		dec := json.NewDecoder(strings.NewReader(body))
		g.Expect(dec.Decode(&md)).To(Succeed())
		g.Expect(md.UUID).To(Equal("11111111-2222-4333-8444-555555555555"))
		g.Expect(md.Name).To(Equal("worker-1"))
		// The driver sanitises the zone itself; the metadata service reports it as Nova has it.
		g.Expect(md.AvailabilityZone).To(Equal("zone a/1"))
		g.Expect(md.Devices).To(BeEmpty())
		g.Expect(body).To(ContainSubstring(`"hostname":"worker-1"`))

		code, body = get(g, node2.URL+"/openstack/latest/meta_data.json")
		g.Expect(code).To(Equal(http.StatusOK))
		g.Expect(json.Unmarshal([]byte(body), &md)).To(Succeed())
		g.Expect(md.UUID).To(Equal("node-2"))
		g.Expect(md.AvailabilityZone).To(Equal("zone-b"))

		code, body = get(g, node1.URL+"/openstack")
		g.Expect(code).To(Equal(http.StatusOK))
		g.Expect(strings.Split(body, "\n")).To(ContainElement("latest"))
		code, body = get(g, node1.URL+"/openstack/latest/")
		g.Expect(code).To(Equal(http.StatusOK))
		g.Expect(strings.Split(body, "\n")).To(ContainElement("meta_data.json"))
		code, _ = get(g, node1.URL+"/openstack/2018-08-27/meta_data.json")
		g.Expect(code).To(Equal(http.StatusOK))
		code, _ = get(g, node1.URL+"/openstack/latest/nope.json")
		g.Expect(code).To(Equal(http.StatusNotFound))

		g.Expect(s.Count(EndpointMetadata)).To(Equal(6))
	})

	t.Run("When the server is unknown or removed, it should answer 404", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{})
		md := httptest.NewServer(s.MetadataHandler("node-1"))
		t.Cleanup(md.Close)
		code, _ := get(g, md.URL+"/openstack/latest/meta_data.json")
		g.Expect(code).To(Equal(http.StatusNotFound))
		g.Expect(s.AddServer(ServerInfo{ID: "node-1"})).To(Succeed())
		code, _ = get(g, md.URL+"/openstack/latest/meta_data.json")
		g.Expect(code).To(Equal(http.StatusOK))
		g.Expect(s.RemoveServer("node-1")).To(Succeed())
		code, _ = get(g, md.URL+"/openstack/latest/meta_data.json")
		g.Expect(code).To(Equal(http.StatusNotFound))
	})

	t.Run("When the metadata endpoint has a fault, it should apply it", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{})
		g.Expect(s.AddServer(ServerInfo{ID: "node-1"})).To(Succeed())
		md := httptest.NewServer(s.MetadataHandler("node-1"))
		t.Cleanup(md.Close)
		s.SetFaultN(EndpointMetadata, FaultServerError, 1)
		code, _ := get(g, md.URL+"/openstack/latest/meta_data.json")
		g.Expect(code).To(Equal(http.StatusInternalServerError))
		s.SetFault(EndpointMetadata, FaultRefuse)
		_, err := http.Get(md.URL + "/openstack/latest/meta_data.json") //nolint:bodyclose // fails: no body
		g.Expect(err).To(HaveOccurred())
		s.ClearFaults()
		code, _ = get(g, md.URL+"/openstack/latest/meta_data.json")
		g.Expect(code).To(Equal(http.StatusOK))
	})

	t.Run("When ServeMetadata runs, it should serve plain HTTP until Close", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{})
		g.Expect(s.AddServer(ServerInfo{ID: "node-1"})).To(Succeed())
		l, err := net.Listen("tcp", "127.0.0.1:0")
		g.Expect(err).NotTo(HaveOccurred())
		done := make(chan error, 1)
		go func() { done <- s.ServeMetadata(l, "node-1") }()
		code, _ := get(g, "http://"+l.Addr().String()+"/openstack/latest/meta_data.json")
		g.Expect(code).To(Equal(http.StatusOK))
		s.Close()
		g.Eventually(done).Should(Receive(BeNil()))
	})
}

func TestListeners(t *testing.T) {
	t.Parallel()

	t.Run("When a client comes through an extra listener, it should get a catalog on that listener", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		ctx := t.Context()
		s := newTestServer(t, Options{})
		// 127.0.0.2 stands for an address inside a node's network namespace: it is on lo, but
		// it is not the main listener's address, and not in the certificate until added.
		g.Expect(s.AddHosts("127.0.0.2")).To(Succeed())
		l, err := net.Listen("tcp", "127.0.0.2:0")
		g.Expect(err).NotTo(HaveOccurred())
		done := make(chan error, 1)
		go func() { done <- s.Serve(l) }()
		base := "https://" + l.Addr().String()

		c := newDriverClients(t, g, s, base+"/identity/v3")
		g.Expect(c.volume.Endpoint).To(HavePrefix(base + "/volume/v3/"))
		g.Expect(c.compute.Endpoint).To(HavePrefix(base + "/compute/v2.1"))
		v := c.createVolume(ctx, g, "pvc", 1)
		g.Expect(c.volumesByName(ctx, g, "pvc")).To(HaveLen(1))
		g.Expect(s.CountFunc(func(r Request) bool { return r.Host == l.Addr().String() })).To(BeNumerically(">=", 3))

		// The main listener serves the same state.
		main := newDriverClients(t, g, s, s.AuthURL())
		g.Expect(main.volume.Endpoint).To(HavePrefix(s.URL()))
		g.Expect(main.getVolume(ctx, g, v.ID).Name).To(Equal("pvc"))

		// Stopped: the extra listener resets connections; started: it serves again.
		s.Stop()
		_, err = volumes.Get(ctx, c.volume, v.ID).Extract()
		g.Expect(err).To(HaveOccurred())
		g.Expect(s.Start()).To(Succeed())
		c.pc.HTTPClient.CloseIdleConnections()
		g.Expect(c.getVolume(ctx, g, v.ID).ID).To(Equal(v.ID))

		s.Close()
		g.Eventually(done).Should(Receive(BeNil()))
	})

	t.Run("When the certificate lacks the listener's address, it should fail TLS verification", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{})
		l, err := net.Listen("tcp", "127.0.0.3:0")
		g.Expect(err).NotTo(HaveOccurred())
		go func() { _ = s.Serve(l) }()
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(s.CACertPEM())
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
		_, err = client.Get("https://" + l.Addr().String() + "/identity/v3") //nolint:bodyclose // fails: no body
		var certErr x509.HostnameError
		g.Expect(errors.As(err, &certErr)).To(BeTrue(), "error: %v", err)
	})

	t.Run("When requests are logged, it should never record the password", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, Options{})
		c := newDriverClients(t, g, s, s.AuthURL())
		c.createVolume(t.Context(), g, "pvc", 1)
		for _, r := range s.Requests() {
			g.Expect(r.Path + r.Query + r.Host + r.APIVersion).NotTo(ContainSubstring(DefaultPassword))
		}
	})
}
