//go:build linux

package fakeopenstack

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/backups"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/snapshots"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/volumeattach"
	. "github.com/onsi/gomega"
)

// helperDirEnv makes the test binary act as a process that owns loop disks until it is killed
// (see TestMain), to test SweepLoopDisks on a real killed run.
const helperDirEnv = "FAKEOPENSTACK_LOOP_HELPER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperDirEnv); dir != "" {
		os.Exit(loopHelper(dir))
	}
	os.Exit(m.Run())
}

// loopHelper attaches a volume, reports the device and link on stdout, and waits to be killed.
func loopHelper(dir string) int {
	d, err := NewLoopDisks(LoopOptions{Dir: dir})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	const id = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
	if err := d.CreateVolume(id, GiB); err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	if err := d.CreateSnapshot("snap", id); err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	dev, err := d.Attach(id, "node")
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	fmt.Println("READY", dev, d.LinkPath(id))
	select {}
}

// requireLoopDisks skips without root or loop devices, except on a CI machine that has both
// Linux and root: there a skip would hide a broken backend, so it fails.
func requireLoopDisks(t *testing.T) {
	t.Helper()
	if err := LoopDisksAvailable(); err != nil {
		if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
			t.Fatalf("loop devices must work on a Linux CI machine with root: %v", err)
		}
		t.Skipf("Skipping: loop devices are not usable here: %v", err)
	}
}

// newLoopDisks makes LoopDisks in a fresh directory that does not exist yet (so Close must remove
// it) and closes them when the test ends, also when it fails.
func newLoopDisks(t *testing.T) *LoopDisks {
	t.Helper()
	requireLoopDisks(t)
	d, err := NewLoopDisks(LoopOptions{Dir: filepath.Join(t.TempDir(), "disks"), Logger: testr.New(t)})
	if err != nil {
		t.Fatalf("creating loop disks: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("closing loop disks: %v", err)
		}
	})
	return d
}

// blockdevSize is what `blockdev --getsize64` says, an outside view of the device size.
func blockdevSize(g Gomega, dev string) int64 {
	out, err := exec.Command("blockdev", "--getsize64", dev).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "blockdev: %s", out)
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	g.Expect(err).NotTo(HaveOccurred())
	return n
}

// loopsIn lists, independently of the code under test, the loop devices whose backing file is
// in dir, from sysfs.
func loopsIn(dir string) []string {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		resolved = dir
	}
	paths, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		file := strings.TrimSuffix(strings.TrimSpace(string(data)), " (deleted)")
		if filepath.Dir(file) == resolved || filepath.Dir(file) == dir {
			out = append(out, p)
		}
	}
	return out
}

func writeAt(g Gomega, dev string, off int64, data []byte) {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	_, err = f.WriteAt(data, off)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.Sync()).To(Succeed())
}

func readAt(g Gomega, dev string, off int64, n int) []byte {
	f, err := os.Open(dev)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	buf := make([]byte, n)
	_, err = f.ReadAt(buf, off)
	g.Expect(err).NotTo(HaveOccurred())
	return buf
}

// expectLink checks that the by-id link of a volume resolves to a block device, and returns it.
func expectLink(g Gomega, d *LoopDisks, volumeID string) string {
	link := d.LinkPath(volumeID)
	g.Expect(filepath.Base(link)).To(Equal("virtio-" + volumeID[:20]))
	dev, err := filepath.EvalSymlinks(link)
	g.Expect(err).NotTo(HaveOccurred())
	st, err := os.Stat(dev)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Mode() & fs.ModeDevice).NotTo(BeZero())
	g.Expect(st.Mode() & fs.ModeCharDevice).To(BeZero())
	return dev
}

