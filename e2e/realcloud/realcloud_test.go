//go:build realcloud

// The tag keeps this test out of the harness's unit and integration runs: it installs Debian
// packages when missing and starts a whole OpenStack (about a minute, 1.5 GiB). Run it with
// `make test-realcloud`.

package realcloud

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/attachments"
	volumeazs "github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/availabilityzones"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	computeazs "github.com/gophercloud/gophercloud/v2/openstack/compute/v2/availabilityzones"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/volumeattach"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	. "github.com/onsi/gomega"
	certutil "k8s.io/client-go/util/cert"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/loopdev"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
)

// testPublicIP is the test cloud's PublicIP. It stands in for the address a real node's network
// namespace reaches the cloud at: all of 127.0.0.0/8 is the loopback's on Linux, so the test
// can listen there in the host's namespace (RelayPublic(net.Listen)), and nothing else does,
// since the TLS proxies listen on 127.0.0.1 only. The host's clients never dial it: HTTPClient
// maps it to 127.0.0.1, which is what lets them work before any relay exists.
var testPublicIP = net.IPv4(127, 0, 0, 2)

// testTLS returns a serving certificate for 127.0.0.1 and testPublicIP, and the CA that signed
// it.
func testTLS(t *testing.T) (certPEM, keyPEM, caPEM []byte) {
	t.Helper()
	chain, key, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.IPv4(127, 0, 0, 1), testPublicIP}, []string{"localhost"})
	if err != nil {
		t.Fatalf("generating certificates: %v", err)
	}
	// The chain is the serving certificate, then the CA that signed it.
	serving, rest := pem.Decode(chain)
	if serving == nil || len(bytes.TrimSpace(rest)) == 0 {
		t.Fatal("expected a serving certificate followed by its CA")
	}
	return pem.EncodeToMemory(serving), key, rest
}

// installPackages runs the install step as make test-realcloud does, so that the test run
// directly on a fresh host installs what it needs too, and logs how long it took.
func installPackages(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		return // Start says why it cannot run
	}
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := exec.CommandContext(t.Context(), filepath.Join(root, "e2e", "hack", "openstack-packages.sh")).CombinedOutput()
	if err != nil {
		t.Fatalf("installing the OpenStack packages: %v\n%s", err, out)
	}
	t.Logf("OpenStack packages installed or checked in %s:\n%s", time.Since(start).Round(100*time.Millisecond), out)
}

// clients are one credential's service clients.
type clients struct {
	compute, volume *gophercloud.ServiceClient
}

func newClients(t *testing.T, c *Cloud, cloud clouds.Cloud) clients {
	t.Helper()
	provider, err := c.Client(t.Context(), cloud)
	if err != nil {
		t.Fatalf("authenticating: %v", err)
	}
	if provider.Token() == "" {
		t.Fatal("authenticated without a token")
	}
	eo := gophercloud.EndpointOpts{Region: c.Region()}
	compute, err := openstack.NewComputeV2(provider, eo)
	if err != nil {
		t.Fatal(err)
	}
	volume, err := openstack.NewBlockStorageV3(provider, eo)
	if err != nil {
		t.Fatal(err)
	}
	return clients{compute: compute, volume: volume}
}

