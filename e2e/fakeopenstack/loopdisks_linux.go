//go:build linux

package fakeopenstack

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/loopdev"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// DefaultByIDDir is where udev puts the stable disk links the driver searches
// (/dev/disk/by-id/virtio-<first 20 characters of the volume ID>).
const DefaultByIDDir = loopdev.DefaultByIDDir

// loopMarker is the owner file LoopDisks writes into its directory; SweepLoopDisks acts only on
// directories that have one.
const loopMarker = ".fakeopenstack-loopdisks.json"

// Names of the files in a LoopDisks directory.
const (
	volumePrefix   = "vol-"
	snapshotPrefix = "snap-"
	backupPrefix   = "backup-"
	imageSuffix    = ".img"
	linkSuffix     = ".link"
)

// ErrLoopDisksInUse is returned by SweepLoopDisks for a directory whose owner process still runs.
var ErrLoopDisksInUse = errors.New("loop disk directory is in use by a running process")

// LoopOptions configures NewLoopDisks.
type LoopOptions struct {
	// Dir holds the sparse backing files and the owner marker; it must be absolute and is created
	// if missing. Use a directory per run (for example under the run's own temporary directory)
	// so that SweepLoopDisks can find what a killed run left behind.
	Dir string
	// ByIDDir is where the by-id links go (default DefaultByIDDir, the path the driver reads).
	ByIDDir string
	// Logger receives one line per device change at V(1). The zero value discards.
	Logger logr.Logger
}

// LoopDisks is the Disks of a real node: every volume is a sparse file in Dir, and attaching it
// binds a loop device to the file and links DefaultByIDDir/virtio-<volume ID[:20]> to it, the name
// a KVM guest's udev gives a Cinder volume and the first one the driver's node service looks for.
// Detach removes the link and frees the device. Extend grows the file and the device's size
// (LOOP_SET_CAPACITY, as losetup -c does), snapshots, backups and clones copy only the data
// extents, so a 1 GiB volume costs only the blocks written to it. A backup is a file of its own
// (backup-<id>.img), so it outlives its volume and snapshot.
//
// Loop devices are configured with autoclear and held open by this process, so a killed process
// frees them by itself once nothing mounts them; the by-id links and files it leaves are what
// SweepLoopDisks removes. Needs root and /dev/loop-control; LoopDisksAvailable says why not.
type LoopDisks struct {
	dir     string
	realDir string
	byID    string
	log     logr.Logger

	mu        sync.Mutex
	closed    bool
	marker    loopMarkerFile
	volumes   map[string]*loopVolume
	snapshots map[string]bool
	backups   map[string]bool
}

// loopVolume is one backing file and, while attached, its device.
type loopVolume struct {
	server  string
	dev     *os.File
	devPath string
	link    string
}

// loopMarkerFile identifies the owner of a directory and records what it created outside it.
type loopMarkerFile struct {
	// PID and StartTime (clock ticks since boot, /proc/<pid>/stat field 22) identify the owner
	// process even if its PID is reused.
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
	// ByIDDir is the directory of the by-id links.
	ByIDDir string `json:"byIdDir"`
	// CreatedDirs are directories the owner created because they were missing (such as
	// /dev/disk and /dev/disk/by-id), to be removed when empty, deepest last.
	CreatedDirs []string `json:"createdDirs,omitempty"`
	// CreatedDir says the owner created Dir itself.
	CreatedDir bool `json:"createdDir"`
}

var _ BackupDisks = (*LoopDisks)(nil)

// LoopDisksAvailable returns nil when LoopDisks can work here (Linux, root, a usable
// /dev/loop-control), or an error that says what is missing.
func LoopDisksAvailable() error { return loopdev.Available() }

