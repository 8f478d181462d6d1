package install_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/imagetars"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/install"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/procs"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/tlscheck"
	operatoraccess "github.com/cinder-csi-operator/cinder-csi-operator/shared/access"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// grantRecheck is how long the operator keeps a denial in TestCSORBACGrantReviews: short, so
// that the test sees the grant taken up within seconds.
const grantRecheck = 3 * time.Second

// TestCSORBACGrantReviews runs the standalone operator, in this process, as csi-operator's
// ServiceAccount under cluster-storage-operator's RBAC, which does not let it create
// SubjectAccessReviews; so the kube-rbac-proxies' ClusterRole grants token reviews only, and a
// real kube-rbac-proxy, running as the controller's ServiceAccount in front of a stand-in metrics
// endpoint, cannot authorise a scrape. An administrator then grants the operator's
// ServiceAccount SubjectAccessReviews, as the README says: within the operator's recheck interval
// the guest manager adds them to the proxies' ClusterRole, and the next scrape of the same proxy
// succeeds; neither the operator nor the proxy restarts.
func TestCSORBACGrantReviews(t *testing.T) {
	// The in-process operator's denials are kept for grantRecheck. Set before t.Parallel, so
	// that every test of this package that starts an operator does so after the change; under
	// the install manifests' RBAC nothing is denied and the interval is never used.
	operatoraccess.DefaultInterval = grantRecheck
	t.Parallel()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	v := imagetars.DefaultVersions()
	proxyBinary := imagetars.BinaryPath(filepath.Join(root, "bin"), imagetars.KubeRBACProxy, v.KubeRBACProxy)
	if _, err := os.Stat(proxyBinary); err != nil {
		t.Skipf("kube-rbac-proxy %s is not built (make operand-binaries): %v", v.KubeRBACProxy, err)
	}

	e := env.StartForTest(t, env.Options{Mode: env.ModeStandalone})
	ctx := context.Background()
	g := NewWithT(t)
	docs := readDocs(t, filepath.Join(cso, "standalone-rbac.yaml"), strings.NewReplacer(install.PlaceholderNamespace, e.Namespace))
	id := serviceAccount(e.Namespace, names.OperatorName)
	createAll(t, e.MgmtClient, docs)
	waitRulesInEffect(t, e.MgmtClient, docs, id)
	operatorMay := func(g Gomega) bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: id.UserName, Groups: id.Groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "create", Group: authorizationv1.GroupName, Resource: "subjectaccessreviews"},
		}}
		g.Expect(e.MgmtClient.Create(ctx, sar)).To(Succeed())
		return sar.Status.Allowed
	}
	g.Expect(operatorMay(g)).To(BeFalse(), "cluster-storage-operator's RBAC grants no SubjectAccessReviews")

	var requests apiLog
	op := e.RunOperatorForTest(t, env.OperatorOptions{WrapConfig: requests.wrapConfig(t, map[string]rest.ImpersonationConfig{env.ClusterManagement: id})})
	waitAvailable(t, e)
	g.Expect(proxyRoleReviews(g, e)).To(BeFalse(), "the proxies' ClusterRole holds SubjectAccessReviews the operator may not grant")

	cs, err := kubernetes.NewForConfig(e.MgmtConfig())
	g.Expect(err).NotTo(HaveOccurred())
	addr := startKubeRBACProxy(t, e, cs, proxyBinary)
	reader, err := tlscheck.ServiceAccountToken(ctx, cs, e.Namespace, "grant-reviews-reader", true)
	g.Expect(err).NotTo(HaveOccurred())
	scrape := func(g Gomega) (int, string) {
		status, body, err := tlscheck.Scrape(ctx, addr, "/metrics", reader, tlscheck.Options{})
		g.Expect(err).NotTo(HaveOccurred())
		return status, string(body)
	}
	// The proxy serves once it is up; a scrape it cannot review is an authorization error.
	g.Eventually(func(g Gomega) {
		status, body := scrape(g)
		g.Expect(status).To(Equal(http.StatusInternalServerError), body)
	}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())

	grant := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "grant-subjectaccessreviews"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{authorizationv1.GroupName}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}}},
	}
	g.Expect(e.MgmtClient.Create(ctx, grant)).To(Succeed())
	g.Expect(e.MgmtClient.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: grant.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: e.Namespace, Name: names.OperatorName}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: grant.Name},
	})).To(Succeed())
	g.Eventually(operatorMay).WithTimeout(installTimeout).WithPolling(poll).Should(BeTrue())
	granted := time.Now()

	// Within the interval, plus a reconcile and an apply.
	g.Eventually(func(g Gomega) bool { return proxyRoleReviews(g, e) }).
		WithTimeout(grantRecheck+30*time.Second).WithPolling(poll).Should(BeTrue(), "the grant is taken up without a restart")
	t.Logf("The proxies' ClusterRole holds SubjectAccessReviews %s after the grant", time.Since(granted).Round(100*time.Millisecond))
	g.Eventually(func(g Gomega) {
		status, body := scrape(g)
		g.Expect(status).To(Equal(http.StatusOK), body)
		g.Expect(body).To(ContainSubstring("csi_sidecar_operations_seconds_count"))
	}).WithTimeout(30 * time.Second).WithPolling(poll).Should(Succeed())
	g.Expect(op.Running()).To(BeTrue(), "the operator kept running")
}

