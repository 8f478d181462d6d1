package fakeopenstack

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"
)

// BackupInfo is a Cinder backup as the fake holds it, for tests to assert on.
type BackupInfo struct {
	// ID is the backup UUID; the driver uses it as the CSI snapshot handle of a "backup"
	// VolumeSnapshotClass.
	ID string
	// Name is the backup name; the driver uses the VolumeSnapshotContent's name.
	Name string
	// Description is the free text the creator set.
	Description string
	// VolumeID is the volume the backup was taken of; the volume may be gone since.
	VolumeID string
	// SnapshotID is the snapshot the backup was taken from, if any; it may be gone since.
	SnapshotID string
	// SizeGiB is the size in GiB, the volume's size when the backup was taken.
	SizeGiB int
	// Status is the Cinder status (StatusAvailable, or StatusError when no backup service
	// could take it or the backend failed).
	Status string
	// FailReason says why the backup is in error, as Cinder's fail_reason.
	FailReason string
	// AvailabilityZone is the zone of the backup service that took it.
	AvailabilityZone string
	// Host is the cinder-backup service that took it, "" when none could.
	Host string
	// Metadata are the backup's properties, such as the driver's cluster tag.
	Metadata map[string]string
	// CreatedAt is when the backup was taken.
	CreatedAt time.Time
}

// BackupService is one cinder-backup service, as GET /os-services lists it. Cinder's scheduler
// gives a new backup to an enabled, up service in the backup's zone (the one asked for, else
// the volume's).
type BackupService struct {
	// Host is the service's host (default "cinder-backup-<n>", n counting from 1).
	Host string
	// Zone is the service's availability zone (default: the first available volume zone when
	// the service is configured).
	Zone string
	// Down reports the service as state "down": it stopped reporting, so it takes no backups.
	Down bool
	// Disabled reports the service as status "disabled": an operator took it out of use.
	Disabled bool
}

// Binaries of the Cinder services os-services lists.
const (
	// BinaryBackup is cinder-backup, what the driver needs for snapshots of type "backup".
	BinaryBackup = "cinder-backup"
	// BinaryVolume is cinder-volume, one per Backend.
	BinaryVolume = "cinder-volume"
	// BinaryScheduler is cinder-scheduler.
	BinaryScheduler = "cinder-scheduler"
)

// backupServiceNotFound is the fail_reason Cinder's scheduler gives a backup when no enabled,
// up cinder-backup service serves its zone (cinder/scheduler/manager.py create_backup). Since
// Rocky the API has already answered 202 by then, so the backup goes to "error" instead of the
// request failing.
const backupServiceNotFound = "Service not found for creating backup."

// servicePolicyError is Cinder's 403 for os-services when the policy forbids it.
const servicePolicyError = "Policy doesn't allow volume_extension:services:index to be performed."

func withBackupServiceDefaults(services []BackupService, zone string) []BackupService {
	out := slices.Clone(services)
	for i := range out {
		if out[i].Host == "" {
			out[i].Host = fmt.Sprintf("cinder-backup-%d", i+1)
		}
		if out[i].Zone == "" {
			out[i].Zone = zone
		}
	}
	return out
}

// SetBackupServices replaces the cinder-backup services, effective for the next request; with no
// argument there is none, so new backups fail. Existing backups are kept.
func (s *Server) SetBackupServices(services ...BackupService) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.backupServices = withBackupServiceDefaults(services, firstAvailable(s.volume))
	if s.backupServices == nil {
		s.backupServices = []BackupService{}
	}
}

// BackupServices returns the cinder-backup services, the default one included.
func (s *Server) BackupServices() []BackupService {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.backupServicesLocked()
}

func (s *Server) backupServicesLocked() []BackupService {
	if s.backupServices != nil {
		return slices.Clone(s.backupServices)
	}
	return []BackupService{{Host: "cinder-backup-1", Zone: firstAvailable(s.volume)}}
}

// SetServiceListForbidden makes GET /os-services answer Cinder's 403 policy error (true) or
// the list (false), as Options.ForbidServiceList.
func (s *Server) SetServiceListForbidden(forbidden bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forbidServiceList = forbidden
}

type backup struct {
	seq         int64
	id          string
	name        string
	description string
	volumeID    string
	snapshotID  string
	size        int
	status      string
	failReason  string
	zone        string
	host        string
	incremental bool
	metadata    map[string]string
	created     time.Time
	updated     time.Time
	// dataTime is Cinder's data_timestamp: the snapshot's creation time, or the backup's.
	dataTime time.Time
	backed   bool
}

func (b *backup) info() BackupInfo {
	return BackupInfo{
		ID: b.id, Name: b.name, Description: b.description, VolumeID: b.volumeID, SnapshotID: b.snapshotID,
		SizeGiB: b.size, Status: b.status, FailReason: b.failReason, AvailabilityZone: b.zone, Host: b.host,
		Metadata: maps.Clone(b.metadata), CreatedAt: b.created,
	}
}