func TestRealCloud(t *testing.T) {
	installPackages(t)
	certPEM, keyPEM, caPEM := testTLS(t)
	// The Erlang VM starts an epmd daemon of its own unless told not to, which would outlive
	// the cloud: the epmds after the test must be those before it.
	epmdsBefore := processesNamed("epmd")
	// Compute and volume zones named differently: the harder of the two shapes, where a
	// client must not assume that a server's zone is a volume zone. The catalog names the
	// public endpoints at another address than the proxies', as it does for real nodes.
	start := time.Now()
	c := StartForTest(t, Options{CertPEM: certPEM, KeyPEM: keyPEM, CAPEM: caPEM, PublicIP: testPublicIP,
		ComputeZones: []string{"compute-a", "compute-b"}, VolumeZones: []string{"volume-a", "volume-b"}})
	t.Logf("Real OpenStack started in %s", time.Since(start).Round(100*time.Millisecond))
	rss, pss, n := c.Memory()
	t.Logf("Real OpenStack at rest: %d processes, RSS %d MiB, PSS %d MiB", n, rss>>20, pss>>20)

	ctx := t.Context()
	for _, cred := range []struct {
		name  string
		cloud clouds.Cloud
	}{{"member user", c.Member()}, {"application credential", c.AppCredential()}} {
		t.Run("When authenticating as the "+cred.name+", it should list both zones of each service", func(t *testing.T) {
			g := NewWithT(t)
			cl := newClients(t, c, cred.cloud)
			pages, err := computeazs.List(cl.compute).AllPages(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			czs, err := computeazs.ExtractAvailabilityZones(pages)
			g.Expect(err).NotTo(HaveOccurred())
			t.Logf("Compute zones as the %s: %+v", cred.name, czs)
			g.Expect(zoneNames(czs, func(z computeazs.AvailabilityZone) string { return z.ZoneName })).To(ContainElements(c.ComputeZones()))

			pages, err = volumeazs.List(cl.volume).AllPages(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			vzs, err := volumeazs.ExtractAvailabilityZones(pages)
			g.Expect(err).NotTo(HaveOccurred())
			t.Logf("Volume zones as the %s: %+v", cred.name, vzs)
			g.Expect(zoneNames(vzs, func(z volumeazs.AvailabilityZone) string { return z.ZoneName })).To(ContainElements(c.VolumeZones()))
		})
	}

	t.Run("When the catalog names PublicIP, it should name it for every public endpoint, and a client on HTTPClient should reach them from the host without a relay", func(t *testing.T) {
		testPublicEndpoints(t, c)
	})

	t.Run("When the member user asks what the operator asks, it should get the real cloud's answers", func(t *testing.T) {
		g := NewWithT(t)
		provider, err := c.Client(ctx, c.Member())
		g.Expect(err).NotTo(HaveOccurred())
		cl := newClients(t, c, c.Member())
		compute, volume := strings.TrimSuffix(cl.compute.Endpoint, "/"), strings.TrimSuffix(cl.volume.Endpoint, "/")
		get := func(what, url string, token bool) int {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			g.Expect(err).NotTo(HaveOccurred())
			if token {
				req.Header.Set("X-Auth-Token", provider.Token())
			}
			resp, err := provider.HTTPClient.Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = resp.Body.Close() }()
			body, _ := io.ReadAll(resp.Body)
			t.Logf("%s: GET %s: %d %s (WWW-Authenticate %q, OpenStack-API-Version %q)\n%s", what, url, resp.StatusCode,
				resp.Header.Get("Content-Type"), resp.Header.Get("WWW-Authenticate"), resp.Header.Get("OpenStack-API-Version"), body)
			return resp.StatusCode
		}
		const missing = "00000000-0000-4000-8000-000000000000"
		g.Expect(get("compute zones", compute+"/os-availability-zone", true)).To(Equal(http.StatusOK))
		g.Expect(get("compute zones in detail (admin only)", compute+"/os-availability-zone/detail", true)).To(Equal(http.StatusForbidden))
		g.Expect(get("volume zones", volume+"/os-availability-zone", true)).To(Equal(http.StatusOK))
		g.Expect(get("volume services (admin only)", volume+"/os-services", true)).To(Equal(http.StatusForbidden))
		g.Expect(get("compute services (admin only)", compute+"/os-services", true)).To(Equal(http.StatusForbidden))
		g.Expect(get("a missing server", compute+"/servers/"+missing, true)).To(Equal(http.StatusNotFound))
		g.Expect(get("a missing volume", volume+"/volumes/"+missing, true)).To(Equal(http.StatusNotFound))
		g.Expect(get("compute without a token", compute+"/os-availability-zone", false)).To(Equal(http.StatusUnauthorized))
		g.Expect(get("compute versions", compute+"/", false)).To(Equal(http.StatusOK))
		base, _, _ := strings.Cut(strings.TrimPrefix(volume, "https://"), "/")
		g.Expect(get("volume versions", "https://"+base+"/", false)).To(BeNumerically("<", 400))

		// What only an admin sees, for comparison: Nova's "internal" zone of the control
		// services, and the zones of Cinder's services, backup's among them.
		admin, err := c.adminClient(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		adminVolume, err := openstack.NewBlockStorageV3(admin, gophercloud.EndpointOpts{Region: c.Region()})
		g.Expect(err).NotTo(HaveOccurred())
		provider = admin
		g.Expect(get("compute zones in detail, as admin", compute+"/os-availability-zone/detail", true)).To(Equal(http.StatusOK))
		g.Expect(get("volume services, as admin", strings.TrimSuffix(adminVolume.Endpoint, "/")+"/os-services", true)).To(Equal(http.StatusOK))

		_, err = c.Client(ctx, clouds.Cloud{AuthInfo: &clouds.AuthInfo{AuthURL: c.AuthURL(), Username: DefaultUser,
			Password: "wrong", ProjectName: DefaultProject, UserDomainName: "Default"}})
		t.Logf("A wrong password: %v", err)
		g.Expect(err).To(HaveOccurred())
	})

	t.Run("When the member makes and deletes application credentials, it should authenticate with them until deleted", func(t *testing.T) {
		testAppCredentials(t, c)
	})

	t.Run("When the admin lets the member list Cinder's services, credentials made after should list them and those made before should not", func(t *testing.T) {
		testServiceListing(t, c)
	})

	// After this the member's password is a new one: every later step, the openrc file's
	// openstack client and CreateServer among them, runs on it.
	t.Run("When the admin changes the member's password, the old one should fail and the new one work", func(t *testing.T) {
		testPasswordChange(t, c)
	})

	t.Run("When the openrc file is sourced, the openstack client should reach the cloud as the member user", func(t *testing.T) {
		g := NewWithT(t)
		rc := filepath.Join(t.TempDir(), "openrc")
		g.Expect(c.WriteOpenRC(rc)).To(Succeed())
		// PublicIP is not where the proxies listen, and no relay is open yet: the file must
		// take the host's ways in.
		content, err := os.ReadFile(rc)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(content)).To(ContainSubstring(fmt.Sprintf("export OS_AUTH_URL='https://127.0.0.1:%d/v3'\n", c.proxies.ports[svcKeystone])))
		g.Expect(string(content)).To(ContainSubstring("export OS_INTERFACE=internal\n"))
		out, err := exec.CommandContext(ctx, "bash", "-c", `. "$1" && openstack availability zone list --volume -f value`, "-", rc).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
		t.Logf("openstack availability zone list --volume:\n%s", out)
		for _, z := range c.VolumeZones() {
			g.Expect(string(out)).To(ContainSubstring(z))
		}
	})

	t.Run("When the public endpoints are relayed into other namespaces, a client there should reach the whole cloud over TLS through the relays alone", func(t *testing.T) {
		testRelays(t, c)
	})

	t.Run("When a node asks the metadata service, it should get real Nova's answer for its own server", func(t *testing.T) {
		testMetadata(t, c)
	})

	t.Run("When a compute zone is renamed, the member should see the new name, and Nova should refuse it for a host with servers", func(t *testing.T) {
		testZoneRename(t, c)
	})

	t.Run("When volume zones are renamed, the member should see the new names, new volumes go there at once and existing ones keep their zone", func(t *testing.T) {
		testVolumeZoneRename(t, c)
	})

	t.Run("When services are stopped and started again, clients should fail while they are down and work once they are back", func(t *testing.T) {
		testServiceRestarts(t, c)
	})

	t.Run("When volumes and servers are created in each zone, they should land there, attach over NFS and go away without a trace", func(t *testing.T) {
		g := NewWithT(t)
		cl := newClients(t, c, c.AppCredential())
		// Attachments' connection_info is shown from 3.27 (the attachments API) on.
		cl.volume.Microversion = "3.27"
		cl.compute.Microversion = NetworksNoneMicroversion

		var vols, srvs []string
		for i, zone := range c.VolumeZones() {
			v, err := volumes.Create(ctx, cl.volume, volumes.CreateOpts{Name: "data-" + zone, Size: 1, AvailabilityZone: zone}, nil).Extract()
			g.Expect(err).NotTo(HaveOccurred())
			vols = append(vols, v.ID)
			g.Expect(WaitVolume(ctx, cl.volume, v.ID, "available")).To(Succeed())
			// The volume's file is in this zone's backend's export, and only there.
			g.Expect(filepath.Join(c.exportDir(i), "volume-"+v.ID)).To(BeAnExistingFile())
			g.Expect(filepath.Join(c.exportDir(1-i), "volume-"+v.ID)).NotTo(BeAnExistingFile())
			// A list by name, as the driver's CreateVolume sends one: Cinder allows the filter
			// only with its resource_filters.json.
			pages, err := volumes.List(cl.volume, volumes.ListOpts{Name: "data-" + zone}).AllPages(ctx)
			g.Expect(err).NotTo(HaveOccurred(), "listing volumes by name")
			named, err := volumes.ExtractVolumes(pages)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(named).To(HaveLen(1))
			g.Expect(named[0].ID).To(Equal(v.ID))
		}
		for _, zone := range c.ComputeZones() {
			bootStart := time.Now()
			id, err := c.CreateServer(ctx, "node-"+zone, zone)
			g.Expect(err).NotTo(HaveOccurred())
			srvs = append(srvs, id)
			s, err := servers.Get(ctx, cl.compute, id).Extract()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.AvailabilityZone).To(Equal(zone))
			t.Logf("Server %s ACTIVE in %s after %s", id, zone, time.Since(bootStart).Round(100*time.Millisecond))
		}

		for i, vol := range vols {
			attachStart := time.Now()
			_, err := volumeattach.Create(ctx, cl.compute, srvs[i], volumeattach.CreateOpts{VolumeID: vol}).Extract()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(WaitVolume(ctx, cl.volume, vol, "in-use")).To(Succeed())
			t.Logf("Volume %s in-use after %s", vol, time.Since(attachStart).Round(100*time.Millisecond))
			v, err := volumes.Get(ctx, cl.volume, vol).Extract()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v.Attachments).To(HaveLen(1))
			g.Expect(v.Attachments[0].ServerID).To(Equal(srvs[i]))
			a, err := attachments.Get(ctx, cl.volume, v.Attachments[0].AttachmentID).Extract()
			g.Expect(err).NotTo(HaveOccurred())
			t.Logf("Attachment %s: status %s, connection_info %v", a.ID, a.Status, a.ConnectionInfo)
			g.Expect(a.ConnectionInfo).To(HaveKeyWithValue("driver_volume_type", "nfs"))
			g.Expect(connectionFormat(a.ConnectionInfo)).To(Equal("raw"))

			detachStart := time.Now()
			g.Expect(volumeattach.Delete(ctx, cl.compute, srvs[i], vol).ExtractErr()).To(Succeed())
			g.Expect(WaitVolume(ctx, cl.volume, vol, "available")).To(Succeed())
			t.Logf("Volume %s available again after %s", vol, time.Since(detachStart).Round(100*time.Millisecond))
		}

		for _, id := range srvs {
			g.Expect(servers.Delete(ctx, cl.compute, id).ExtractErr()).To(Succeed())
		}
		for _, id := range vols {
			g.Expect(volumes.Delete(ctx, cl.volume, id, nil).ExtractErr()).To(Succeed())
		}
		for _, id := range srvs {
			g.Expect(WaitServerGone(ctx, cl.compute, id)).To(Succeed())
		}
		// The boot volumes go with their servers (delete_on_termination).
		g.Eventually(func() ([]volumes.Volume, error) {
			pages, err := volumes.List(cl.volume, nil).AllPages(ctx)
			if err != nil {
				return nil, err
			}
			return volumes.ExtractVolumes(pages)
		}).WithTimeout(2 * time.Minute).Should(BeEmpty())
		for i := range backends {
			left, err := filepath.Glob(filepath.Join(c.exportDir(i), "volume-*"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(left).To(BeEmpty(), "volume files left in %s", c.exportDir(i))
		}
	})

	t.Run("When a server's attachments are followed, each raw volume should be a loop device at its by-id link while attached, and a snapshotted one should be reported, not exposed", func(t *testing.T) {
		testFollower(t, c)
	})

	// The next step stops the cloud, and its logs go with it.
	if t.Failed() {
		c.logTails(40)
	}
	t.Run("When the cloud stops, it should leave no process, mount or listener behind", func(t *testing.T) {
		g := NewWithT(t)
		// A service stopped (and one started again, in testServiceRestarts) is Stop's too.
		g.Expect(c.StopService(ServiceCinderBackup)).To(Succeed())
		pids := c.Pids()
		g.Expect(len(pids)).To(BeNumerically(">=", 15), "the cloud's processes, found by process group")
		dir := c.Dir()
		var listeners []string
		for _, port := range []int{c.ports.amqp, c.ports.epmd, c.ports.dist, c.ports.keystone, c.ports.placement,
			c.ports.nova, c.ports.cinder, c.ports.stub, c.ports.metadata} {
			listeners = append(listeners, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		}
		// The proxies, and the relays testRelays opened in front of them.
		for _, ip := range []string{"127.0.0.1", testPublicIP.String(), secondNamespaceIP} {
			for _, svc := range publicServices {
				listeners = append(listeners, net.JoinHostPort(ip, strconv.Itoa(c.proxies.ports[svc])))
			}
		}
		// The exports' resolved paths, as the kernel names the files behind loop devices.
		var exports []string
		for i := range backends {
			export, err := filepath.EvalSymlinks(c.exportDir(i))
			g.Expect(err).NotTo(HaveOccurred())
			exports = append(exports, export)
		}
		stopStart := time.Now()
		g.Expect(c.Stop()).To(Succeed())
		t.Logf("Real OpenStack stopped in %s", time.Since(stopStart).Round(100*time.Millisecond))
		g.Expect(c.StartService(ctx, ServiceCinderBackup)).To(MatchError(errStopping), "a start after Stop")

		for _, pid := range pids {
			err := syscall.Kill(pid, 0)
			g.Expect(errors.Is(err, syscall.ESRCH)).To(BeTrue(), "process %d still there: %s", pid, cmdline(pid))
		}
		// Also what might have left its process group (a daemonised epmd would): nothing may
		// still run from the run directory or on its epmd port.
		g.Expect(processesMentioning(dir)).To(BeEmpty())
		g.Expect(processesNamed("epmd")).To(Equal(epmdsBefore))
		mounts, err := os.ReadFile("/proc/mounts")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(mounts)).NotTo(ContainSubstring(dir))
		for _, addr := range listeners {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				_ = conn.Close()
			}
			g.Expect(err).To(HaveOccurred(), "%s still accepts connections", addr)
		}
		g.Expect(dir).NotTo(BeADirectory())
		for _, export := range exports {
			loops, err := loopdev.BackedBy(export)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(loops).To(BeEmpty(), "loop devices over the files of %s", export)
		}
	})
}

