// Package fakeopenstack is an in-process HTTPS stand-in for the OpenStack APIs that the operator
// and the real cinder-csi-plugin talk to: Keystone v3 (tokens), Nova (availability zones, servers,
// volume attachments), Cinder v3 (availability zones, volumes, snapshots, backups, services and
// the scheduler's placement on backends) and the Nova metadata service. It answers what
// gophercloud v2 and the driver need (shared/reference/openstack.md section 4; the driver's
// pkg/csi/cinder/openstack), serves it over TLS with its own CA so that the CA plumbing is
// exercised, and lets tests inject faults per endpoint, expire tokens, and stop and restart the
// whole server. Every request is recorded so that tests can assert on traffic (for example that
// an expired token caused exactly one new token request).
//
// Volumes are backed by a Disks implementation: in memory by default, or LoopDisks, which gives an
// attached volume a real loop block device with the /dev/disk/by-id link the driver looks for.
// Disks that also implement BackupDisks (both of those do) keep backups as copies of their own.
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
	// EndpointMetadata is the Nova metadata service (MetadataHandler), served over plain HTTP on
	// the listeners the caller creates.
	EndpointMetadata Endpoint = "metadata"
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
	// and localhost. AddHosts adds more after start.
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
	// Disks backs the Cinder volumes (default: in memory, no device). The caller owns it: Close
	// of the Server does not close it.
	Disks Disks
	// VolumeTypes, when non-nil, are the only volume type names Cinder accepts (others: 404, as
	// Cinder answers for an unknown type). Nil accepts any name.
	VolumeTypes []string
	// QuotaGigabytes is the project's Cinder gigabytes quota, counting volumes and snapshots as
	// Cinder does; exceeding it answers 413, which the driver maps to ResourceExhausted. Zero
	// means unlimited.
	QuotaGigabytes int
	// QuotaBackupGigabytes is the project's backup_gigabytes quota, which Cinder counts apart
	// from gigabytes; a backup that would exceed it answers 413. Zero means unlimited.
	QuotaBackupGigabytes int
	// Backends are the Cinder volume backends (cinder-volume services) and the volume zones they
	// serve. Nil keeps the fake's old shape: one implicit backend per volume zone, named
	// "cinder@lvm-<zone>", and scheduler hints accepted but ignored, like a Cinder without the
	// affinity filters. Non-nil (SetBackends too) turns on the SameBackendFilter and
	// DifferentBackendFilter semantics for OS-SCH-HNT:scheduler_hints: a volume no backend of
	// its zone satisfies is accepted and then in status "error", and so is every volume of a
	// zone that has no backend. Without hints a new volume goes to the backend of its zone with
	// the fewest volumes, the first configured on a tie; clones and volumes from snapshots stay
	// on their source's backend, as with Cinder's default snapshot_same_host.
	Backends []Backend
	// BackupServices are the cinder-backup services. Nil: one, up and enabled, in the default
	// volume zone (followed when the zones change); an empty non-nil slice: none, so every
	// backup fails as in a Cinder without a backup service.
	BackupServices []BackupService
	// ForbidServiceList makes GET /os-services answer 403 with Cinder's policy error, as a real
	// Cinder does for a non-admin (its default policy is admin-only). The zero value lets the
	// fake's user list services, as an admin could.
	ForbidServiceList bool
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
	// backends and backupServices follow Options.Backends and Options.BackupServices; nil
	// means the defaults described there.
	backends          []Backend
	backupServices    []BackupService
	forbidServiceList bool

	// cloud is the Nova and Cinder state (servers, volumes, snapshots); it has its own lock so
	// that slow disk work never blocks token checks.
	cloud *cloud

	// lifeMu serialises Start, Stop and Close; gen is the running generation or nil. Stop holds
	// it while waiting for handlers, so handlers must never take it: they read addr and cur
	// instead.
	lifeMu sync.Mutex
	gen    *generation
	closed bool
	// cur mirrors gen for the handlers of listeners added with Serve.
	cur atomic.Pointer[generation]
	// closing is closed by Close; it releases hanging metadata requests and Serve loops.
	closing chan struct{}
	// extra are the http.Servers of Serve and ServeMetadata, shut down by Close.
	extraMu sync.Mutex
	extra   map[*http.Server]struct{}
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

		backends:          opts.Backends,
		backupServices:    opts.BackupServices,
		forbidServiceList: opts.ForbidServiceList,
		hangFor:           opts.HangFor,
		closing:           make(chan struct{}),
		extra:             map[*http.Server]struct{}{},
	}
	s.cloud = newCloud(s, opts.Disks)
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
	if o.Disks == nil {
		o.Disks = NewMemoryDisks()
	}
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
	if o.Backends != nil {
		o.Backends = withBackendDefaults(o.Backends, firstAvailable(o.VolumeZones))
	}
	if o.BackupServices != nil {
		o.BackupServices = withBackupServiceDefaults(o.BackupServices, firstAvailable(o.VolumeZones))
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
	g.srv = s.newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(g, w, r) }))
	s.gen = g
	s.cur.Store(g)
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
	s.cur.Store(nil)
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

