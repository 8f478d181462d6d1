package fakeopenstack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/backups"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/services"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/snapshots"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/volumeattach"
	. "github.com/onsi/gomega"
)

// createBackup is the driver's CreateBackup: microversion 3.51 with the cluster tag as metadata,
// the snapshot it just took, and the VolumeSnapshotClass's availability parameter (zone).
func (c *driverClients) createBackup(ctx context.Context, g Gomega, name, volumeID, snapshotID, zone string) (*backups.Backup, error) {
	return backups.Create(ctx, c.volumeAt(g, "3.51"), backups.CreateOpts{
		VolumeID: volumeID, SnapshotID: snapshotID, Name: name, Description: "Created by OpenStack Cinder CSI driver",
		AvailabilityZone: zone, Metadata: map[string]string{clusterKey: "kubernetes"},
	}).Extract()
}

// faultMessage returns the message of an OpenStack fault body in err.
func faultMessage(g Gomega, err error) string {
	var e gophercloud.ErrUnexpectedResponseCode
	g.Expect(errors.As(err, &e)).To(BeTrue(), "an unexpected response code: %v", err)
	var body map[string]struct {
		Message string `json:"message"`
	}
	g.Expect(json.Unmarshal(e.Body, &body)).To(Succeed())
	for _, f := range body {
		return f.Message
	}
	return ""
}