// zoneNames maps a zone listing to its names.
func zoneNames[Z any](zones []Z, name func(Z) string) []string {
	var out []string
	for _, z := range zones {
		out = append(out, name(z))
	}
	return out
}

// connectionFormat finds the image format in a connection_info, which carries the driver's
// data either under "data" or at the top level.
func connectionFormat(info map[string]any) any {
	if data, ok := info["data"].(map[string]any); ok {
		return data["format"]
	}
	return info["format"]
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.ReplaceAll(string(b), "\x00", " ")
}

// processesMentioning returns the command lines of live processes that name s.
func processesMentioning(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if cl := cmdline(pid); strings.Contains(cl, s) {
			out = append(out, fmt.Sprintf("%d: %s", pid, cl))
		}
	}
	return slices.Clip(out)
}

// processesNamed returns the pids of the live processes whose command name is name.
func processesNamed(name string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(comm)) == name {
			out = append(out, pid)
		}
	}
	return out
}

// secondNamespaceIP stands in for a second node's namespace, where testRelays relays the public
// endpoints again; the catalog still names testPublicIP, which a client there dials.
const secondNamespaceIP = "127.0.0.3"

// caClient is an HTTP client that trusts the cloud's CA and nothing of the host: what a pod has.
// dialIP, when set, is where it dials whatever the URL names, as if PublicIP were routed there.
func caClient(t *testing.T, c *Cloud, dialIP string) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(c.CAPEM()) {
		t.Fatal("the cloud's CA PEM holds no certificate")
	}
	transport := &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	if dialIP != "" {
		var d net.Dialer
		transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			_, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			return d.DialContext(ctx, network, net.JoinHostPort(dialIP, port))
		}
	}
	t.Cleanup(transport.CloseIdleConnections)
	return &http.Client{Transport: transport, Timeout: time.Minute}
}