// NewLoopDisks prepares o.Dir and writes its owner marker. It refuses a directory that already
// has a marker: that is an earlier run's, which SweepLoopDisks must clean first.
func NewLoopDisks(o LoopOptions) (*LoopDisks, error) {
	if !filepath.IsAbs(o.Dir) {
		return nil, fmt.Errorf("loop disk directory %q is not absolute", o.Dir)
	}
	if err := LoopDisksAvailable(); err != nil {
		return nil, err
	}
	if o.ByIDDir == "" {
		o.ByIDDir = DefaultByIDDir
	}
	dir := filepath.Clean(o.Dir)
	if _, err := os.Stat(filepath.Join(dir, loopMarker)); err == nil {
		return nil, fmt.Errorf("%s holds the loop disks of an earlier run: sweep it first", dir)
	}
	created, err := loopdev.MkdirAllRecorded(dir, 0o700)
	if err != nil {
		return nil, err
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", dir, err)
	}
	start, err := procs.StartTicks(os.Getpid())
	if err != nil {
		return nil, err
	}
	d := &LoopDisks{
		dir: dir, realDir: realDir, byID: filepath.Clean(o.ByIDDir), log: o.Logger,
		marker: loopMarkerFile{
			PID: os.Getpid(), StartTime: start, ByIDDir: filepath.Clean(o.ByIDDir), CreatedDir: len(created) > 0,
		},
		volumes: map[string]*loopVolume{}, snapshots: map[string]bool{}, backups: map[string]bool{},
	}
	if err := d.writeMarker(); err != nil {
		return nil, err
	}
	return d, nil
}

// Dir returns the directory of the backing files.
func (d *LoopDisks) Dir() string { return d.dir }

// LinkPath returns the by-id link of a volume, whether or not it is attached.
func (d *LoopDisks) LinkPath(volumeID string) string {
	return filepath.Join(d.byID, loopdev.ByIDName(volumeID))
}

// Device returns the loop device of an attached volume, or "".
func (d *LoopDisks) Device(volumeID string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if v, ok := d.volumes[volumeID]; ok {
		return v.devPath
	}
	return ""
}

func (d *LoopDisks) volumePath(id string) string {
	return filepath.Join(d.dir, volumePrefix+id+imageSuffix)
}

func (d *LoopDisks) snapshotPath(id string) string {
	return filepath.Join(d.dir, snapshotPrefix+id+imageSuffix)
}

func (d *LoopDisks) backupPath(id string) string {
	return filepath.Join(d.dir, backupPrefix+id+imageSuffix)
}

func (d *LoopDisks) linkRecordPath(id string) string {
	return filepath.Join(d.dir, volumePrefix+id+linkSuffix)
}

// checkLocked rejects calls after Close and IDs that could escape the directory.
func (d *LoopDisks) checkLocked(ids ...string) error {
	if d.closed {
		return errors.New("loop disks are closed")
	}
	for _, id := range ids {
		if id == "" || strings.ContainsAny(id, "/\x00") || id == "." || id == ".." {
			return fmt.Errorf("invalid ID %q", id)
		}
	}
	return nil
}

// volumeLocked returns the volume id after checking it and newIDs (the IDs of what the call
// creates from it) with checkLocked.
func (d *LoopDisks) volumeLocked(id string, newIDs ...string) (*loopVolume, error) {
	if err := d.checkLocked(append(newIDs, id)...); err != nil {
		return nil, err
	}
	v, ok := d.volumes[id]
	if !ok {
		return nil, fmt.Errorf("volume %s not found", id)
	}
	return v, nil
}

