package realcloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/attachments"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"golang.org/x/sys/unix"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/loopdev"
)

// FakeDriver attaches a volume in Nova's and Cinder's books only: a real node whose server it
// is gets no disk. A Follower plays the hypervisor's part for one server: it watches the
// server's attachments and gives the host, for each raw volume file of an NFS backend, the block
// device a KVM guest would see (a loop device over the file, linked at
// /dev/disk/by-id/virtio-<first 20 characters of the volume ID>), and takes it away on detach.

const (
	// hypervisorDir, under the run directory, holds a record of every device a follower makes,
	// written before the device, and of the directories its links needed: Stop, and the next
	// run's sweep after a kill, undo what these records and the export directories name.
	hypervisorDir = "hypervisor"
	// createdDirsRecord, in hypervisorDir, lists the directories the links needed (on a host
	// without udev, /dev/disk and /dev/disk/by-id), to be removed when empty.
	createdDirsRecord = "created-dirs.json"
	// followInterval is how often a follower lists its server's attachments: a hypervisor's
	// disk appears within a second of Nova's attach, and a list is one indexed query.
	followInterval = 500 * time.Millisecond
	// listTimeout bounds one list, so that a hung API delays a follower but never stops it.
	listTimeout = 10 * time.Second
	// attachmentsMicroversion is the first volume microversion with the attachments API, whose
	// detailed list carries connection_info.
	attachmentsMicroversion = "3.27"
)

// Device is what a Follower made of one attachment of its server.
type Device struct {
	// VolumeID and AttachmentID name the attachment.
	VolumeID, AttachmentID string
	// Format is the image format the attachment's connection_info names: raw, or qcow2 once the
	// NFS driver has snapshotted the volume.
	Format string
	// File is the volume's active file in its backend's export directory.
	File string
	// Link is the by-id link and Loop the loop device it points at; both are empty while the
	// volume has no device (Reason says why).
	Link, Loop string
	// Size is the loop device's size in bytes.
	Size int64
	// Unservable says that this backend cannot give the volume a device here at all (a qcow2
	// image, a connection type other than nfs); Reason says why. Otherwise a non-empty Reason is
	// the last error making the device, which the next poll retries.
	Unservable bool
	Reason     string
}

// Exposed says the volume has a block device.
func (d Device) Exposed() bool { return d.Loop != "" }

// Follower gives the host a block device for each raw volume attached to one server; see
// FollowAttachments.
type Follower struct {
	c      *Cloud
	server string
	volume *gophercloud.ServiceClient // admin, all projects' attachments
	cancel context.CancelFunc
	done   chan struct{}
	err    error // teardown's, set before done closes

	mu      sync.Mutex
	devices map[string]*followed // by volume ID
	listErr string               // the last list error, logged once
}

// followed is one attachment and what was made for it.
type followed struct {
	Device
	dev    *os.File // the loop device, held open: the kernel frees it (autoclear) when this process dies
	record string
}

// deviceRecord is written before a device is made and removed after it is gone.
type deviceRecord struct {
	Server string `json:"server"`
	Volume string `json:"volume"`
	Link   string `json:"link"`
	File   string `json:"file"`
	Loop   string `json:"loop,omitempty"`
}