// memberVolumes authenticates as the member user at the cloud's AuthURL with client and lists
// the volumes of its project: the catalog's whole public path, Keystone then Cinder.
func memberVolumes(ctx context.Context, c *Cloud, client *http.Client) (*gophercloud.ProviderClient, []volumes.Volume, error) {
	provider, err := openstack.NewClient(c.AuthURL())
	if err != nil {
		return nil, nil, err
	}
	provider.HTTPClient = *client
	if err := openstack.Authenticate(ctx, provider, gophercloud.AuthOptions{IdentityEndpoint: c.AuthURL(),
		Username: DefaultUser, Password: c.Member().AuthInfo.Password, DomainName: "Default", TenantName: DefaultProject}); err != nil {
		return nil, nil, fmt.Errorf("authenticating as the member: %w", err)
	}
	volume, err := openstack.NewBlockStorageV3(provider, gophercloud.EndpointOpts{Region: c.Region()})
	if err != nil {
		return nil, nil, err
	}
	pages, err := volumes.List(volume, nil).AllPages(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("listing volumes at %s: %w", volume.Endpoint, err)
	}
	list, err := volumes.ExtractVolumes(pages)
	return provider, list, err
}

// refused says whether nothing accepts connections at addr.
func refused(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return true
	}
	_ = conn.Close()
	return false
}

