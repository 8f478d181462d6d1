package fakeopenstack

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// cinderTime is the layout Cinder uses for created_at and friends (no zone suffix); gophercloud
// parses it as RFC3339MilliNoZ.
const cinderTime = "2006-01-02T15:04:05.000000"

// maxPageSize is Cinder's osapi_max_limit: the most items one list answer holds.
const maxPageSize = 1000

// flexInt is a number that clients may send as a JSON number or a string ("size": "1"), both of
// which Cinder accepts.
type flexInt struct {
	set bool
	n   int
}

func (f *flexInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "null" {
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("%q is not an integer", s)
	}
	f.set, f.n = true, n
	return nil
}

// flexBool is a boolean that may come as a string ("force": "True"), as Cinder accepts.
type flexBool bool

func (f *flexBool) UnmarshalJSON(b []byte) error {
	v, err := strconv.ParseBool(strings.Trim(string(b), `"`))
	if err != nil {
		return fmt.Errorf("%s is not a boolean", b)
	}
	*f = flexBool(v)
	return nil
}

// serveVolume is Cinder v3 under /volume/v3/<project>. Like the real service it checks the token
// before the path, so an expired token gives 401 on any URL.
func (s *Server) serveVolume(w *statusWriter, r *http.Request) {
	mv, seg, ok := s.admit(w, r, "/volume/v3/"+s.opts.ProjectID, cinderVersions)
	if !ok {
		return
	}

	served := false
	switch seg[0] {
	case "os-availability-zone":
		if len(seg) == 1 && r.Method == http.MethodGet {
			s.writeZones(w, EndpointVolume)
			served = true
		}
	case "volumes":
		served = s.serveVolumes(w, r, mv, seg[1:])
	case "snapshots":
		served = s.serveSnapshots(w, r, mv, seg[1:])
	case "backups":
		served = s.serveBackups(w, r, mv, seg[1:])
	case "os-services":
		if len(seg) == 1 && r.Method == http.MethodGet {
			s.serveServices(w, r, mv)
			served = true
		}
	}
	if !served {
		writeNotFound(w)
	}
}

// serveVolumes routes the requests under /volumes; rest is the path below it. It reports false,
// having written nothing, for a route it does not serve.
func (s *Server) serveVolumes(w http.ResponseWriter, r *http.Request, mv apiVersion, rest []string) bool {
	get, post, del := r.Method == http.MethodGet, r.Method == http.MethodPost, r.Method == http.MethodDelete
	switch {
	case len(rest) == 0 && post:
		s.createVolume(w, r, mv)
	case len(rest) == 0 && get:
		s.listVolumes(w, r, mv, false)
	case len(rest) == 1 && rest[0] == "detail" && get:
		s.listVolumes(w, r, mv, true)
	case len(rest) == 1 && get:
		s.getVolume(w, r, mv, rest[0])
	case len(rest) == 1 && del:
		s.deleteVolume(w, r, rest[0])
	case len(rest) == 2 && rest[1] == "action" && post:
		s.volumeAction(w, r, mv, rest[0])
	default:
		return false
	}
	return true
}

// serveSnapshots routes the requests under /snapshots; rest is the path below it. It reports
// false, having written nothing, for a route it does not serve.
func (s *Server) serveSnapshots(w http.ResponseWriter, r *http.Request, mv apiVersion, rest []string) bool {
	get, post, del := r.Method == http.MethodGet, r.Method == http.MethodPost, r.Method == http.MethodDelete
	switch {
	case len(rest) == 0 && post:
		s.createSnapshot(w, r, mv)
	case len(rest) == 0 && get,
		len(rest) == 1 && rest[0] == "detail" && get:
		s.listSnapshots(w, r, mv)
	case len(rest) == 1 && get:
		s.getSnapshot(w, mv, rest[0])
	case len(rest) == 1 && del:
		s.deleteSnapshot(w, rest[0])
	default:
		return false
	}
	return true
}

// decodeBody reads a JSON request body of at most 1 MiB into v, answering 400 if it is not JSON.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(v); err != nil {
		writeFault(w, http.StatusBadRequest, "Malformed request body: "+err.Error())
		return false
	}
	return true
}