// expectAllGone checks that nothing of d is left: no loop device on its files, no link, no file.
func expectAllGone(g Gomega, dir string, links []string, byIDExisted bool) {
	g.Eventually(func() []string { return loopsIn(dir) }).WithTimeout(5 * time.Second).Should(BeEmpty())
	for _, link := range links {
		_, err := os.Lstat(link)
		g.Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue(), "link %s: %v", link, err)
	}
	_, err := os.Stat(dir)
	g.Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue(), "dir %s: %v", dir, err)
	if !byIDExisted {
		// Created for us: gone, unless another run put links into it meanwhile.
		if entries, err := os.ReadDir(DefaultByIDDir); err == nil {
			g.Expect(entries).NotTo(BeEmpty(), "%s was created for the test and left empty", DefaultByIDDir)
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

const (
	volA = "0a0a0a0a-1111-4222-8333-444444444444"
	volB = "0b0b0b0b-1111-4222-8333-444444444444"
	volC = "0c0c0c0c-1111-4222-8333-444444444444"
)

func TestLoopDisks(t *testing.T) {
	t.Run("When volumes are attached, written, extended, snapshotted and cloned, it should behave like disks and leave nothing after Close", func(t *testing.T) {
		g := NewWithT(t)
		byIDExisted := exists(DefaultByIDDir)
		d := newLoopDisks(t)
		pattern := bytes.Repeat([]byte("cinder-csi-fake\n"), 256)

		// A 1 GiB volume is a sparse file: nothing allocated.
		start := time.Now()
		g.Expect(d.CreateVolume(volA, GiB)).To(Succeed())
		st, err := os.Stat(d.volumePath(volA))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Size()).To(Equal(GiB))
		g.Expect(st.Sys().(*syscall.Stat_t).Blocks * 512).To(BeNumerically("<", 1<<20))

		dev, err := d.Attach(volA, "node-1")
		g.Expect(err).NotTo(HaveOccurred())
		t.Logf("Created and attached a 1 GiB volume in %v as %s", time.Since(start), dev)
		g.Expect(expectLink(g, d, volA)).To(Equal(dev))
		g.Expect(d.Device(volA)).To(Equal(dev))
		out, err := exec.Command("losetup", "-j", d.volumePath(volA)).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "losetup: %s", out)
		g.Expect(string(out)).To(HavePrefix(dev + ":"))
		g.Expect(blockdevSize(g, d.LinkPath(volA))).To(Equal(GiB))
		_, err = d.Attach(volA, "node-2")
		g.Expect(err).To(HaveOccurred(), "attached twice")
		g.Expect(d.DeleteVolume(volA)).NotTo(Succeed(), "deleted while attached")

		// Data written through the device survives detach and a new attach.
		writeAt(g, d.LinkPath(volA), 300<<20, pattern)
		g.Expect(d.Detach(volA, "node-2")).NotTo(Succeed(), "detached from the wrong server")
		g.Expect(d.Detach(volA, "node-1")).To(Succeed())
		_, err = os.Lstat(d.LinkPath(volA))
		g.Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue(), "link after detach: %v", err)
		g.Eventually(func() []string { return loopsIn(d.Dir()) }).WithTimeout(5 * time.Second).Should(BeEmpty())
		_, err = d.Attach(volA, "node-1")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(readAt(g, d.LinkPath(volA), 300<<20, len(pattern))).To(Equal(pattern))

		// Extend while attached: the device grows as an outside tool sees it.
		start = time.Now()
		g.Expect(d.ExtendVolume(volA, 2*GiB)).To(Succeed())
		g.Expect(blockdevSize(g, d.LinkPath(volA))).To(Equal(2 * GiB))
		t.Logf("Extended an attached volume to 2 GiB in %v", time.Since(start))
		g.Expect(d.ExtendVolume(volA, GiB)).NotTo(Succeed(), "shrink")

		// Snapshot while attached (with data written after the last flush), restore it larger,
		// and clone: both have the data, and stay sparse.
		writeAt(g, d.LinkPath(volA), 1900<<20, pattern)
		start = time.Now()
		g.Expect(d.CreateSnapshot("snap-1", volA)).To(Succeed())
		g.Expect(d.RestoreSnapshot(volB, "snap-1", 3*GiB)).To(Succeed())
		g.Expect(d.CloneVolume(volC, volA, 2*GiB)).To(Succeed())
		t.Logf("Snapshot, restore and clone of a 2 GiB volume took %v", time.Since(start))
		for _, id := range []string{volB, volC} {
			st, err := os.Stat(d.volumePath(id))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Sys().(*syscall.Stat_t).Blocks*512).To(BeNumerically("<", 64<<20), "%s stays sparse", id)
		}
		devB, err := d.Attach(volB, "node-2")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(devB).NotTo(Equal(dev))
		g.Expect(blockdevSize(g, d.LinkPath(volB))).To(Equal(3 * GiB))
		g.Expect(readAt(g, d.LinkPath(volB), 300<<20, len(pattern))).To(Equal(pattern))
		g.Expect(readAt(g, d.LinkPath(volB), 1900<<20, len(pattern))).To(Equal(pattern))
		_, err = d.Attach(volC, "node-2")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(readAt(g, d.LinkPath(volC), 1900<<20, len(pattern))).To(Equal(pattern))

		g.Expect(d.DeleteSnapshot("snap-1")).To(Succeed())
		g.Expect(d.Detach(volC, "node-2")).To(Succeed())
		g.Expect(d.DeleteVolume(volC)).To(Succeed())
		_, err = os.Stat(d.volumePath(volC))
		g.Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue())

		// Close with two volumes still attached: everything goes.
		dir := d.Dir()
		links := []string{d.LinkPath(volA), d.LinkPath(volB), d.LinkPath(volC)}
		g.Expect(d.Close()).To(Succeed())
		expectAllGone(g, dir, links, byIDExisted)
		g.Expect(d.Close()).To(Succeed(), "second Close")
		_, err = d.Attach(volA, "node-1")
		g.Expect(err).To(HaveOccurred(), "use after Close")
	})

	t.Run("When a caller panics while volumes are attached, it should still release everything on Close", func(t *testing.T) {
		g := NewWithT(t)
		byIDExisted := exists(DefaultByIDDir)
		d := newLoopDisks(t)
		func() {
			defer func() { _ = recover() }()
			g.Expect(d.CreateVolume(volA, GiB)).To(Succeed())
			_, err := d.Attach(volA, "node-1")
			g.Expect(err).NotTo(HaveOccurred())
			panic("test panic while attached")
		}()
		dir, link := d.Dir(), d.LinkPath(volA)
		g.Expect(loopsIn(dir)).To(HaveLen(1))
		g.Expect(d.Close()).To(Succeed())
		expectAllGone(g, dir, []string{link}, byIDExisted)
	})

	t.Run("When a loop device is left bound onto an attached volume, as an interrupted kubelet leaves its block-volume lock, Close should free both", func(t *testing.T) {
		g := NewWithT(t)
		byIDExisted := exists(DefaultByIDDir)
		d := newLoopDisks(t)
		g.Expect(d.CreateVolume(volA, GiB)).To(Succeed())
		dev, err := d.Attach(volA, "node-1")
		g.Expect(err).NotTo(HaveOccurred())
		// What the kubelet does for a raw-block volume: a loop device on the volume's device
		// node, without autoclear.
		out, err := exec.Command("losetup", "--find", "--show", dev).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "losetup: %s", out)
		stacked := strings.TrimSpace(string(out))
		t.Cleanup(func() { _ = exec.Command("losetup", "-d", stacked).Run() })
		g.Expect(loopsStackedOn([]string{dev})).To(Equal([]string{stacked}))

		dir, link := d.Dir(), d.LinkPath(volA)
		g.Expect(d.Close()).To(Succeed())
		expectAllGone(g, dir, []string{link}, byIDExisted)
		_, bound := loopStatus(stacked)
		g.Expect(bound).To(BeFalse(), "the stacked device %s is detached", stacked)
	})

	t.Run("When a directory already has an owner, it should refuse to reuse or sweep it", func(t *testing.T) {
		g := NewWithT(t)
		d := newLoopDisks(t)
		_, err := NewLoopDisks(LoopOptions{Dir: d.Dir()})
		g.Expect(err).To(MatchError(ContainSubstring("earlier run")))
		_, err = SweepLoopDisks(d.Dir(), logr.Discard())
		g.Expect(err).To(MatchError(ErrLoopDisksInUse))
		g.Expect(exists(filepath.Join(d.Dir(), loopMarker))).To(BeTrue())

		other := t.TempDir()
		g.Expect(os.WriteFile(filepath.Join(other, "keep"), nil, 0o600)).To(Succeed())
		_, err = SweepLoopDisks(other, logr.Discard())
		g.Expect(err).To(MatchError(ContainSubstring("no loop disk marker")))
		g.Expect(exists(filepath.Join(other, "keep"))).To(BeTrue())
		removed, err := SweepLoopDisks(filepath.Join(other, "missing"), logr.Discard())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(removed).To(BeEmpty())
	})

	t.Run("When the owning process was killed, it should sweep its devices, links and files", func(t *testing.T) {
		g := NewWithT(t)
		requireLoopDisks(t)
		byIDExisted := exists(DefaultByIDDir)
		dir := filepath.Join(t.TempDir(), "killed-run")
		t.Cleanup(func() { _, _ = SweepLoopDisks(dir, testr.New(t)) })

		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), helperDirEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cmd.Start()).To(Succeed())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		line, err := bufio.NewReader(stdout).ReadString('\n')
		g.Expect(err).NotTo(HaveOccurred())
		fields := strings.Fields(line)
		g.Expect(fields).To(HaveLen(3), "helper said %q", line)
		g.Expect(fields[0]).To(Equal("READY"))
		dev, link := fields[1], fields[2]
		g.Expect(filepath.EvalSymlinks(link)).To(Equal(dev))

		// Hold the device open, as a mount would, so that it outlives its owner.
		held, err := os.Open(dev)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
		_ = cmd.Wait()
		g.Expect(loopsIn(dir)).To(HaveLen(1), "the held device stays bound")

		// The first sweep removes the link and the files but cannot free the held device; it
		// keeps the marker so that a later sweep can.
		start := time.Now()
		removed, err := SweepLoopDisks(dir, testr.New(t))
		g.Expect(err).To(MatchError(ContainSubstring("still in use")))
		g.Expect(removed).To(ContainElement(link))
		g.Expect(exists(filepath.Join(dir, loopMarker))).To(BeTrue())
		_ = held.Close()
		g.Eventually(func() []string { return loopsIn(dir) }).WithTimeout(5 * time.Second).Should(BeEmpty())
		removed, err = SweepLoopDisks(dir, testr.New(t))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(removed).To(ContainElement(dir))
		t.Logf("Swept a killed run in %v", time.Since(start))
		expectAllGone(g, dir, []string{link}, byIDExisted)
	})
}