// Backups returns every backup, newest first.
func (s *Server) Backups() []BackupInfo {
	c := s.cloud
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]BackupInfo, 0, len(c.backups))
	for _, b := range c.sortedBackupsLocked() {
		out = append(out, b.info())
	}
	return out
}

// Backup returns one backup by ID.
func (s *Server) Backup(id string) (BackupInfo, bool) {
	c := s.cloud
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.backups[id]
	if !ok {
		return BackupInfo{}, false
	}
	return b.info(), true
}

func (c *cloud) sortedBackupsLocked() []*backup {
	out := slices.Collect(maps.Values(c.backups))
	slices.SortFunc(out, func(a, b *backup) int { return int(b.seq - a.seq) })
	return out
}

func backupsOf(c *cloud) map[string]*backup { return c.backups }

// serveBackups routes the requests under /backups; rest is the path below it. It reports false,
// having written nothing, for a route it does not serve (restore, export and import are not).
func (s *Server) serveBackups(w http.ResponseWriter, r *http.Request, mv apiVersion, rest []string) bool {
	get, post, del := r.Method == http.MethodGet, r.Method == http.MethodPost, r.Method == http.MethodDelete
	switch {
	case len(rest) == 0 && post:
		s.createBackup(w, r, mv)
	case len(rest) == 0 && get:
		s.listBackups(w, r, mv, false)
	case len(rest) == 1 && rest[0] == "detail" && get:
		s.listBackups(w, r, mv, true)
	case len(rest) == 1 && get:
		withLocked(s, w, "Backup", rest[0], backupsOf, func(_ *cloud, b *backup) {
			writeJSON(w, http.StatusOK, map[string]any{"backup": s.backupView(r, b, mv)})
		})
	case len(rest) == 1 && del:
		s.deleteBackup(w, rest[0])
	default:
		return false
	}
	return true
}

type createBackupRequest struct {
	Backup *struct {
		VolumeID         string            `json:"volume_id"`
		SnapshotID       string            `json:"snapshot_id"`
		Name             string            `json:"name"`
		Description      string            `json:"description"`
		Container        string            `json:"container"`
		Force            flexBool          `json:"force"`
		Incremental      flexBool          `json:"incremental"`
		Metadata         map[string]string `json:"metadata"`
		AvailabilityZone *string           `json:"availability_zone"`
	} `json:"backup"`
}

// createBackup is POST /backups, checked as Cinder's backup API does: metadata needs 3.43 and
// availability_zone 3.51 (the driver sends both, at 3.51); a snapshot must belong to the volume
// and be available, and then the volume's status does not matter, so a backup of an in-use
// volume's snapshot works; without a snapshot an in-use volume needs force. Then the scheduler's
// part: an enabled, up cinder-backup service in the zone asked for, else the volume's. Without
// one the request still succeeds (202) and the backup is in "error", as in Cinder since the
// scheduler took backups over. The answer is Cinder's summary view (id, name, links); the data
// copy is done before it, so the first GET already sees "available".
func (s *Server) createBackup(w http.ResponseWriter, r *http.Request, mv apiVersion) {
	var req createBackupRequest
	if !decodeBody(w, r, &req) {
		return
	}
	in := req.Backup
	switch {
	case in == nil:
		writeFault(w, http.StatusBadRequest, "Invalid input for field/attribute backup. 'backup' is a required property")
		return
	case in.VolumeID == "":
		writeFault(w, http.StatusBadRequest, "Invalid input for field/attribute backup. 'volume_id' is a required property")
		return
	case in.Metadata != nil && !mv.atLeast(3, 43):
		writeFault(w, http.StatusBadRequest, "Invalid input for field/attribute backup. Additional properties are not allowed ('metadata' was unexpected)")
		return
	case in.AvailabilityZone != nil && !mv.atLeast(3, 51):
		writeFault(w, http.StatusBadRequest, "Invalid input for field/attribute backup. Additional properties are not allowed ('availability_zone' was unexpected)")
		return
	}
	withLocked(s, w, "Volume", in.VolumeID, volumesOf, func(c *cloud, v *volume) {
		var snap *snapshot
		if in.SnapshotID != "" {
			var ok bool
			if snap, ok = c.snapshots[in.SnapshotID]; !ok {
				writeFault(w, http.StatusNotFound, notFound("Snapshot", in.SnapshotID))
				return
			}
			if snap.volumeID != v.id {
				writeFault(w, http.StatusBadRequest, fmt.Sprintf(
					"Invalid volume: Volume %s does not match with snapshot.volume_id %s.", v.id, snap.volumeID))
				return
			}
			if snap.status != StatusAvailable {
				writeFault(w, http.StatusBadRequest, fmt.Sprintf(
					"Invalid snapshot: Snapshot to be backed up must be available, but the current status is \"%s\".", snap.status))
				return
			}
		} else {
			switch {
			case v.status != StatusAvailable && v.status != StatusInUse:
				writeFault(w, http.StatusBadRequest, fmt.Sprintf(
					"Invalid volume: Volume to be backed up must be available or in-use, but the current status is \"%s\".", v.status))
				return
			case v.status == StatusInUse && !bool(in.Force):
				writeFault(w, http.StatusBadRequest, "Invalid volume: Backing up an in-use volume must use the force flag.")
				return
			}
		}
		if !s.checkBackupQuotaLocked(w, v.size) {
			return
		}
		if bool(in.Incremental) && !slices.ContainsFunc(slices.Collect(maps.Values(c.backups)), func(b *backup) bool {
			return b.volumeID == v.id && b.status == StatusAvailable
		}) {
			writeFault(w, http.StatusBadRequest, "Invalid backup: No backups available to do an incremental backup.")
			return
		}

		now := time.Now().UTC()
		b := &backup{
			seq: c.nextSeq(), id: newUUID(), name: in.Name, description: in.Description, volumeID: v.id,
			snapshotID: in.SnapshotID, size: v.size, status: StatusAvailable, incremental: bool(in.Incremental),
			metadata: maps.Clone(in.Metadata), created: now, updated: now, dataTime: now,
		}
		if b.metadata == nil {
			b.metadata = map[string]string{}
		}
		if snap != nil {
			b.dataTime = snap.created
		}
		zone := v.zone
		if in.AvailabilityZone != nil && *in.AvailabilityZone != "" {
			zone = *in.AvailabilityZone
		}
		b.zone = zone
		s.takeBackupLocked(b, zone, snap)
		c.backups[b.id] = b
		writeJSON(w, http.StatusAccepted, map[string]any{"backup": map[string]any{
			"id": b.id, "name": b.name, "links": s.selfLinks(r, "backups", b.id),
		}})
	})
}

