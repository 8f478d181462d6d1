package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// testUserAgent marks this test's requests in the audit log.
const testUserAgent = "localcluster-test"

func TestFindBinaries(t *testing.T) {
	t.Run("When KUBE_BIN_DIR has no kube-apiserver, it should fail with ErrBinariesMissing naming the variable and the make target", func(t *testing.T) {
		g := NewWithT(t)
		etcdDir := t.TempDir()
		g.Expect(os.WriteFile(filepath.Join(etcdDir, "etcd"), nil, 0o755)).To(Succeed())
		t.Setenv(EtcdBinDirEnv, etcdDir)
		t.Setenv(KubeBinDirEnv, t.TempDir())

		_, err := findBinaries(true, false)

		g.Expect(errors.Is(err, ErrBinariesMissing)).To(BeTrue(), "error: %v", err)
		g.Expect(err.Error()).To(And(ContainSubstring("kube-apiserver"), ContainSubstring(KubeBinDirEnv),
			ContainSubstring("make upstream")))
	})
	t.Run("When only etcd and kube-apiserver exist, it should accept them for a control-plane-only cluster but not for a full one", func(t *testing.T) {
		g := NewWithT(t)
		etcdDir, kubeDir := t.TempDir(), t.TempDir()
		g.Expect(os.WriteFile(filepath.Join(etcdDir, "etcd"), nil, 0o755)).To(Succeed())
		g.Expect(os.WriteFile(filepath.Join(kubeDir, "kube-apiserver"), nil, 0o755)).To(Succeed())
		t.Setenv(EtcdBinDirEnv, etcdDir)
		t.Setenv(KubeBinDirEnv, kubeDir)

		b, err := findBinaries(true, false)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.apiserver).To(Equal(filepath.Join(kubeDir, "kube-apiserver")))

		_, err = findBinaries(false, true)
		g.Expect(errors.Is(err, ErrBinariesMissing)).To(BeTrue(), "error: %v", err)
	})
	t.Run("When there is no kwok, it should accept a full cluster without fake nodes but not one with them", func(t *testing.T) {
		g := NewWithT(t)
		etcdDir, kubeDir := t.TempDir(), t.TempDir()
		g.Expect(os.WriteFile(filepath.Join(etcdDir, "etcd"), nil, 0o755)).To(Succeed())
		for _, n := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			g.Expect(os.WriteFile(filepath.Join(kubeDir, n), nil, 0o755)).To(Succeed())
		}
		t.Setenv(EtcdBinDirEnv, etcdDir)
		t.Setenv(KubeBinDirEnv, kubeDir)
		t.Setenv(KwokBinDirEnv, t.TempDir())

		b, err := findBinaries(false, false)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(b.scheduler).To(Equal(filepath.Join(kubeDir, "kube-scheduler")))
		g.Expect(b.kwok).To(BeEmpty())

		_, err = findBinaries(false, true)
		g.Expect(errors.Is(err, ErrBinariesMissing)).To(BeTrue(), "error: %v", err)
	})
}

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b string
		want int // sign only
	}{
		{"When minor versions differ numerically, it should not sort them as strings", "1.36.3", "1.9.0", 1},
		{"When versions are equal, it should return zero", "3.6.16", "3.6.16", 0},
		{"When one version is a prefix of the other, it should sort the shorter first", "0.8", "0.8.0", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := compareVersions(tc.a, tc.b)
			if sign(got) != tc.want {
				t.Fatalf("compareVersions(%q, %q) = %d, want sign %d", tc.a, tc.b, got, tc.want)
			}
		})
	}
}

func sign(i int) int {
	switch {
	case i < 0:
		return -1
	case i > 0:
		return 1
	}
	return 0
}