// testPublicEndpoints checks the catalog against PublicIP and HTTPClient's dial mapping, before
// any relay exists.
func testPublicEndpoints(t *testing.T, c *Cloud) {
	g := NewWithT(t)
	g.Expect(c.PublicIP().Equal(testPublicIP)).To(BeTrue())
	g.Expect(c.AuthURL()).To(Equal(fmt.Sprintf("https://%s:%d/v3", testPublicIP, c.proxies.ports[svcKeystone])))
	for _, svc := range publicServices {
		g.Expect(refused(net.JoinHostPort(testPublicIP.String(), strconv.Itoa(c.proxies.ports[svc])))).To(BeTrue(),
			"something listens at PublicIP for %s before any relay", svc)
	}

	provider, vols, err := memberVolumes(t.Context(), c, c.HTTPClient())
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("The member's volumes, listed through HTTPClient: %d", len(vols))
	catalog, err := provider.GetAuthResult().(tokens.CreateResult).ExtractServiceCatalog()
	g.Expect(err).NotTo(HaveOccurred())
	public := map[string]string{}
	for _, entry := range catalog.Entries {
		for _, e := range entry.Endpoints {
			u, err := url.Parse(e.URL)
			g.Expect(err).NotTo(HaveOccurred())
			switch e.Interface {
			case "public":
				public[entry.Type] = e.URL
				g.Expect(u.Scheme).To(Equal("https"), "%s's public endpoint", entry.Type)
				g.Expect(u.Hostname()).To(Equal(testPublicIP.String()), "%s's public endpoint", entry.Type)
			case "internal":
				g.Expect(u.Hostname()).To(Equal("127.0.0.1"), "%s's internal endpoint", entry.Type)
			}
		}
	}
	t.Logf("Public endpoints in the member's catalog: %v", public)
	g.Expect(public).To(HaveKey("identity"))
	g.Expect(public).To(HaveKey("compute"))
	g.Expect(public).To(HaveKey("block-storage"))
	g.Expect(public).To(HaveKey("network"))
}

