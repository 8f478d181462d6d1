// Package fakeopenstack is an in-process HTTPS stand-in for the three OpenStack APIs the operator
// talks to: Keystone v3 (tokens), Nova and Cinder (availability zones). It answers exactly what
// gophercloud v2 needs (shared/reference/openstack.md section 4) and nothing more, serves it over
// TLS with its own CA so that the CA plumbing is exercised, and lets tests inject faults per
// endpoint, expire tokens, and stop and restart the whole server. Every request is recorded so that
// tests can assert on traffic (for example that an expired token caused exactly one new token
// request).
//
// The package has no build tag: the topology unit tests and the project's local run both use it.
package fakeopenstack

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// Endpoint names one of the fake's three APIs; faults and request counts are per endpoint.
type Endpoint string

const (
	// EndpointIdentity is Keystone: version discovery and POST .../v3/auth/tokens.
	EndpointIdentity Endpoint = "identity"
	// EndpointCompute is Nova, served under /compute/v2.1.
	EndpointCompute Endpoint = "compute"
	// EndpointVolume is Cinder v3, served under /volume/v3/<project>.
	EndpointVolume Endpoint = "volume"
	// EndpointUnknown is any path the fake does not serve; it always answers 404.
	EndpointUnknown Endpoint = "unknown"
)

// Zone is one availability zone as Nova or Cinder report it.
type Zone struct {
	// Name is the zone name (zoneName).
	Name string
	// Available is zoneState.available; Nova reports false when every service in the zone is down.
	Available bool
}

// User is a Keystone user that may authenticate with a password.
type User struct {
	// Name is the user name; requests by name must also name the user's domain.
	Name string
	// ID is the user ID; requests by ID need no domain.
	ID string
	// DomainName is the user's domain name (default "Default").
	DomainName string
	// DomainID is the user's domain ID (default "default").
	DomainID string
	// Password is the only password accepted for this user. It is never logged.
	Password string
}

// AppCredential is a Keystone application credential.
type AppCredential struct {
	// ID is the credential ID.
	ID string
	// Name is the credential name; requests by name must also identify the owning user.
	Name string
	// UserName is the name of the owning user, matched for requests by credential name.
	UserName string
	// Secret is the only secret accepted. It is never logged.
	Secret string
}

// Options configures a Server. The zero value is usable; see the field comments for defaults.
type Options struct {
	// Addr is the listen address (default "127.0.0.1:0", a free loopback port). The port chosen on
	// the first start is kept across Stop and Start.
	Addr string
	// ExtraHosts are additional DNS names or IPs for the serving certificate, beyond 127.0.0.1, ::1
	// and localhost.
	ExtraHosts []string
	// Users may authenticate with a password. Default: one user DefaultUserName/DefaultPassword in
	// domain Default.
	Users []User
	// AppCredentials may authenticate as application credentials. Default: none.
	AppCredentials []AppCredential
	// ComputeZones are what Nova reports. Default (nil): "nova", available; an empty non-nil
	// slice reports no zone at all.
	ComputeZones []Zone
	// VolumeZones are what Cinder reports. Default (nil): "nova", available; an empty non-nil
	// slice reports no zone at all.
	VolumeZones []Zone
	// Region is the catalog region (default "RegionOne").
	Region string
	// ProjectID is the project every token is scoped to and the last segment of the volume URL
	// (default DefaultProjectID).
	ProjectID string
	// ProjectName is the project's name (default "demo").
	ProjectName string
	// TokenTTL is the lifetime written into expires_at (default one hour). Gophercloud never looks
	// at it; only a 401 makes it re-authenticate, which is what ExpireTokens simulates.
	TokenTTL time.Duration
	// HangFor bounds FaultHang: after it elapses the request is served normally. Zero means hang
	// until the client gives up or the server stops.
	HangFor time.Duration
	// Logger receives one line per request at V(1) and lifecycle messages at V(0). Adapt a
	// testing.T with github.com/go-logr/logr/testr. The zero value discards.
	Logger logr.Logger
}

// Defaults used when Options leaves a field empty.
const (
	// DefaultUserName is the name of the default user, in domain "Default".
	DefaultUserName = "demo"
	// DefaultPassword is the default user's password. Tests use it to assert that no error text
	// or condition message ever contains it.
	DefaultPassword = "fake-openstack-password"
	// DefaultProjectID is the default project ID, in the shape of a Keystone ID (32 hex digits).
	DefaultProjectID = "0123456789abcdef0123456789abcdef"
	// DefaultProjectName is the default project's name.
	DefaultProjectName = "demo"
	// DefaultRegion is the default catalog region, the name DevStack uses.
	DefaultRegion = "RegionOne"
	// DefaultZone is the default availability zone of both services, the name Nova and Cinder use
	// when none is configured.
	DefaultZone = "nova"
)