// FollowAttachments starts following the attachments of server serverID, as admin, every half
// second, until Stop or the cloud's Stop: each raw volume file of an NFS backend attached to it
// gets a loop device and the by-id link the driver's node service looks for; a volume this
// backend cannot serve as a block device here (qcow2 after a snapshot: the kernel has no nbd) is
// reported by Device and logged, never given a device. ctx bounds the set-up only. A server is
// followed by one Follower at a time: the host has one /dev/disk/by-id.
func (c *Cloud) FollowAttachments(ctx context.Context, serverID string) (*Follower, error) {
	if err := loopdev.Available(); err != nil {
		return nil, fmt.Errorf("following the attachments of server %s: %w", serverID, err)
	}
	admin, err := c.adminClient(ctx)
	if err != nil {
		return nil, err
	}
	eo := gophercloud.EndpointOpts{Region: c.opts.Region}
	compute, err := openstack.NewComputeV2(admin, eo)
	if err != nil {
		return nil, err
	}
	if _, err := servers.Get(ctx, compute, serverID).Extract(); err != nil {
		return nil, fmt.Errorf("following the attachments of server %s: %w", serverID, err)
	}
	volume, err := openstack.NewBlockStorageV3(admin, eo)
	if err != nil {
		return nil, err
	}
	volume.Microversion = attachmentsMicroversion
	if err := os.MkdirAll(c.hypervisorDir(), 0o700); err != nil {
		return nil, fmt.Errorf("creating hypervisor records: %w", err)
	}

	// The follower outlives the set-up's context: a test's context ends before its cleanups,
	// which stop the follower and must find its devices in its books.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f := &Follower{c: c, server: serverID, volume: volume, cancel: cancel, done: make(chan struct{}),
		devices: map[string]*followed{}}
	c.hvMu.Lock()
	defer c.hvMu.Unlock()
	switch {
	case c.hvClosed:
		cancel()
		return nil, errors.New("the cloud is stopping")
	case c.followers[serverID] != nil:
		cancel()
		return nil, fmt.Errorf("server %s is already followed", serverID)
	}
	if c.followers == nil {
		c.followers = map[string]*Follower{}
	}
	c.followers[serverID] = f
	go f.run(runCtx)
	c.logf("Real OpenStack: following the attachments of server %s", serverID)
	return f, nil
}

// Stop stops following and removes every link and loop device the follower made, and the
// directories its links needed once they are empty. It is safe to call more than once.
func (f *Follower) Stop() error {
	f.cancel()
	<-f.done
	f.c.hvMu.Lock()
	if f.c.followers[f.server] == f {
		delete(f.c.followers, f.server)
	}
	f.c.hvMu.Unlock()
	return f.err
}

// Server is the followed server's ID.
func (f *Follower) Server() string { return f.server }

// LinkPath is where a volume's by-id link is while it has a device.
func (f *Follower) LinkPath(volumeID string) string {
	return filepath.Join(f.c.byIDDir(), loopdev.ByIDName(volumeID))
}

// Device returns what the follower made of volumeID's attachment, and false while it knows of
// no attachment of it (not attached, or not yet seen).
func (f *Follower) Device(volumeID string) (Device, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.devices[volumeID]
	if !ok {
		return Device{}, false
	}
	return d.Device, true
}

// Devices returns what the follower made of each attachment it knows, by volume ID.
func (f *Follower) Devices() []Device {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Device, 0, len(f.devices))
	for _, d := range f.devices {
		out = append(out, d.Device)
	}
	slices.SortFunc(out, func(a, b Device) int { return strings.Compare(a.VolumeID, b.VolumeID) })
	return out
}

// run polls until ctx ends, then tears everything down.
func (f *Follower) run(ctx context.Context) {
	defer close(f.done)
	tick := time.NewTicker(followInterval)
	defer tick.Stop()
	for {
		f.sync(ctx)
		select {
		case <-ctx.Done():
			f.err = f.teardown()
			return
		case <-tick.C:
		}
	}
}

// sync lists the server's attachments and makes the devices match them. A failed list changes
// nothing: an API that is down (a test stops cinder-api) is not a detach.
func (f *Follower) sync(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	var list []attachments.Attachment
	pages, err := attachments.List(f.volume, attachments.ListOpts{AllTenants: true, InstanceID: f.server}).AllPages(lctx)
	if err == nil {
		list, err = attachments.ExtractAttachments(pages)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil && err.Error() != f.listErr {
			f.listErr = err.Error()
			f.c.logf("Real OpenStack: listing the attachments of server %s failed, devices stay as they are: %v", f.server, err)
		}
		return
	}
	if f.listErr != "" {
		f.listErr = ""
		f.c.logf("Real OpenStack: listing the attachments of server %s works again", f.server)
	}

	// An attachment is the hypervisor's business from Nova's connect (attaching, with the
	// connection_info Cinder's driver returned) until Nova deletes it on detach.
	want := map[string]attachments.Attachment{}
	for _, a := range list {
		if a.Instance == f.server && (a.Status == "attaching" || a.Status == "attached") && len(a.ConnectionInfo) > 0 {
			want[a.VolumeID] = a
		}
	}
	for id, d := range f.devices {
		if a, ok := want[id]; !ok || a.ID != d.AttachmentID {
			if err := f.removeLocked(d); err != nil {
				f.c.logf("Real OpenStack: removing the device of volume %s: %v", id, err)
			}
			delete(f.devices, id)
		}
	}
	for id, a := range want {
		d, ok := f.devices[id]
		switch {
		case !ok:
			f.devices[id] = f.expose(a, "")
		case d.Exposed():
			f.refreshSize(d)
		case !d.Unservable:
			// The last try failed: try again, logging only a new error.
			f.devices[id] = f.expose(a, d.Reason)
		}
	}
}

