// Package realcloud runs a real OpenStack for a test: Keystone, Placement, Nova (api, conductor,
// scheduler and one nova-compute with the fake virt driver per zone) and Cinder (api, scheduler,
// volume with one NFS backend per zone, backup with the POSIX driver), from Debian's python3-*
// library packages (e2e/hack/openstack-packages.sh), with RabbitMQ and SQLite, all on loopback
// and under the harness's process supervisor (package procs).
//
// The catalog names the public endpoints at Options.PublicIP, by default 127.0.0.1, where their
// TLS proxies listen. Another address is for clients in other network namespaces (a real node's
// pods), which cannot reach the host's loopback: RelayPublic opens listeners there that relay
// to the proxies, while the host's own clients (HTTPClient) dial the proxies directly. Nova's
// metadata API runs too, fronted as Neutron's metadata agent would front it: ServeMetadata
// answers a node's requests at 169.254.169.254 with Nova's answer for the node's server.
//
// The cloud is shaped like the ones OpenShift runs on: an admin used only to set it up, a
// project with a member-role user (what OpenShift's installer hands a cluster) and an application
// credential of that user, two availability zones on each side (Nova aggregates, Cinder
// backend_availability_zone), and public endpoints behind TLS signed by the caller's CA. The
// services reach each other on the catalog's plain-HTTP internal endpoints, as a cloud whose load
// balancer terminates TLS does.
//
// Everything a run makes is in one directory (configuration, databases, logs, the exports
// behind the NFS backends); Stop ends every process, unmounts the exports and removes it.
//
// Nova's fake virt driver attaches volumes in the books only; FollowAttachments plays the
// hypervisor's part for a real node's server: each raw volume file attached to it becomes a loop
// device at /dev/disk/by-id/virtio-<first 20 characters of the volume ID>, where the driver's
// node service looks, until it is detached. A volume the NFS driver keeps as qcow2 (after a
// snapshot) is reported and gets no device: no raw block device can expose it here.
package realcloud

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/machine"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// ErrUnsupported is wrapped by Start's error when this host cannot run the cloud at all (not
// Linux, not root, or the Debian packages missing), so that StartForTest can tell "cannot run
// here" from a failure of the cloud.
var ErrUnsupported = errors.New("real OpenStack cannot run on this host")

// Defaults used when Options leaves a field empty.
const (
	// DefaultRegion is the catalog's region, the name DevStack and most installers use.
	DefaultRegion = "RegionOne"
	// DefaultProject is the project the member user works in.
	DefaultProject = "openshift"
	// DefaultUser is the member-role user's name.
	DefaultUser = "openshift"
)

// DefaultZones are the availability zones of both services unless Options names others.
var DefaultZones = []string{"zone-a", "zone-b"}

// Options describe a cloud.
type Options struct {
	// CertPEM and KeyPEM are the serving certificate (optionally followed by its chain) and key
	// of every public endpoint, and CAPEM the CA that signed it, which the clients of the cloud
	// trust. All three are required: the caller owns the CA, so one world can trust the cloud
	// and its other TLS endpoints alike. The certificate must name 127.0.0.1 (the openrc file
	// authenticates there) and PublicIP, as IP addresses: every client, the host's too, verifies
	// the address in the catalog's URLs.
	CertPEM, KeyPEM, CAPEM []byte
	// PublicIP is the address the catalog's public endpoints and AuthURL name; 127.0.0.1 when
	// nil. The TLS proxies listen on 127.0.0.1 whatever it is, on the ports the catalog names:
	// another address is served where RelayPublic relays it, and the host's clients reach it
	// through HTTPClient's dial mapping.
	PublicIP net.IP
	// ComputeZones are the two Nova availability zones (one compute host each) and VolumeZones
	// the two Cinder ones (one backend each), in matching order; DefaultZones when empty, and
	// VolumeZones defaults to ComputeZones. Different names give a cloud whose compute and
	// volume zones differ.
	ComputeZones, VolumeZones []string
	// Region is the catalog's region; DefaultRegion when empty.
	Region string
	// PackagesDir holds the files openstack-packages.sh extracts (Cinder's and Nova's
	// api-paste.ini, Cinder's resource_filters.json); when empty,
	// <repo>/bin/openstack-<installed python3-nova version>.
	PackagesDir string
	// Logf, when set, receives progress: each phase of the start and its time.
	Logf func(format string, args ...any)
	// ByIDDir is where attachment followers (FollowAttachments) link the volumes' devices;
	// loopdev.DefaultByIDDir, where the driver's node service looks, when empty.
	ByIDDir string
}