func TestDesiredNodes(t *testing.T) {
	t.Run("When a cluster has 1 master and 2 workers in 2 zones, it should label and taint them like OpenShift", func(t *testing.T) {
		g := NewWithT(t)
		nodes := desiredNodes(Options{Name: "mgmt", Masters: 1, Workers: 2, Zones: []string{"az1", "az2"},
			NodeLabels: map[string]string{"hypershift.openshift.io/control-plane": "true"}})

		g.Expect(nodes).To(HaveLen(3))
		g.Expect(nodes[0].Name).To(Equal("mgmt-master-0"))
		g.Expect(nodes[0].Labels).To(And(HaveKeyWithValue(MasterRoleLabel, ""), HaveKeyWithValue(ControlPlaneRoleLabel, "")))
		g.Expect(nodes[0].Spec.Taints).To(ConsistOf(corev1.Taint{Key: MasterRoleLabel, Effect: corev1.TaintEffectNoSchedule}))
		g.Expect(nodes[2].Name).To(Equal("mgmt-worker-1"))
		g.Expect(nodes[2].Spec.Taints).To(BeEmpty())
		g.Expect(nodes[2].Labels).NotTo(HaveKey(MasterRoleLabel))
		for i, n := range nodes {
			g.Expect(n.Labels).To(And(
				HaveKeyWithValue("kubernetes.io/os", "linux"),
				HaveKeyWithValue("kubernetes.io/hostname", n.Name),
				HaveKeyWithValue("hypershift.openshift.io/control-plane", "true"),
				HaveKeyWithValue(ZoneLabel, []string{"az1", "az2"}[i%2])))
			g.Expect(n.Status.Allocatable).To(HaveKey(corev1.ResourcePods))
		}
	})
}

func TestStartValidation(t *testing.T) {
	t.Run("When the name is not a DNS label, it should fail before starting anything", func(t *testing.T) {
		_, err := Start(context.Background(), Options{Name: "Not_A_Label"})
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("invalid cluster name")))
	})
}

func TestCRDHelpers(t *testing.T) {
	t.Run("When the CRD helpers resolve their files, it should decode every one into a distinct CRD", func(t *testing.T) {
		g := NewWithT(t)
		mgmt, err := ManagementCRDs()
		g.Expect(err).NotTo(HaveOccurred())
		guest, err := GuestCRDs()
		g.Expect(err).NotTo(HaveOccurred())

		crds, err := readCRDs(append(mgmt, guest...))

		g.Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, c := range crds {
			names = append(names, c.Name)
		}
		// The monitoring stack's CRDs are in both lists and must be installed once.
		g.Expect(names).To(ConsistOf(
			"hostedcontrolplanes.hypershift.openshift.io",
			"servicemonitors.monitoring.coreos.com",
			"prometheusrules.monitoring.coreos.com",
			"clustercsidrivers.operator.openshift.io",
			"apiservers.config.openshift.io",
			"infrastructures.config.openshift.io",
			"proxies.config.openshift.io",
			"volumesnapshotclasses.snapshot.storage.k8s.io",
		))
	})
}

// TestCluster starts one full cluster and proves that the real controller-manager, scheduler and
// kwok drive workloads to Available, that audit records what it must, and that Stop leaves
// nothing behind.
func TestCluster(t *testing.T) {
	g := NewWithT(t)
	begin := time.Now()
	c := StartForTest(t, Options{Name: "single", Masters: 1, Workers: 2, Audit: true})
	t.Logf("Cluster start took %s", time.Since(begin).Round(time.Millisecond))
	logMemory(t, c)
	cl := newTestClient(g, c.RESTConfig())
	ctx := t.Context()

	t.Run("When a Deployment and a DaemonSet tolerating everything are created, it should make both Available", func(t *testing.T) {
		g := NewWithT(t)
		created := time.Now()
		labels := map[string]string{"app": "web"}
		dep := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: appsv1.DeploymentSpec{
				Replicas: new(int32(2)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: podTemplate(labels, nil),
			},
		}
		dsLabels := map[string]string{"app": "agent"}
		ds := &appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "default"},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: dsLabels},
				Template: podTemplate(dsLabels, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}),
			},
		}
		g.Expect(cl.Create(ctx, dep)).To(Succeed())
		g.Expect(cl.Create(ctx, ds)).To(Succeed())

		g.Eventually(func(g Gomega) {
			g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(dep), dep)).To(Succeed())
			g.Expect(dep.Status.Conditions).To(ContainElement(And(
				HaveField("Type", appsv1.DeploymentAvailable), HaveField("Status", corev1.ConditionTrue))))
			g.Expect(dep.Status.AvailableReplicas).To(BeEquivalentTo(2))
		}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(cl.Get(ctx, client.ObjectKeyFromObject(ds), ds)).To(Succeed())
			// The master's NoSchedule taint is tolerated, so all three nodes run it.
			g.Expect(ds.Status.DesiredNumberScheduled).To(BeEquivalentTo(3))
			g.Expect(ds.Status.NumberAvailable).To(Equal(ds.Status.DesiredNumberScheduled))
		}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		t.Logf("Deployment and DaemonSet Available %s after creation", time.Since(created).Round(time.Millisecond))
	})

	t.Run("When audit is on, it should record user, impersonated user, user agent, verb, resource, namespace and name", func(t *testing.T) {
		g := NewWithT(t)
		cfg := c.RESTConfig()
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "someone", Groups: []string{"system:masters"}}
		impersonating := newTestClient(g, cfg)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "audited", Namespace: "default"}}
		g.Expect(impersonating.Create(ctx, cm)).To(Succeed())

		events, err := ReadAuditLog(c.AuditLogPath())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(events).To(ContainElement(And(
			HaveField("User.Username", adminUser),
			HaveField("ImpersonatedUser.Username", "someone"),
			HaveField("UserAgent", testUserAgent),
			HaveField("Verb", "create"),
			HaveField("ObjectRef.Resource", "configmaps"),
			HaveField("ObjectRef.Namespace", "default"),
			HaveField("ObjectRef.Name", "audited"),
		)))
	})

	t.Run("When the cluster is stopped, it should leave no process, port or directory behind", func(t *testing.T) {
		g := NewWithT(t)
		before := snapshot(c)
		g.Expect(before.pids).To(HaveLen(5))

		stopped := time.Now()
		g.Expect(c.Stop()).To(Succeed())
		t.Logf("Stop took %s", time.Since(stopped).Round(time.Millisecond))
		g.Expect(c.Stop()).To(Succeed(), "a second Stop must be a no-op")

		expectNothingLeft(g, before)
	})
}