// Server is a running fake OpenStack. All methods are safe for concurrent use.
type Server struct {
	log  logr.Logger
	auth *authority
	opts Options

	// mu guards the mutable API state below.
	mu       sync.Mutex
	tokens   map[string]tokenInfo
	compute  []Zone
	volume   []Zone
	faults   map[Endpoint]faultState
	hangFor  time.Duration
	requests []Request

	// lifeMu serialises Start, Stop and Close; gen is the running generation or nil. Stop holds
	// it while waiting for handlers, so handlers must never take it: they read addr instead.
	lifeMu sync.Mutex
	gen    *generation
	closed bool
	// addr is host:port; the port chosen on the first start is kept for every restart.
	addr atomic.Pointer[string]
}

// generation is one listen-and-serve cycle. Stop ends it; Start begins a new one on the same
// address. Handlers of a generation are tracked so Stop can wait for them (net/http's
// Server.Close does not), which keeps a testing.T logger from being called after the test ended.
type generation struct {
	srv      *http.Server
	stopping chan struct{}
	served   chan struct{}

	mu       sync.Mutex
	closed   bool
	handlers sync.WaitGroup
}

// New creates the server and starts it. Call Close when done (t.Cleanup(s.Close) in tests).
func New(opts Options) (*Server, error) {
	opts = withDefaults(opts)
	auth, err := newAuthority(opts.ExtraHosts)
	if err != nil {
		return nil, fmt.Errorf("creating fake OpenStack CA: %w", err)
	}
	s := &Server{
		log:     opts.Logger,
		auth:    auth,
		opts:    opts,
		tokens:  map[string]tokenInfo{},
		compute: append([]Zone(nil), opts.ComputeZones...),
		volume:  append([]Zone(nil), opts.VolumeZones...),
		faults:  map[Endpoint]faultState{},
		hangFor: opts.HangFor,
	}
	s.addr.Store(&opts.Addr)
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

func withDefaults(o Options) Options {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if len(o.Users) == 0 {
		o.Users = []User{{Name: DefaultUserName, ID: "u-" + DefaultUserName, Password: DefaultPassword}}
	}
	o.Users = append([]User(nil), o.Users...)
	for i := range o.Users {
		if o.Users[i].DomainName == "" {
			o.Users[i].DomainName = "Default"
		}
		if o.Users[i].DomainID == "" {
			o.Users[i].DomainID = "default"
		}
		if o.Users[i].ID == "" {
			o.Users[i].ID = "u-" + o.Users[i].Name
		}
	}
	o.AppCredentials = append([]AppCredential(nil), o.AppCredentials...)
	if o.ComputeZones == nil {
		o.ComputeZones = []Zone{{Name: DefaultZone, Available: true}}
	}
	if o.VolumeZones == nil {
		o.VolumeZones = []Zone{{Name: DefaultZone, Available: true}}
	}
	if o.Region == "" {
		o.Region = DefaultRegion
	}
	if o.ProjectID == "" {
		o.ProjectID = DefaultProjectID
	}
	if o.ProjectName == "" {
		o.ProjectName = DefaultProjectName
	}
	if o.TokenTTL <= 0 {
		o.TokenTTL = time.Hour
	}
	return o
}

// Start listens again after Stop, on the same address, so clients configured with the old URLs
// reach it ("OpenStack down, then back"). Tokens issued before the stop stay valid, as they do on a
// real Keystone restart. Start on a running server is a no-op.
func (s *Server) Start() error {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.closed {
		return errors.New("fake OpenStack server is closed")
	}
	if s.gen != nil {
		return nil
	}
	addr := *s.addr.Load()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	// Keep the concrete port, so a restart binds the same one even if Options.Addr said :0.
	bound := ln.Addr().String()
	s.addr.Store(&bound)

	g := &generation{stopping: make(chan struct{}), served: make(chan struct{})}
	g.srv = &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(g, w, r) }),
		ReadHeaderTimeout: 10 * time.Second,
		// Handshake failures from the wrong-CA tests would otherwise go to the standard logger.
		ErrorLog: log.New(logrWriter{s.log.V(1)}, "", 0),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{s.auth.serving},
			MinVersion:   tls.VersionTLS12,
			// HTTP/1.1 only: FaultRefuse needs http.Hijacker, which HTTP/2 does not offer.
			NextProtos: []string{"http/1.1"},
		},
	}
	s.gen = g
	go func() {
		defer close(g.served)
		err := g.srv.Serve(tls.NewListener(ln, g.srv.TLSConfig))
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error(err, "Fake OpenStack stopped serving")
		}
	}()
	s.log.Info("Fake OpenStack listening", "url", s.baseURL())
	return nil
}