// testRelays relays the public endpoints at PublicIP in the host's namespace (standing in for a
// node's) and at a second address, and checks that a client that knows only the CA and the
// catalog gets through, and that a failed listen leaves nothing open.
func testRelays(t *testing.T, c *Cloud) {
	g := NewWithT(t)
	ctx := t.Context()
	// Left open: Stop closes it (the last subtest checks).
	_, err := c.RelayPublic(net.Listen)
	g.Expect(err).NotTo(HaveOccurred())

	pod := caClient(t, c, "")
	for _, svc := range publicServices {
		u := c.proxies.publicURL(svc) + "/"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := pod.Do(req)
		g.Expect(err).NotTo(HaveOccurred(), "GET %s through the relay", u)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		t.Logf("GET %s through the relay: %d over %s", u, resp.StatusCode, tls.VersionName(resp.TLS.Version))
		g.Expect(resp.StatusCode).To(BeNumerically("<", 400), "GET %s", u)
		g.Expect(resp.TLS.VerifiedChains).NotTo(BeEmpty())
	}
	_, vols, err := memberVolumes(ctx, c, pod)
	g.Expect(err).NotTo(HaveOccurred(), "the member's volumes through the relays alone")
	t.Logf("The member's volumes, listed through the relays alone: %d", len(vols))

	// Another namespace: the same ports at another address. The client there still dials the
	// catalog's address, which that namespace routes to its own listeners.
	at := func(ip string) func(network, addr string) (net.Listener, error) {
		return func(network, addr string) (net.Listener, error) {
			_, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			return net.Listen(network, net.JoinHostPort(ip, port))
		}
	}
	stopSecond, err := c.RelayPublic(at(secondNamespaceIP))
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = memberVolumes(ctx, c, caClient(t, c, secondNamespaceIP))
	g.Expect(err).NotTo(HaveOccurred(), "the member's volumes through the second namespace's relays")

	// The second namespace goes away: its stop closes its listeners and the connections they
	// relay, here an idle TLS connection to Keystone, and leaves the first namespace's alone.
	keystonePort := strconv.Itoa(c.proxies.ports[svcKeystone])
	pool := x509.NewCertPool()
	g.Expect(pool.AppendCertsFromPEM(c.CAPEM())).To(BeTrue())
	live, err := tls.Dial("tcp", net.JoinHostPort(secondNamespaceIP, keystonePort),
		&tls.Config{RootCAs: pool, ServerName: testPublicIP.String(), MinVersion: tls.VersionTLS12})
	g.Expect(err).NotTo(HaveOccurred(), "a TLS connection through the second namespace's relay")
	defer func() { _ = live.Close() }()
	stopStart := time.Now()
	g.Expect(stopSecond()).To(Succeed())
	t.Logf("The second namespace's relays stopped in %s", time.Since(stopStart).Round(time.Millisecond))
	g.Expect(live.SetReadDeadline(time.Now().Add(10 * time.Second))).To(Succeed())
	_, err = live.Read(make([]byte, 1))
	t.Logf("Reading the relayed connection after its relay stopped: %v", err)
	g.Expect(err).To(HaveOccurred())
	g.Expect(errors.Is(err, os.ErrDeadlineExceeded)).To(BeFalse(), "the relayed connection stays open after stop")
	for _, svc := range publicServices {
		addr := net.JoinHostPort(secondNamespaceIP, strconv.Itoa(c.proxies.ports[svc]))
		g.Expect(refused(addr)).To(BeTrue(), "%s still accepts connections after stop", addr)
	}
	g.Expect(stopSecond()).To(Succeed(), "a second stop")
	_, _, err = memberVolumes(ctx, c, pod)
	g.Expect(err).NotTo(HaveOccurred(), "the member's volumes through the first namespace's relays, after the second's stop")

	// A namespace where the third listen fails: the two listeners before it close again.
	const failingIP = "127.0.0.4"
	listens := 0
	stopFailed, err := c.RelayPublic(func(network, addr string) (net.Listener, error) {
		if listens++; listens == 3 {
			return nil, errors.New("no such namespace")
		}
		return at(failingIP)(network, addr)
	})
	t.Logf("RelayPublic with a failing listen: %v", err)
	g.Expect(err).To(MatchError(ContainSubstring("no such namespace")))
	g.Expect(stopFailed).To(BeNil())
	for _, svc := range publicServices[:2] {
		addr := net.JoinHostPort(failingIP, strconv.Itoa(c.proxies.ports[svc]))
		g.Expect(refused(addr)).To(BeTrue(), "%s still accepts connections after the failed call", addr)
	}
}