// Cloud is a running cloud.
type Cloud struct {
	opts Options
	dir  string
	lock *os.File // held while the cloud runs (sweep)
	logf func(string, ...any)

	ports   ports
	secrets secrets
	proxies *proxies
	mounts  []string

	// mu guards procs (StartService replaces a stopped one in place), stopping, and what the
	// admin operations change: the member's password and the zones' names.
	mu       sync.Mutex
	procs    []*procs.Process
	stopping bool // Stop has begun: no process starts any more
	// svcMu serialises StopService and StartService.
	svcMu sync.Mutex

	authURL   string
	caFile    string
	transport *http.Transport // HTTPClient's: the CA, the dial mapping
	project   string          // the member's project ID
	memberID  string          // the member user's ID
	listerID  string          // ServiceListerRole's ID
	appCred   appCredential
	stopOnce  sync.Once
	stopErr   error

	// The attachment followers, by server; hvClosed refuses new ones once Stop began.
	hvMu      sync.Mutex
	followers map[string]*Follower
	hvClosed  bool

	// What RelayPublic and ServeMetadata serve, all of which ends at Stop.
	relays relays
}

// appCredential is the member user's application credential.
type appCredential struct{ id, secret string }

// Start starts a cloud and returns once every service is up, the zones exist and the member
// user and its application credential can authenticate. On failure everything started is
// stopped again.
func Start(ctx context.Context, opts Options) (*Cloud, error) {
	opts, err := withDefaults(opts)
	if err != nil {
		return nil, err
	}
	if err := checkHost(&opts); err != nil {
		return nil, err
	}
	if err := sweep(); err != nil {
		return nil, fmt.Errorf("removing what killed runs left: %w", err)
	}
	dir, err := os.MkdirTemp("", runDirPattern)
	if err != nil {
		return nil, fmt.Errorf("creating run directory: %w", err)
	}
	lock, err := lockRunDir(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	c := &Cloud{opts: opts, dir: dir, lock: lock, logf: opts.Logf}
	if c.logf == nil {
		c.logf = func(string, ...any) {}
	}
	if err := c.start(ctx); err != nil {
		// The run directory goes with the cleanup: what the services said goes to Logf first.
		c.logTails(15)
		if stopErr := c.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("cleaning up: %w", stopErr))
		}
		return nil, err
	}
	return c, nil
}

func withDefaults(o Options) (Options, error) {
	if len(o.CertPEM) == 0 || len(o.KeyPEM) == 0 || len(o.CAPEM) == 0 {
		return o, errors.New("realcloud: Options.CertPEM, KeyPEM and CAPEM are required")
	}
	if len(o.ComputeZones) == 0 {
		o.ComputeZones = DefaultZones
	}
	if len(o.VolumeZones) == 0 {
		o.VolumeZones = o.ComputeZones
	}
	if len(o.ComputeZones) != 2 || len(o.VolumeZones) != 2 {
		return o, fmt.Errorf("realcloud: two compute and two volume zones are needed, got %v and %v", o.ComputeZones, o.VolumeZones)
	}
	o.ComputeZones, o.VolumeZones = slices.Clone(o.ComputeZones), slices.Clone(o.VolumeZones)
	if o.Region == "" {
		o.Region = DefaultRegion
	}
	if o.PublicIP == nil {
		o.PublicIP = net.ParseIP(proxyHost)
	}
	if o.PublicIP.To16() == nil || o.PublicIP.IsUnspecified() {
		return o, fmt.Errorf("realcloud: Options.PublicIP %q is not an address a client can dial", o.PublicIP)
	}
	o.PublicIP = slices.Clone(o.PublicIP)
	return o, nil
}