// TestStartPair starts a management and a guest cluster together, with the CRDs the operator
// needs, and proves both are reachable and separate and that stopping them leaves nothing.
func TestStartPair(t *testing.T) {
	g := NewWithT(t)
	mgmtCRDs, err := ManagementCRDs()
	g.Expect(err).NotTo(HaveOccurred())
	guestCRDs, err := GuestCRDs()
	g.Expect(err).NotTo(HaveOccurred())

	t.Run("When a management and a guest cluster start concurrently, it should make both reachable and leave nothing behind after Stop", func(t *testing.T) {
		g := NewWithT(t)
		begin := time.Now()
		mgmt, guest := StartPairForTest(t,
			Options{Name: "management", Workers: 2, CRDs: mgmtCRDs, Zones: []string{"az1", "az2"},
				NodeLabels: map[string]string{"hypershift.openshift.io/control-plane": "true"}},
			Options{Name: "guest", Masters: 1, Workers: 1, CRDs: guestCRDs})
		t.Logf("Pair start took %s", time.Since(begin).Round(time.Millisecond))
		logMemory(t, mgmt)
		logMemory(t, guest)
		g.Expect(mgmt.RESTConfig().Host).NotTo(Equal(guest.RESTConfig().Host))

		ctx := t.Context()
		mgmtClient := newTestClient(g, mgmt.RESTConfig())
		guestClient := newTestClient(g, guest.RESTConfig())
		var nodes corev1.NodeList
		g.Expect(mgmtClient.List(ctx, &nodes, client.MatchingLabels{"hypershift.openshift.io/control-plane": "true"})).To(Succeed())
		g.Expect(nodes.Items).To(HaveLen(2))
		g.Expect(guestClient.List(ctx, &nodes)).To(Succeed())
		g.Expect(nodes.Items).To(HaveLen(2))

		// Each cluster serves its own CRDs and not the other's.
		hcps := &unstructured.UnstructuredList{}
		hcps.SetGroupVersionKind(schema.GroupVersionKind{Group: "hypershift.openshift.io", Version: "v1beta1", Kind: "HostedControlPlaneList"})
		g.Expect(mgmtClient.List(ctx, hcps)).To(Succeed())
		g.Expect(guestClient.List(ctx, hcps)).NotTo(Succeed())
		drivers := &unstructured.UnstructuredList{}
		drivers.SetGroupVersionKind(schema.GroupVersionKind{Group: "operator.openshift.io", Version: "v1", Kind: "ClusterCSIDriverList"})
		g.Expect(guestClient.List(ctx, drivers)).To(Succeed())

		states := []clusterState{snapshot(mgmt), snapshot(guest)}
		g.Expect(mgmt.Stop()).To(Succeed())
		g.Expect(guest.Stop()).To(Succeed())
		for _, s := range states {
			expectNothingLeft(g, s)
		}
	})
}