type createVolumeRequest struct {
	Volume *struct {
		Name             string            `json:"name"`
		Description      string            `json:"description"`
		Size             flexInt           `json:"size"`
		AvailabilityZone string            `json:"availability_zone"`
		VolumeType       string            `json:"volume_type"`
		SnapshotID       string            `json:"snapshot_id"`
		SourceVolID      string            `json:"source_volid"`
		BackupID         string            `json:"backup_id"`
		ImageRef         string            `json:"imageRef"`
		Metadata         map[string]string `json:"metadata"`
	} `json:"volume"`
	// SchedulerHints are what the driver sends for the PVC affinity annotations: same_host and
	// different_host, honoured when backends are configured (see Options.Backends).
	SchedulerHints map[string]any `json:"OS-SCH-HNT:scheduler_hints"`
}

// createVolume is POST /volumes. It validates like Cinder's API and create flow (size, source,
// availability zone, type, quota), makes the disk, and answers 202 with status "creating"; the
// stored volume is "available" at once (or "error" if the backend failed), as if Cinder's
// asynchronous creation had finished.
func (s *Server) createVolume(w http.ResponseWriter, r *http.Request, mv apiVersion) {
	var req createVolumeRequest
	if !decodeBody(w, r, &req) {
		return
	}
	in := req.Volume
	if in == nil {
		writeFault(w, http.StatusBadRequest, "Missing required element 'volume' in request body.")
		return
	}
	if in.ImageRef != "" {
		writeFault(w, http.StatusBadRequest, "Invalid input received: this fake has no image service.")
		return
	}

	c := s.cloud
	c.mu.Lock()
	defer c.mu.Unlock()

	size := in.Size.n
	src, ok := s.volumeSourceLocked(w, in.SnapshotID, in.SourceVolID, in.BackupID, in.AvailabilityZone)
	if !ok {
		return
	}
	sourceSize, zone := src.size, src.zone
	if !in.Size.set && sourceSize > 0 {
		size = sourceSize
	}
	if size <= 0 {
		writeFault(w, http.StatusBadRequest, fmt.Sprintf(
			"Invalid input received: Volume size '%d' must be an integer and greater than 0", size))
		return
	}
	if size < sourceSize {
		msg := fmt.Sprintf("Invalid input received: Volume size '%d'GB cannot be smaller than the source size %dGB. They must be >= original size.",
			size, sourceSize)
		if in.BackupID != "" {
			msg = fmt.Sprintf("Invalid input received: Volume size %dGB cannot be smaller than the backup size %dGB. It must be >= backup size.",
				size, sourceSize)
		}
		writeFault(w, http.StatusBadRequest, msg)
		return
	}
	if zone == "" {
		zone = s.defaultZone(EndpointVolume)
	}
	if !slices.ContainsFunc(s.zones(EndpointVolume), func(z Zone) bool { return z.Name == zone && z.Available }) {
		// Cinder's InvalidAvailabilityZone, without allow_availability_zone_fallback.
		writeFault(w, http.StatusBadRequest, fmt.Sprintf("Availability zone '%s' is invalid.", zone))
		return
	}
	volType := in.VolumeType
	if volType == "" {
		volType = defaultVolumeType
	} else if s.opts.VolumeTypes != nil && !slices.Contains(s.opts.VolumeTypes, volType) {
		writeFault(w, http.StatusNotFound, fmt.Sprintf("Volume type with name %s could not be found.", volType))
		return
	}
	if !s.checkQuotaLocked(w, size) {
		return
	}

	now := time.Now().UTC()
	v := &volume{
		seq: c.nextSeq(), id: newUUID(), name: in.Name, description: in.Description, size: size,
		status: StatusAvailable, zone: zone, volType: volType, snapshotID: src.snapshotID,
		sourceVolID: src.sourceVolID, backupID: src.backupID, metadata: maps.Clone(in.Metadata),
		attachedAt: map[string]time.Time{}, created: now, updated: now,
	}
	if v.metadata == nil {
		v.metadata = map[string]string{}
	}
	// Scheduling happens after the API answered in Cinder, so a volume that fits no backend
	// is accepted and then in error.
	if b, ok := s.placeLocked(zone, src.pinned, parseSchedulerHints(req.SchedulerHints)); ok {
		v.backend = b.location()
		s.createDiskLocked(v, src, size)
	} else {
		v.status, v.failReason = StatusError, noValidBackend
	}
	c.volumes[v.id] = v

	view := s.volumeView(r, v, mv)
	if v.status == StatusAvailable || v.failReason == noValidBackend {
		view["status"] = StatusCreating
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"volume": view})
}