// expose decides what attachment a gets and makes it; lastErr is the previous try's error,
// not logged again.
func (f *Follower) expose(a attachments.Attachment, lastErr string) *followed {
	d := &followed{Device: Device{VolumeID: a.VolumeID, AttachmentID: a.ID}}
	p := planDevice(a.ConnectionInfo, f.c.exportDirs())
	d.File, d.Format, d.Reason, d.Unservable = p.file, p.format, p.reason, p.reason != ""
	if d.Unservable {
		f.c.logf("Real OpenStack: volume %s attached to server %s gets no device: %s", a.VolumeID, f.server, d.Reason)
		return d
	}
	start := time.Now()
	if err := f.makeDevice(d); err != nil {
		d.Reason = err.Error()
		if d.Reason != lastErr {
			f.c.logf("Real OpenStack: making the device of volume %s attached to server %s failed, retrying: %v", a.VolumeID, f.server, err)
		}
		return d
	}
	f.c.logf("Real OpenStack: volume %s attached to server %s is %s at %s (%d bytes, made in %s)",
		a.VolumeID, f.server, d.Loop, d.Link, d.Size, time.Since(start).Round(time.Millisecond))
	return d
}

// devicePlan is what an attachment's connection_info says about the volume's file.
type devicePlan struct {
	file, format string
	// reason is why this backend cannot give the volume a block device here; empty if it can.
	reason string
}

// planDevice reads a connection_info (Cinder's attachments keep the driver's data flat, the
// older initialize_connection answer nests it under "data") against the cloud's export
// directories by share. Only a raw file of one of the cloud's NFS backends can be a loop
// device: after a snapshot the NFS driver keeps the volume's changes in a qcow2 overlay, which
// only nbd or a hypervisor's qcow2 driver could expose, and this kernel has no nbd.
func planDevice(info map[string]any, exports map[string]string) devicePlan {
	field := func(key string) string {
		if v, ok := info[key].(string); ok {
			return v
		}
		if data, ok := info["data"].(map[string]any); ok {
			if v, ok := data[key].(string); ok {
				return v
			}
		}
		return ""
	}
	p := devicePlan{format: field("format")}
	if typ := field("driver_volume_type"); typ != "nfs" {
		p.reason = fmt.Sprintf("connection type %q: only the files of the cloud's NFS backends can be given a device here", typ)
		return p
	}
	export, name := field("export"), field("name")
	dir, ok := exports[export]
	if !ok {
		p.reason = fmt.Sprintf("export %q is none of the cloud's NFS backends", export)
		return p
	}
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		p.reason = fmt.Sprintf("volume file name %q is not a file of export %s", name, export)
		return p
	}
	p.file = filepath.Join(dir, name)
	if p.format != "raw" {
		p.reason = fmt.Sprintf("%s is a %s image (the NFS driver keeps a snapshotted volume's changes in a qcow2 overlay); "+
			"a loop device exposes only raw files and this kernel has no nbd, so this backend cannot serve it as a block device here",
			name, p.format)
	}
	return p
}

