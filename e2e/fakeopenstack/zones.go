package fakeopenstack

import (
	"net/http"
	"strings"
)

// serveZones answers GET os-availability-zone on Nova and Cinder. Like the real services it checks
// the token before the path, so an expired token gives 401 on any URL.
func (s *Server) serveZones(w *statusWriter, r *http.Request, ep Endpoint) {
	if !s.validToken(r.Header.Get("X-Auth-Token")) {
		writeUnauthorized(w)
		return
	}
	if r.Method != http.MethodGet {
		writeJSON(w, http.StatusMethodNotAllowed,
			keystoneError(http.StatusMethodNotAllowed, "Method Not Allowed", "Only GET is served."))
		return
	}

	path := strings.TrimSuffix(r.URL.Path, "/")
	var (
		zones []Zone
		ok    bool
	)
	s.mu.Lock()
	switch ep {
	case EndpointCompute:
		// The /detail variant is admin-only on a real Nova; the fake serves both the same way.
		ok = path == "/compute/v2.1/os-availability-zone" || path == "/compute/v2.1/os-availability-zone/detail"
		zones = append(zones, s.compute...)
	case EndpointVolume:
		ok = path == "/volume/v3/"+s.opts.ProjectID+"/os-availability-zone"
		zones = append(zones, s.volume...)
	}
	s.mu.Unlock()
	if !ok {
		writeNotFound(w)
		return
	}

	info := make([]any, 0, len(zones))
	for _, z := range zones {
		entry := map[string]any{"zoneName": z.Name, "zoneState": map[string]any{"available": z.Available}}
		if ep == EndpointCompute {
			// A non-admin Nova reports "hosts": null; Cinder has no hosts field at all.
			entry["hosts"] = nil
		}
		info = append(info, entry)
	}
	writeJSON(w, http.StatusOK, map[string]any{"availabilityZoneInfo": info})
}
