package fakeopenstack

import (
	"net"
	"net/http"
	"strings"
	"time"
)

// metadataVersions are the OpenStack metadata versions the service lists, oldest first, as Nova
// does; "latest" is what the driver reads.
var metadataVersions = []string{
	"2012-08-10", "2013-04-04", "2013-10-17", "2015-10-15", "2016-06-30", "2016-10-06",
	"2017-02-22", "2018-08-27", "2020-10-14", "latest",
}

// MetadataHandler returns the Nova metadata service as one server sees it, for a listener on
// 169.254.169.254:80 inside that server's network namespace: the driver's node service reads
// http://169.254.169.254/openstack/latest/meta_data.json and takes uuid as its node ID and
// availability_zone as its topology. The server is looked up per request, so the handler may be
// created before AddServer; an unknown or removed server answers 404. Requests are recorded as
// EndpointMetadata, which takes faults like the other endpoints; Stop does not affect it (the
// metadata service is not the API), Close ends hanging requests.
func (s *Server) MetadataHandler(serverID string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fault, hangFor := s.takeFault(EndpointMetadata)
		idx := s.record(newRequest(r, EndpointMetadata, fault))
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			s.finish(idx, sw.status, "")
			s.log.V(1).Info("Fake OpenStack request", "method", r.Method, "path", r.URL.Path,
				"host", r.Host, "endpoint", EndpointMetadata, "server", serverID, "status", sw.status, "fault", fault)
		}()
		if !applyFault(sw, r, fault, hangFor, s.closing) {
			return
		}
		s.serveMetadata(sw, r, serverID)
	})
}

// ServeMetadata serves MetadataHandler(serverID) over plain HTTP on l until Close, then returns
// nil; the caller creates l, typically 169.254.169.254:80 inside the server's network namespace.
func (s *Server) ServeMetadata(l net.Listener, serverID string) error {
	srv := &http.Server{Handler: s.MetadataHandler(serverID), ReadHeaderTimeout: 10 * time.Second}
	return s.serveExtra(srv, l)
}

func (s *Server) serveMetadata(w http.ResponseWriter, r *http.Request, serverID string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeFault(w, http.StatusMethodNotAllowed, "Only GET is served.")
		return
	}
	info, ok := s.cloud.server(serverID)
	if !ok {
		http.NotFound(w, r)
		return
	}
	path := strings.Trim(r.URL.Path, "/")
	if path == "" {
		writeText(w, "openstack")
		return
	}
	if path == "openstack" {
		writeText(w, strings.Join(metadataVersions, "\n"))
		return
	}
	version, file, _ := strings.Cut(strings.TrimPrefix(path, "openstack/"), "/")
	if !strings.HasPrefix(path, "openstack/") || !isMetadataVersion(version) {
		http.NotFound(w, r)
		return
	}
	switch file {
	case "":
		writeText(w, "meta_data.json\nnetwork_data.json\nvendor_data.json\nvendor_data2.json")
	case "meta_data.json":
		writeJSON(w, http.StatusOK, map[string]any{
			"uuid":              info.ID,
			"name":              info.Name,
			"hostname":          info.Hostname,
			"availability_zone": info.Zone,
			"project_id":        s.opts.ProjectID,
			"launch_index":      0,
			"public_keys":       map[string]any{},
			"keys":              []any{},
			"meta":              map[string]any{},
			// Nova lists only tagged devices here; the driver finds volumes by
			// /dev/disk/by-id instead and reads devices only as a fallback.
			"devices":        []any{},
			"dedicated_cpus": []any{},
			"random_seed":    "",
			"instance_type":  "m1.small",
		})
	case "network_data.json":
		writeJSON(w, http.StatusOK, map[string]any{"links": []any{}, "networks": []any{}, "services": []any{}})
	case "vendor_data.json", "vendor_data2.json":
		writeJSON(w, http.StatusOK, map[string]any{})
	default:
		http.NotFound(w, r)
	}
}

func isMetadataVersion(v string) bool {
	for _, known := range metadataVersions {
		if v == known {
			return true
		}
	}
	return false
}

func writeText(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(body))
}