// metadataServer is one ServeMetadata a test runs.
type metadataServer struct {
	serverID, zone string
	l              net.Listener
	done           chan error
}

// testMetadata creates a server in each compute zone and serves the metadata API for each on a
// listener of its own, as two nodes would have it, and checks Nova's answers, its checks of the
// headers ServeMetadata sends, and its log.
func testMetadata(t *testing.T, c *Cloud) {
	g := NewWithT(t)
	ctx := t.Context()
	cl := newClients(t, c, c.Member())
	var novaAPI *procs.Process
	for _, p := range c.processes() {
		if p.Name() == "nova-api" {
			novaAPI = p
		}
	}
	g.Expect(novaAPI).NotTo(BeNil())
	logStart := fileSize(novaAPI.LogPath())

	var nodes []*metadataServer
	t.Cleanup(func() {
		for _, n := range nodes {
			if err := servers.Delete(context.WithoutCancel(ctx), cl.compute, n.serverID).ExtractErr(); err != nil {
				t.Errorf("deleting server %s: %v", n.serverID, err)
			}
		}
		for _, n := range nodes {
			if err := WaitServerGone(context.WithoutCancel(ctx), cl.compute, n.serverID); err != nil {
				t.Error(err)
			}
		}
	})
	for _, zone := range c.ComputeZones() {
		id, err := c.CreateServer(ctx, "metadata-"+zone, zone)
		if id != "" {
			nodes = append(nodes, &metadataServer{serverID: id, zone: zone})
		}
		g.Expect(err).NotTo(HaveOccurred())
	}
	for _, n := range nodes {
		var err error
		n.l, err = net.Listen("tcp", net.JoinHostPort(testPublicIP.String(), "0"))
		g.Expect(err).NotTo(HaveOccurred())
		n.done = make(chan error, 1)
		go func() { n.done <- c.ServeMetadata(n.l, n.serverID) }()
	}

	plain := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: time.Minute}
	t.Cleanup(plain.CloseIdleConnections)
	get := func(u string, header http.Header) (int, []byte) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		g.Expect(err).NotTo(HaveOccurred())
		maps.Copy(req.Header, header)
		resp, err := plain.Do(req)
		g.Expect(err).NotTo(HaveOccurred(), "GET %s", u)
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, body
	}
	stubLog := filepath.Join(c.LogDir(), "tls-proxy.log")
	stubLogStart := fileSize(stubLog)
	for _, n := range nodes {
		start := time.Now()
		code, body := get("http://"+n.l.Addr().String()+"/openstack/latest/meta_data.json", nil)
		t.Logf("meta_data.json of server %s (%s) in %s: %d\n%s", n.serverID, n.zone, time.Since(start).Round(time.Millisecond), code, body)
		g.Expect(code).To(Equal(http.StatusOK))
		var md struct {
			UUID             string `json:"uuid"`
			AvailabilityZone string `json:"availability_zone"`
			ProjectID        string `json:"project_id"`
		}
		g.Expect(json.Unmarshal(body, &md)).To(Succeed())
		g.Expect(md.UUID).To(Equal(n.serverID))
		g.Expect(md.AvailabilityZone).To(Equal(n.zone))
		g.Expect(md.ProjectID).To(Equal(c.ProjectID()))
	}

	// Nova's own checks, straight at its metadata listener: the signature ServeMetadata sends is
	// the one it expects, and it answers nothing for a wrong one or for another project.
	direct := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(c.ports.metadata)) + "/openstack/latest/meta_data.json"
	id := nodes[0].serverID
	headers := func(project, secret string) http.Header {
		h := http.Header{}
		h.Set(headerInstanceID, id)
		h.Set(headerTenantID, project)
		h.Set(headerInstanceSignature, metadataSignature(secret, id))
		return h
	}
	code, _ := get(direct, headers(c.ProjectID(), c.secrets.metadata))
	g.Expect(code).To(Equal(http.StatusOK), "the right signature")
	code, _ = get(direct, headers(c.ProjectID(), "not the shared secret"))
	g.Expect(code).To(Equal(http.StatusForbidden), "a wrong signature")
	code, _ = get(direct, headers("another-project", c.secrets.metadata))
	g.Expect(code).To(Equal(http.StatusNotFound), "another project")

	for _, n := range nodes {
		g.Expect(n.l.Close()).To(Succeed())
		g.Eventually(n.done).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
	}

	// Nova looked each server's ports up in the Neutron stub (for its security groups; there
	// are none, the servers have no networks) and must have had no trouble with the answer.
	asked := logSince(t, stubLog, stubLogStart)
	t.Logf("The Neutron and Glance stub during the metadata requests:\n%s", asked)
	for _, n := range nodes {
		g.Expect(asked).To(ContainSubstring("ports?device_id="+n.serverID), "Nova asking Neutron for server %s's ports", n.serverID)
	}
	logged := logSince(t, novaAPI.LogPath(), logStart)
	t.Logf("nova-api's log during the metadata requests:\n%s", logged)
	g.Expect(logged).NotTo(ContainSubstring("Traceback"))
	g.Expect(logged).NotTo(MatchRegexp(`\d ERROR `))

	// What the metadata API costs: its worker is the last process nova-api forks.
	pids := pidsInGroups(map[int]bool{novaAPI.Pid(): true})
	slices.Sort(pids)
	for _, pid := range pids {
		rss, pss, _ := processMemory(pid)
		t.Logf("nova-api process %d: PSS %d MiB, RSS %d MiB", pid, pss>>20, rss>>20)
	}
}

// fileSize is the size of the file at path, 0 when there is none yet.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logSince reads what was written to the log at path after offset.
func logSince(t *testing.T, path string, offset int64) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