// volumeSource is what a new volume is made from: a snapshot, a volume or a backup (at most
// one ID is set), with its size (0 without a source), the new volume's zone, and the backend
// host@backend the volume must land on (snapshot_same_host: snapshots and clones stay on their
// volume's backend), if any.
type volumeSource struct {
	snapshotID, sourceVolID, backupID string
	size                              int
	zone                              string
	pinned                            string
}

// volumeSourceLocked checks the snapshot, else the volume, else the backup that a new volume is
// created from, and returns it with the new volume's zone: zone if it was asked for, else the
// source volume's (a backup may be restored into any zone). It answers the fault and reports
// false when the source is missing or not ready, or lives in another zone than the one asked
// for.
func (s *Server) volumeSourceLocked(w http.ResponseWriter, snapshotID, sourceVolID, backupID, zone string) (volumeSource, bool) {
	c := s.cloud
	switch {
	case snapshotID != "":
		snap, ok := c.snapshots[snapshotID]
		if !ok {
			writeFault(w, http.StatusNotFound, notFound("Snapshot", snapshotID))
			return volumeSource{}, false
		}
		if snap.status != StatusAvailable {
			writeFault(w, http.StatusBadRequest, "Invalid snapshot: Originating snapshot status must be one of 'available' values")
			return volumeSource{}, false
		}
		out := volumeSource{snapshotID: snapshotID, size: snap.size, zone: zone}
		// cloned_volume_same_az (default true): a volume from a snapshot lives in the zone of
		// the snapshot's volume.
		if src, ok := c.volumes[snap.volumeID]; ok {
			out.pinned = backendHost(src.backend)
			if zone == "" {
				out.zone = src.zone
			} else if zone != src.zone {
				writeFault(w, http.StatusBadRequest, "Invalid input received: Volume must be in the same availability zone as the snapshot")
				return volumeSource{}, false
			}
		}
		return out, true
	case sourceVolID != "":
		src, ok := c.volumes[sourceVolID]
		if !ok {
			writeFault(w, http.StatusNotFound, notFound("Volume", sourceVolID))
			return volumeSource{}, false
		}
		if src.status != StatusAvailable && src.status != StatusInUse {
			writeFault(w, http.StatusBadRequest, fmt.Sprintf(
				"Invalid volume: Source volume status must be available or in-use, but is %s.", src.status))
			return volumeSource{}, false
		}
		if zone == "" {
			zone = src.zone
		} else if zone != src.zone {
			writeFault(w, http.StatusBadRequest, "Invalid input received: Volume must be in the same availability zone as the source volume")
			return volumeSource{}, false
		}
		return volumeSource{sourceVolID: sourceVolID, size: src.size, zone: zone, pinned: backendHost(src.backend)}, true
	case backupID != "":
		// Cinder reads backup_id at every microversion (its schema only validates it from 3.47).
		b, ok := c.backups[backupID]
		if !ok {
			writeFault(w, http.StatusNotFound, notFound("Backup", backupID))
			return volumeSource{}, false
		}
		if b.status != StatusAvailable {
			writeFault(w, http.StatusBadRequest, "Invalid backup: Originating backup status must be one of 'available' values")
			return volumeSource{}, false
		}
		return volumeSource{backupID: backupID, size: b.size, zone: zone}, true
	}
	return volumeSource{zone: zone}, true
}

// createDiskLocked makes v's disk from src in the backend; a failure leaves v in error.
func (s *Server) createDiskLocked(v *volume, src volumeSource, size int) {
	c := s.cloud
	sizeBytes := int64(size) * GiB
	var err error
	switch {
	case src.snapshotID != "":
		err = c.disks.RestoreSnapshot(v.id, src.snapshotID, sizeBytes)
	case src.sourceVolID != "":
		err = c.disks.CloneVolume(v.id, src.sourceVolID, sizeBytes)
	case src.backupID != "":
		if disks, ok := c.disks.(BackupDisks); ok {
			err = disks.RestoreBackup(v.id, src.backupID, sizeBytes)
		} else {
			err = errNoBackupDisks
		}
	default:
		err = c.disks.CreateVolume(v.id, sizeBytes)
	}
	if err != nil {
		s.log.Error(err, "Fake Cinder backend failed to create a volume", "volume", v.id)
		v.status, v.failReason = StatusError, err.Error()
	}
	v.backed = err == nil
}

