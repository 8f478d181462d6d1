package fakeopenstack

import (
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

// MemoryDisks is the default Disks: it only keeps sizes and attachments, with no device and no
// data, and rejects calls that would be impossible on a real backend (unknown IDs, deleting an
// attached volume, shrinking), so that a bug in the fake's bookkeeping shows up as an error.
type MemoryDisks struct {
	mu        sync.Mutex
	volumes   map[string]*memVolume
	snapshots map[string]int64
}

type memVolume struct {
	size     int64
	attached string
}

// NewMemoryDisks returns an empty MemoryDisks.
func NewMemoryDisks() *MemoryDisks {
	return &MemoryDisks{volumes: map[string]*memVolume{}, snapshots: map[string]int64{}}
}

var _ Disks = (*MemoryDisks)(nil)

// CreateVolume implements Disks.
func (d *MemoryDisks) CreateVolume(volumeID string, size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.addLocked(volumeID, size)
}

func (d *MemoryDisks) addLocked(volumeID string, size int64) error {
	if _, ok := d.volumes[volumeID]; ok {
		return fmt.Errorf("volume %s already exists", volumeID)
	}
	if size <= 0 {
		return fmt.Errorf("volume %s: invalid size %d", volumeID, size)
	}
	d.volumes[volumeID] = &memVolume{size: size}
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
	if size < src.size {
		return fmt.Errorf("volume %s: size %d is smaller than the source's %d", volumeID, size, src.size)
	}
	return d.addLocked(volumeID, size)
}

// RestoreSnapshot implements Disks.
func (d *MemoryDisks) RestoreSnapshot(volumeID, snapshotID string, size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	snap, ok := d.snapshots[snapshotID]
	if !ok {
		return fmt.Errorf("snapshot %s not found", snapshotID)
	}
	if size < snap {
		return fmt.Errorf("volume %s: size %d is smaller than the snapshot's %d", volumeID, size, snap)
	}
	return d.addLocked(volumeID, size)
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
	d.snapshots[snapshotID] = v.size
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