// start runs the phases of Start; a failure leaves the cleanup to Start.
func (c *Cloud) start(ctx context.Context) error {
	begin := time.Now()
	var err error
	if c.ports, err = allocatePorts(); err != nil {
		return err
	}
	if c.secrets, err = newSecrets(); err != nil {
		return err
	}
	c.caFile = filepath.Join(c.dir, "ca.pem")
	if err := os.WriteFile(c.caFile, c.opts.CAPEM, 0o644); err != nil {
		return fmt.Errorf("writing CA: %w", err)
	}
	if err := c.writeShims(); err != nil {
		return err
	}
	// The configurations name the public endpoints, which the proxies' listeners decide.
	if c.proxies, err = c.startProxies(); err != nil {
		return err
	}
	if c.transport, err = c.newTransport(); err != nil {
		return err
	}
	if err := c.writeConfigs(); err != nil {
		return err
	}
	c.authURL = c.proxies.publicURL(svcKeystone) + "/v3"

	phase := func(name string, fn func(context.Context) error) error {
		start := time.Now()
		if err := fn(ctx); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		c.logf("Real OpenStack: %s done in %s", name, time.Since(start).Round(100*time.Millisecond))
		return nil
	}
	// The broker and the four services' schemas do not depend on each other; on two cores the Python
	// start-ups of the schema syncs overlap the Erlang VM's boot.
	if err := phase("RabbitMQ and database schemas", func(ctx context.Context) error {
		return parallel(ctx, c.startRabbit, c.syncKeystone, c.syncPlacement, c.syncNova, c.syncCinder)
	}); err != nil {
		return err
	}
	if err := phase("Keystone and Placement", func(ctx context.Context) error {
		return parallel(ctx, c.startKeystone, c.startPlacement)
	}); err != nil {
		return err
	}
	if err := phase("identity (services, endpoints, users, application credential)", c.setupIdentity); err != nil {
		return err
	}
	if err := phase("NFS exports", func(context.Context) error { return c.mountExports() }); err != nil {
		return err
	}
	if err := phase("Nova and Cinder services", c.startComputeAndVolume); err != nil {
		return err
	}
	if err := phase("zones and flavor", c.setupZones); err != nil {
		return err
	}
	c.logf("Real OpenStack up in %s: auth URL %s, run directory %s", time.Since(begin).Round(time.Second), c.authURL, c.dir)
	machine.Started("real OpenStack", time.Since(begin))
	return nil
}

// parallel runs fns concurrently and returns their errors joined.
func parallel(ctx context.Context, fns ...func(context.Context) error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = fn(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Stop stops the attachment followers (removing their devices), every process, then the TLS
// proxies, unmounts the exports and removes the run directory. It is safe to call more than
// once.
func (c *Cloud) Stop() error {
	c.stopOnce.Do(func() {
		// The hypervisor's devices first: they need no service, and a device is the node's
		// view of a volume that Cinder's files below it must outlive.
		followersErr := c.stopFollowers()
		c.mu.Lock()
		c.stopping = true
		ps := slices.Clone(c.procs)
		c.mu.Unlock()
		// Reverse start order: the services before RabbitMQ and epmd, which they talk to
		// while shutting down.
		var wg sync.WaitGroup
		for _, p := range slices.Backward(ps) {
			if p.Name() == rabbitName || p.Name() == epmdName {
				continue
			}
			wg.Go(func() { p.Stop(10 * time.Second) })
		}
		wg.Wait()
		for _, p := range slices.Backward(ps) {
			p.Stop(15 * time.Second)
		}
		errs := []error{followersErr}
		// The relays before the proxies they lead to, and before the proxies' log they write.
		c.relays.close()
		if c.proxies != nil {
			c.proxies.close()
		}
		if c.transport != nil {
			c.transport.CloseIdleConnections()
		}
		// What a follower lost track of (a device it could not remove) goes before the exports
		// it holds open.
		errs = append(errs, cleanHypervisor(c.dir, c.byIDDir()))
		errs = append(errs, c.unmountExports())
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, fmt.Errorf("removing run directory: %w", err))
		}
		_ = c.lock.Close()
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// Dir is the run directory: configuration, databases, exports and logs (<Dir>/logs).
func (c *Cloud) Dir() string { return c.dir }

// LogDir holds one log file per process.
func (c *Cloud) LogDir() string { return filepath.Join(c.dir, "logs") }

// AuthURL is Keystone's public v3 endpoint, behind TLS, at PublicIP.
func (c *Cloud) AuthURL() string { return c.authURL }

// PublicIP is the address the catalog's public endpoints and AuthURL name.
func (c *Cloud) PublicIP() net.IP { return slices.Clone(c.opts.PublicIP) }

// CAPEM is the CA that signed the public endpoints' certificate.
func (c *Cloud) CAPEM() []byte { return slices.Clone(c.opts.CAPEM) }

// CAFile is the CA written into the run directory, for clouds.yaml's cacert and OS_CACERT.
func (c *Cloud) CAFile() string { return c.caFile }

// Region is the catalog's region.
func (c *Cloud) Region() string { return c.opts.Region }

// ComputeZones are Nova's two zones, one compute host each, in the order of VolumeZones; after
// SetComputeZone, with the name it set.
func (c *Cloud) ComputeZones() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.opts.ComputeZones)
}

// VolumeZones are Cinder's two zones, one backend each, in the order of ComputeZones; after
// SetVolumeZones, with the names it set.
func (c *Cloud) VolumeZones() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.opts.VolumeZones)
}

// ProjectID is the member user's project.
func (c *Cloud) ProjectID() string { return c.project }

