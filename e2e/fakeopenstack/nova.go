package fakeopenstack

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// serveCompute is Nova under /compute/v2.1: availability zones, servers and volume attachments.
// Like the real service it checks the token before the path.
func (s *Server) serveCompute(w *statusWriter, r *http.Request) {
	mv, seg, ok := s.admit(w, r, "/compute/v2.1", novaVersions)
	if !ok {
		return
	}
	get, post, del := r.Method == http.MethodGet, r.Method == http.MethodPost, r.Method == http.MethodDelete
	attachments := len(seg) >= 3 && seg[0] == "servers" && seg[2] == "os-volume_attachments"

	switch {
	case get && seg[0] == "os-availability-zone" && (len(seg) == 1 || len(seg) == 2 && seg[1] == "detail"):
		// The /detail variant is admin-only on a real Nova; the fake serves both the same way.
		s.writeZones(w, EndpointCompute)
	case get && len(seg) == 2 && seg[0] == "servers" && seg[1] != "detail":
		s.getServer(w, r, mv, seg[1])
	case get && attachments && len(seg) == 3:
		s.listAttachments(w, mv, seg[1])
	case post && attachments && len(seg) == 3:
		s.attachVolume(w, r, mv, seg[1])
	case get && attachments && len(seg) == 4:
		s.getAttachment(w, mv, seg[1], seg[3])
	case del && attachments && len(seg) == 4:
		s.detachVolume(w, seg[1], seg[3])
	default:
		writeNotFound(w)
	}
}

// getServer is GET /servers/{id}; an unknown ID answers 404, which the driver takes as "node gone"
// (ControllerUnpublish then succeeds, ControllerPublish answers NotFound).
func (s *Server) getServer(w http.ResponseWriter, r *http.Request, mv apiVersion, id string) {
	withLocked(s, w, "Instance", id, serversOf, func(c *cloud, srv *server) {
		volumes := []any{}
		for _, v := range c.sortedVolumesLocked() {
			if slices.ContainsFunc(v.attachments, func(a AttachmentInfo) bool { return a.ServerID == id }) {
				volumes = append(volumes, map[string]any{"id": v.id, "delete_on_termination": false})
			}
		}
		host := sha256.Sum256([]byte(s.opts.ProjectID + "fake-compute-host"))
		created := srv.created.Format(time.RFC3339)
		self := s.requestBase(r) + "/compute/v2.1/servers/" + id
		view := map[string]any{
			"id":                                   srv.info.ID,
			"name":                                 srv.info.Name,
			"status":                               "ACTIVE",
			"tenant_id":                            s.opts.ProjectID,
			"user_id":                              s.opts.Users[0].ID,
			"hostId":                               hex.EncodeToString(host[:28]),
			"created":                              created,
			"updated":                              created,
			"addresses":                            map[string]any{},
			"metadata":                             map[string]any{},
			"flavor":                               map[string]any{"id": "1", "links": []any{}},
			"image":                                "",
			"key_name":                             nil,
			"accessIPv4":                           "",
			"accessIPv6":                           "",
			"config_drive":                         "",
			"progress":                             0,
			"links":                                []any{map[string]any{"rel": "self", "href": self}},
			"security_groups":                      []any{map[string]any{"name": "default"}},
			"OS-EXT-AZ:availability_zone":          srv.info.Zone,
			"OS-EXT-STS:vm_state":                  "active",
			"OS-EXT-STS:power_state":               1,
			"OS-EXT-STS:task_state":                nil,
			"OS-SRV-USG:launched_at":               srv.created.Format(cinderTime),
			"OS-SRV-USG:terminated_at":             nil,
			"OS-DCF:diskConfig":                    "MANUAL",
			"os-extended-volumes:volumes_attached": volumes,
		}
		if mv.atLeast(2, 9) {
			view["locked"] = false
		}
		if mv.atLeast(2, 26) {
			view["tags"] = []any{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"server": view})
	})
}

// attachmentView renders a Nova volume attachment at microversion mv.
func attachmentView(serverID, volumeID string, a AttachmentInfo, mv apiVersion) map[string]any {
	view := map[string]any{"device": a.Device, "serverId": serverID, "volumeId": volumeID}
	if mv.atLeast(2, 89) {
		// 2.89 dropped the legacy id (which was the volume ID) for Cinder's attachment ID.
		view["attachment_id"] = a.AttachmentID
	} else {
		view["id"] = volumeID
	}
	if mv.atLeast(2, 70) {
		view["tag"] = nil
	}
	if mv.atLeast(2, 79) {
		view["delete_on_termination"] = false
	}
	return view
}

func (s *Server) listAttachments(w http.ResponseWriter, mv apiVersion, serverID string) {
	withLocked(s, w, "Instance", serverID, serversOf, func(c *cloud, _ *server) {
		items := []any{}
		for _, v := range c.sortedVolumesLocked() {
			for _, a := range v.attachments {
				if a.ServerID == serverID {
					items = append(items, attachmentView(serverID, v.id, a, mv))
				}
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"volumeAttachments": items})
	})
}