// checkQuotaLocked answers 413 if adding gigabytes would exceed the quota.
func (s *Server) checkQuotaLocked(w http.ResponseWriter, gigabytes int) bool {
	quota := s.opts.QuotaGigabytes
	if quota <= 0 {
		return true
	}
	used := s.cloud.usedGigabytesLocked()
	if used+gigabytes <= quota {
		return true
	}
	writeFault(w, http.StatusRequestEntityTooLarge, fmt.Sprintf(
		"VolumeSizeExceedsAvailableQuota: Requested volume or snapshot exceeds allowed gigabytes quota. Requested %dG, quota is %dG and %dG has been consumed.",
		gigabytes, quota, used))
	return false
}

// volumeView renders a volume as Cinder's detail view at microversion mv.
func (s *Server) volumeView(r *http.Request, v *volume, mv apiVersion) map[string]any {
	attachments := make([]any, 0, len(v.attachments))
	for _, a := range v.attachments {
		attachments = append(attachments, map[string]any{
			"id": v.id, "attachment_id": a.AttachmentID, "volume_id": v.id, "server_id": a.ServerID,
			"host_name": nil, "device": a.Device, "attached_at": v.attachedAt[a.ServerID].Format(cinderTime),
		})
	}
	view := map[string]any{
		"id":                           v.id,
		"name":                         v.name,
		"description":                  v.description,
		"status":                       v.status,
		"size":                         v.size,
		"availability_zone":            v.zone,
		"created_at":                   v.created.Format(cinderTime),
		"updated_at":                   v.updated.Format(cinderTime),
		"attachments":                  attachments,
		"volume_type":                  v.volType,
		"snapshot_id":                  nullable(v.snapshotID),
		"source_volid":                 nullable(v.sourceVolID),
		"metadata":                     v.metadata,
		"user_id":                      s.opts.Users[0].ID,
		"bootable":                     "false",
		"encrypted":                    false,
		"replication_status":           nil,
		"consistencygroup_id":          nil,
		"multiattach":                  false,
		"migration_status":             nil,
		"os-vol-tenant-attr:tenant_id": s.opts.ProjectID,
		// Admin-only in Cinder (volume_extension:volume_host_attribute); the fake always shows
		// it, so tests and the operator can see where the scheduler put a volume.
		"os-vol-host-attr:host": nullable(v.backend),
		"links":                 s.selfLinks(r, "volumes", v.id),
	}
	if mv.atLeast(3, 13) {
		view["group_id"] = nil
	}
	if mv.atLeast(3, 47) {
		view["backup_id"] = nil
	}
	if mv.atLeast(3, 48) {
		view["shared_targets"] = false
		view["service_uuid"] = nil
	}
	if mv.atLeast(3, 63) {
		view["volume_type_id"] = "type-" + v.volType
	}
	if mv.atLeast(3, 65) {
		view["consumes_quota"] = true
	}
	return view
}

// nullable renders "" as JSON null, as Cinder does for unset references.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (s *Server) selfLinks(r *http.Request, collection, id string) []any {
	href := s.requestBase(r) + "/volume/v3/" + s.opts.ProjectID + "/" + collection + "/" + id
	return []any{map[string]any{"rel": "self", "href": href}}
}

func (s *Server) getVolume(w http.ResponseWriter, r *http.Request, mv apiVersion, id string) {
	withLocked(s, w, "Volume", id, volumesOf, func(_ *cloud, v *volume) {
		writeJSON(w, http.StatusOK, map[string]any{"volume": s.volumeView(r, v, mv)})
	})
}

