//go:build realcloud

package realcloud

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/snapshots"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/volumeattach"
	. "github.com/onsi/gomega"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/loopdev"
)

func TestPlanDevice(t *testing.T) {
	exports := map[string]string{"127.0.0.1:/nfs-0": "/run/exports/nfs-0"}
	const vol = "volume-0c5e1a5e-3f0b-4a7e-9a57-5b3c9d1e2f40"
	for _, tc := range []struct {
		name       string
		info       map[string]any
		file       string
		unservable string
	}{{
		name: "When an attachment's connection_info is a raw NFS file, flat as the attachments API keeps it, it should name the file in its export",
		info: map[string]any{"driver_volume_type": "nfs", "export": "127.0.0.1:/nfs-0", "name": vol, "format": "raw"},
		file: "/run/exports/nfs-0/" + vol,
	}, {
		name: "When the driver's data is nested under data, it should read it there",
		info: map[string]any{"driver_volume_type": "nfs", "data": map[string]any{"export": "127.0.0.1:/nfs-0", "name": vol, "format": "raw"}},
		file: "/run/exports/nfs-0/" + vol,
	}, {
		name:       "When the volume was snapshotted and is a qcow2 overlay, it should say this backend cannot serve it",
		info:       map[string]any{"driver_volume_type": "nfs", "export": "127.0.0.1:/nfs-0", "name": vol + ".5d2e", "format": "qcow2"},
		unservable: "qcow2",
	}, {
		name:       "When the connection is not NFS, it should say so",
		info:       map[string]any{"driver_volume_type": "iscsi", "target_iqn": "iqn.x"},
		unservable: `"iscsi"`,
	}, {
		name:       "When the export is not one of the cloud's, it should refuse it",
		info:       map[string]any{"driver_volume_type": "nfs", "export": "10.0.0.1:/other", "name": vol, "format": "raw"},
		unservable: "none of the cloud's",
	}, {
		name:       "When the file name would leave the export, it should refuse it",
		info:       map[string]any{"driver_volume_type": "nfs", "export": "127.0.0.1:/nfs-0", "name": "../" + vol, "format": "raw"},
		unservable: "not a file of export",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := planDevice(tc.info, exports)
			if tc.unservable != "" {
				g.Expect(p.reason).To(ContainSubstring(tc.unservable))
				return
			}
			g.Expect(p.reason).To(BeEmpty())
			g.Expect(p.file).To(Equal(tc.file))
			g.Expect(p.format).To(Equal("raw"))
		})
	}
}

// requireLoop skips where loop devices cannot be made, except on CI, where that is a failure.
func requireLoop(t *testing.T) {
	t.Helper()
	if err := loopdev.Available(); err != nil {
		if localcluster.InCI() {
			t.Fatalf("loop devices must work on CI: %v", err)
		}
		t.Skipf("Skipping: %v", err)
	}
}

// losetupJ lists the loop devices over file, as losetup -j does.
func losetupJ(t *testing.T, file string) string {
	t.Helper()
	out, err := exec.Command("losetup", "-j", file).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup -j %s: %v: %s", file, err, out)
	}
	return strings.TrimSpace(string(out))
}

// loopBacking is the file behind a loop device, from sysfs, or "" when it has none.
func loopBacking(loop string) string {
	data, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(loop), "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.TrimSpace(string(data)), " (deleted)")
}

