package fakeopenstack

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// apiVersion is a Nova or Cinder microversion, major.minor.
type apiVersion struct {
	major, minor int
}

func (v apiVersion) String() string {
	return fmt.Sprintf("%d.%d", v.major, v.minor)
}

// atLeast reports whether v is major.minor or newer.
func (v apiVersion) atLeast(major, minor int) bool {
	return v.major > major || (v.major == major && v.minor >= minor)
}

func parseAPIVersion(s string) (apiVersion, error) {
	major, minor, ok := strings.Cut(strings.TrimSpace(s), ".")
	if !ok {
		return apiVersion{}, fmt.Errorf("invalid version string %q", s)
	}
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil || ma < 0 || mi < 0 {
		return apiVersion{}, fmt.Errorf("invalid version string %q", s)
	}
	return apiVersion{ma, mi}, nil
}

// microversions describes how one service negotiates microversions.
type microversions struct {
	// service is the name in "OpenStack-API-Version: <service> <version>".
	service string
	// legacyHeader is the older per-service header, which gophercloud also sends.
	legacyHeader string
	// min is what a request without a version gets; max is the newest served.
	min, max apiVersion
}

// Microversion ranges of the services as the fake serves them: Cinder 3.0-3.70 and Nova 2.1-2.96
// are what current releases offer; the driver asks for at most volume 3.51 and compute 2.60.
var (
	cinderVersions = microversions{service: "volume", legacyHeader: "X-OpenStack-Volume-API-Version",
		min: apiVersion{3, 0}, max: apiVersion{3, 70}}
	novaVersions = microversions{service: "compute", legacyHeader: "X-OpenStack-Nova-API-Version",
		min: apiVersion{2, 1}, max: apiVersion{2, 96}}
)

// negotiate reads the requested microversion from OpenStack-API-Version (or the legacy header),
// answers 400 for a malformed one and 406 for one out of range, as both services do, and
// otherwise sets the response headers and returns the version to serve.
func (m microversions) negotiate(w http.ResponseWriter, r *http.Request) (apiVersion, bool) {
	requested := ""
	for _, h := range r.Header.Values("OpenStack-API-Version") {
		for part := range strings.SplitSeq(h, ",") {
			svc, ver, ok := strings.Cut(strings.TrimSpace(part), " ")
			if ok && strings.EqualFold(svc, m.service) {
				requested = strings.TrimSpace(ver)
			}
		}
	}
	if requested == "" {
		requested = strings.TrimSpace(r.Header.Get(m.legacyHeader))
	}

	v := m.min
	switch {
	case requested == "":
	case strings.EqualFold(requested, "latest"):
		v = m.max
	default:
		var err error
		if v, err = parseAPIVersion(requested); err != nil {
			writeFault(w, http.StatusBadRequest, fmt.Sprintf("Invalid API version: %s", requested))
			return apiVersion{}, false
		}
		if !v.atLeast(m.min.major, m.min.minor) || !m.max.atLeast(v.major, v.minor) {
			writeFault(w, http.StatusNotAcceptable, fmt.Sprintf(
				"Version %s is not supported by the API. Minimum is %s and maximum is %s.", v, m.min, m.max))
			return apiVersion{}, false
		}
	}
	w.Header().Set("OpenStack-API-Version", m.service+" "+v.String())
	w.Header().Set(m.legacyHeader, v.String())
	w.Header().Add("Vary", "OpenStack-API-Version, "+m.legacyHeader)
	return v, true
}

// writeFault answers with an OpenStack fault body, {"<kind>": {"code": N, "message": "..."}},
// where the kind follows the status as in the services' WSGI layer.
func writeFault(w http.ResponseWriter, code int, message string) {
	kind := map[int]string{
		http.StatusBadRequest:            "badRequest",
		http.StatusForbidden:             "forbidden",
		http.StatusNotFound:              "itemNotFound",
		http.StatusMethodNotAllowed:      "badMethod",
		http.StatusConflict:              "conflict",
		http.StatusRequestEntityTooLarge: "overLimit",
	}[code]
	if kind == "" {
		kind = "computeFault"
	}
	writeJSON(w, code, map[string]any{kind: map[string]any{"code": code, "message": message}})
}