// Close stops the server for good, including every listener given to Serve and ServeMetadata
// (their calls return nil). It is safe to call more than once. It does not close Options.Disks.
func (s *Server) Close() {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	s.stopLocked()
	if s.closed {
		return
	}
	s.closed = true
	close(s.closing)
	s.extraMu.Lock()
	servers := make([]*http.Server, 0, len(s.extra))
	for srv := range s.extra {
		servers = append(servers, srv)
	}
	s.extraMu.Unlock()
	for _, srv := range servers {
		_ = srv.Close()
	}
}

// newHTTPServer returns an HTTPS server for h with the fake's certificate.
func (s *Server) newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		// Handshake failures from the wrong-CA tests would otherwise go to the standard logger.
		ErrorLog: log.New(logrWriter{s.log.V(1)}, "", 0),
		TLSConfig: &tls.Config{
			// A callback, not a fixed certificate, so that AddHosts takes effect on running
			// listeners.
			GetCertificate: s.auth.certificate,
			MinVersion:     tls.VersionTLS12,
			// HTTP/1.1 only: FaultRefuse needs http.Hijacker, which HTTP/2 does not offer.
			NextProtos: []string{"http/1.1"},
		},
	}
}

// Serve serves the whole API (Keystone, Nova, Cinder) over TLS on l, in addition to the main
// listener, until Close; then it returns nil. The caller creates l, for example inside a network
// namespace, and the catalog a client gets through l names l's address (the request's Host), so
// it stays in that namespace. Add the listener's IP to the certificate first (Options.ExtraHosts
// or AddHosts). Faults, tokens and the request log are shared with the main listener. While the
// server is stopped (Stop), connections to l are accepted and reset at once, since l cannot be
// closed and re-created here; clients see "connection reset" instead of "connection refused".
func (s *Server) Serve(l net.Listener) error {
	srv := s.newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g := s.cur.Load()
		if g == nil {
			refuse(w)
			return
		}
		s.serve(g, w, r)
	}))
	return s.serveExtra(srv, tls.NewListener(stoppableListener{Listener: l, s: s}, srv.TLSConfig))
}

// serveExtra runs srv on l until Close.
func (s *Server) serveExtra(srv *http.Server, l net.Listener) error {
	s.lifeMu.Lock()
	if s.closed {
		s.lifeMu.Unlock()
		_ = l.Close()
		return errors.New("fake OpenStack server is closed")
	}
	s.extraMu.Lock()
	s.extra[srv] = struct{}{}
	s.extraMu.Unlock()
	s.lifeMu.Unlock()
	defer func() {
		s.extraMu.Lock()
		delete(s.extra, srv)
		s.extraMu.Unlock()
	}()
	s.log.Info("Fake OpenStack serving an extra listener", "address", l.Addr().String())
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// stoppableListener resets connections while the server is stopped, so an extra listener looks
// down like the main one does.
type stoppableListener struct {
	net.Listener
	s *Server
}

func (l stoppableListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.s.cur.Load() != nil {
			return c, nil
		}
		if tcp, ok := c.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
		_ = c.Close()
	}
}