func TestSweepHypervisor(t *testing.T) {
	requireLoop(t)
	t.Run("When a killed run left a loop device over a volume file, its by-id link and the directories the link needed, the next sweep should remove them all", func(t *testing.T) {
		g := NewWithT(t)
		// sweep looks for run directories in the temporary directory: this test's own.
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		dir := filepath.Join(tmp, "realcloud-killed")
		export := filepath.Join(dir, "exports", backends[0])
		hv := filepath.Join(dir, hypervisorDir)
		g.Expect(os.MkdirAll(export, 0o755)).To(Succeed())
		g.Expect(os.MkdirAll(hv, 0o700)).To(Succeed())
		// The lock file of a run whose process is gone: nobody holds it.
		g.Expect(os.WriteFile(filepath.Join(dir, "lock"), nil, 0o600)).To(Succeed())
		const vol = "0c5e1a5e-3f0b-4a7e-9a57-5b3c9d1e2f40"
		file := filepath.Join(export, "volume-"+vol)
		g.Expect(os.WriteFile(file, nil, 0o600)).To(Succeed())
		g.Expect(os.Truncate(file, 1<<20)).To(Succeed())

		// What a follower does, up to the kill: the record, a loop device (one without
		// autoclear stands for a device the kernel keeps after its owner's death because a node
		// still held it), the link, and the link's directories recorded.
		byID := filepath.Join(tmp, "dev", "disk", "by-id")
		link := filepath.Join(byID, loopdev.ByIDName(vol))
		rec := filepath.Join(hv, "server-"+vol+".json")
		g.Expect(writeJSON(rec, deviceRecord{Server: "server", Volume: vol, Link: link, File: file})).To(Succeed())
		out, err := exec.Command("losetup", "--find", "--show", file).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "losetup: %s", out)
		loop := strings.TrimSpace(string(out))
		t.Cleanup(func() {
			// Only while it is still ours: a freed device may be someone else's by now.
			if loopBacking(loop) == file {
				_ = exec.Command("losetup", "-d", loop).Run()
			}
		})
		g.Expect(loopdev.Link(link, loop, func(created []string) error { return addCreatedDirs(hv, created) })).To(Succeed())
		g.Expect(readCreatedDirs(hv)).To(ConsistOf(filepath.Join(tmp, "dev"), filepath.Join(tmp, "dev", "disk"), byID))
		g.Expect(losetupJ(t, file)).To(ContainSubstring(loop))

		g.Expect(sweep()).To(Succeed())
		g.Expect(loopBacking(loop)).NotTo(Equal(file), "%s freed", loop)
		_, err = os.Lstat(link)
		g.Expect(os.IsNotExist(err)).To(BeTrue(), "link %s removed", link)
		g.Expect(filepath.Join(tmp, "dev")).NotTo(BeADirectory())
		g.Expect(dir).NotTo(BeADirectory())
	})
}

// loopSize is a loop device's size in bytes, from sysfs (512-byte sectors).
func loopSize(g Gomega, loop string) int64 {
	data, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(loop), "size"))
	g.Expect(err).NotTo(HaveOccurred())
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	g.Expect(err).NotTo(HaveOccurred())
	return n * 512
}