// makeDevice records, then makes, the loop device and link of d; on failure it undoes what it
// made.
func (f *Follower) makeDevice(d *followed) error {
	link := f.LinkPath(d.VolumeID)
	rec := deviceRecord{Server: f.server, Volume: d.VolumeID, Link: link, File: d.File}
	recPath := filepath.Join(f.c.hypervisorDir(), f.server+"-"+d.VolumeID+".json")
	if err := writeJSON(recPath, rec); err != nil {
		return fmt.Errorf("recording the device: %w", err)
	}
	// A link of that name that this follower did not make belongs to someone else (the same
	// volume attached to another followed server): it is not replaced.
	if _, err := os.Lstat(link); err == nil {
		_ = os.Remove(recPath)
		return fmt.Errorf("%s exists and is not this follower's", link)
	}
	dev, loop, err := loopdev.Attach(d.File)
	if err != nil {
		_ = os.Remove(recPath)
		return err
	}
	undo := func(err error) error {
		_ = loopdev.Clear(dev)
		_ = dev.Close()
		_ = os.Remove(recPath)
		return err
	}
	rec.Loop = loop
	if err := writeJSON(recPath, rec); err != nil {
		return undo(fmt.Errorf("recording the device: %w", err))
	}
	st, err := os.Stat(d.File)
	if err != nil {
		return undo(err)
	}
	if err := loopdev.Link(link, loop, f.c.recordCreatedDirs); err != nil {
		return undo(err)
	}
	d.dev, d.record, d.Loop, d.Link, d.Size, d.Reason = dev, recPath, loop, link, st.Size(), ""
	return nil
}

// refreshSize gives an exposed device its file's new size: a volume extended while attached,
// as a hypervisor's block resize would. Cinder's NFS driver refuses to extend an attached volume
// (Cinder bug 1870367), so today this happens only to volumes whose file something else grew.
func (f *Follower) refreshSize(d *followed) {
	st, err := os.Stat(d.File)
	if err != nil || st.Size() <= d.Size {
		return
	}
	if err := loopdev.SetCapacity(d.dev); err != nil {
		f.c.logf("Real OpenStack: resizing %s of volume %s: %v", d.Loop, d.VolumeID, err)
		return
	}
	f.c.logf("Real OpenStack: %s of volume %s grew from %d to %d bytes", d.Loop, d.VolumeID, d.Size, st.Size())
	d.Size = st.Size()
}

// removeLocked takes a volume's device away: the link (only if it still points at our device),
// then the loop device, flushed first so that the file has everything written through it. A
// device still mounted on the node is freed by the kernel when it is unmounted (autoclear).
func (f *Follower) removeLocked(d *followed) error {
	if d.dev == nil {
		return nil
	}
	var errs []error
	if target, err := os.Readlink(d.Link); err == nil && target == d.Loop {
		if err := os.Remove(d.Link); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := loopdev.Release(d.dev, d.Loop); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		// The record stays, so that the cloud's Stop or the next sweep finishes the job.
		return err
	}
	if err := os.Remove(d.record); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f.c.logf("Real OpenStack: volume %s is no longer attached to server %s: removed %s and %s", d.VolumeID, f.server, d.Link, d.Loop)
	d.dev, d.Loop, d.Link = nil, "", ""
	return nil
}

// teardown removes every device and the directories the links needed, once empty.
func (f *Follower) teardown() error {
	f.mu.Lock()
	var errs []error
	for _, d := range f.devices {
		errs = append(errs, f.removeLocked(d))
	}
	f.devices = map[string]*followed{}
	f.mu.Unlock()
	errs = append(errs, f.c.removeCreatedDirs())
	f.c.logf("Real OpenStack: stopped following the attachments of server %s", f.server)
	return errors.Join(errs...)
}

// hypervisorDir holds the followers' records.
func (c *Cloud) hypervisorDir() string { return filepath.Join(c.dir, hypervisorDir) }

// byIDDir is where the followers link devices.
func (c *Cloud) byIDDir() string {
	if c.opts.ByIDDir != "" {
		return c.opts.ByIDDir
	}
	return loopdev.DefaultByIDDir
}

// exportDirs maps each backend's share to its export directory.
func (c *Cloud) exportDirs() map[string]string {
	out := map[string]string{}
	for i := range backends {
		out[share(i)] = c.exportDir(i)
	}
	return out
}

// recordCreatedDirs adds directories a link needed to the record.
func (c *Cloud) recordCreatedDirs(created []string) error {
	c.hvMu.Lock()
	defer c.hvMu.Unlock()
	return addCreatedDirs(c.hypervisorDir(), created)
}

// removeCreatedDirs removes the recorded directories that are empty. Another follower may be
// about to link into one: loopdev.Link creates it again, and records it again.
func (c *Cloud) removeCreatedDirs() error {
	c.hvMu.Lock()
	defer c.hvMu.Unlock()
	return removeCreatedDirs(c.hypervisorDir())
}