// CreateVolume implements Disks: a sparse file of size bytes.
func (d *LoopDisks) CreateVolume(volumeID string, size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkLocked(volumeID); err != nil {
		return err
	}
	f, err := os.OpenFile(d.volumePath(volumeID), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("creating volume file: %w", err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(d.volumePath(volumeID))
		return fmt.Errorf("sizing volume file: %w", err)
	}
	d.volumes[volumeID] = &loopVolume{}
	return nil
}

// CloneVolume implements Disks.
func (d *LoopDisks) CloneVolume(volumeID, sourceID string, size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	src, err := d.volumeLocked(sourceID, volumeID)
	if err != nil {
		return err
	}
	if err := src.flush(); err != nil {
		return err
	}
	if err := copySparse(d.volumePath(volumeID), d.volumePath(sourceID), size); err != nil {
		return fmt.Errorf("cloning volume %s: %w", sourceID, err)
	}
	d.volumes[volumeID] = &loopVolume{}
	return nil
}

// RestoreSnapshot implements Disks.
func (d *LoopDisks) RestoreSnapshot(volumeID, snapshotID string, size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkLocked(volumeID, snapshotID); err != nil {
		return err
	}
	if !d.snapshots[snapshotID] {
		return fmt.Errorf("snapshot %s not found", snapshotID)
	}
	if err := copySparse(d.volumePath(volumeID), d.snapshotPath(snapshotID), size); err != nil {
		return fmt.Errorf("restoring snapshot %s: %w", snapshotID, err)
	}
	d.volumes[volumeID] = &loopVolume{}
	return nil
}

// ExtendVolume implements Disks: the file grows, and an attached device learns its new size.
func (d *LoopDisks) ExtendVolume(volumeID string, size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.volumeLocked(volumeID)
	if err != nil {
		return err
	}
	st, err := os.Stat(d.volumePath(volumeID))
	if err != nil {
		return fmt.Errorf("extending volume: %w", err)
	}
	if size < st.Size() {
		return fmt.Errorf("volume %s: cannot shrink from %d to %d bytes", volumeID, st.Size(), size)
	}
	if err := os.Truncate(d.volumePath(volumeID), size); err != nil {
		return fmt.Errorf("extending volume file: %w", err)
	}
	if v.dev != nil {
		if err := loopdev.SetCapacity(v.dev); err != nil {
			return fmt.Errorf("refreshing the size of %s: %w", v.devPath, err)
		}
		d.log.V(1).Info("Loop device resized", "device", v.devPath, "volume", volumeID, "bytes", size)
	}
	return nil
}

// DeleteVolume implements Disks.
func (d *LoopDisks) DeleteVolume(volumeID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.volumeLocked(volumeID)
	if err != nil {
		return err
	}
	if v.dev != nil {
		return fmt.Errorf("volume %s is attached to %s", volumeID, v.server)
	}
	if err := os.Remove(d.volumePath(volumeID)); err != nil {
		return fmt.Errorf("deleting volume file: %w", err)
	}
	delete(d.volumes, volumeID)
	return nil
}

// CreateSnapshot implements Disks. An attached volume's device is flushed first, so the copy has
// what the node wrote (crash-consistent, like a Cinder snapshot of an in-use volume).
func (d *LoopDisks) CreateSnapshot(snapshotID, volumeID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.volumeLocked(volumeID, snapshotID)
	if err != nil {
		return err
	}
	if err := v.flush(); err != nil {
		return err
	}
	st, err := os.Stat(d.volumePath(volumeID))
	if err != nil {
		return fmt.Errorf("snapshotting volume: %w", err)
	}
	if err := copySparse(d.snapshotPath(snapshotID), d.volumePath(volumeID), st.Size()); err != nil {
		return fmt.Errorf("snapshotting volume %s: %w", volumeID, err)
	}
	d.snapshots[snapshotID] = true
	return nil
}

// DeleteSnapshot implements Disks.
func (d *LoopDisks) DeleteSnapshot(snapshotID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkLocked(snapshotID); err != nil {
		return err
	}
	if !d.snapshots[snapshotID] {
		return fmt.Errorf("snapshot %s not found", snapshotID)
	}
	if err := os.Remove(d.snapshotPath(snapshotID)); err != nil {
		return fmt.Errorf("deleting snapshot file: %w", err)
	}
	delete(d.snapshots, snapshotID)
	return nil
}

// BackupVolume implements BackupDisks. An attached volume's device is flushed first, as for
// CreateSnapshot.
func (d *LoopDisks) BackupVolume(backupID, volumeID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.volumeLocked(volumeID, backupID)
	if err != nil {
		return err
	}
	if err := v.flush(); err != nil {
		return err
	}
	return d.copyIntoBackupLocked(backupID, d.volumePath(volumeID))
}

// BackupSnapshot implements BackupDisks.
func (d *LoopDisks) BackupSnapshot(backupID, snapshotID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkLocked(backupID, snapshotID); err != nil {
		return err
	}
	if !d.snapshots[snapshotID] {
		return fmt.Errorf("snapshot %s not found", snapshotID)
	}
	return d.copyIntoBackupLocked(backupID, d.snapshotPath(snapshotID))
}

// copyIntoBackupLocked makes a backup file of its own from src, so that it outlives src.
func (d *LoopDisks) copyIntoBackupLocked(backupID, src string) error {
	if d.backups[backupID] {
		return fmt.Errorf("backup %s already exists", backupID)
	}
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("backing up: %w", err)
	}
	if err := copySparse(d.backupPath(backupID), src, st.Size()); err != nil {
		return fmt.Errorf("backing up into %s: %w", backupID, err)
	}
	d.backups[backupID] = true
	return nil
}