// testFollower boots a server, follows its attachments and checks what its node sees through
// an attach, a write, a detach, an offline extension, a second attach, a snapshotted (qcow2)
// volume and the follower's Stop. It is a step of TestRealCloud, which owns the cloud.
func testFollower(t *testing.T, c *Cloud) {
	g := NewWithT(t)
	ctx := t.Context()
	cl := newClients(t, c, c.AppCredential())
	cl.compute.Microversion = NetworksNoneMicroversion
	const gib = int64(1) << 30

	srv, err := c.CreateServer(ctx, "node-hypervisor", c.ComputeZones()[0])
	g.Expect(err).NotTo(HaveOccurred())
	f, err := c.FollowAttachments(ctx, srv)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Errorf("Stopping the follower: %v", err)
		}
	})
	// The boot volume is a disk of the server too, as vda is of a KVM guest.
	g.Eventually(f.Devices).WithTimeout(time.Minute).Should(ContainElement(Satisfy(Device.Exposed)))
	t.Logf("Devices of the booted server: %+v", f.Devices())

	newVolume := func(name string) string {
		v, err := volumes.Create(ctx, cl.volume, volumes.CreateOpts{Name: name, Size: 1, AvailabilityZone: c.VolumeZones()[0]}, nil).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(WaitVolume(ctx, cl.volume, v.ID, "available")).To(Succeed())
		return v.ID
	}
	// attach attaches through Nova and returns the device once the follower made it, and the
	// time from Nova's answer to the by-id link.
	attach := func(vol string) (Device, time.Duration) {
		start := time.Now()
		_, err := volumeattach.Create(ctx, cl.compute, srv, volumeattach.CreateOpts{VolumeID: vol}).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		var d Device
		g.Eventually(func() bool {
			var ok bool
			d, ok = f.Device(vol)
			return ok && d.Exposed()
		}).WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(BeTrue())
		took := time.Since(start)
		g.Expect(WaitVolume(ctx, cl.volume, vol, "in-use")).To(Succeed())
		return d, took
	}
	// detach detaches through Nova and returns the time until the follower removed the device.
	detach := func(vol string) time.Duration {
		start := time.Now()
		g.Expect(volumeattach.Delete(ctx, cl.compute, srv, vol).ExtractErr()).To(Succeed())
		g.Eventually(func() bool {
			_, ok := f.Device(vol)
			return ok
		}).WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(BeFalse())
		took := time.Since(start)
		g.Expect(WaitVolume(ctx, cl.volume, vol, "available")).To(Succeed())
		return took
	}
	expectGone := func(d Device) {
		_, err := os.Lstat(d.Link)
		g.Expect(os.IsNotExist(err)).To(BeTrue(), "link %s removed", d.Link)
		g.Expect(losetupJ(t, d.File)).To(BeEmpty(), "no loop device over %s", d.File)
	}

	vol := newVolume("hypervisor-raw")
	file := filepath.Join(c.exportDir(0), "volume-"+vol)
	d, took := attach(vol)
	t.Logf("Attach to device: %s (%+v)", took.Round(time.Millisecond), d)
	g.Expect(d.Link).To(Equal(f.LinkPath(vol)))
	g.Expect(d.Link).To(HavePrefix(loopdev.DefaultByIDDir + "/virtio-" + vol[:20]))
	g.Expect(os.Readlink(d.Link)).To(Equal(d.Loop))
	g.Expect(d.Loop).To(HavePrefix("/dev/loop"))
	g.Expect(d.File).To(Equal(file))
	g.Expect(d.Format).To(Equal("raw"))
	g.Expect(loopSize(g, d.Loop)).To(Equal(gib))
	g.Expect(losetupJ(t, file)).To(ContainSubstring(d.Loop + ":"))

	// What the node writes through its disk is in the volume's file once it is detached.
	pattern := bytes.Repeat([]byte("realcloud hypervisor "), 4096)
	const off = 3 << 20
	dev, err := os.OpenFile(d.Link, os.O_RDWR, 0)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = dev.WriteAt(pattern, off)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dev.Sync()).To(Succeed())
	g.Expect(dev.Close()).To(Succeed())

	took = detach(vol)
	t.Logf("Detach to device gone: %s", took.Round(time.Millisecond))
	expectGone(d)
	data := make([]byte, len(pattern))
	fd, err := os.Open(file)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = fd.ReadAt(data, off)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fd.Close()).To(Succeed())
	g.Expect(data).To(Equal(pattern), "the pattern is in %s", file)

	// Offline expansion, then the second attach: the device has the new size and the data.
	g.Expect(volumes.ExtendSize(ctx, cl.volume, vol, volumes.ExtendSizeOpts{NewSize: 2}).ExtractErr()).To(Succeed())
	g.Expect(WaitVolume(ctx, cl.volume, vol, "available")).To(Succeed())
	d, took = attach(vol)
	t.Logf("Attach after extension to device: %s (%+v)", took.Round(time.Millisecond), d)
	g.Expect(loopSize(g, d.Loop)).To(Equal(2 * gib))
	dev, err = os.Open(d.Link)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = dev.ReadAt(data, off)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dev.Close()).To(Succeed())
	g.Expect(data).To(Equal(pattern), "the pattern read back through %s", d.Link)

	// A snapshot makes the NFS driver keep the volume as a qcow2 overlay: attached, it is
	// reported and gets no device.
	snapVol := newVolume("hypervisor-snapshotted")
	snap, err := snapshots.Create(ctx, cl.volume, snapshots.CreateOpts{VolumeID: snapVol, Name: "hypervisor"}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(poll(ctx, 2*time.Minute, "snapshot "+snap.ID+" available", func() (bool, error) {
		s, err := snapshots.Get(ctx, cl.volume, snap.ID).Extract()
		if err != nil {
			return false, err
		}
		if s.Status == "error" {
			return false, fmt.Errorf("snapshot %s is in error", snap.ID)
		}
		return s.Status == "available", nil
	})).To(Succeed())
	_, err = volumeattach.Create(ctx, cl.compute, srv, volumeattach.CreateOpts{VolumeID: snapVol}).Extract()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(WaitVolume(ctx, cl.volume, snapVol, "in-use")).To(Succeed())
	var qd Device
	g.Eventually(func() bool {
		var ok bool
		qd, ok = f.Device(snapVol)
		return ok
	}).WithTimeout(30 * time.Second).Should(BeTrue())
	t.Logf("The snapshotted volume: %+v", qd)
	g.Expect(qd.Unservable).To(BeTrue())
	g.Expect(qd.Format).To(Equal("qcow2"))
	g.Expect(qd.Reason).To(ContainSubstring("qcow2"))
	g.Expect(qd.Exposed()).To(BeFalse())
	_, err = os.Lstat(f.LinkPath(snapVol))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "no link for the qcow2 volume")
	detach(snapVol)

	// Stop with volumes attached (the boot volume and vol) leaves no device behind.
	devices := f.Devices()
	g.Expect(devices).To(ContainElement(HaveField("VolumeID", vol)))
	g.Expect(f.Stop()).To(Succeed())
	for _, d := range devices {
		if d.Exposed() {
			expectGone(d)
		}
	}
	if entries, err := os.ReadDir(loopdev.DefaultByIDDir); err == nil {
		for _, e := range entries {
			for _, d := range devices {
				g.Expect(e.Name()).NotTo(Equal(loopdev.ByIDName(d.VolumeID)))
			}
		}
	}
	_, ok := f.Device(vol)
	g.Expect(ok).To(BeFalse())

	// What the step made in the cloud goes again.
	g.Expect(volumeattach.Delete(ctx, cl.compute, srv, vol).ExtractErr()).To(Succeed())
	g.Expect(WaitVolume(ctx, cl.volume, vol, "available")).To(Succeed())
	g.Expect(snapshots.Delete(ctx, cl.volume, snap.ID).ExtractErr()).To(Succeed())
	g.Expect(poll(ctx, 2*time.Minute, "snapshot "+snap.ID+" deleted", func() (bool, error) {
		_, err := snapshots.Get(ctx, cl.volume, snap.ID).Extract()
		if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			return true, nil
		}
		return false, err
	})).To(Succeed())
	for _, id := range []string{vol, snapVol} {
		g.Expect(volumes.Delete(ctx, cl.volume, id, nil).ExtractErr()).To(Succeed())
	}
	g.Expect(servers.Delete(ctx, cl.compute, srv).ExtractErr()).To(Succeed())
	g.Expect(WaitServerGone(ctx, cl.compute, srv)).To(Succeed())
}