// listVolumes is GET /volumes and /volumes/detail with the filters the driver and the CSI
// sidecars use (name, status) and Cinder's limit/marker pagination.
func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request, mv apiVersion, detail bool) {
	c := s.cloud
	c.mu.Lock()
	defer c.mu.Unlock()
	writeList(s, w, r, c.sortedVolumesLocked(), collection[*volume]{
		name: "volumes", summaries: !detail,
		fields: func(v *volume) listFields { return listFields{id: v.id, name: v.name, status: v.status} },
		view:   func(v *volume) any { return s.volumeView(r, v, mv) },
	})
}

// collection is one of Cinder's listable collections, as writeList answers it.
type collection[T any] struct {
	// name is the collection's name in its path and answer: volumes, snapshots, backups.
	name string
	// summaries lists each item as its id, name and links only (GET /volumes, not /detail).
	summaries bool
	// byVolume is set where the collection takes the volume_id filter (snapshots, backups).
	byVolume bool
	// fields are what the filters and the summary read of an item.
	fields func(T) listFields
	// view is an item's detailed view.
	view func(T) any
}

// listFields are what a list's filters and summaries read of an item.
type listFields struct {
	id, name, status, volumeID string
}

// writeList answers a GET of a collection from items (already in Cinder's order): the name,
// status and volume_id filters, limit/marker pagination, and the next link.
func writeList[T any](s *Server, w http.ResponseWriter, r *http.Request, items []T, c collection[T]) {
	q := r.URL.Query()
	var matched []T
	for _, it := range items {
		f := c.fields(it)
		if (!q.Has("name") || f.name == q.Get("name")) && (!q.Has("status") || f.status == q.Get("status")) &&
			(!c.byVolume || !q.Has("volume_id") || f.volumeID == q.Get("volume_id")) {
			matched = append(matched, it)
		}
	}
	page, next, ok := paginate(w, r, matched, func(it T) string { return c.fields(it).id })
	if !ok {
		return
	}
	views := make([]any, 0, len(page))
	for _, it := range page {
		if c.summaries {
			f := c.fields(it)
			views = append(views, map[string]any{"id": f.id, "name": f.name, "links": s.selfLinks(r, c.name, f.id)})
		} else {
			views = append(views, c.view(it))
		}
	}
	body := map[string]any{c.name: views}
	if next != "" {
		body[c.name+"_links"] = []any{map[string]any{"rel": "next", "href": s.requestBase(r) + next}}
	}
	writeJSON(w, http.StatusOK, body)
}

// paginate applies limit and marker to items (already in Cinder's order). When the page is full
// it also returns the path and query of the next page, as Cinder adds a next link whenever a page
// reaches the limit, even if nothing follows.
func paginate[T any](w http.ResponseWriter, r *http.Request, items []T, id func(T) string) ([]T, string, bool) {
	q := r.URL.Query()
	limit := maxPageSize
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 0 {
			writeFault(w, http.StatusBadRequest, "Invalid input received: limit param must be an integer")
			return nil, "", false
		}
		limit = min(n, maxPageSize)
	}
	if marker := q.Get("marker"); marker != "" {
		i := slices.IndexFunc(items, func(t T) bool { return id(t) == marker })
		if i < 0 {
			writeFault(w, http.StatusBadRequest, fmt.Sprintf("Invalid input received: marker [%s] not found", marker))
			return nil, "", false
		}
		items = items[i+1:]
	}
	if limit == 0 || len(items) < limit {
		return items, "", true
	}
	page := items[:limit]
	nq := url.Values{}
	maps.Copy(nq, q)
	nq.Set("limit", strconv.Itoa(limit))
	nq.Set("marker", id(page[len(page)-1]))
	return page, r.URL.Path + "?" + nq.Encode(), true
}