func TestCinderBackups(t *testing.T) {
	t.Parallel()

	t.Run("When a backup is taken from a snapshot of an in-use volume, it should outlive both and restore their data", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		ctx := t.Context()
		disks := NewMemoryDisks()
		s := newTestServer(t, Options{Disks: disks})
		g.Expect(s.AddServer(ServerInfo{ID: "node-1"})).To(Succeed())
		c := newDriverClients(t, g, s, s.AuthURL())
		v := c.createVolume(ctx, g, "pvc", 2)
		g.Expect(disks.WriteData(v.ID, []byte("hello from the node"))).To(Succeed())
		_, err := c.attach(ctx, "node-1", v.ID)
		g.Expect(err).NotTo(HaveOccurred())

		// The driver's CreateSnapshot for a "backup" class: snapshot (force-create), then backup.
		snap, err := snapshots.Create(ctx, c.volume, &snapshots.CreateOpts{VolumeID: v.ID, Name: "snapcontent-1", Force: true}).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		created, err := c.createBackup(ctx, g, "snapcontent-1", v.ID, snap.ID, "")
		g.Expect(err).NotTo(HaveOccurred())
		// Cinder answers with the summary view only.
		g.Expect(created.ID).NotTo(BeEmpty())
		g.Expect(created.Name).To(Equal("snapcontent-1"))
		g.Expect(created.Status).To(BeEmpty())

		// The driver waits on GET, then reads the size and the snapshot to delete.
		b, err := backups.Get(ctx, c.volume, created.ID).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.Status).To(Equal(StatusAvailable))
		g.Expect(b.VolumeID).To(Equal(v.ID))
		g.Expect(b.SnapshotID).To(Equal(snap.ID))
		g.Expect(b.Size).To(Equal(2))
		g.Expect(b.AvailabilityZone).To(HaveValue(Equal(DefaultZone)))
		g.Expect(b.FailReason).To(BeEmpty())
		// Metadata is shown from 3.43 only.
		g.Expect(b.Metadata).To(BeNil())
		b, err = backups.Get(ctx, c.volumeAt(g, "3.51"), created.ID).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.Metadata).To(HaveValue(HaveKeyWithValue(clusterKey, "kubernetes")))

		// The driver's ListBackups by name: the summary has no volume_id; detail has.
		pages, err := backups.List(c.volume, backups.ListOpts{Name: "snapcontent-1"}).AllPages(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		listed, err := backups.ExtractBackups(pages)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(listed).To(HaveLen(1))
		g.Expect(listed[0].ID).To(Equal(b.ID))
		g.Expect(listed[0].VolumeID).To(BeEmpty())
		pages, err = backups.List(c.volume, backups.ListOpts{VolumeID: v.ID, Status: StatusAvailable}).AllPages(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		listed, err = backups.ExtractBackups(pages)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(listed).To(HaveLen(1))
		pages, err = backups.List(c.volume, backups.ListOpts{VolumeID: "00000000-0000-4000-8000-000000000000"}).AllPages(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(backups.ExtractBackups(pages)).To(BeEmpty())
		// Detail, one per page: a full page carries a next link, as Cinder's does.
		pages, err = backups.ListDetail(c.volume, backups.ListDetailOpts{Limit: 1}).AllPages(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		listed, err = backups.ExtractBackups(pages)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(listed).To(HaveLen(1))
		g.Expect(listed[0].VolumeID).To(Equal(v.ID))

		// The driver deletes the snapshot; then the volume goes, backups notwithstanding.
		g.Expect(snapshots.Delete(ctx, c.volume, snap.ID).ExtractErr()).To(Succeed())
		g.Expect(volumeattach.Delete(ctx, c.compute, "node-1", v.ID).ExtractErr()).To(Succeed())
		g.Expect(volumes.Delete(ctx, c.volume, v.ID, nil).ExtractErr()).To(Succeed())
		_, ok := s.Volume(v.ID)
		g.Expect(ok).To(BeFalse())

		// Restore (CreateVolume from a backup, at 3.51): the answer does not name the backup.
		_, err = volumes.Create(ctx, c.volumeAt(g, "3.51"), &volumes.CreateOpts{Name: "small", Size: 1, BackupID: b.ID}, nil).Extract()
		g.Expect(isStatus(err, http.StatusBadRequest)).To(BeTrue(), "smaller: %v", err)
		g.Expect(faultMessage(g, err)).To(Equal("Invalid input received: Volume size 1GB cannot be smaller than the backup size 2GB. It must be >= backup size."))
		restored, err := volumes.Create(ctx, c.volumeAt(g, "3.51"), &volumes.CreateOpts{Name: "restored", BackupID: b.ID}, nil).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(restored.Status).To(Equal(StatusCreating))
		g.Expect(restored.BackupID).To(BeNil())
		g.Expect(restored.Size).To(Equal(2))
		got := c.getVolume(ctx, g, restored.ID)
		g.Expect(got.Status).To(Equal(StatusAvailable))
		info, _ := s.Volume(restored.ID)
		g.Expect(info.BackupID).To(Equal(b.ID))
		data, ok := disks.Data(restored.ID)
		g.Expect(ok).To(BeTrue())
		g.Expect(string(data)).To(Equal("hello from the node"))

		// The driver's DeleteSnapshot of a backup handle: GET, DELETE the backup, then a 404
		// from the snapshot.
		g.Expect(backups.Delete(ctx, c.volume, b.ID).ExtractErr()).To(Succeed())
		_, err = backups.Get(ctx, c.volume, b.ID).Extract()
		g.Expect(isStatus(err, http.StatusNotFound)).To(BeTrue(), "deleted: %v", err)
		g.Expect(faultMessage(g, err)).To(Equal("Backup " + b.ID + " could not be found."))
		g.Expect(disks.HasBackup(b.ID)).To(BeFalse())
		g.Expect(s.Backups()).To(BeEmpty())
	})

	cases := []struct {
		name string
		opts Options
		// zone is the backup's availability_zone; inUse attaches the volume; noSnapshot backs
		// the volume up directly; mv is the microversion (default 3.51).
		zone       string
		inUse      bool
		noSnapshot bool
		mv         string
		// code is the expected HTTP error; otherwise status, failReason and backupZone are
		// what the backup ends with.
		code       int
		message    string
		status     string
		failReason string
		backupZone string
	}{
		{
			name:   "When a volume is backed up directly, it should take the default zone's service",
			opts:   Options{VolumeZones: []Zone{{Name: "az1", Available: true}}},
			status: StatusAvailable, backupZone: "az1", noSnapshot: true,
		},
		{
			name:  "When an in-use volume is backed up without a snapshot or force, it should answer Cinder's 400",
			inUse: true, noSnapshot: true,
			code: http.StatusBadRequest, message: "Invalid volume: Backing up an in-use volume must use the force flag.",
		},
		{
			name:   "When there is no backup service, it should accept the backup and fail it as Cinder's scheduler does",
			opts:   Options{BackupServices: []BackupService{}},
			status: StatusError, failReason: "Service not found for creating backup.", backupZone: DefaultZone,
		},
		{
			name:   "When the only backup service is down, it should fail the backup",
			opts:   Options{BackupServices: []BackupService{{Down: true}}},
			status: StatusError, failReason: "Service not found for creating backup.", backupZone: DefaultZone,
		},
		{
			name: "When the only backup service serves another zone, it should fail a backup in the volume's zone",
			opts: Options{
				VolumeZones:    []Zone{{Name: "az1", Available: true}, {Name: "az2", Available: true}},
				BackupServices: []BackupService{{Host: "backup-az2", Zone: "az2"}},
			},
			status: StatusError, failReason: "Service not found for creating backup.", backupZone: "az1",
		},
		{
			name: "When the backup asks for the backup service's zone, it should be taken there",
			opts: Options{
				VolumeZones:    []Zone{{Name: "az1", Available: true}, {Name: "az2", Available: true}},
				BackupServices: []BackupService{{Host: "backup-az2", Zone: "az2"}},
			},
			zone:   "az2",
			status: StatusAvailable, backupZone: "az2",
		},
		{
			name: "When metadata is sent below microversion 3.43, it should answer 400 as Cinder's schema does",
			mv:   "3.42",
			code: http.StatusBadRequest, message: "Invalid input for field/attribute backup. Additional properties are not allowed ('metadata' was unexpected)",
		},
		{
			name:    "When the backup quota would be exceeded, it should answer 413",
			opts:    Options{QuotaBackupGigabytes: 1},
			code:    http.StatusRequestEntityTooLarge,
			message: "Requested backup exceeds allowed Backup gigabytes quota. Requested 2G, quota is 1G and 0G has been consumed.",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ctx := t.Context()
			s := newTestServer(t, tc.opts)
			g.Expect(s.AddServer(ServerInfo{ID: "node-1"})).To(Succeed())
			c := newDriverClients(t, g, s, s.AuthURL())
			v := c.createVolume(ctx, g, "pvc", 2)
			snapshotID := ""
			if !tc.noSnapshot {
				snap, err := snapshots.Create(ctx, c.volume, &snapshots.CreateOpts{VolumeID: v.ID, Name: "snap"}).Extract()
				g.Expect(err).NotTo(HaveOccurred())
				snapshotID = snap.ID
			}
			if tc.inUse {
				_, err := c.attach(ctx, "node-1", v.ID)
				g.Expect(err).NotTo(HaveOccurred())
			}
			mv := tc.mv
			if mv == "" {
				mv = "3.51"
			}
			opts := backups.CreateOpts{VolumeID: v.ID, SnapshotID: snapshotID, Name: "b", Metadata: map[string]string{clusterKey: "k"}}
			if tc.zone != "" {
				opts.AvailabilityZone = tc.zone
			}
			created, err := backups.Create(ctx, c.volumeAt(g, mv), opts).Extract()
			if tc.code != 0 {
				g.Expect(isStatus(err, tc.code)).To(BeTrue(), "error: %v", err)
				g.Expect(faultMessage(g, err)).To(Equal(tc.message))
				g.Expect(s.Backups()).To(BeEmpty())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			b, err := backups.Get(ctx, c.volume, created.ID).Extract()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.Status).To(Equal(tc.status))
			g.Expect(b.FailReason).To(Equal(tc.failReason))
			g.Expect(b.AvailabilityZone).To(HaveValue(Equal(tc.backupZone)))
			// A backup in error can be deleted, as in Cinder.
			g.Expect(backups.Delete(ctx, c.volume, b.ID).ExtractErr()).To(Succeed())
		})
	}

	t.Run("When a volume is restored from a backup in error, it should answer 400", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		ctx := t.Context()
		s := newTestServer(t, Options{BackupServices: []BackupService{}})
		c := newDriverClients(t, g, s, s.AuthURL())
		v := c.createVolume(ctx, g, "pvc", 1)
		b, err := c.createBackup(ctx, g, "b", v.ID, "", "")
		g.Expect(err).NotTo(HaveOccurred())
		_, err = volumes.Create(ctx, c.volumeAt(g, "3.51"), &volumes.CreateOpts{Name: "r", BackupID: b.ID}, nil).Extract()
		g.Expect(isStatus(err, http.StatusBadRequest)).To(BeTrue(), "error: %v", err)
		g.Expect(faultMessage(g, err)).To(Equal("Invalid backup: Originating backup status must be one of 'available' values"))
	})
}