// takeBackupLocked gives b to a backup service in zone and copies the data, or leaves b in error
// with the reason.
func (s *Server) takeBackupLocked(b *backup, zone string, snap *snapshot) {
	s.mu.Lock()
	services := s.backupServicesLocked()
	s.mu.Unlock()
	i := slices.IndexFunc(services, func(svc BackupService) bool {
		return svc.Zone == zone && !svc.Down && !svc.Disabled
	})
	if i < 0 {
		b.status, b.failReason = StatusError, backupServiceNotFound
		return
	}
	b.host = services[i].Host
	disks, ok := s.cloud.disks.(BackupDisks)
	var err error
	switch {
	case !ok:
		err = errNoBackupDisks
	case snap != nil:
		err = disks.BackupSnapshot(b.id, snap.id)
	default:
		err = disks.BackupVolume(b.id, b.volumeID)
	}
	if err != nil {
		s.log.Error(err, "Fake Cinder backup backend failed to create a backup", "backup", b.id)
		b.status, b.failReason = StatusError, err.Error()
		return
	}
	b.backed = true
}

// checkBackupQuotaLocked answers 413 if a backup of gigabytes would exceed backup_gigabytes.
func (s *Server) checkBackupQuotaLocked(w http.ResponseWriter, gigabytes int) bool {
	quota := s.opts.QuotaBackupGigabytes
	if quota <= 0 {
		return true
	}
	used := 0
	for _, b := range s.cloud.backups {
		used += b.size
	}
	if used+gigabytes <= quota {
		return true
	}
	writeFault(w, http.StatusRequestEntityTooLarge, fmt.Sprintf(
		"Requested backup exceeds allowed Backup gigabytes quota. Requested %dG, quota is %dG and %dG has been consumed.",
		gigabytes, quota, used))
	return false
}

// backupView renders a backup as Cinder's detail view at microversion mv.
func (s *Server) backupView(r *http.Request, b *backup, mv apiVersion) map[string]any {
	view := map[string]any{
		"id":                    b.id,
		"name":                  b.name,
		"description":           b.description,
		"status":                b.status,
		"size":                  b.size,
		"object_count":          0,
		"availability_zone":     b.zone,
		"container":             nil,
		"created_at":            b.created.Format(cinderTime),
		"updated_at":            b.updated.Format(cinderTime),
		"fail_reason":           nullable(b.failReason),
		"volume_id":             b.volumeID,
		"snapshot_id":           nullable(b.snapshotID),
		"data_timestamp":        b.dataTime.Format(cinderTime),
		"is_incremental":        b.incremental,
		"has_dependent_backups": false,
		"links":                 s.selfLinks(r, "backups", b.id),
	}
	if b.backed {
		view["object_count"] = 1
		view["container"] = "volumebackups"
	}
	if mv.atLeast(3, 18) {
		view["os-backup-project-attr:project_id"] = s.opts.ProjectID
	}
	if mv.atLeast(3, 43) {
		view["metadata"] = b.metadata
	}
	if mv.atLeast(3, 56) {
		view["user_id"] = s.opts.Users[0].ID
	}
	return view
}

