package fakeopenstack

import (
	"net/http"
)

// writeZones answers GET os-availability-zone on Nova and Cinder; the caller has checked the token
// and the path.
func (s *Server) writeZones(w http.ResponseWriter, ep Endpoint) {
	zones := s.zones(ep)
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