func TestRefreshSize(t *testing.T) {
	requireLoop(t)
	t.Run("When an exposed volume's file grows, the next poll should give its loop device the new size", func(t *testing.T) {
		g := NewWithT(t)
		file := filepath.Join(t.TempDir(), "volume-grows")
		g.Expect(os.WriteFile(file, nil, 0o600)).To(Succeed())
		g.Expect(os.Truncate(file, 1<<20)).To(Succeed())
		dev, loop, err := loopdev.Attach(file)
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() {
			_ = loopdev.Clear(dev)
			_ = dev.Close()
		})
		f := &Follower{c: &Cloud{logf: t.Logf}, server: "server"}
		d := &followed{Device: Device{VolumeID: "grows", File: file, Loop: loop, Size: 1 << 20}, dev: dev}

		f.refreshSize(d)
		g.Expect(loopSize(g, loop)).To(Equal(int64(1 << 20)))
		g.Expect(os.Truncate(file, 4<<20)).To(Succeed())
		f.refreshSize(d)
		g.Expect(d.Size).To(Equal(int64(4 << 20)))
		g.Expect(loopSize(g, loop)).To(Equal(int64(4 << 20)))
	})
}

// fakeAttachments answers the detailed attachment list as Cinder does, from attachments, or
// with a 500 while broken is set.
type fakeAttachments struct {
	mu          sync.Mutex
	attachments []map[string]any
	broken      bool
}