// deleteVolume is DELETE /volumes/{id}. Like Cinder it refuses (400) a volume that is attached
// or has snapshots, unless ?cascade=true, which deletes the snapshots too. Backups do not hold a
// volume: they stay, with their data.
func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request, id string) {
	cascade, _ := strconv.ParseBool(r.URL.Query().Get("cascade"))
	withLocked(s, w, "Volume", id, volumesOf, func(c *cloud, v *volume) {
		var snaps []*snapshot
		for _, sn := range c.snapshots {
			if sn.volumeID == id {
				snaps = append(snaps, sn)
			}
		}
		if len(v.attachments) > 0 || v.status == StatusInUse || (len(snaps) > 0 && !cascade) {
			writeFault(w, http.StatusBadRequest, "Invalid volume: Volume status must be available or error or error_restoring "+
				"or error_extending or error_managing and must not be migrating, attached, belong to a group, have snapshots, "+
				"awaiting a transfer, or be disassociated from snapshots after volume transfer.")
			return
		}
		for _, sn := range snaps {
			if sn.backed {
				if err := c.disks.DeleteSnapshot(sn.id); err != nil {
					s.log.Error(err, "Fake Cinder backend failed to delete a snapshot", "snapshot", sn.id)
					sn.status = StatusErrorDeleting
					v.status = StatusErrorDeleting
					w.WriteHeader(http.StatusAccepted)
					return
				}
			}
			delete(c.snapshots, sn.id)
		}
		if !v.backed {
			// Creation failed in the backend: there is no disk to delete.
			delete(c.volumes, id)
		} else if err := c.disks.DeleteVolume(id); err != nil {
			// Cinder deletes asynchronously: the request is accepted and the volume ends up in
			// error_deleting.
			s.log.Error(err, "Fake Cinder backend failed to delete a volume", "volume", id)
			v.status = StatusErrorDeleting
			v.updated = time.Now().UTC()
		} else {
			delete(c.volumes, id)
		}
		w.WriteHeader(http.StatusAccepted)
	})
}

// volumeAction is POST /volumes/{id}/action; only os-extend is served.
func (s *Server) volumeAction(w http.ResponseWriter, r *http.Request, mv apiVersion, id string) {
	var req map[string]json.RawMessage
	if !decodeBody(w, r, &req) {
		return
	}
	raw, ok := req["os-extend"]
	if !ok || len(req) != 1 {
		keys := slices.Sorted(maps.Keys(req))
		writeFault(w, http.StatusBadRequest, fmt.Sprintf("There is no such action: %s", strings.Join(keys, ",")))
		return
	}
	var extend struct {
		NewSize flexInt `json:"new_size"`
	}
	if err := json.Unmarshal(raw, &extend); err != nil || !extend.NewSize.set {
		writeFault(w, http.StatusBadRequest, "Invalid input received: new_size must be an integer")
		return
	}
	s.extendVolume(w, mv, id, extend.NewSize.n)
}

// extendVolume grows a volume. An in-use volume needs microversion 3.42 or newer, which is why the
// driver asks for it; older versions get Cinder's 400.
func (s *Server) extendVolume(w http.ResponseWriter, mv apiVersion, id string, newSize int) {
	withLocked(s, w, "Volume", id, volumesOf, func(c *cloud, v *volume) {
		switch {
		case v.status == StatusAvailable:
		case v.status == StatusInUse && mv.atLeast(3, 42):
		default:
			allowed := "'available'"
			if mv.atLeast(3, 42) {
				allowed = "'available' or 'in-use'"
			}
			writeFault(w, http.StatusBadRequest, fmt.Sprintf(
				"Invalid volume: Volume %s status must be %s to extend, currently %s.", id, allowed, v.status))
			return
		}
		if newSize <= v.size {
			writeFault(w, http.StatusBadRequest, fmt.Sprintf(
				"Invalid input received: New size for extend must be greater than current size. (current: %d, extended: %d).",
				v.size, newSize))
			return
		}
		if !s.checkQuotaLocked(w, newSize-v.size) {
			return
		}
		if err := c.disks.ExtendVolume(id, int64(newSize)*GiB); err != nil {
			// Accepted, then failed in the backend: the driver's wait sees error_extending.
			s.log.Error(err, "Fake Cinder backend failed to extend a volume", "volume", id)
			v.status = StatusErrorExtend
		} else {
			v.size = newSize
		}
		v.updated = time.Now().UTC()
		w.WriteHeader(http.StatusAccepted)
	})
}

type createSnapshotRequest struct {
	Snapshot *struct {
		VolumeID    string            `json:"volume_id"`
		Force       flexBool          `json:"force"`
		Name        string            `json:"name"`
		Description string            `json:"description"`
		Metadata    map[string]string `json:"metadata"`
	} `json:"snapshot"`
}