// Member is a clouds.yaml entry for the member-role user with a password, scoped to its
// project: what OpenShift's installer puts into a cluster. Its auth URL is at PublicIP; the
// host's clients reach it through HTTPClient (Client does). The password is the current one:
// SetMemberPassword changes it.
func (c *Cloud) Member() clouds.Cloud {
	c.mu.Lock()
	password := c.secrets.member
	c.mu.Unlock()
	return clouds.Cloud{
		AuthType: clouds.AuthV3Password,
		AuthInfo: &clouds.AuthInfo{
			AuthURL: c.authURL, Username: DefaultUser, Password: password,
			ProjectName: DefaultProject, UserDomainName: "Default", ProjectDomainName: "Default",
		},
		RegionName: c.opts.Region, Interface: "public", IdentityAPIVersion: "3", CACertFile: c.caFile,
	}
}

// AppCredential is a clouds.yaml entry for the member user's application credential, which
// carries its project and roles with it.
func (c *Cloud) AppCredential() clouds.Cloud { return c.appCredentialCloud(c.appCred) }

// appCredentialCloud is the clouds.yaml entry of one of the member's application credentials.
func (c *Cloud) appCredentialCloud(ac appCredential) clouds.Cloud {
	return clouds.Cloud{
		AuthType: clouds.AuthV3ApplicationCredential,
		AuthInfo: &clouds.AuthInfo{
			AuthURL: c.authURL, ApplicationCredentialID: ac.id, ApplicationCredentialSecret: ac.secret,
		},
		RegionName: c.opts.Region, Interface: "public", IdentityAPIVersion: "3", CACertFile: c.caFile,
	}
}

// WriteOpenRC writes a shell file that points the openstack client at the cloud as the member
// user, for people poking at a running cloud from the host. When PublicIP is not where the
// proxies listen, the catalog's public URLs are unreachable from the host (the openstack client
// has no dial mapping; only RelayPublic's listeners serve them, inside the nodes): the file then
// authenticates at Keystone's proxy on 127.0.0.1 and uses the internal endpoints, plain HTTP on
// 127.0.0.1.
func (c *Cloud) WriteOpenRC(path string) error {
	m := c.Member().AuthInfo
	authURL, iface, why := m.AuthURL, "public", ""
	if !c.opts.PublicIP.Equal(net.ParseIP(proxyHost)) {
		authURL = "https://" + net.JoinHostPort(proxyHost, strconv.Itoa(c.proxies.ports[svcKeystone])) + "/v3"
		iface = "internal"
		why = fmt.Sprintf("# The catalog's public endpoints name %s, which only the nodes' relays serve: from the host,\n"+
			"# Keystone's TLS proxy on %s and the internal endpoints (plain HTTP on %s) instead.\n",
			c.opts.PublicIP, proxyHost, proxyHost)
	}
	content := fmt.Sprintf(`# The member user of a realcloud test cloud: source this, then run openstack.
%sexport OS_AUTH_URL=%s
export OS_IDENTITY_API_VERSION=3
export OS_AUTH_TYPE=password
export OS_USERNAME=%s
export OS_PASSWORD=%s
export OS_PROJECT_NAME=%s
export OS_USER_DOMAIN_NAME=Default
export OS_PROJECT_DOMAIN_NAME=Default
export OS_REGION_NAME=%s
export OS_INTERFACE=%s
export OS_CACERT=%s
`, why, shellQuote(authURL), shellQuote(m.Username), shellQuote(m.Password), shellQuote(m.ProjectName),
		shellQuote(c.opts.Region), iface, shellQuote(c.caFile))
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return fmt.Errorf("writing openrc: %w", err)
	}
	return nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	out := "'"
	for _, r := range s {
		if r == '\'' {
			out += `'\''`
		} else {
			out += string(r)
		}
	}
	return out + "'"
}

// logTails passes the last n lines of every log of the cloud to Logf: the run directory goes
// with Stop, and a failure's reason is often in a service's log rather than in its API's answer.
func (c *Cloud) logTails(n int) {
	if _, err := os.Stat(c.dir); err != nil {
		return
	}
	logs := []string{filepath.Join(c.LogDir(), "tls-proxy.log")}
	for _, p := range c.processes() {
		logs = append(logs, p.LogPath())
	}
	for _, l := range logs {
		c.logf("Real OpenStack: last lines of %s:\n%s", l, procs.LogTail(l, n))
	}
}

// addProc records a started process for Stop.
func (c *Cloud) addProc(p *procs.Process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.procs = append(c.procs, p)
}

// processes returns the processes started so far.
func (c *Cloud) processes() []*procs.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.procs)
}