func TestControlPlaneOnly(t *testing.T) {
	t.Run("When ControlPlaneOnly is set, it should run only etcd and kube-apiserver and still create the nodes", func(t *testing.T) {
		g := NewWithT(t)
		begin := time.Now()
		c := StartForTest(t, Options{Name: "apionly", Workers: 1, ControlPlaneOnly: true})
		t.Logf("Control-plane-only start took %s", time.Since(begin).Round(time.Millisecond))
		logMemory(t, c)

		var nodes corev1.NodeList
		g.Expect(newTestClient(g, c.RESTConfig()).List(t.Context(), &nodes)).To(Succeed())
		g.Expect(nodes.Items).To(HaveLen(1))
		s := snapshot(c)
		g.Expect(s.pids).To(HaveLen(2))
		g.Expect(c.Stop()).To(Succeed())
		expectNothingLeft(g, s)
	})
}

// podTemplate returns a pod template for kwok: the image is never pulled.
func podTemplate(labels map[string]string, tolerations []corev1.Toleration) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			Containers:  []corev1.Container{{Name: "main", Image: "never-pulled:1"}},
			Tolerations: tolerations,
		},
	}
}

func newTestClient(g Gomega, cfg *rest.Config) client.Client {
	cfg.UserAgent = testUserAgent
	scheme, err := newScheme()
	g.Expect(err).NotTo(HaveOccurred())
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	return cl
}

// clusterState is what a running cluster holds that Stop must give back.
type clusterState struct {
	dir   string
	owned bool
	pids  []int
	ports []int
}

func snapshot(c *Cluster) clusterState {
	s := clusterState{dir: c.dir, owned: c.ownsDir, ports: append([]int(nil), c.ports...)}
	for _, p := range c.processes() {
		s.pids = append(s.pids, p.Pid())
	}
	return s
}

// expectNothingLeft checks that the pids are gone, that no process anywhere still refers to the
// cluster directory (which would catch a grandchild that escaped the process group), that no
// socket listens on any of its ports any more and that an owned directory is removed.
func expectNothingLeft(g Gomega, s clusterState) {
	for _, pid := range s.pids {
		g.Expect(syscall.Kill(pid, 0)).To(MatchError(syscall.ESRCH), "pid %d still exists", pid)
	}
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err != nil {
			continue // the process ended while scanning
		}
		g.Expect(string(cmdline)).NotTo(ContainSubstring(s.dir), "%s still refers to the cluster directory", p)
	}
	for _, port := range s.ports {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			g.Expect(l.Close()).To(Succeed())
			continue
		}
		// Bound, but maybe as the local end of another program's outgoing connection (the
		// port came back to the ephemeral range, and other tests run beside this one): only a
		// listener would be the cluster's.
		listening, lerr := listeningOn(port)
		g.Expect(lerr).NotTo(HaveOccurred())
		g.Expect(listening).To(BeFalse(), "port %d is still listened on (%v)", port, err)
	}
	if s.owned {
		_, err := os.Stat(s.dir)
		g.Expect(os.IsNotExist(err)).To(BeTrue(), "%s still exists", s.dir)
	}
}

// logMemory logs the resident memory of every component, for sizing CI machines.
func logMemory(t *testing.T, c *Cluster) {
	var total uint64
	var parts []string
	for _, p := range c.processes() {
		rss := p.RSS()
		total += rss
		parts = append(parts, p.Name()+"="+strconv.FormatUint(rss>>20, 10)+"MiB")
	}
	t.Logf("Cluster %s resident memory: %s, total %d MiB", c.Name(), strings.Join(parts, " "), total>>20)
}

// listeningOn says whether a TCP socket of this network namespace listens on port, from
// /proc/net/tcp and tcp6 (state 0A is LISTEN; the local address ends in the port in hex).
func listeningOn(port int) (bool, error) {
	suffix := fmt.Sprintf(":%04X", port)
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 3 && strings.HasSuffix(f[1], suffix) && f[3] == "0A" {
				return true, nil
			}
		}
	}
	return false, nil
}

// A listener is seen on its port, and no longer once closed; an outgoing connection's local port
// is not a listener.
func TestListeningOn(t *testing.T) {
	g := NewWithT(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	port := l.Addr().(*net.TCPAddr).Port
	g.Expect(listeningOn(port)).To(BeTrue())
	conn, err := net.Dial("tcp", l.Addr().String())
	g.Expect(err).NotTo(HaveOccurred())
	local := conn.LocalAddr().(*net.TCPAddr).Port
	g.Expect(listeningOn(local)).To(BeFalse(), "the client end of a connection")
	g.Expect(conn.Close()).To(Succeed())
	g.Expect(l.Close()).To(Succeed())
	g.Expect(listeningOn(port)).To(BeFalse())
}
