package fakeopenstack

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Backend is one Cinder volume backend: a cinder-volume service (host@backend) with one pool, in
// one volume zone. A volume placed on it reports "os-vol-host-attr:host" as Host#Pool, for
// example "cinder@lvm-1#pool", and os-services lists it as a cinder-volume service.
type Backend struct {
	// Host is the service's host@backend, for example "cinder@lvm-1" (required).
	Host string
	// Pool is the pool after '#' in a volume's host (default "pool").
	Pool string
	// Zone is the volume zone the backend serves (default: the first available volume zone of
	// Options.VolumeZones when the backend is configured).
	Zone string
}

// location is what Cinder stores as a volume's host: host@backend#pool.
func (b Backend) location() string { return b.Host + "#" + b.Pool }

// defaultPool is the pool of a Backend that names none.
const defaultPool = "pool"

// noValidBackend is the reason Cinder's scheduler gives a volume it could not place (the
// NoValidBackend exception with the filter scheduler's "no weighed backends" reason); the volume
// goes to status "error". The fake keeps it as VolumeInfo.FailReason, where a real Cinder keeps
// it in its user messages.
const noValidBackend = "No valid backend was found. No weighed backends available"

func withBackendDefaults(backends []Backend, zone string) []Backend {
	out := slices.Clone(backends)
	for i := range out {
		if out[i].Pool == "" {
			out[i].Pool = defaultPool
		}
		if out[i].Zone == "" {
			out[i].Zone = zone
		}
	}
	return out
}

// SetBackends replaces the volume backends, effective for the next volume create, and turns on
// scheduler hints as Options.Backends does. Volumes already placed keep their host, also on a
// backend that is gone (as in Cinder, where removing a backend does not move its volumes); a
// clone or restored snapshot of such a volume can no longer be placed. Backups are not on a
// backend and survive it.
func (s *Server) SetBackends(backends ...Backend) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.backends = withBackendDefaults(backends, firstAvailable(s.volume))
	if s.backends == nil {
		s.backends = []Backend{}
	}
}

// Backends returns the volume backends of every volume zone, the implicit ones included, in
// configuration (or zone) order.
func (s *Server) Backends() []Backend {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.backendsLocked()
}

// backendsLocked returns the configured backends, or one implicit backend per volume zone.
func (s *Server) backendsLocked() []Backend {
	if s.backends != nil {
		return slices.Clone(s.backends)
	}
	out := make([]Backend, 0, len(s.volume))
	for _, z := range s.volume {
		out = append(out, Backend{Host: "cinder@lvm-" + z.Name, Pool: defaultPool, Zone: z.Name})
	}
	return out
}

// schedulerHints are the affinity hints of a volume create request (OS-SCH-HNT:scheduler_hints).
type schedulerHints struct {
	sameHost, differentHost []string
	// invalid is set when a hint is neither a UUID nor a list of UUIDs: Cinder's affinity
	// filters then reject every backend rather than guess.
	invalid bool
}

// parseSchedulerHints reads same_host and different_host, each a UUID or a list of UUIDs, as
// Cinder's SameBackendFilter and DifferentBackendFilter do. Other hints are ignored.
func parseSchedulerHints(raw map[string]any) schedulerHints {
	var h schedulerHints
	read := func(key string) []string {
		v, ok := raw[key]
		if !ok || v == nil {
			return nil
		}
		var ids []string
		switch t := v.(type) {
		case string:
			ids = []string{t}
		case []any:
			for _, e := range t {
				id, ok := e.(string)
				if !ok {
					h.invalid = true
					return nil
				}
				ids = append(ids, id)
			}
		default:
			h.invalid = true
			return nil
		}
		for _, id := range ids {
			if !uuidLike(id) {
				h.invalid = true
			}
		}
		return ids
	}
	h.sameHost = read("same_host")
	h.differentHost = read("different_host")
	return h
}

// uuidLike is oslo's is_uuid_like: 32 hex digits, with or without the dashes, any case.
func uuidLike(s string) bool {
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	return err == nil && len(b) == 16
}

// placeLocked is Cinder's scheduler for a new volume in zone: the backends of that zone, only
// pinned's backend when the volume is made from a snapshot or a clone (snapshot_same_host), then
// the affinity filters when hints are on. Among those left it picks the backend with the fewest
// volumes, the first configured on a tie, so that placement spreads and is deterministic. It
// returns false when no backend is left, which Cinder reports as NoValidBackend. The caller
// holds the cloud's lock.
func (s *Server) placeLocked(zone, pinned string, hints schedulerHints) (Backend, bool) {
	s.mu.Lock()
	backends := s.backendsLocked()
	honourHints := s.backends != nil
	s.mu.Unlock()

	c := s.cloud
	hostOf := func(id string) (string, bool) {
		v, ok := c.volumes[id]
		if !ok || v.backend == "" {
			return "", false
		}
		return backendHost(v.backend), true
	}
	passes := func(b Backend) bool {
		if b.Zone != zone || (pinned != "" && b.Host != pinned) {
			return false
		}
		if !honourHints {
			return true
		}
		if hints.invalid {
			return false
		}
		// SameBackendFilter: at least one of the named volumes lives here.
		if len(hints.sameHost) > 0 && !slices.ContainsFunc(hints.sameHost, func(id string) bool {
			host, ok := hostOf(id)
			return ok && host == b.Host
		}) {
			return false
		}
		// DifferentBackendFilter: none of them does. Unknown volumes live nowhere.
		return !slices.ContainsFunc(hints.differentHost, func(id string) bool {
			host, ok := hostOf(id)
			return ok && host == b.Host
		})
	}

	load := map[string]int{}
	for _, v := range c.volumes {
		load[backendHost(v.backend)]++
	}
	best, found := Backend{}, false
	for _, b := range backends {
		if passes(b) && (!found || load[b.Host] < load[best.Host]) {
			best, found = b, true
		}
	}
	return best, found
}

// backendHost returns host@backend of a volume's location.
func backendHost(location string) string {
	host, _, _ := strings.Cut(location, "#")
	return host
}

// errNoBackupDisks is the fail reason of a backup or restore when Options.Disks cannot keep
// backups (it does not implement BackupDisks).
var errNoBackupDisks = fmt.Errorf("the fake's Disks do not implement BackupDisks")