// RestoreBackup implements BackupDisks.
func (d *LoopDisks) RestoreBackup(volumeID, backupID string, size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkLocked(volumeID, backupID); err != nil {
		return err
	}
	if !d.backups[backupID] {
		return fmt.Errorf("backup %s not found", backupID)
	}
	if err := copySparse(d.volumePath(volumeID), d.backupPath(backupID), size); err != nil {
		return fmt.Errorf("restoring backup %s: %w", backupID, err)
	}
	d.volumes[volumeID] = &loopVolume{}
	return nil
}

// DeleteBackup implements BackupDisks.
func (d *LoopDisks) DeleteBackup(backupID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkLocked(backupID); err != nil {
		return err
	}
	if !d.backups[backupID] {
		return fmt.Errorf("backup %s not found", backupID)
	}
	if err := os.Remove(d.backupPath(backupID)); err != nil {
		return fmt.Errorf("deleting backup file: %w", err)
	}
	delete(d.backups, backupID)
	return nil
}

// Attach implements Disks: it binds a loop device to the volume's file and links the by-id name
// to it. The link record is written before the link, so a sweep finds the link even if the
// process dies in between.
func (d *LoopDisks) Attach(volumeID, serverID string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.checkLocked(volumeID); err != nil {
		return "", err
	}
	v, ok := d.volumes[volumeID]
	if !ok {
		return "", fmt.Errorf("volume %s not found", volumeID)
	}
	if v.dev != nil {
		return "", fmt.Errorf("volume %s is already attached to %s", volumeID, v.server)
	}
	link := d.LinkPath(volumeID)
	if err := os.WriteFile(d.linkRecordPath(volumeID), []byte(link+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("recording the by-id link: %w", err)
	}
	dev, devPath, err := loopdev.Attach(d.volumePath(volumeID))
	if err != nil {
		_ = os.Remove(d.linkRecordPath(volumeID))
		return "", err
	}
	v.server, v.dev, v.devPath = serverID, dev, devPath
	if err := d.linkLocked(link, devPath); err != nil {
		_ = d.detachLocked(volumeID, v)
		return "", err
	}
	v.link = link
	d.log.V(1).Info("Loop device attached", "device", devPath, "link", link, "volume", volumeID, "server", serverID)
	return devPath, nil
}

// linkLocked points link at target, replacing an older link of the same name atomically. The
// by-id directory is created when missing (there is no udev here) and recorded in the marker;
// another run may remove it when it empties, hence the retry.
func (d *LoopDisks) linkLocked(link, target string) error {
	return loopdev.Link(link, target, func(created []string) error {
		d.marker.CreatedDirs = append(d.marker.CreatedDirs, created...)
		return d.writeMarker()
	})
}

// Detach implements Disks.
func (d *LoopDisks) Detach(volumeID, serverID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.volumeLocked(volumeID)
	if err != nil {
		return err
	}
	if v.dev == nil || v.server != serverID {
		return fmt.Errorf("volume %s is not attached to %s", volumeID, serverID)
	}
	return d.detachLocked(volumeID, v)
}

// detachLocked removes the link (only if it still points at our device), flushes the device so
// the file has everything written through it, and frees it. The kernel frees a device that is
// still mounted once it is unmounted (autoclear).
func (d *LoopDisks) detachLocked(volumeID string, v *loopVolume) error {
	var errs []error
	link := d.LinkPath(volumeID)
	if target, err := os.Readlink(link); err == nil && target == v.devPath {
		if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing %s: %w", link, err))
		}
	}
	if err := os.Remove(d.linkRecordPath(volumeID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	if err := loopdev.Release(v.dev, v.devPath); err != nil {
		errs = append(errs, err)
	}
	d.log.V(1).Info("Loop device detached", "device", v.devPath, "volume", volumeID, "server", v.server)
	v.server, v.dev, v.devPath, v.link = "", nil, "", ""
	return errors.Join(errs...)
}

// flush writes what the node wrote through the device into the backing file.
func (v *loopVolume) flush() error {
	if v.dev == nil {
		return nil
	}
	if err := v.dev.Sync(); err != nil {
		return fmt.Errorf("flushing %s: %w", v.devPath, err)
	}
	return nil
}

// Close detaches every device, removes every link and file this LoopDisks made, its marker, and
// the directories it created if they are empty. It also frees loop devices of its directory that
// it lost track of (a panic between binding and bookkeeping). Later calls return nil; other
// methods fail after Close.
func (d *LoopDisks) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	for id, v := range d.volumes {
		if v.dev != nil {
			errs = append(errs, d.detachLocked(id, v))
		}
	}
	_, err := cleanLoopDir(d.dir, d.realDir, d.marker, d.log)
	errs = append(errs, err)
	d.volumes, d.snapshots, d.backups = map[string]*loopVolume{}, map[string]bool{}, map[string]bool{}
	return errors.Join(errs...)
}

// SweepLoopDisks removes what a LoopDisks on dir left behind when its process was killed: loop
// devices bound to files in dir and by-id links to them, the recorded by-id links, the files, the
// marker, and the directories the owner created if they are empty. It returns what it removed.
// A missing dir is fine; a dir without a marker is not touched (error); a dir whose owner still
// runs gives ErrLoopDisksInUse. If a device cannot be freed yet (still mounted) it returns an
// error and keeps the marker, so that a later sweep can finish.
func SweepLoopDisks(dir string, log logr.Logger) ([]string, error) {
	dir = filepath.Clean(dir)
	data, err := os.ReadFile(filepath.Join(dir, loopMarker))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s has no loop disk marker: not sweeping it", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("reading loop disk marker: %w", err)
	}
	var m loopMarkerFile
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("parsing loop disk marker in %s: %w", dir, err)
	}
	if start, err := procs.StartTicks(m.PID); err == nil && start == m.StartTime {
		return nil, fmt.Errorf("%s (process %d): %w", dir, m.PID, ErrLoopDisksInUse)
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", dir, err)
	}
	return cleanLoopDir(dir, realDir, m, log)
}

