package fakeopenstack

import (
	"bytes"
	"fmt"
	"sync"
)

// GiB is the unit of Cinder volume sizes.
const GiB int64 = 1 << 30

// Disks is the block storage behind Cinder volumes and snapshots. The fake calls it while it
// changes its own state, one call at a time per Server, with IDs it generated; a call that fails
// leaves the volume or snapshot in an error status, as a failing Cinder backend would. Volumes are
// attached to at most one server at a time (the fake offers no multiattach volume types).
type Disks interface {
	// CreateVolume makes an empty volume of size bytes.
	CreateVolume(volumeID string, size int64) error
	// CloneVolume makes volumeID (size bytes, at least the source's) with the data of sourceID.
	CloneVolume(volumeID, sourceID string, size int64) error
	// RestoreSnapshot makes volumeID (size bytes, at least the snapshot's) with the data of
	// snapshotID.
	RestoreSnapshot(volumeID, snapshotID string, size int64) error
	// ExtendVolume grows the volume to size bytes, also while it is attached.
	ExtendVolume(volumeID string, size int64) error
	// DeleteVolume removes a detached volume and its data.
	DeleteVolume(volumeID string) error
	// CreateSnapshot copies the volume's current data, also while it is attached.
	CreateSnapshot(snapshotID, volumeID string) error
	// DeleteSnapshot removes a snapshot's data.
	DeleteSnapshot(snapshotID string) error
	// Attach gives serverID the volume as a block device and returns the device's path on this
	// host ("" when there is no real device).
	Attach(volumeID, serverID string) (string, error)
	// Detach takes the device away from serverID.
	Detach(volumeID, serverID string) error
}

// BackupDisks is a Disks that also keeps Cinder backups. A backup is a copy of its own, as in a
// backup store: it outlives the volume and snapshot it was taken of and their backend, and a
// restore writes it into a new volume. Disks without it make every backup and restore fail in
// the backend (status "error").
type BackupDisks interface {
	Disks
	// BackupVolume copies the volume's current data into backupID, also while it is attached.
	BackupVolume(backupID, volumeID string) error
	// BackupSnapshot copies the snapshot's data into backupID.
	BackupSnapshot(backupID, snapshotID string) error
	// RestoreBackup makes volumeID (size bytes, at least the backup's) with the data of
	// backupID.
	RestoreBackup(volumeID, backupID string, size int64) error
	// DeleteBackup removes a backup's data.
	DeleteBackup(backupID string) error
}

// MemoryDisks is the default Disks: it keeps sizes, attachments and only the data written with
// WriteData, with no device, and rejects calls that would be impossible on a real backend
// (unknown IDs, deleting an attached volume, shrinking), so that a bug in the fake's bookkeeping
// shows up as an error. Snapshots, clones, backups and restores carry the written data along, so
// unit tests can follow it without loop devices.
type MemoryDisks struct {
	mu        sync.Mutex
	volumes   map[string]*memVolume
	snapshots map[string]memImage
	backups   map[string]memImage
}

type memVolume struct {
	memImage
	attached string
}

// memImage is the size and the written data of a volume, snapshot or backup.
type memImage struct {
	size int64
	data []byte
}

func (m memImage) clone() memImage {
	return memImage{size: m.size, data: bytes.Clone(m.data)}
}

// NewMemoryDisks returns an empty MemoryDisks.
func NewMemoryDisks() *MemoryDisks {
	return &MemoryDisks{volumes: map[string]*memVolume{}, snapshots: map[string]memImage{}, backups: map[string]memImage{}}
}

var _ BackupDisks = (*MemoryDisks)(nil)

// CreateVolume implements Disks.
func (d *MemoryDisks) CreateVolume(volumeID string, size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.addLocked(volumeID, size)
}

func (d *MemoryDisks) addLocked(volumeID string, size int64) error {
	return d.addFromLocked(volumeID, size, memImage{}, "source")
}

// addFromLocked creates volumeID with src's data; size must hold src (named what in errors).
func (d *MemoryDisks) addFromLocked(volumeID string, size int64, src memImage, what string) error {
	if _, ok := d.volumes[volumeID]; ok {
		return fmt.Errorf("volume %s already exists", volumeID)
	}
	if size <= 0 {
		return fmt.Errorf("volume %s: invalid size %d", volumeID, size)
	}
	if size < src.size {
		return fmt.Errorf("volume %s: size %d is smaller than the %s's %d", volumeID, size, what, src.size)
	}
	img := src.clone()
	img.size = size
	d.volumes[volumeID] = &memVolume{memImage: img}
	return nil
}

// volumeLocked returns the volume id.
func (d *MemoryDisks) volumeLocked(id string) (*memVolume, error) {
	v, ok := d.volumes[id]
	if !ok {
		return nil, fmt.Errorf("volume %s not found", id)
	}
	return v, nil
}

// CloneVolume implements Disks.
func (d *MemoryDisks) CloneVolume(volumeID, sourceID string, size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	src, err := d.volumeLocked(sourceID)
	if err != nil {
		return err
	}
	return d.addFromLocked(volumeID, size, src.memImage, "source")
}