// proxyRoleReviews reports whether the kube-rbac-proxies' ClusterRole grants creating
// SubjectAccessReviews.
func proxyRoleReviews(g Gomega, e *env.Env) bool {
	role := &rbacv1.ClusterRole{}
	g.Expect(e.MgmtClient.Get(context.Background(), client.ObjectKey{Name: names.KubeRBACProxyRole}, role)).To(Succeed())
	return slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.APIGroups, authorizationv1.GroupName) && slices.Contains(r.Resources, "subjectaccessreviews") && slices.Contains(r.Verbs, "create")
	})
}

// startKubeRBACProxy runs the kube-rbac-proxy binary as a process of this host with the arguments
// of the controller's first kube-rbac-proxy container, as the controller's ServiceAccount (whose
// token it reviews with, as in the pod), listening on loopback with a certificate of its own in
// front of a stand-in metrics endpoint, and returns its address.
func startKubeRBACProxy(t *testing.T, e *env.Env, cs kubernetes.Interface, binary string) string {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	dep := &appsv1.Deployment{}
	g.Expect(e.MgmtClient.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: names.ControllerDeployment}, dep)).To(Succeed())
	i := slices.IndexFunc(dep.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return strings.Contains(c.Name, "kube-rbac-proxy") })
	g.Expect(i).NotTo(Equal(-1), "a kube-rbac-proxy container")
	args := dep.Spec.Template.Spec.Containers[i].Args

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
	addr, err := env.FreeAddr()
	g.Expect(err).NotTo(HaveOccurred())
	token, err := tlscheck.ServiceAccountToken(ctx, cs, e.Namespace, names.ControllerServiceAccount, false)
	g.Expect(err).NotTo(HaveOccurred())

	// The pod's addresses and paths become this process's; the rest stays as the Deployment has it.
	local := map[string]string{
		"--secure-listen-address": addr, "--upstream": upstream.URL + "/",
		"--tls-cert-file": certFile, "--tls-private-key-file": keyFile,
	}
	run := []string{"--kubeconfig=" + tokenKubeconfig(t, e.Mgmt.KubeconfigPath(), token)}
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if v, ok := local[name]; ok {
			a = name + "=" + v
		}
		run = append(run, a)
	}
	logPath := filepath.Join(dir, "kube-rbac-proxy.log")
	logFile, err := os.Create(logPath)
	g.Expect(err).NotTo(HaveOccurred())
	p, err := procs.Start(procs.Options{Name: "kube-rbac-proxy", Path: binary, Args: run, Output: logFile})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if p.Exited() {
			t.Errorf("kube-rbac-proxy ended before the test did: %v", p.Err())
		}
		p.Stop(5 * time.Second)
		_ = logFile.Close()
		if t.Failed() {
			t.Logf("kube-rbac-proxy's log ended with:\n%s", procs.LogTail(logPath, 40))
		}
	})
	return addr
}