func (a *fakeAttachments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r.URL.Path != "/attachments/detail" || r.URL.Query().Get("instance_id") != "server" || a.broken {
		http.Error(w, `{"badRequest": {}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"attachments": a.attachments})
}

func (a *fakeAttachments) set(broken bool, attachments ...map[string]any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	// Cinder answers an empty list, never null.
	a.broken, a.attachments = broken, append([]map[string]any{}, attachments...)
}

func TestFollowerSync(t *testing.T) {
	requireLoop(t)
	t.Run("When attachments come and go, it should make and remove devices, keep them while the API fails and report a qcow2 volume", func(t *testing.T) {
		g := NewWithT(t)
		tmp := t.TempDir()
		byID := filepath.Join(tmp, "dev", "disk", "by-id")
		c := &Cloud{dir: filepath.Join(tmp, "run"), logf: t.Logf, opts: Options{ByIDDir: byID}}
		g.Expect(os.MkdirAll(c.exportDir(0), 0o755)).To(Succeed())
		g.Expect(os.MkdirAll(c.hypervisorDir(), 0o700)).To(Succeed())
		const raw, snapped = "11111111-2222-4333-8444-555555555555", "66666666-7777-4888-9999-aaaaaaaaaaaa"
		for _, name := range []string{"volume-" + raw, "volume-" + snapped + ".snap"} {
			path := filepath.Join(c.exportDir(0), name)
			g.Expect(os.WriteFile(path, nil, 0o600)).To(Succeed())
			g.Expect(os.Truncate(path, 2<<20)).To(Succeed())
		}
		attachment := func(id, vol, name, format string) map[string]any {
			return map[string]any{"id": id, "volume_id": vol, "instance": "server", "status": "attached",
				"connection_info": map[string]any{"driver_volume_type": "nfs", "export": share(0), "name": name, "format": format}}
		}
		api := &fakeAttachments{}
		srv := httptest.NewServer(api)
		t.Cleanup(srv.Close)
		f := &Follower{c: c, server: "server", devices: map[string]*followed{},
			volume: &gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{}, Endpoint: srv.URL + "/"}}
		t.Cleanup(func() { _ = f.teardown() })
		ctx := t.Context()

		api.set(false, attachment("a1", raw, "volume-"+raw, "raw"), attachment("a2", snapped, "volume-"+snapped+".snap", "qcow2"))
		f.sync(ctx)
		d, ok := f.Device(raw)
		g.Expect(ok).To(BeTrue())
		g.Expect(d.Exposed()).To(BeTrue(), "%+v", d)
		g.Expect(os.Readlink(filepath.Join(byID, loopdev.ByIDName(raw)))).To(Equal(d.Loop))
		g.Expect(loopSize(g, d.Loop)).To(Equal(int64(2 << 20)))
		g.Expect(filepath.Join(c.hypervisorDir(), "server-"+raw+".json")).To(BeAnExistingFile())
		q, ok := f.Device(snapped)
		g.Expect(ok).To(BeTrue())
		g.Expect(q.Unservable).To(BeTrue())
		g.Expect(q.Exposed()).To(BeFalse())
		g.Expect(q.Reason).To(ContainSubstring("qcow2"))
		_, err := os.Lstat(filepath.Join(byID, loopdev.ByIDName(snapped)))
		g.Expect(os.IsNotExist(err)).To(BeTrue())

		// An API that fails is not a detach.
		api.set(true)
		f.sync(ctx)
		kept, _ := f.Device(raw)
		g.Expect(kept.Loop).To(Equal(d.Loop))

		api.set(false)
		f.sync(ctx)
		_, ok = f.Device(raw)
		g.Expect(ok).To(BeFalse())
		g.Expect(losetupJ(t, d.File)).To(BeEmpty())
		_, err = os.Lstat(d.Link)
		g.Expect(os.IsNotExist(err)).To(BeTrue())
		g.Expect(filepath.Join(c.hypervisorDir(), "server-"+raw+".json")).NotTo(BeAnExistingFile())

		// Attached again, then the follower ends: nothing stays, not even the link's directories.
		api.set(false, attachment("a3", raw, "volume-"+raw, "raw"))
		f.sync(ctx)
		d, _ = f.Device(raw)
		g.Expect(d.Exposed()).To(BeTrue())
		g.Expect(f.teardown()).To(Succeed())
		g.Expect(losetupJ(t, d.File)).To(BeEmpty())
		g.Expect(filepath.Join(tmp, "dev")).NotTo(BeADirectory())
		g.Expect(os.ReadDir(c.hypervisorDir())).To(BeEmpty())

		// The same through the poll loop and Stop.
		ctx, cancel := context.WithCancel(context.Background())
		f = &Follower{c: c, server: "server", devices: map[string]*followed{}, cancel: cancel, done: make(chan struct{}),
			volume: &gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{}, Endpoint: srv.URL + "/"}}
		go f.run(ctx)
		start := time.Now()
		g.Eventually(func() bool {
			d, _ = f.Device(raw)
			return d.Exposed()
		}).WithTimeout(5 * time.Second).WithPolling(10 * time.Millisecond).Should(BeTrue())
		api.set(false)
		g.Eventually(func() bool {
			_, ok := f.Device(raw)
			return ok
		}).WithTimeout(5 * time.Second).WithPolling(10 * time.Millisecond).Should(BeFalse())
		t.Logf("Device made and removed by the poll loop in %s", time.Since(start).Round(time.Millisecond))
		api.set(false, attachment("a4", raw, "volume-"+raw, "raw"))
		g.Eventually(func() bool {
			d, _ = f.Device(raw)
			return d.Exposed()
		}).WithTimeout(5 * time.Second).WithPolling(10 * time.Millisecond).Should(BeTrue())
		g.Expect(f.Stop()).To(Succeed())
		g.Expect(f.Stop()).To(Succeed())
		g.Expect(losetupJ(t, d.File)).To(BeEmpty())
		g.Expect(filepath.Join(tmp, "dev")).NotTo(BeADirectory())
		g.Expect(os.ReadDir(c.hypervisorDir())).To(BeEmpty())
	})
}