func TestCinderServices(t *testing.T) {
	t.Parallel()

	type row struct{ Binary, Host, Zone, Status, State string }
	list := func(ctx context.Context, g Gomega, c *driverClients, binary string) ([]row, error) {
		pages, err := services.List(c.volume, services.ListOpts{Binary: binary}).AllPages(ctx)
		if err != nil {
			return nil, err
		}
		svcs, err := services.ExtractServices(pages)
		g.Expect(err).NotTo(HaveOccurred())
		var out []row
		for _, sv := range svcs {
			g.Expect(sv.UpdatedAt.IsZero()).To(BeFalse(), "updated_at of %s", sv.Host)
			out = append(out, row{sv.Binary, sv.Host, sv.Zone, sv.Status, sv.State})
		}
		return out, nil
	}

	cases := []struct {
		name   string
		opts   Options
		binary string
		want   []row
	}{
		{
			name:   "When nothing is configured, it should list one enabled, up cinder-backup in the default volume zone",
			opts:   Options{VolumeZones: []Zone{{Name: "az1"}, {Name: "az2", Available: true}}},
			binary: BinaryBackup,
			want:   []row{{BinaryBackup, "cinder-backup-1", "az2", "enabled", "up"}},
		},
		{
			name:   "When no filter is given, it should list the scheduler, one cinder-volume per backend and the backup services",
			opts:   Options{Backends: []Backend{{Host: "cinder@lvm-1"}, {Host: "cinder@lvm-2"}}},
			binary: "",
			want: []row{
				{BinaryScheduler, "cinder", DefaultZone, "enabled", "up"},
				{BinaryVolume, "cinder@lvm-1", DefaultZone, "enabled", "up"},
				{BinaryVolume, "cinder@lvm-2", DefaultZone, "enabled", "up"},
				{BinaryBackup, "cinder-backup-1", DefaultZone, "enabled", "up"},
			},
		},
		{
			name: "When backup services are configured down or disabled, it should report them so",
			opts: Options{
				VolumeZones:    []Zone{{Name: "zoneA", Available: true}, {Name: "zoneC", Available: true}},
				BackupServices: []BackupService{{Host: "bk-a", Down: true}, {Host: "bk-c", Zone: "zoneC", Disabled: true}},
			},
			binary: BinaryBackup,
			want: []row{
				{BinaryBackup, "bk-a", "zoneA", "enabled", "down"},
				{BinaryBackup, "bk-c", "zoneC", "disabled", "up"},
			},
		},
		{
			name:   "When there is no backup service, it should list none",
			opts:   Options{BackupServices: []BackupService{}},
			binary: BinaryBackup,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := newTestServer(t, tc.opts)
			c := newDriverClients(t, g, s, s.AuthURL())
			got, err := list(t.Context(), g, c, tc.binary)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}

	t.Run("When listing services is forbidden, it should answer Cinder's 403 policy error until allowed", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		ctx := t.Context()
		s := newTestServer(t, Options{ForbidServiceList: true})
		c := newDriverClients(t, g, s, s.AuthURL())
		_, err := list(ctx, g, c, BinaryBackup)
		g.Expect(isStatus(err, http.StatusForbidden)).To(BeTrue(), "error: %v", err)
		g.Expect(faultMessage(g, err)).To(Equal("Policy doesn't allow volume_extension:services:index to be performed."))
		s.SetServiceListForbidden(false)
		got, err := list(ctx, g, c, BinaryBackup)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(HaveLen(1))
		s.SetBackupServices()
		got, err = list(ctx, g, c, BinaryBackup)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(BeEmpty())
	})
}