// AddHosts adds DNS names or IPs to the serving certificate, for listeners created after start
// (Serve). New TLS handshakes on every listener get the re-issued certificate; the CA stays the
// same, so clients need no new CA bundle.
func (s *Server) AddHosts(hosts ...string) error {
	return s.auth.addHosts(hosts...)
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
	case path == "/compute" || strings.HasPrefix(path, "/compute/"):
		return EndpointCompute
	case path == "/volume" || strings.HasPrefix(path, "/volume/"):
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
	idx := s.record(newRequest(r, ep, fault))
	sw := &statusWriter{ResponseWriter: w}
	var authMethod string
	defer func() {
		s.finish(idx, sw.status, authMethod)
		s.log.V(1).Info("Fake OpenStack request", "method", r.Method, "path", r.URL.Path,
			"query", r.URL.RawQuery, "host", r.Host, "endpoint", ep, "status", sw.status,
			"fault", fault, "authMethod", authMethod)
	}()

	if !applyFault(sw, r, fault, hangFor, g.stopping) {
		return
	}

	switch ep {
	case EndpointIdentity:
		authMethod = s.serveIdentity(sw, r)
	case EndpointCompute:
		s.serveCompute(sw, r)
	case EndpointVolume:
		s.serveVolume(sw, r)
	default:
		writeNotFound(sw)
	}
}

// applyFault injects fault into the request and reports whether the request should still be
// served normally (no fault, or a hang that ran its course).
func applyFault(w *statusWriter, r *http.Request, fault Fault, hangFor time.Duration, stopping <-chan struct{}) bool {
	switch fault {
	case FaultRefuse:
		refuse(w)
		return false
	case FaultHang:
		if !hang(stopping, r, hangFor) {
			// Returning without writing would make net/http send an empty 200; a stopped server
			// or an abandoned request must get no answer at all.
			refuse(w)
			return false
		}
	case FaultServerError:
		writeJSON(w, http.StatusInternalServerError, map[string]any{
			"error": map[string]any{"code": 500, "title": "Internal Server Error", "message": "injected fault"},
		})
		return false
	case FaultUnauthorized:
		writeUnauthorized(w)
		return false
	}
	return true
}

// requestBase returns scheme://host of the request as the client addressed it, so that links in
// answers (catalog, version documents, next-page links) point at the listener the client can
// reach, for example an address inside its network namespace. It falls back to the main URL.
func (s *Server) requestBase(r *http.Request) string {
	if r == nil || r.Host == "" {
		return s.URL()
	}
	scheme := "https"
	if r.TLS == nil {
		scheme = "http"
	}
	return scheme + "://" + r.Host
}

// statusWriter remembers the status code for the request log. Unwrap lets FaultRefuse reach the
// connection's http.Hijacker.
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

// Unwrap returns the underlying writer, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter {
	return w.ResponseWriter
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

// withLocked runs f under the cloud's lock with the item id of the collection that items picks
// (volumes, snapshots or servers); without one it answers OpenStack's 404 instead.
func withLocked[T any](s *Server, w http.ResponseWriter, kind, id string, items func(*cloud) map[string]T, f func(c *cloud, item T)) {
	c := s.cloud
	c.mu.Lock()
	defer c.mu.Unlock()
	item, ok := items(c)[id]
	if !ok {
		writeFault(w, http.StatusNotFound, notFound(kind, id))
		return
	}
	f(c, item)
}

// notFound is the message of Cinder's and Nova's 404 for an unknown volume, snapshot or
// instance (kind "Volume", "Snapshot" or "Instance").
func notFound(kind, id string) string { return fmt.Sprintf("%s %s could not be found.", kind, id) }

// volumesOf, snapshotsOf and serversOf pick a collection for withLocked.
func volumesOf(c *cloud) map[string]*volume     { return c.volumes }
func snapshotsOf(c *cloud) map[string]*snapshot { return c.snapshots }
func serversOf(c *cloud) map[string]*server     { return c.servers }

// admit checks a request to Nova or Cinder as the services do, the token first, then that the
// path is under prefix, then the microversion, and returns the microversion and the path's
// segments below prefix. It answers the fault and reports false when a check fails.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, prefix string, versions microversions) (apiVersion, []string, bool) {
	if !s.validToken(r.Header.Get("X-Auth-Token")) {
		writeUnauthorized(w)
		return apiVersion{}, nil, false
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	if path != prefix && !strings.HasPrefix(path, prefix+"/") {
		writeNotFound(w)
		return apiVersion{}, nil, false
	}
	mv, ok := versions.negotiate(w, r)
	if !ok {
		return apiVersion{}, nil, false
	}
	return mv, strings.Split(strings.TrimPrefix(strings.TrimPrefix(path, prefix), "/"), "/"), true
}