// Stop closes the listener and every open connection, so new connections are refused (ECONNREFUSED)
// until Start. It unblocks hanging requests and waits for all handlers to return.
func (s *Server) Stop() {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	g := s.gen
	if g == nil {
		return
	}
	s.gen = nil
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	// Close, not Shutdown: a stopped OpenStack must drop in-flight requests, not drain them.
	// Connections go first, then hanging handlers are released.
	_ = g.srv.Close()
	close(g.stopping)
	<-g.served
	g.handlers.Wait()
	s.log.Info("Fake OpenStack stopped", "url", s.baseURL())
}

// Close stops the server for good. It is safe to call more than once.
func (s *Server) Close() {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	s.stopLocked()
	s.closed = true
}

// Running reports whether the server is currently listening.
func (s *Server) Running() bool {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	return s.gen != nil
}

// CACertPEM returns the PEM of the CA that signed the serving certificate.
func (s *Server) CACertPEM() []byte {
	return append([]byte(nil), s.auth.caPEM...)
}

// URL returns the server's base URL, for example https://127.0.0.1:40123. It stays the same
// across Stop and Start.
func (s *Server) URL() string {
	return s.baseURL()
}

func (s *Server) baseURL() string {
	return "https://" + *s.addr.Load()
}

// AuthURL returns the versioned Keystone URL (…/identity/v3), which gophercloud uses without a
// discovery request.
func (s *Server) AuthURL() string {
	return s.URL() + "/identity/v3"
}

// VersionlessAuthURL returns the versionless Keystone URL (…/identity), as OpenShift's
// installer-made clouds.yaml often has; gophercloud first GETs …/identity/ and follows the
// versions document.
func (s *Server) VersionlessAuthURL() string {
	return s.URL() + "/identity"
}

// ProjectID returns the project every token is scoped to.
func (s *Server) ProjectID() string {
	return s.opts.ProjectID
}

// Region returns the catalog region.
func (s *Server) Region() string {
	return s.opts.Region
}

// SetComputeZones replaces the zones Nova reports, effective for the next request.
func (s *Server) SetComputeZones(zones ...Zone) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compute = append([]Zone(nil), zones...)
}

// SetVolumeZones replaces the zones Cinder reports, effective for the next request.
func (s *Server) SetVolumeZones(zones ...Zone) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.volume = append([]Zone(nil), zones...)
}

// ExpireTokens forgets every issued token, so the next compute or volume request answers 401 and
// gophercloud (with AllowReauth) requests a new token once and retries.
func (s *Server) ExpireTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = map[string]tokenInfo{}
}

// endpointOf maps a path to the API that serves it. "/" counts as identity because a versionless
// auth_url of just scheme://host:port makes gophercloud discover versions there.
func endpointOf(path string) Endpoint {
	switch {
	case path == "/" || path == "/identity" || strings.HasPrefix(path, "/identity/"):
		return EndpointIdentity
	case strings.HasPrefix(path, "/compute/"):
		return EndpointCompute
	case strings.HasPrefix(path, "/volume/"):
		return EndpointVolume
	default:
		return EndpointUnknown
	}
}

// serve is the single entry point: record, apply a fault, or route to the API handler.
func (s *Server) serve(g *generation, w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		refuse(w)
		return
	}
	g.handlers.Add(1)
	g.mu.Unlock()
	defer g.handlers.Done()

	ep := endpointOf(r.URL.Path)
	fault, hangFor := s.takeFault(ep)
	idx := s.record(Request{Time: time.Now(), Method: r.Method, Path: r.URL.Path, Endpoint: ep, Fault: fault})
	sw := &statusWriter{ResponseWriter: w}
	var authMethod string
	defer func() {
		s.finish(idx, sw.status, authMethod)
		s.log.V(1).Info("Fake OpenStack request", "method", r.Method, "path", r.URL.Path,
			"endpoint", ep, "status", sw.status, "fault", fault, "authMethod", authMethod)
	}()

	switch fault {
	case FaultRefuse:
		refuse(w)
		return
	case FaultHang:
		if !hang(g, r, hangFor) {
			// Returning without writing would make net/http send an empty 200; a stopped server
			// or an abandoned request must get no answer at all.
			refuse(w)
			return
		}
	case FaultServerError:
		writeJSON(sw, http.StatusInternalServerError, map[string]any{
			"error": map[string]any{"code": 500, "title": "Internal Server Error", "message": "injected fault"},
		})
		return
	case FaultUnauthorized:
		writeUnauthorized(sw)
		return
	}

	switch ep {
	case EndpointIdentity:
		authMethod = s.serveIdentity(sw, r)
	case EndpointCompute, EndpointVolume:
		s.serveZones(sw, r, ep)
	default:
		writeNotFound(sw)
	}
}

// statusWriter remembers the status code for the request log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// logrWriter adapts logr to the *log.Logger that http.Server.ErrorLog needs.
type logrWriter struct {
	log logr.Logger
}

func (w logrWriter) Write(p []byte) (int, error) {
	w.log.Info("Fake OpenStack HTTP server", "message", strings.TrimSpace(string(p)))
	return len(p), nil
}