func TestCinderScheduler(t *testing.T) {
	t.Parallel()

	twoBackends := []Backend{{Host: "cinder@lvm-1"}, {Host: "cinder@lvm-2"}}
	// Volumes "a" (on lvm-1) and "b" (on lvm-2) exist before each case; hints name them by
	// these keys, which the test replaces with their IDs.
	cases := []struct {
		name     string
		backends []Backend
		same     []string
		diff     []string
		clone    string
		// backend is where the new volume lands, or "" for a scheduling failure.
		backend string
	}{
		{
			name:     "When different_host names a volume, it should land on another backend",
			backends: twoBackends, diff: []string{"a"}, backend: "cinder@lvm-2#pool",
		},
		{
			name:     "When same_host names a volume, it should land on that volume's backend",
			backends: twoBackends, same: []string{"b"}, backend: "cinder@lvm-2#pool",
		},
		{
			name:     "When same_host and different_host name the same volume, it should fail with No valid backend",
			backends: twoBackends, same: []string{"a"}, diff: []string{"a"},
		},
		{
			name:     "When different_host names volumes on every backend, it should fail with No valid backend",
			backends: twoBackends, diff: []string{"a", "b"},
		},
		{
			name:     "When same_host names an unknown volume, it should fail, as Cinder finds it on no backend",
			backends: twoBackends, same: []string{"00000000-0000-4000-8000-000000000000"},
		},
		{
			name:     "When different_host names an unknown volume, it should pass it and spread",
			backends: twoBackends, diff: []string{"00000000-0000-4000-8000-000000000000"}, backend: "cinder@lvm-1#pool",
		},
		{
			name:     "When a volume is cloned, it should stay on its source's backend",
			backends: twoBackends, clone: "b", backend: "cinder@lvm-2#pool",
		},
		{
			name:     "When a clone must avoid its source's backend, it should fail",
			backends: twoBackends, clone: "b", diff: []string{"b"},
		},
		{
			name:     "When no backends are configured, it should ignore the hints as before",
			backends: nil, diff: []string{"a", "b"}, backend: "cinder@lvm-nova#pool",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ctx := t.Context()
			s := newTestServer(t, Options{Backends: tc.backends})
			c := newDriverClients(t, g, s, s.AuthURL())
			ids := map[string]string{}
			for _, name := range []string{"a", "b"} {
				ids[name] = c.createVolume(ctx, g, name, 1).ID
			}
			if tc.backends != nil {
				// Spread without hints: the emptiest backend, the first on a tie.
				a, _ := s.Volume(ids["a"])
				b, _ := s.Volume(ids["b"])
				g.Expect([]string{a.Backend, b.Backend}).To(Equal([]string{"cinder@lvm-1#pool", "cinder@lvm-2#pool"}))
			}
			resolve := func(keys []string) []string {
				var out []string
				for _, k := range keys {
					if id, ok := ids[k]; ok {
						k = id
					}
					out = append(out, k)
				}
				return out
			}
			opts := volumes.CreateOpts{Name: "new", Size: 1, SourceVolID: ids[tc.clone]}
			hints := volumes.SchedulerHintOpts{SameHost: resolve(tc.same), DifferentHost: resolve(tc.diff)}
			created, err := volumes.Create(ctx, c.volume, &opts, hints).Extract()
			// Scheduling is asynchronous in Cinder: the request is accepted either way.
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(created.Status).To(Equal(StatusCreating))
			got := c.getVolume(ctx, g, created.ID)
			info, _ := s.Volume(created.ID)
			if tc.backend == "" {
				g.Expect(got.Status).To(Equal(StatusError))
				g.Expect(got.Host).To(BeEmpty())
				g.Expect(info.FailReason).To(HavePrefix("No valid backend was found."))
				// A volume that never got a backend can be deleted.
				g.Expect(volumes.Delete(ctx, c.volume, created.ID, nil).ExtractErr()).To(Succeed())
				return
			}
			g.Expect(got.Status).To(Equal(StatusAvailable))
			g.Expect(got.Host).To(Equal(tc.backend))
			g.Expect(info.Backend).To(Equal(tc.backend))
		})
	}

	t.Run("When a hint is not a UUID, it should fail the volume as Cinder's affinity filters do", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		ctx := t.Context()
		s := newTestServer(t, Options{Backends: twoBackends})
		c := newDriverClients(t, g, s, s.AuthURL())
		// gophercloud refuses non-UUIDs, so this goes through AdditionalProperties.
		hints := volumes.SchedulerHintOpts{AdditionalProperties: map[string]any{"different_host": "not-a-uuid"}}
		created, err := volumes.Create(ctx, c.volume, &volumes.CreateOpts{Name: "v", Size: 1}, hints).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.getVolume(ctx, g, created.ID).Status).To(Equal(StatusError))
	})

	t.Run("When a backend is removed, its backups should still restore onto another", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		ctx := t.Context()
		disks := NewMemoryDisks()
		s := newTestServer(t, Options{Backends: []Backend{{Host: "cinder@lvm-1"}}, Disks: disks})
		c := newDriverClients(t, g, s, s.AuthURL())
		v := c.createVolume(ctx, g, "v", 1)
		g.Expect(disks.WriteData(v.ID, []byte("data"))).To(Succeed())
		b, err := c.createBackup(ctx, g, "b", v.ID, "", "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(volumes.Delete(ctx, c.volume, v.ID, nil).ExtractErr()).To(Succeed())
		s.SetBackends(Backend{Host: "cinder@ceph", Pool: "rbd"})
		restored, err := volumes.Create(ctx, c.volume, &volumes.CreateOpts{Name: "r", BackupID: b.ID}, nil).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		got := c.getVolume(ctx, g, restored.ID)
		g.Expect(got.Status).To(Equal(StatusAvailable))
		g.Expect(got.Host).To(Equal("cinder@ceph#rbd"))
		data, _ := disks.Data(restored.ID)
		g.Expect(string(data)).To(Equal("data"))
	})
}