// listBackups is GET /backups (summary: id, name, links, which is why the driver GETs a found
// backup again for its volume_id) and /backups/detail, with the name, status and volume_id
// filters and limit/marker pagination.
func (s *Server) listBackups(w http.ResponseWriter, r *http.Request, mv apiVersion, detail bool) {
	c := s.cloud
	c.mu.Lock()
	defer c.mu.Unlock()
	writeList(s, w, r, c.sortedBackupsLocked(), collection[*backup]{
		name: "backups", summaries: !detail, byVolume: true,
		fields: func(b *backup) listFields {
			return listFields{id: b.id, name: b.name, status: b.status, volumeID: b.volumeID}
		},
		view: func(b *backup) any { return s.backupView(r, b, mv) },
	})
}

// deleteBackup is DELETE /backups/{id}. Like Cinder it needs the backup available or in error;
// the source volume and snapshot do not matter.
func (s *Server) deleteBackup(w http.ResponseWriter, id string) {
	withLocked(s, w, "Backup", id, backupsOf, func(c *cloud, b *backup) {
		if b.status != StatusAvailable && b.status != StatusError {
			writeFault(w, http.StatusBadRequest, "Invalid backup: Backup status must be available or error")
			return
		}
		if b.backed {
			disks, _ := c.disks.(BackupDisks)
			if err := disks.DeleteBackup(id); err != nil {
				s.log.Error(err, "Fake Cinder backup backend failed to delete a backup", "backup", id)
				b.status, b.failReason = StatusErrorDeleting, err.Error()
				b.updated = time.Now().UTC()
				w.WriteHeader(http.StatusAccepted)
				return
			}
		}
		delete(c.backups, id)
		w.WriteHeader(http.StatusAccepted)
	})
}

// serveServices is GET /os-services with the binary and host filters: the scheduler, one
// cinder-volume per backend and the cinder-backup services, in Cinder's detailed shape (the
// os-extended-services extension is always loaded). Options.ForbidServiceList answers Cinder's
// 403 instead, as its default admin-only policy does for other users.
func (s *Server) serveServices(w http.ResponseWriter, r *http.Request, mv apiVersion) {
	s.mu.Lock()
	forbidden := s.forbidServiceList
	backends := s.backendsLocked()
	backupServices := s.backupServicesLocked()
	schedulerZone := firstAvailable(s.volume)
	s.mu.Unlock()
	if forbidden {
		writeFault(w, http.StatusForbidden, servicePolicyError)
		return
	}

	now := time.Now().UTC()
	type svc struct {
		binary, host, zone string
		down, disabled     bool
	}
	all := []svc{{binary: BinaryScheduler, host: "cinder", zone: schedulerZone}}
	seen := map[string]bool{}
	for _, b := range backends {
		// One service per host@backend, even if it were configured twice.
		if !seen[b.Host] {
			seen[b.Host] = true
			all = append(all, svc{binary: BinaryVolume, host: b.Host, zone: b.Zone})
		}
	}
	for _, b := range backupServices {
		all = append(all, svc{binary: BinaryBackup, host: b.Host, zone: b.Zone, down: b.Down, disabled: b.Disabled})
	}

	q := r.URL.Query()
	out := []any{}
	for _, sv := range all {
		if (q.Has("binary") && sv.binary != q.Get("binary")) || (q.Has("host") && sv.host != q.Get("host")) {
			continue
		}
		state, updated := "up", now
		if sv.down {
			// Down: no report for longer than service_down_time (60 s).
			state, updated = "down", now.Add(-10*time.Minute)
		}
		status := "enabled"
		if sv.disabled {
			status = "disabled"
		}
		view := map[string]any{
			"binary": sv.binary, "host": sv.host, "zone": sv.zone, "status": status, "state": state,
			"updated_at": updated.Format(cinderTime), "disabled_reason": nil,
		}
		if mv.atLeast(3, 7) {
			view["cluster"] = nil
		}
		if sv.binary == BinaryVolume {
			view["replication_status"] = "disabled"
			view["active_backend_id"] = nil
			view["frozen"] = false
			if mv.atLeast(3, 49) {
				view["backend_state"] = "up"
			}
		}
		out = append(out, view)
	}
	writeJSON(w, http.StatusOK, map[string]any{"services": out})
}
