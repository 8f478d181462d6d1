//go:build realcloud

// The tag keeps this test out of the harness's unit and integration runs: it installs Debian
// packages when missing and starts a whole OpenStack (about a minute, 1.5 GiB). Run it with
// `make test-realcloud`.

package realcloud

import (
	"bytes"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
	. "github.com/onsi/gomega"
	certutil "k8s.io/client-go/util/cert"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/loopdev"
)

// testTLS returns a serving certificate for 127.0.0.1 and the CA that signed it.
func testTLS(t *testing.T) (certPEM, keyPEM, caPEM []byte) {
	t.Helper()
	chain, key, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
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
	// client must not assume that a server's zone is a volume zone.
	start := time.Now()
	c := StartForTest(t, Options{CertPEM: certPEM, KeyPEM: keyPEM, CAPEM: caPEM,
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

	t.Run("When the openrc file is sourced, the openstack client should reach the cloud as the member user", func(t *testing.T) {
		g := NewWithT(t)
		rc := filepath.Join(t.TempDir(), "openrc")
		g.Expect(c.WriteOpenRC(rc)).To(Succeed())
		out, err := exec.CommandContext(ctx, "bash", "-c", `. "$1" && openstack availability zone list --volume -f value`, "-", rc).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
		t.Logf("openstack availability zone list --volume:\n%s", out)
		for _, z := range c.VolumeZones() {
			g.Expect(string(out)).To(ContainSubstring(z))
		}
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
		pids := c.Pids()
		g.Expect(len(pids)).To(BeNumerically(">=", 15), "the cloud's processes, found by process group")
		dir := c.Dir()
		listeners := []int{c.ports.amqp, c.ports.epmd, c.ports.dist, c.ports.keystone, c.ports.placement,
			c.ports.nova, c.ports.cinder, c.ports.stub}
		for _, svc := range []service{svcKeystone, svcPlacement, svcNova, svcCinder, svcStub} {
			_, port, err := net.SplitHostPort(strings.TrimPrefix(c.proxies.publicURL(svc), "https://"))
			g.Expect(err).NotTo(HaveOccurred())
			n, _ := strconv.Atoi(port)
			listeners = append(listeners, n)
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
		for _, port := range listeners {
			conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
			if err == nil {
				_ = conn.Close()
			}
			g.Expect(err).To(HaveOccurred(), "port %d still accepts connections", port)
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