// cleanLoopDir is the part of Close and SweepLoopDisks that works from the directory alone.
func cleanLoopDir(dir, realDir string, m loopMarkerFile, log logr.Logger) ([]string, error) {
	var removed []string
	var errs []error
	byID := m.ByIDDir
	if byID == "" {
		byID = DefaultByIDDir
	}

	errs = append(errs, loopdev.FreeBackedBy(realDir, byID, &removed))

	// Recorded links: the name carries our volume ID, so a link of that name is ours even if
	// its device is gone or was reused.
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), linkSuffix) {
			continue
		}
		record := filepath.Join(dir, e.Name())
		if data, err := os.ReadFile(record); err == nil {
			link := strings.TrimSpace(string(data))
			if st, err := os.Lstat(link); err == nil && st.Mode()&fs.ModeSymlink != 0 &&
				filepath.Dir(link) == filepath.Clean(byID) {
				if err := os.Remove(link); err != nil {
					errs = append(errs, err)
				} else {
					removed = append(removed, link)
				}
			}
		}
		errs = append(errs, removeFile(record, &removed))
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), imageSuffix) && (strings.HasPrefix(e.Name(), volumePrefix) ||
			strings.HasPrefix(e.Name(), snapshotPrefix) || strings.HasPrefix(e.Name(), backupPrefix)) {
			errs = append(errs, removeFile(filepath.Join(dir, e.Name()), &removed))
		}
	}
	if err := errors.Join(errs...); err != nil {
		// Keep the marker, so that a later sweep may finish the job (a device still mounted).
		log.V(1).Info("Loop disk leftovers remain", "dir", dir, "removed", removed, "error", err.Error())
		return removed, err
	}
	if err := removeFile(filepath.Join(dir, loopMarker), &removed); err != nil {
		return removed, err
	}

	// Directories we created, deepest first, only when empty: another run may use them.
	dirs := slices.Clone(m.CreatedDirs)
	if m.CreatedDir {
		dirs = append(dirs, dir)
	}
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	slices.SortStableFunc(dirs, func(a, b string) int { return len(b) - len(a) })
	for _, d := range dirs {
		if err := os.Remove(d); err == nil {
			removed = append(removed, d)
		} else if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, err)
		}
	}
	if len(removed) > 0 {
		log.V(1).Info("Removed loop disk leftovers", "dir", dir, "removed", removed)
	}
	return removed, errors.Join(errs...)
}

