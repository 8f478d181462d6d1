package fakeopenstack

import (
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// ServerInfo is a Nova server (instance) the harness registers: a real node of a local cluster.
// Its ID is what the node's metadata service reports as uuid, so the driver's node ID.
type ServerInfo struct {
	// ID is the instance UUID.
	ID string
	// Name is the instance name (default: the ID).
	Name string
	// Hostname is the metadata hostname (default: Name).
	Hostname string
	// Zone is the compute availability zone (default: the first available compute zone, or
	// DefaultZone).
	Zone string
}

// AttachmentInfo is one attachment of a volume to a server.
type AttachmentInfo struct {
	// ServerID is the server the volume is attached to.
	ServerID string
	// AttachmentID is Cinder's attachment ID.
	AttachmentID string
	// Device is the device name Nova reports, such as /dev/vdb; like a real Nova's, it is only
	// a hint and need not exist.
	Device string
	// HostDevice is the block device on this host that Disks gave the server, such as
	// /dev/loop3, or "" with MemoryDisks.
	HostDevice string
}

// VolumeInfo is a Cinder volume as the fake holds it, for tests to assert on.
type VolumeInfo struct {
	// ID is the volume UUID, the CSI volume handle.
	ID string
	// Name is the volume name; the driver uses the PV name.
	Name string
	// Description is the free text the creator set.
	Description string
	// SizeGiB is the size in GiB.
	SizeGiB int
	// Status is the Cinder status (StatusAvailable, StatusInUse, or an error status).
	Status string
	// AvailabilityZone is the Cinder zone the volume lives in.
	AvailabilityZone string
	// VolumeType is the type name ("__DEFAULT__" when none was asked for).
	VolumeType string
	// SnapshotID is the snapshot the volume was restored from, if any.
	SnapshotID string
	// SourceVolID is the volume it was cloned from, if any.
	SourceVolID string
	// BackupID is the backup the volume was restored from, if any. Cinder's answers do not
	// name it; the fake keeps it for tests.
	BackupID string
	// Backend is where the scheduler placed the volume, host@backend#pool as
	// "os-vol-host-attr:host" reports it (for example "cinder@lvm-1#pool"), or "" when it
	// could not be placed.
	Backend string
	// FailReason says why a volume is in StatusError, for example Cinder's "No valid backend
	// was found. ..." when no backend satisfies the scheduler hints; a real Cinder keeps it in
	// its user messages, not in the volume.
	FailReason string
	// Metadata are the volume's properties, such as the driver's cluster tag.
	Metadata map[string]string
	// Attachments lists the servers the volume is attached to (at most one).
	Attachments []AttachmentInfo
	// CreatedAt is when the volume was created.
	CreatedAt time.Time
}

// SnapshotInfo is a Cinder snapshot as the fake holds it.
type SnapshotInfo struct {
	// ID is the snapshot UUID, the CSI snapshot handle.
	ID string
	// Name is the snapshot name; the driver uses the VolumeSnapshotContent's name.
	Name string
	// Description is the free text the creator set.
	Description string
	// VolumeID is the volume the snapshot was taken of.
	VolumeID string
	// SizeGiB is the size in GiB, the volume's size when it was taken.
	SizeGiB int
	// Status is the Cinder status (StatusAvailable or an error status).
	Status string
	// Metadata are the snapshot's properties, such as the driver's cluster tag.
	Metadata map[string]string
	// CreatedAt is when the snapshot was taken.
	CreatedAt time.Time
}

// Cinder volume and snapshot statuses the fake uses. Transitions such as attaching, detaching,
// extending and deleting are instant, so they are never observed.
const (
	// StatusCreating is only in the answer to a create request, as Cinder creates asynchronously.
	StatusCreating = "creating"
	// StatusAvailable is a volume not attached, or a usable snapshot.
	StatusAvailable = "available"
	// StatusInUse is an attached volume.
	StatusInUse = "in-use"
	// StatusError is a volume or snapshot the backend (Disks) failed to create.
	StatusError = "error"
	// StatusErrorDeleting is a volume or snapshot the backend failed to delete.
	StatusErrorDeleting = "error_deleting"
	// StatusErrorExtend is a volume the backend failed to extend; the driver's wait fails on it.
	StatusErrorExtend = "error_extending"
)

// defaultVolumeType is the name modern Cinder gives the type of a volume created without one.
const defaultVolumeType = "__DEFAULT__"

// cloud is the Nova and Cinder state. Disk calls happen under mu, so they are serialised with the
// state change they belong to.
type cloud struct {
	s     *Server
	disks Disks

	mu        sync.Mutex
	seq       int64
	servers   map[string]*server
	volumes   map[string]*volume
	snapshots map[string]*snapshot
	backups   map[string]*backup
}

type server struct {
	info    ServerInfo
	created time.Time
}

type volume struct {
	seq         int64
	id          string
	name        string
	description string
	size        int
	status      string
	zone        string
	volType     string
	snapshotID  string
	sourceVolID string
	backupID    string
	// backend is host@backend#pool, or "" when the scheduler found none.
	backend     string
	failReason  string
	metadata    map[string]string
	attachments []AttachmentInfo
	attachedAt  map[string]time.Time
	created     time.Time
	updated     time.Time
	// backed is false when the backend failed to create the disk, so there is none to delete.
	backed bool
}

type snapshot struct {
	seq         int64
	id          string
	name        string
	description string
	volumeID    string
	size        int
	status      string
	metadata    map[string]string
	created     time.Time
	updated     time.Time
	backed      bool
}

func newCloud(s *Server, disks Disks) *cloud {
	return &cloud{
		s: s, disks: disks,
		servers: map[string]*server{}, volumes: map[string]*volume{}, snapshots: map[string]*snapshot{},
		backups: map[string]*backup{},
	}
}

func (c *cloud) nextSeq() int64 {
	c.seq++
	return c.seq
}

// newUUID returns a random version 4 UUID in the lower-case form OpenStack uses; the driver checks
// volume IDs against that shape (scheduler hints).
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// AddServer registers a Nova server, so that GET /servers/{id} finds it and volumes can be
// attached to it, and so that MetadataHandler(info.ID) answers for it. Adding an ID again
// updates its name and zone.
func (s *Server) AddServer(info ServerInfo) error {
	if info.ID == "" {
		return errors.New("server ID is empty")
	}
	if info.Name == "" {
		info.Name = info.ID
	}
	if info.Hostname == "" {
		info.Hostname = info.Name
	}
	if info.Zone == "" {
		info.Zone = s.defaultZone(EndpointCompute)
	}
	c := s.cloud
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.servers[info.ID]; ok {
		old.info = info
		return nil
	}
	c.servers[info.ID] = &server{info: info, created: time.Now().UTC()}
	return nil
}

// RemoveServer deletes a server. Like Nova deleting an instance, it first detaches every volume
// attached to it; detach errors are returned, and the server is removed regardless.
func (s *Server) RemoveServer(id string) error {
	c := s.cloud
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.servers[id]; !ok {
		return fmt.Errorf("server %s not found", id)
	}
	var errs []error
	for _, v := range c.sortedVolumesLocked() {
		if slices.ContainsFunc(v.attachments, func(a AttachmentInfo) bool { return a.ServerID == id }) {
			errs = append(errs, c.detachLocked(v, id))
		}
	}
	delete(c.servers, id)
	return errors.Join(errs...)
}

// Servers returns the registered servers, sorted by ID.
func (s *Server) Servers() []ServerInfo {
	c := s.cloud
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ServerInfo, 0, len(c.servers))
	for _, srv := range c.servers {
		out = append(out, srv.info)
	}
	slices.SortFunc(out, func(a, b ServerInfo) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

func (c *cloud) server(id string) (ServerInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	srv, ok := c.servers[id]
	if !ok {
		return ServerInfo{}, false
	}
	return srv.info, true
}

// Volumes returns every volume, newest first (Cinder's default order).
func (s *Server) Volumes() []VolumeInfo {
	c := s.cloud
	c.mu.Lock()
	defer c.mu.Unlock()
	vols := c.sortedVolumesLocked()
	out := make([]VolumeInfo, 0, len(vols))
	for _, v := range vols {
		out = append(out, v.info())
	}
	return out
}

// Volume returns one volume by ID.
func (s *Server) Volume(id string) (VolumeInfo, bool) {
	c := s.cloud
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.volumes[id]
	if !ok {
		return VolumeInfo{}, false
	}
	return v.info(), true
}

// Snapshots returns every snapshot, newest first.
func (s *Server) Snapshots() []SnapshotInfo {
	c := s.cloud
	c.mu.Lock()
	defer c.mu.Unlock()
	snaps := c.sortedSnapshotsLocked()
	out := make([]SnapshotInfo, 0, len(snaps))
	for _, sn := range snaps {
		out = append(out, SnapshotInfo{
			ID: sn.id, Name: sn.name, Description: sn.description, VolumeID: sn.volumeID, SizeGiB: sn.size,
			Status: sn.status, Metadata: maps.Clone(sn.metadata), CreatedAt: sn.created,
		})
	}
	return out
}

func (v *volume) info() VolumeInfo {
	return VolumeInfo{
		ID: v.id, Name: v.name, Description: v.description, SizeGiB: v.size, Status: v.status,
		AvailabilityZone: v.zone, VolumeType: v.volType, SnapshotID: v.snapshotID, SourceVolID: v.sourceVolID,
		BackupID: v.backupID, Backend: v.backend, FailReason: v.failReason,
		Metadata: maps.Clone(v.metadata), Attachments: slices.Clone(v.attachments), CreatedAt: v.created,
	}
}

// sortedVolumesLocked returns the volumes newest first; Cinder sorts by created_at then id,
// descending, and the creation sequence gives the same order without ties.
func (c *cloud) sortedVolumesLocked() []*volume {
	out := slices.Collect(maps.Values(c.volumes))
	slices.SortFunc(out, func(a, b *volume) int { return int(b.seq - a.seq) })
	return out
}

func (c *cloud) sortedSnapshotsLocked() []*snapshot {
	out := slices.Collect(maps.Values(c.snapshots))
	slices.SortFunc(out, func(a, b *snapshot) int { return int(b.seq - a.seq) })
	return out
}

// usedGigabytesLocked is what Cinder's gigabytes quota counts: volumes plus snapshots.
func (c *cloud) usedGigabytesLocked() int {
	n := 0
	for _, v := range c.volumes {
		n += v.size
	}
	for _, sn := range c.snapshots {
		n += sn.size
	}
	return n
}

// detachLocked detaches v from serverID in the backend and in the state. On a backend error the
// volume stays attached, as a failed detach leaves it in Nova.
func (c *cloud) detachLocked(v *volume, serverID string) error {
	if err := c.disks.Detach(v.id, serverID); err != nil {
		return fmt.Errorf("detaching volume %s from server %s: %w", v.id, serverID, err)
	}
	v.attachments = slices.DeleteFunc(v.attachments, func(a AttachmentInfo) bool { return a.ServerID == serverID })
	delete(v.attachedAt, serverID)
	if len(v.attachments) == 0 && v.status == StatusInUse {
		v.status = StatusAvailable
	}
	v.updated = time.Now().UTC()
	return nil
}

// defaultZone is the zone used when a request names none: the first available zone the service
// reports, standing in for Cinder's default_availability_zone and Nova's default zone, or
// DefaultZone when none is available.
func (s *Server) defaultZone(ep Endpoint) string {
	return firstAvailable(s.zones(ep))
}

// firstAvailable is the first available zone of zones, or DefaultZone when none is.
func firstAvailable(zones []Zone) string {
	for _, z := range zones {
		if z.Available {
			return z.Name
		}
	}
	return DefaultZone
}

func (s *Server) zones(ep Endpoint) []Zone {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ep == EndpointCompute {
		return slices.Clone(s.compute)
	}
	return slices.Clone(s.volume)
}