// TestLoopDisksThroughAPI drives a LoopDisks-backed fake the way the driver's controller does and
// checks the node's view: the by-id device, its size after an online extend, the data in a
// restored snapshot.
func TestLoopDisksThroughAPI(t *testing.T) {
	t.Run("When the driver's calls attach, extend and snapshot a volume, it should show on the node's devices", func(t *testing.T) {
		g := NewWithT(t)
		ctx := t.Context()
		d := newLoopDisks(t)
		s := newTestServer(t, Options{Disks: d})
		g.Expect(s.AddServer(ServerInfo{ID: "node-1"})).To(Succeed())
		g.Expect(s.AddServer(ServerInfo{ID: "node-2"})).To(Succeed())
		c := newDriverClients(t, g, s, s.AuthURL())

		v := c.createVolume(ctx, g, "pvc-1", 1)
		_, err := c.attach(ctx, "node-1", v.ID)
		g.Expect(err).NotTo(HaveOccurred())
		info, _ := s.Volume(v.ID)
		g.Expect(info.Attachments).To(HaveLen(1))
		g.Expect(expectLink(g, d, v.ID)).To(Equal(info.Attachments[0].HostDevice))
		g.Expect(blockdevSize(g, d.LinkPath(v.ID))).To(Equal(GiB))
		pattern := []byte("written by the node")
		writeAt(g, d.LinkPath(v.ID), 4096, pattern)

		g.Expect(volumes.ExtendSize(ctx, c.volumeAt(g, "3.42"), v.ID, volumes.ExtendSizeOpts{NewSize: 2}).ExtractErr()).To(Succeed())
		g.Expect(blockdevSize(g, d.LinkPath(v.ID))).To(Equal(2 * GiB))

		snap, err := snapshots.Create(ctx, c.volume, &snapshots.CreateOpts{VolumeID: v.ID, Name: "snap", Force: true}).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		restored, err := volumes.Create(ctx, c.volume, &volumes.CreateOpts{Name: "pvc-2", Size: 2, SnapshotID: snap.ID}, nil).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.attach(ctx, "node-2", restored.ID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(readAt(g, d.LinkPath(restored.ID), 4096, len(pattern))).To(Equal(pattern))

		g.Expect(volumeattach.Delete(ctx, c.compute, "node-1", v.ID).ExtractErr()).To(Succeed())
		_, err = os.Lstat(d.LinkPath(v.ID))
		g.Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue(), "link after detach: %v", err)
		g.Expect(snapshots.Delete(ctx, c.volume, snap.ID).ExtractErr()).To(Succeed())
		g.Expect(volumes.Delete(ctx, c.volume, v.ID, nil).ExtractErr()).To(Succeed())
		_, err = os.Stat(d.volumePath(v.ID))
		g.Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue())
	})
}