// RestoreSnapshot implements Disks.
func (d *MemoryDisks) RestoreSnapshot(volumeID, snapshotID string, size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	snap, ok := d.snapshots[snapshotID]
	if !ok {
		return fmt.Errorf("snapshot %s not found", snapshotID)
	}
	return d.addFromLocked(volumeID, size, snap, "snapshot")
}

// ExtendVolume implements Disks.
func (d *MemoryDisks) ExtendVolume(volumeID string, size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.volumeLocked(volumeID)
	if err != nil {
		return err
	}
	if size < v.size {
		return fmt.Errorf("volume %s: cannot shrink from %d to %d", volumeID, v.size, size)
	}
	v.size = size
	return nil
}

// DeleteVolume implements Disks.
func (d *MemoryDisks) DeleteVolume(volumeID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.volumeLocked(volumeID)
	if err != nil {
		return err
	}
	if v.attached != "" {
		return fmt.Errorf("volume %s is attached to %s", volumeID, v.attached)
	}
	delete(d.volumes, volumeID)
	return nil
}

// CreateSnapshot implements Disks.
func (d *MemoryDisks) CreateSnapshot(snapshotID, volumeID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.volumeLocked(volumeID)
	if err != nil {
		return err
	}
	if _, ok := d.snapshots[snapshotID]; ok {
		return fmt.Errorf("snapshot %s already exists", snapshotID)
	}
	d.snapshots[snapshotID] = v.clone()
	return nil
}

// DeleteSnapshot implements Disks.
func (d *MemoryDisks) DeleteSnapshot(snapshotID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.snapshots[snapshotID]; !ok {
		return fmt.Errorf("snapshot %s not found", snapshotID)
	}
	delete(d.snapshots, snapshotID)
	return nil
}

// Attach implements Disks; there is no device, so the path is empty.
func (d *MemoryDisks) Attach(volumeID, serverID string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.volumeLocked(volumeID)
	if err != nil {
		return "", err
	}
	if v.attached != "" {
		return "", fmt.Errorf("volume %s is already attached to %s", volumeID, v.attached)
	}
	v.attached = serverID
	return "", nil
}

// Detach implements Disks.
func (d *MemoryDisks) Detach(volumeID, serverID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.volumeLocked(volumeID)
	if err != nil {
		return err
	}
	if v.attached != serverID {
		return fmt.Errorf("volume %s is not attached to %s", volumeID, serverID)
	}
	v.attached = ""
	return nil
}

// Size returns the size in bytes of a volume, and whether it exists; tests use it to check that
// an extend reached the backend.
func (d *MemoryDisks) Size(volumeID string) (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.volumes[volumeID]
	if !ok {
		return 0, false
	}
	return v.size, true
}

// BackupVolume implements BackupDisks.
func (d *MemoryDisks) BackupVolume(backupID, volumeID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.volumeLocked(volumeID)
	if err != nil {
		return err
	}
	return d.addBackupLocked(backupID, v.memImage)
}

// BackupSnapshot implements BackupDisks.
func (d *MemoryDisks) BackupSnapshot(backupID, snapshotID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	snap, ok := d.snapshots[snapshotID]
	if !ok {
		return fmt.Errorf("snapshot %s not found", snapshotID)
	}
	return d.addBackupLocked(backupID, snap)
}

func (d *MemoryDisks) addBackupLocked(backupID string, src memImage) error {
	if _, ok := d.backups[backupID]; ok {
		return fmt.Errorf("backup %s already exists", backupID)
	}
	d.backups[backupID] = src.clone()
	return nil
}

// RestoreBackup implements BackupDisks.
func (d *MemoryDisks) RestoreBackup(volumeID, backupID string, size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	b, ok := d.backups[backupID]
	if !ok {
		return fmt.Errorf("backup %s not found", backupID)
	}
	return d.addFromLocked(volumeID, size, b, "backup")
}

// DeleteBackup implements BackupDisks.
func (d *MemoryDisks) DeleteBackup(backupID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.backups[backupID]; !ok {
		return fmt.Errorf("backup %s not found", backupID)
	}
	delete(d.backups, backupID)
	return nil
}

// WriteData sets the data at the start of a volume, as a node writing to it would; it must fit
// in the volume. Snapshots, clones, backups and restores copy it.
func (d *MemoryDisks) WriteData(volumeID string, data []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := d.volumeLocked(volumeID)
	if err != nil {
		return err
	}
	if int64(len(data)) > v.size {
		return fmt.Errorf("volume %s: %d bytes do not fit in %d", volumeID, len(data), v.size)
	}
	v.data = bytes.Clone(data)
	return nil
}

// Data returns what WriteData (or a copy of it) put into a volume, and whether the volume exists.
func (d *MemoryDisks) Data(volumeID string) ([]byte, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	v, ok := d.volumes[volumeID]
	if !ok {
		return nil, false
	}
	return bytes.Clone(v.data), true
}

// HasBackup reports whether the backend holds a backup's data.
func (d *MemoryDisks) HasBackup(backupID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.backups[backupID]
	return ok
}