func TestZones(t *testing.T) {
	t.Parallel()

	// Compute and volume zones differ, as in clouds where topology must be off: compute
	// {zoneA, zoneB}, volume {zoneA, zoneC}.
	opts := Options{
		ComputeZones: []Zone{{Name: "zoneA", Available: true}, {Name: "zoneB", Available: true}},
		VolumeZones:  []Zone{{Name: "zoneA", Available: true}, {Name: "zoneC", Available: true}},
		Backends:     []Backend{{Host: "cinder@a-1", Zone: "zoneA"}, {Host: "cinder@c-1", Zone: "zoneC"}, {Host: "cinder@c-2", Zone: "zoneC"}},
	}
	cases := []struct {
		name    string
		zone    string
		code    int
		message string
		// wantZone and backends are the new volume's zone and the backends it may land on.
		wantZone string
		backends []string
	}{
		{
			name: "When no zone is asked for, it should use the first volume zone", wantZone: "zoneA",
			backends: []string{"cinder@a-1#pool"},
		},
		{
			name: "When a volume-only zone is asked for, it should land on that zone's backends", zone: "zoneC",
			wantZone: "zoneC", backends: []string{"cinder@c-1#pool", "cinder@c-2#pool"},
		},
		{
			name: "When a compute-only zone is asked for, it should answer Cinder's 400", zone: "zoneB",
			code: http.StatusBadRequest, message: "Availability zone 'zoneB' is invalid.",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := newTestServer(t, opts)
			c := newDriverClients(t, g, s, s.AuthURL())
			v, err := volumes.Create(t.Context(), c.volume, &volumes.CreateOpts{Name: "v", Size: 1, AvailabilityZone: tc.zone}, nil).Extract()
			if tc.code != 0 {
				g.Expect(isStatus(err, tc.code)).To(BeTrue(), "error: %v", err)
				g.Expect(faultMessage(g, err)).To(Equal(tc.message))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			got := c.getVolume(t.Context(), g, v.ID)
			g.Expect(got.AvailabilityZone).To(Equal(tc.wantZone))
			g.Expect(tc.backends).To(ContainElement(got.Host))
		})
	}

	t.Run("When a server is placed in a compute-only zone, the metadata service should report it", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := newTestServer(t, opts)
		g.Expect(s.AddServer(ServerInfo{ID: "node-b", Zone: "zoneB"})).To(Succeed())
		g.Expect(s.AddServer(ServerInfo{ID: "node-a"})).To(Succeed())
		for id, want := range map[string]string{"node-b": "zoneB", "node-a": "zoneA"} {
			rec := httptest.NewRecorder()
			s.MetadataHandler(id).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openstack/latest/meta_data.json", nil))
			g.Expect(rec.Code).To(Equal(http.StatusOK))
			var md driverMetadata
			g.Expect(json.Unmarshal(rec.Body.Bytes(), &md)).To(Succeed())
			g.Expect(md.AvailabilityZone).To(Equal(want), id)
		}
	})
}