// TestLoopDisksBackups drives backups through the API onto real loop devices: the backup is a
// file of its own, so the node's data comes back after its volume, snapshot and their files are
// gone, and Close leaves no backup file behind.
func TestLoopDisksBackups(t *testing.T) {
	t.Run("When a backup of an in-use volume's snapshot outlives both, it should restore the node's data", func(t *testing.T) {
		g := NewWithT(t)
		ctx := t.Context()
		byIDExisted := exists(DefaultByIDDir)
		d := newLoopDisks(t)
		s := newTestServer(t, Options{Disks: d})
		g.Expect(s.AddServer(ServerInfo{ID: "node-1"})).To(Succeed())
		c := newDriverClients(t, g, s, s.AuthURL())

		v := c.createVolume(ctx, g, "pvc-1", 1)
		_, err := c.attach(ctx, "node-1", v.ID)
		g.Expect(err).NotTo(HaveOccurred())
		pattern := []byte("backed up from the node")
		writeAt(g, d.LinkPath(v.ID), 8192, pattern)

		snap, err := snapshots.Create(ctx, c.volume, &snapshots.CreateOpts{VolumeID: v.ID, Name: "snap", Force: true}).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		fromSnap, err := c.createBackup(ctx, g, "from-snap", v.ID, snap.ID, "")
		g.Expect(err).NotTo(HaveOccurred())
		// A direct backup of the attached volume (force) flushes the device first.
		writeAt(g, d.LinkPath(v.ID), 16384, pattern)
		direct, err := backups.Create(ctx, c.volumeAt(g, "3.51"), backups.CreateOpts{VolumeID: v.ID, Name: "direct", Force: true}).Extract()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(exists(d.backupPath(fromSnap.ID))).To(BeTrue())

		g.Expect(snapshots.Delete(ctx, c.volume, snap.ID).ExtractErr()).To(Succeed())
		g.Expect(volumeattach.Delete(ctx, c.compute, "node-1", v.ID).ExtractErr()).To(Succeed())
		g.Expect(volumes.Delete(ctx, c.volume, v.ID, nil).ExtractErr()).To(Succeed())
		g.Expect(exists(d.volumePath(v.ID))).To(BeFalse())
		g.Expect(exists(d.snapshotPath(snap.ID))).To(BeFalse())

		// The snapshot was taken before the second write: its backup has only the first.
		for _, b := range []struct {
			id             string
			offsets, holes []int64
		}{{fromSnap.ID, []int64{8192}, []int64{16384}}, {direct.ID, []int64{8192, 16384}, nil}} {
			restored, err := volumes.Create(ctx, c.volumeAt(g, "3.51"), &volumes.CreateOpts{Name: "restored", Size: 2, BackupID: b.id}, nil).Extract()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c.getVolume(ctx, g, restored.ID).Status).To(Equal(StatusAvailable))
			_, err = c.attach(ctx, "node-1", restored.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(blockdevSize(g, d.LinkPath(restored.ID))).To(Equal(2 * GiB))
			for _, off := range b.offsets {
				g.Expect(readAt(g, d.LinkPath(restored.ID), off, len(pattern))).To(Equal(pattern), "backup %s at %d", b.id, off)
			}
			for _, off := range b.holes {
				g.Expect(readAt(g, d.LinkPath(restored.ID), off, len(pattern))).To(Equal(make([]byte, len(pattern))), "backup %s at %d", b.id, off)
			}
			g.Expect(volumeattach.Delete(ctx, c.compute, "node-1", restored.ID).ExtractErr()).To(Succeed())
		}
		g.Expect(backups.Delete(ctx, c.volume, fromSnap.ID).ExtractErr()).To(Succeed())
		g.Expect(exists(d.backupPath(fromSnap.ID))).To(BeFalse())

		// Close removes the backup still held, with everything else.
		dir := d.Dir()
		g.Expect(d.Close()).To(Succeed())
		expectAllGone(g, dir, nil, byIDExisted)
	})
}