// stopFollowers stops every follower, for the cloud's Stop, and refuses new ones.
func (c *Cloud) stopFollowers() error {
	c.hvMu.Lock()
	c.hvClosed = true
	followers := make([]*Follower, 0, len(c.followers))
	for _, f := range c.followers {
		followers = append(followers, f)
	}
	c.hvMu.Unlock()
	var errs []error
	for _, f := range followers {
		errs = append(errs, f.Stop())
	}
	return errors.Join(errs...)
}

// cleanHypervisor removes what the followers of the run in dir made and lost track of, or left
// when their process was killed: loop devices over the files of its exports (and those stacked
// onto them, and links to them), the recorded links, and the directories the links needed, when
// empty. A loop device still mounted somewhere is freed by the kernel at its unmount; it is
// reported, and the records stay for a later sweep.
func cleanHypervisor(dir string, byIDDirs ...string) error {
	hv := filepath.Join(dir, hypervisorDir)
	paths, _ := filepath.Glob(filepath.Join(hv, "*-*.json"))
	type record struct {
		path string
		deviceRecord
	}
	var recs []record
	for _, path := range paths {
		r := record{path: path}
		if data, err := os.ReadFile(path); err == nil && json.Unmarshal(data, &r.deviceRecord) == nil && r.Link != "" {
			recs = append(recs, r)
			byIDDirs = append(byIDDirs, filepath.Dir(r.Link))
		}
	}
	if len(byIDDirs) == 0 {
		byIDDirs = []string{loopdev.DefaultByIDDir}
	}
	slices.Sort(byIDDirs)
	byIDDirs = slices.Compact(byIDDirs)

	var errs []error
	var removed []string
	exports, _ := filepath.Glob(filepath.Join(dir, "exports", "*"))
	for _, export := range exports {
		realDir, err := filepath.EvalSymlinks(export)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, byID := range byIDDirs {
			errs = append(errs, loopdev.FreeBackedBy(realDir, byID, &removed))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("freeing the loop devices of %s: %w", dir, err)
	}
	// A recorded link is ours by its name, which carries one of the run's volume IDs, whether
	// its device is gone, was freed by the kernel or was taken by someone else since.
	for _, r := range recs {
		if st, err := os.Lstat(r.Link); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			if err := os.Remove(r.Link); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		errs = append(errs, removeIfExists(r.path))
	}
	errs = append(errs, removeCreatedDirs(hv))
	return errors.Join(errs...)
}

// addCreatedDirs adds dirs to the record in hv.
func addCreatedDirs(hv string, dirs []string) error {
	have, err := readCreatedDirs(hv)
	if err != nil {
		return err
	}
	return writeJSON(filepath.Join(hv, createdDirsRecord), append(have, dirs...))
}

// removeCreatedDirs removes the recorded directories in hv that are empty, deepest first, and
// keeps the others in the record.
func removeCreatedDirs(hv string) error {
	dirs, err := readCreatedDirs(hv)
	if err != nil || len(dirs) == 0 {
		return err
	}
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	slices.SortStableFunc(dirs, func(a, b string) int { return len(b) - len(a) })
	var keep []string
	var errs []error
	for _, d := range dirs {
		err := os.Remove(d)
		switch {
		case err == nil, errors.Is(err, fs.ErrNotExist):
		case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST):
			keep = append(keep, d)
		default:
			keep = append(keep, d)
			errs = append(errs, err)
		}
	}
	if len(keep) == 0 {
		errs = append(errs, removeIfExists(filepath.Join(hv, createdDirsRecord)))
	} else {
		errs = append(errs, writeJSON(filepath.Join(hv, createdDirsRecord), keep))
	}
	return errors.Join(errs...)
}

func readCreatedDirs(hv string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(hv, createdDirsRecord))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var dirs []string
	if err := json.Unmarshal(data, &dirs); err != nil {
		return nil, fmt.Errorf("reading %s: %w", createdDirsRecord, err)
	}
	return dirs, nil
}

// writeJSON writes v to path atomically: a record read after a kill is whole or absent.
func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
