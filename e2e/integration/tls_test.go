// The cluster's TLS security profile and the operator's secured metrics, with real handshakes:
// the operator runs as a process of the built binary (hostedcluster on HyperShift, standalone),
// its /metrics is scraped over HTTPS with and without an authorised token, and the profile is
// changed under it: the operator's own endpoint follows without a restart, and the CSI
// controller's kube-rbac-proxies get the new settings in exactly one rollout.
package integration

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/imagetars"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/tlscheck"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
)

// TestTLSProfileHyperShift runs the checks against the hostedcluster process, with the profile
// in the HostedControlPlane.
func TestTLSProfileHyperShift(t *testing.T) {
	t.Parallel()
	testTLSProfile(t, env.ModeHyperShift, "hostedcluster")
}

// TestTLSProfileStandalone runs the checks against the standalone process, with the profile in
// the APIServer named cluster.
func TestTLSProfileStandalone(t *testing.T) {
	t.Parallel()
	testTLSProfile(t, env.ModeStandalone, "standalone")
}

func testTLSProfile(t *testing.T, mode, process string) {
	binary := operatorBinary(t)
	e := env.StartForTest(t, env.Options{Mode: mode})
	out := operatorLog(t)
	procs := startProcesses(t, e, env.ProcessOptions{Binary: binary, Output: out, PodName: leadingPod})
	addr := procs.MetricsAddrs[process]
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(e.MgmtConfig())
	if err != nil {
		t.Fatal(err)
	}
	waitAvailable(t, e)

	t.Run("When nothing sets a profile, it should serve Intermediate: TLS 1.2 on the operator's metrics and on every kube-rbac-proxy", func(t *testing.T) {
		g := NewWithT(t)
		state, err := tlscheck.Handshake(ctx, addr, tls.VersionTLS12, tlscheck.Options{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(state.Version).To(BeEquivalentTo(tls.VersionTLS12))
		_, err = tlscheck.Handshake(ctx, addr, tls.VersionTLS11, tlscheck.Options{})
		g.Expect(err).To(HaveOccurred(), "a TLS 1.1 client was served")
		expectProxyArgs(g, controllerDeployment(g, e), "VersionTLS12")
	})

	t.Run("When a scrape has no token, it should be refused with 401", func(t *testing.T) {
		g := NewWithT(t)
		status, _, err := tlscheck.Scrape(ctx, addr, "/metrics", "", tlscheck.Options{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusUnauthorized))
	})

	t.Run("When a scrape has the token of a ServiceAccount that may not get /metrics, it should be refused with 403", func(t *testing.T) {
		g := NewWithT(t)
		token, err := tlscheck.ServiceAccountToken(ctx, cs, e.Namespace, "no-metrics", false)
		g.Expect(err).NotTo(HaveOccurred())
		status, body, err := tlscheck.Scrape(ctx, addr, "/metrics", token, tlscheck.Options{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusForbidden), string(body))
	})

	t.Run("When a scrape has the token of a ServiceAccount that may get /metrics, it should be served the metrics", func(t *testing.T) {
		g := NewWithT(t)
		status, body, err := tlscheck.Scrape(ctx, addr, "/metrics", procs.MetricsToken, tlscheck.Options{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusOK))
		g.Expect(string(body)).To(ContainSubstring("controller_runtime_reconcile_total"))
	})

	t.Run("When the probes are read, they should stay plain HTTP without a token", func(t *testing.T) {
		expectReady(NewWithT(t), procs.HealthAddrs[process])
	})

	var rolloutsBefore int
	var othersBefore map[string]string
	t.Run("When the profile becomes Modern, the operator's metrics should refuse a TLS 1.2 client and serve a TLS 1.3 one, without a restart", func(t *testing.T) {
		g := NewWithT(t)
		rolloutsBefore, othersBefore = len(replicaSets(g, e)), ownedVersions(g, e)
		setProfile(t, e, &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType, Modern: &configv1.ModernTLSProfile{}})
		changed := time.Now()
		g.Eventually(func(g Gomega) {
			_, err := tlscheck.Handshake(ctx, addr, tls.VersionTLS12, tlscheck.Options{})
			g.Expect(err).To(HaveOccurred(), "a TLS 1.2 client was served")
		}).WithTimeout(reactTimeout).WithPolling(poll).Should(Succeed())
		t.Logf("The operator's metrics refused TLS 1.2 %s after the change", since(changed))
		state, err := tlscheck.Handshake(ctx, addr, tls.VersionTLS13, tlscheck.Options{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(state.Version).To(BeEquivalentTo(tls.VersionTLS13))
		status, _, err := tlscheck.Scrape(ctx, addr, "/metrics", procs.MetricsToken, tlscheck.Options{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusOK))
		ended, err := procs.Ended(process)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ended).To(BeFalse(), "the operator restarted to follow the profile")
	})

	t.Run("When the profile becomes Modern, it should roll the controller once with the new kube-rbac-proxy arguments and change nothing else", func(t *testing.T) {
		g := NewWithT(t)
		// The subtest before changed the profile; the rollout is seen here.
		g.Eventually(func(g Gomega) {
			expectProxyArgs(g, controllerDeployment(g, e), "VersionTLS13")
		}).WithTimeout(reactTimeout).WithPolling(poll).Should(Succeed())
		// The controller-manager creates the new ReplicaSet a moment after the Deployment
		// changes: wait for it, then make sure no second one follows.
		oneNew := func(g Gomega) {
			g.Expect(replicaSets(g, e)).To(HaveLen(rolloutsBefore+1), "one new ReplicaSet for the new profile")
		}
		g.Eventually(oneNew).WithTimeout(reactTimeout).WithPolling(poll).Should(Succeed())
		g.Consistently(oneNew).WithTimeout(5 * time.Second).WithPolling(poll).Should(Succeed())
		g.Expect(ownedVersions(g, e)).To(Equal(othersBefore), "objects other than the Deployment changed with the profile")
	})

	t.Run("When the real kube-rbac-proxy runs with the controller's arguments under Modern, it should refuse TLS 1.2 and serve only authorised scrapes", func(t *testing.T) {
		checkKubeRBACProxy(t, e, cs, controllerDeployment(NewWithT(t), e), procs.MetricsToken)
	})

	t.Run("When the cluster's profile cannot be served, it should fall back to Intermediate and say so in a condition that is not Degraded", func(t *testing.T) {
		g := NewWithT(t)
		others := ownedVersions(g, e)
		setProfile(t, e, &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType, Custom: &configv1.CustomTLSProfile{
			TLSProfileSpec: configv1.TLSProfileSpec{MinTLSVersion: configv1.VersionTLS12, Ciphers: []string{"DHE-RSA-AES256-GCM-SHA384"}}}})
		g.Eventually(func(g Gomega) {
			c := condition(g, e, names.ConditionConfigDegraded)
			g.Expect(c.Status).To(BeEquivalentTo(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(names.ReasonTLSProfileFallback))
			g.Expect(c.Message).To(ContainSubstring("Intermediate"))
			expectProxyArgs(g, controllerDeployment(g, e), "VersionTLS12")
			_, err := tlscheck.Handshake(ctx, addr, tls.VersionTLS12, tlscheck.Options{})
			g.Expect(err).NotTo(HaveOccurred(), "the operator's metrics serve Intermediate")
		}).WithTimeout(reactTimeout).WithPolling(poll).Should(Succeed())
		g.Expect(ownedVersions(g, e)).To(Equal(others), "objects other than the Deployment changed with the profile")
	})
}

// checkKubeRBACProxy runs the kube-rbac-proxy binary the operand image is built from with the
// arguments of the controller's first kube-rbac-proxy container (which must be at the Modern
// profile), listening on loopback in front of a stand-in metrics endpoint, with its own
// certificate and the management cluster's kubeconfig for its reviews, and runs the tlscheck
// checks against it: the same checks the lead runs against the real pods on a real node.
func checkKubeRBACProxy(t *testing.T, e *env.Env, cs kubernetes.Interface, dep *appsv1.Deployment, readerToken string) {
	g := NewWithT(t)
	root, err := localcluster.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	v := imagetars.DefaultVersions()
	binary := imagetars.BinaryPath(filepath.Join(root, "bin"), imagetars.KubeRBACProxy, v.KubeRBACProxy)
	if _, err := os.Stat(binary); err != nil {
		t.Skipf("kube-rbac-proxy %s is not built (make operand-binaries): %v", v.KubeRBACProxy, err)
	}
	var args []string
	for _, c := range dep.Spec.Template.Spec.Containers {
		if strings.Contains(c.Name, "kube-rbac-proxy") {
			args = c.Args
			break
		}
	}
	g.Expect(args).To(ContainElement("--tls-min-version=VersionTLS13"))

	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("csi_sidecar_operations_seconds_count 1\n"))
	}))
	t.Cleanup(upstream.Close)
	dir := t.TempDir()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	g.Expect(os.WriteFile(certFile, certPEM, 0o600)).To(Succeed())
	g.Expect(os.WriteFile(keyFile, keyPEM, 0o600)).To(Succeed())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	g.Expect(l.Close()).To(Succeed())

	// The pod's addresses and paths become this process's; the TLS flags stay as the Deployment has them.
	local := map[string]string{
		"--secure-listen-address": addr, "--upstream": upstream.URL + "/",
		"--tls-cert-file": certFile, "--tls-private-key-file": keyFile,
	}
	run := []string{"--kubeconfig=" + e.Mgmt.KubeconfigPath()}
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if v, ok := local[name]; ok {
			a = name + "=" + v
		}
		run = append(run, a)
	}
	var out logBuffer
	cmd := exec.Command(binary, run...)
	cmd.Stdout, cmd.Stderr = &out, &out
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("kube-rbac-proxy log:\n%s", lastLines(out.String(), 40))
		}
	})

	ctx := t.Context()
	g.Eventually(func() error {
		_, err := tlscheck.Handshake(ctx, addr, tls.VersionTLS13, tlscheck.Options{})
		return err
	}).WithTimeout(reactTimeout).WithPolling(poll).Should(Succeed(), "a TLS 1.3 client is served")
	_, err = tlscheck.Handshake(ctx, addr, tls.VersionTLS12, tlscheck.Options{})
	g.Expect(err).To(HaveOccurred(), "a TLS 1.2 client was served")

	status, _, err := tlscheck.Scrape(ctx, addr, "/metrics", "", tlscheck.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusUnauthorized))
	other, err := tlscheck.ServiceAccountToken(ctx, cs, e.Namespace, "no-metrics", false)
	g.Expect(err).NotTo(HaveOccurred())
	status, _, err = tlscheck.Scrape(ctx, addr, "/metrics", other, tlscheck.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusForbidden))
	status, body, err := tlscheck.Scrape(ctx, addr, "/metrics", readerToken, tlscheck.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusOK), string(body))
	g.Expect(string(body)).To(ContainSubstring("csi_sidecar_operations_seconds_count"))
}