// createSnapshot is POST /snapshots. An in-use volume needs force=true below microversion 3.66,
// as in Cinder: the driver passes it only when the VolumeSnapshotClass sets force-create.
func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request, mv apiVersion) {
	var req createSnapshotRequest
	if !decodeBody(w, r, &req) {
		return
	}
	in := req.Snapshot
	if in == nil || in.VolumeID == "" {
		writeFault(w, http.StatusBadRequest, "Missing required element 'snapshot' or 'volume_id' in request body.")
		return
	}
	withLocked(s, w, "Volume", in.VolumeID, volumesOf, func(c *cloud, v *volume) {
		switch {
		case v.status == StatusAvailable:
		case v.status == StatusInUse && (bool(in.Force) || mv.atLeast(3, 66)):
		default:
			writeFault(w, http.StatusBadRequest, fmt.Sprintf(
				"Invalid volume: Volume %s status must be available, but current status is: %s.", v.id, v.status))
			return
		}
		if !s.checkQuotaLocked(w, v.size) {
			return
		}
		now := time.Now().UTC()
		sn := &snapshot{
			seq: c.nextSeq(), id: newUUID(), name: in.Name, description: in.Description, volumeID: v.id,
			size: v.size, status: StatusAvailable, metadata: maps.Clone(in.Metadata), created: now, updated: now,
		}
		if sn.metadata == nil {
			sn.metadata = map[string]string{}
		}
		if err := c.disks.CreateSnapshot(sn.id, v.id); err != nil {
			s.log.Error(err, "Fake Cinder backend failed to create a snapshot", "snapshot", sn.id)
			sn.status = StatusError
		} else {
			sn.backed = true
		}
		c.snapshots[sn.id] = sn
		view := s.snapshotView(sn, mv)
		if sn.status == StatusAvailable {
			view["status"] = StatusCreating
		}
		writeJSON(w, http.StatusAccepted, map[string]any{"snapshot": view})
	})
}

func (s *Server) snapshotView(sn *snapshot, mv apiVersion) map[string]any {
	view := map[string]any{
		"id":          sn.id,
		"name":        sn.name,
		"description": sn.description,
		"volume_id":   sn.volumeID,
		"status":      sn.status,
		"size":        sn.size,
		"created_at":  sn.created.Format(cinderTime),
		"updated_at":  sn.updated.Format(cinderTime),
		"metadata":    sn.metadata,
		"os-extended-snapshot-attributes:project_id": s.opts.ProjectID,
		"os-extended-snapshot-attributes:progress":   "100%",
	}
	if mv.atLeast(3, 14) {
		view["group_snapshot_id"] = nil
	}
	if mv.atLeast(3, 41) {
		view["user_id"] = s.opts.Users[0].ID
	}
	if mv.atLeast(3, 65) {
		view["consumes_quota"] = true
	}
	return view
}

func (s *Server) getSnapshot(w http.ResponseWriter, mv apiVersion, id string) {
	withLocked(s, w, "Snapshot", id, snapshotsOf, func(_ *cloud, sn *snapshot) {
		writeJSON(w, http.StatusOK, map[string]any{"snapshot": s.snapshotView(sn, mv)})
	})
}

// listSnapshots is GET /snapshots and /snapshots/detail (the driver uses the former; both
// answer the detailed view) with the name, status and volume_id filters and limit/marker
// pagination.
func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request, mv apiVersion) {
	c := s.cloud
	c.mu.Lock()
	defer c.mu.Unlock()
	writeList(s, w, r, c.sortedSnapshotsLocked(), collection[*snapshot]{
		name: "snapshots", byVolume: true,
		fields: func(sn *snapshot) listFields {
			return listFields{id: sn.id, name: sn.name, status: sn.status, volumeID: sn.volumeID}
		},
		view: func(sn *snapshot) any { return s.snapshotView(sn, mv) },
	})
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, id string) {
	withLocked(s, w, "Snapshot", id, snapshotsOf, func(c *cloud, sn *snapshot) {
		if !sn.backed {
			delete(c.snapshots, id)
		} else if err := c.disks.DeleteSnapshot(id); err != nil {
			s.log.Error(err, "Fake Cinder backend failed to delete a snapshot", "snapshot", id)
			sn.status = StatusErrorDeleting
			sn.updated = time.Now().UTC()
		} else {
			delete(c.snapshots, id)
		}
		w.WriteHeader(http.StatusAccepted)
	})
}