func removeFile(path string, removed *[]string) error {
	err := os.Remove(path)
	if err == nil {
		*removed = append(*removed, path)
		return nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// copySparse creates dst with src's data and size bytes (at least src's size). A reflink is tried
// first; otherwise only the data extents (SEEK_DATA/SEEK_HOLE) are copied, so holes stay holes.
func copySparse(dst, src string, size int64) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if size < st.Size() {
		return fmt.Errorf("size %d is smaller than the source's %d", size, st.Size())
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(dst)
		}
	}()
	if unix.IoctlFileClone(int(out.Fd()), int(in.Fd())) != nil {
		if err := copyExtents(out, in, st.Size()); err != nil {
			return err
		}
	}
	return out.Truncate(size)
}

func copyExtents(out, in *os.File, end int64) error {
	for off := int64(0); off < end; {
		data, err := unix.Seek(int(in.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // only a hole remains
		}
		if err != nil {
			return fmt.Errorf("finding data: %w", err)
		}
		hole, err := unix.Seek(int(in.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("finding a hole: %w", err)
		}
		if err := copyRange(out, in, data, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return nil
}

// copyRange copies n bytes at off with copy_file_range, falling back to read and write where the
// kernel or file system does not offer it.
func copyRange(out, in *os.File, off, n int64) error {
	roff, woff := off, off
	for n > 0 {
		c, err := unix.CopyFileRange(int(in.Fd()), &roff, int(out.Fd()), &woff, int(min(n, 1<<30)), 0)
		if err != nil {
			if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) ||
				errors.Is(err, unix.EOPNOTSUPP) {
				_, err = io.Copy(io.NewOffsetWriter(out, woff), io.NewSectionReader(in, roff, n))
				return err
			}
			return fmt.Errorf("copying data: %w", err)
		}
		if c == 0 {
			return io.ErrUnexpectedEOF
		}
		n -= int64(c)
	}
	return nil
}

// writeMarker writes the owner marker atomically.
func (d *LoopDisks) writeMarker() error {
	data, err := json.Marshal(d.marker)
	if err != nil {
		return err
	}
	path := filepath.Join(d.dir, loopMarker)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing loop disk marker: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing loop disk marker: %w", err)
	}
	return nil
}