// setProfile sets the cluster's TLS security profile where the mode keeps it.
func setProfile(t *testing.T, e *env.Env, p *configv1.TLSSecurityProfile) {
	t.Helper()
	if err := e.SetTLSProfile(t.Context(), p); err != nil {
		t.Fatal(err)
	}
}

// expectProxyArgs checks that every kube-rbac-proxy of the controller serves minVersion, with
// the cipher suites of the profile when it has any.
func expectProxyArgs(g Gomega, dep *appsv1.Deployment, minVersion string) {
	proxies := 0
	for _, c := range dep.Spec.Template.Spec.Containers {
		if !strings.Contains(c.Name, "kube-rbac-proxy") {
			continue
		}
		proxies++
		g.Expect(c.Args).To(ContainElement("--tls-min-version="+minVersion), c.Name)
		i := slices.IndexFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--tls-cipher-suites=") })
		g.Expect(i).NotTo(Equal(-1), "%s has --tls-cipher-suites", c.Name)
	}
	g.Expect(proxies).To(Equal(5))
}

// ownedVersions returns the resourceVersion of every object the operator applies besides the
// controller Deployment, by kind and name; for the PodDisruptionBudget and the node DaemonSet,
// whose status moves with the pods, their generation, which only a change of spec moves.
func ownedVersions(g Gomega, e *env.Env) map[string]string {
	ctx := context.Background()
	out := map[string]string{}
	get := func(kind string, c client.Client, key client.ObjectKey, obj client.Object) {
		g.Expect(c.Get(ctx, key, obj)).To(Succeed(), kind)
		out[kind+"/"+key.String()] = obj.GetResourceVersion()
	}
	mgmt := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: e.Namespace, Name: name} }
	get("ConfigMap", e.MgmtClient, mgmt(names.CloudConfConfigMap), &corev1.ConfigMap{})
	get("ServiceAccount", e.MgmtClient, mgmt(names.ControllerServiceAccount), &corev1.ServiceAccount{})
	get("Service", e.MgmtClient, mgmt(names.ControllerMetricsService), &corev1.Service{})
	pdb := &policyv1.PodDisruptionBudget{}
	g.Expect(e.MgmtClient.Get(ctx, mgmt(names.ControllerPDB), pdb)).To(Succeed())
	out["PodDisruptionBudget generation"] = strconv.FormatInt(pdb.Generation, 10)
	get("ConfigMap", e.GuestClient, client.ObjectKey{Namespace: names.GuestNamespace, Name: nodeconf.Name(e.Mode == env.ModeHyperShift)}, &corev1.ConfigMap{})
	if e.Mode == env.ModeStandalone {
		sm := &unstructured.Unstructured{}
		sm.SetGroupVersionKind(schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"})
		get("ServiceMonitor", e.MgmtClient, mgmt(names.ControllerServiceMonitor), sm)
	}
	out["DaemonSet generation"] = strconv.FormatInt(nodeDaemonSet(g, e).Generation, 10)
	return out
}