func (s *Server) getAttachment(w http.ResponseWriter, mv apiVersion, serverID, volumeID string) {
	withLocked(s, w, "Instance", serverID, serversOf, func(c *cloud, _ *server) {
		if v, ok := c.volumes[volumeID]; ok {
			for _, a := range v.attachments {
				if a.ServerID == serverID {
					writeJSON(w, http.StatusOK, map[string]any{"volumeAttachment": attachmentView(serverID, v.id, a, mv)})
					return
				}
			}
		}
		writeFault(w, http.StatusNotFound, fmt.Sprintf("Volume %s is not attached to %s", volumeID, serverID))
	})
}

type attachRequest struct {
	VolumeAttachment *struct {
		VolumeID string `json:"volumeId"`
		Device   string `json:"device"`
	} `json:"volumeAttachment"`
}

// attachVolume is POST /servers/{id}/os-volume_attachments. The attach happens before the answer
// (a real Nova finishes it asynchronously), so the driver's first poll already sees the volume
// in-use with the attachment. A backend failure answers 500, where a real Nova would leave the
// driver to time out waiting.
func (s *Server) attachVolume(w http.ResponseWriter, r *http.Request, mv apiVersion, serverID string) {
	var req attachRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.VolumeAttachment == nil || req.VolumeAttachment.VolumeID == "" {
		writeFault(w, http.StatusBadRequest, "Invalid input for field/attribute volumeAttachment. 'volumeId' is a required property")
		return
	}
	volumeID := req.VolumeAttachment.VolumeID
	withLocked(s, w, "Instance", serverID, serversOf, func(c *cloud, _ *server) {
		v, ok := c.volumes[volumeID]
		if !ok {
			writeFault(w, http.StatusNotFound, notFound("Volume", volumeID))
			return
		}
		if slices.ContainsFunc(v.attachments, func(a AttachmentInfo) bool { return a.ServerID == serverID }) {
			writeFault(w, http.StatusBadRequest, fmt.Sprintf("Invalid volume: volume %s already attached", volumeID))
			return
		}
		if v.status != StatusAvailable {
			writeFault(w, http.StatusBadRequest, fmt.Sprintf(
				"Invalid volume: Volume %s status must be available or downloading to reserve, but the current status is %s.",
				volumeID, v.status))
			return
		}
		hostDevice, err := c.disks.Attach(volumeID, serverID)
		if err != nil {
			s.log.Error(err, "Fake OpenStack backend failed to attach a volume", "volume", volumeID, "server", serverID)
			writeFault(w, http.StatusInternalServerError, fmt.Sprintf("Failed to attach volume %s: %v", volumeID, err))
			return
		}
		a := AttachmentInfo{
			ServerID: serverID, AttachmentID: newUUID(), Device: c.nextDeviceLocked(serverID), HostDevice: hostDevice,
		}
		now := time.Now().UTC()
		v.attachments = append(v.attachments, a)
		v.attachedAt[serverID] = now
		v.status = StatusInUse
		v.updated = now
		writeJSON(w, http.StatusOK, map[string]any{"volumeAttachment": attachmentView(serverID, volumeID, a, mv)})
	})
}

// nextDeviceLocked returns the first free virtio disk name of a server, from /dev/vdb (vda is the
// root disk), as the libvirt driver assigns them.
func (c *cloud) nextDeviceLocked(serverID string) string {
	used := map[string]bool{}
	for _, v := range c.volumes {
		for _, a := range v.attachments {
			if a.ServerID == serverID {
				used[a.Device] = true
			}
		}
	}
	for i := 1; ; i++ {
		name := ""
		for n := i; ; n = n/26 - 1 {
			name = string(rune('a'+n%26)) + name
			if n < 26 {
				break
			}
		}
		if dev := "/dev/vd" + name; !used[dev] {
			return dev
		}
	}
}

// detachVolume is DELETE /servers/{id}/os-volume_attachments/{volumeId}: 202, or 404 when the
// volume is not attached to the server.
func (s *Server) detachVolume(w http.ResponseWriter, serverID, volumeID string) {
	withLocked(s, w, "Instance", serverID, serversOf, func(c *cloud, _ *server) {
		v, ok := c.volumes[volumeID]
		if !ok || !slices.ContainsFunc(v.attachments, func(a AttachmentInfo) bool { return a.ServerID == serverID }) {
			writeFault(w, http.StatusNotFound, fmt.Sprintf("Volume %s is not attached to %s", volumeID, serverID))
			return
		}
		if err := c.detachLocked(v, serverID); err != nil {
			s.log.Error(err, "Fake OpenStack backend failed to detach a volume", "volume", volumeID, "server", serverID)
			writeFault(w, http.StatusInternalServerError, err.Error())
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
}
