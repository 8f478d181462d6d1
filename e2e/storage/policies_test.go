//go:build e2e

package storage

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realnode"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil/policylabels"
)

// unlabelledOperator names the copy of the operator's Deployment without its policy labels, and
// is the value of its pods' label app.
const unlabelledOperator = "cinder-csi-operator-unlabelled"

// dialTimeout bounds one connection attempt of the policy checks: a refused one fails at once
// (kube-router rejects the first packet), so this only guards against a hang.
const dialTimeout = 5 * time.Second

// policiesEnforced proves that the platform's NetworkPolicies, as the local world seeds them, are
// enforced and that the operator passes under them only thanks to its labels: a copy of the
// operator's Deployment whose pod lacks the labels the policies select on (standalone: the
// openshift.storage.network-policy.* labels under cluster-storage-operator's default-deny;
// HyperShift: need-management-kas-access under management-kas) cannot reach its API server, so
// once its container starts under the policies its caches never sync and its readiness endpoint
// says so within the probe's period, while the labelled operator runs on. Each connection is a real one, opened from the pod's own network
// namespace; the outcomes are logged as a table of what each policy allowed or refused.
func policiesEnforced(t *testing.T, w *world) {
	ctx := context.Background()
	g := NewWithT(t)
	node := w.Env.Real.MgmtNode
	hyperShift := w.Env.Mode == env.ModeHyperShift

	labelled, err := w.Operator.Pod(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	unlabelled := w.deployUnlabelledOperator(t)
	netns := map[string]string{}
	for name, p := range map[string]*corev1.Pod{"operator": labelled, "unlabelled": unlabelled} {
		netns[name], err = node.PodNetns(p.UID)
		g.Expect(err).NotTo(HaveOccurred())
	}
	apiServer := net.JoinHostPort(localcluster.KubernetesServiceIP, "443")

	// The policies reach a new pod's rules a moment after its sandbox has its address, and the
	// connections its process opened before stay up (established connections are let through,
	// as by most implementations). Once the rules refuse a new connection, the container is
	// killed: what the kubelet starts again in the same pod meets them from its first request.
	g.Eventually(func() error { return dialIn(ctx, netns["unlabelled"], apiServer) }).
		WithTimeout(30*time.Second).WithPolling(poll).Should(HaveOccurred(), "the policies are in place for the unlabelled pod")
	st := unlabelled.Status.ContainerStatuses[0]
	g.Expect(node.KillContainer(ctx, st.ContainerID)).To(Succeed())
	g.Eventually(func(g Gomega) {
		p := &corev1.Pod{}
		g.Expect(w.Mgmt.Get(ctx, client.ObjectKeyFromObject(unlabelled), p)).To(Succeed())
		g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(BeNumerically(">", st.RestartCount))
		g.Expect(p.Status.ContainerStatuses[0].State.Running).NotTo(BeNil())
		unlabelled = p
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	restarts := unlabelled.Status.ContainerStatuses[0].RestartCount

	t.Run("When the operator's pod lacks its policy labels, its readiness should say its caches cannot sync", func(t *testing.T) {
		g := NewWithT(t)
		// The readiness probe runs every 10 s; its endpoint answers what the kubelet sees.
		probe := net.JoinHostPort(unlabelled.Status.PodIP, "8081")
		g.Eventually(func(g Gomega) {
			code, body, err := getIn(ctx, node.NetnsPath(), "http://"+probe+"/readyz")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(code).To(Equal(http.StatusInternalServerError), body)
			g.Expect(body).To(ContainSubstring("not ready"))
		}).WithTimeout(20 * time.Second).WithPolling(poll).Should(Succeed())
		g.Consistently(func(g Gomega) {
			p := &corev1.Pod{}
			g.Expect(w.Mgmt.Get(ctx, client.ObjectKeyFromObject(unlabelled), p)).To(Succeed())
			g.Expect(ready(p)).To(BeFalse(), "the unlabelled operator never becomes Ready")
			g.Expect(p.Status.ContainerStatuses[0].RestartCount).To(Equal(restarts), "it waits, it does not crash")
		}).WithTimeout(30 * time.Second).WithPolling(poll).Should(Succeed())
		g.Expect(*w.operatorLease(g).Spec.HolderIdentity).To(Equal(w.OperatorNamespace+"/"+labelled.Name), "the labelled operator keeps its lease")
		w.waitAvailable(t)
	})

	// Where each pod may connect to, and what decides it.
	type check struct {
		what, from, addr     string
		labelled, unlabelled bool
		why                  string
		// logOnly records the unlabelled pod's outcome without asserting it: on HyperShift,
		// management-kas lets it out to every address but the management API server's
		// (0.0.0.0/0 with exceptions), and kube-router v2.1.0 does not reliably let such
		// connections through (seen refused in two runs of four); what the negative test
		// proves, the refused API server, is asserted.
		logOnly bool
	}
	openStackURL, err := url.Parse(w.OpenStackURL)
	g.Expect(err).NotTo(HaveOccurred())
	openStack := net.JoinHostPort(openStackURL.Hostname(), "443")
	checks := []check{
		{"its API server, through the kubernetes Service", "pod", apiServer, true, false, map[bool]string{
			false: "allow-egress-to-api-server admits the labelled pod (TCP 6443 after the Service translation); default-deny refuses the other",
			true:  "management-kas refuses the management API server's addresses to a pod without need-management-kas-access",
		}[hyperShift], false},
		{"OpenStack", "pod", openStack, true, hyperShift, map[bool]string{
			false: "allow-all-egress admits the labelled pod; default-deny refuses the other",
			true:  "management-kas lets every other address out, to both pods (unlabelled: logged, not asserted)",
		}[hyperShift], hyperShift},
	}
	if hyperShift {
		kc, err := clientcmd.Load(w.Env.Real.GuestKubeconfigInMgmt)
		g.Expect(err).NotTo(HaveOccurred())
		var guestAPI string
		for _, c := range kc.Clusters {
			u, err := url.Parse(c.Server)
			g.Expect(err).NotTo(HaveOccurred())
			guestAPI = u.Host
		}
		checks = append(checks, check{"the guest API server", "pod", guestAPI, true, true,
			"management-kas lets every address but the management API server's out (unlabelled: logged, not asserted)", true})
	}
	// Ingress, from the CSI controller's pod in the same namespace, to ports that listen: the
	// labelled operator's metrics port, and each pod's probe port, which answers from the start
	// (the unlabelled operator's metrics port does not listen while it cannot reach its API
	// server, so a refusal there would prove nothing).
	controller := w.controllerPod(g)
	netns["controller"], err = node.PodNetns(controller.UID)
	g.Expect(err).NotTo(HaveOccurred())
	metricsPort := strconv.Itoa(int(containerPort(g, labelled, "metrics")))
	probePort := strconv.Itoa(int(containerPort(g, labelled, "probes")))
	checks = append(checks,
		check{"its metrics port " + metricsPort + ", from the CSI controller", "controller:" + metricsPort, "", true, false, map[bool]string{
			false: "allow-ingress-to-operator-metrics-range admits 8443-8445 to the labelled pod (the unlabelled one's does not listen: not tried)",
			true:  "same-namespace admits every pod of the namespace (the unlabelled one's does not listen: not tried)",
		}[hyperShift], false},
		check{"its probe port " + probePort + ", from the CSI controller", "controller:" + probePort, "", hyperShift, hyperShift, map[bool]string{
			false: "operator-metrics-range admits only 8443-8445 to the labelled pod; default-deny refuses the other",
			true:  "same-namespace admits every pod of the namespace to both",
		}[hyperShift], false})

	var table strings.Builder
	fmt.Fprintf(&table, "%-50s %-10s %-10s %s\n", "connection", "labelled", "unlabelled", "because")
	for _, c := range checks {
		result := map[string]bool{}
		port, toPod := strings.CutPrefix(c.from, "controller:")
		for _, pod := range []string{"operator", "unlabelled"} {
			from, addr := netns[pod], c.addr
			if toPod {
				if pod == "unlabelled" && port == metricsPort {
					continue // not listening, see above
				}
				target := labelled
				if pod == "unlabelled" {
					target = unlabelled
				}
				from, addr = netns["controller"], net.JoinHostPort(target.Status.PodIP, port)
			}
			result[pod] = reachable(ctx, from, addr)
		}
		unlabelledVerdict := verdict(result["unlabelled"])
		if toPod && port == metricsPort {
			unlabelledVerdict = "-"
		}
		fmt.Fprintf(&table, "%-50s %-10s %-10s %s\n", c.what, verdict(result["operator"]), unlabelledVerdict, c.why)
		g.Expect(result["operator"]).To(Equal(c.labelled), "%s, for the labelled operator\n%s", c.what, table.String())
		if unlabelledVerdict != "-" && !c.logOnly {
			g.Expect(result["unlabelled"]).To(Equal(c.unlabelled), "%s, for the unlabelled one\n%s", c.what, table.String())
		}
	}
	t.Logf("What the seeded policies allowed (%s):\n%s", w.Env.Mode, table.String())
}

// deployUnlabelledOperator creates a copy of the operator's Deployment under another name whose
// pod lacks every label the platform's policies select on, waits for its container to run, and
// deletes it when the test ends.
func (w *world) deployUnlabelledOperator(t *testing.T) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	orig := &appsv1.Deployment{}
	g.Expect(w.Mgmt.Get(ctx, client.ObjectKey{Namespace: w.OperatorNamespace, Name: env.OperatorName(w.Env.Mode)}, orig)).To(Succeed())
	labels := map[string]string{}
	for k, v := range orig.Spec.Template.Labels {
		labels[k] = v
	}
	// Nor the labels the operator's Deployment selects its pods by, so that neither Deployment
	// counts the other's pod.
	for k := range orig.Spec.Selector.MatchLabels {
		delete(labels, k)
	}
	for k := range policylabels.Operator() {
		delete(labels, k)
	}
	delete(labels, names.NeedManagementKASAccess)
	labels["app"] = unlabelledOperator
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: orig.Namespace, Name: unlabelledOperator},
		Spec:       *orig.Spec.DeepCopy(),
	}
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": unlabelledOperator}}
	d.Spec.Template.Labels = labels
	g.Expect(w.Mgmt.Create(ctx, d)).To(Succeed())
	t.Cleanup(func() {
		if err := w.Mgmt.Delete(context.Background(), d); err != nil {
			t.Errorf("deleting %s: %v", d.Name, err)
		}
	})
	var pod *corev1.Pod
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(w.Mgmt.List(ctx, pods, client.InNamespace(d.Namespace), client.MatchingLabels{"app": unlabelledOperator})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		pod = &pods.Items[0]
		g.Expect(pod.Status.ContainerStatuses).NotTo(BeEmpty())
		g.Expect(pod.Status.ContainerStatuses[0].State.Running).NotTo(BeNil(), "%s", podSummary(pod))
		g.Expect(pod.Status.PodIP).NotTo(BeEmpty())
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	return pod
}

// controllerPod returns a running CSI controller pod.
func (w *world) controllerPod(g Gomega) *corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(w.Mgmt.List(context.Background(), pods, client.InNamespace(w.Namespace), client.MatchingLabels{"app": names.ControllerDeployment})).To(Succeed())
	for i := range pods.Items {
		if p := &pods.Items[i]; p.DeletionTimestamp == nil && ready(p) {
			return p
		}
	}
	g.Expect(pods.Items).To(BeEmpty(), "no Ready controller pod")
	return nil
}

// containerPort returns the port named name of the pod's first container.
func containerPort(g Gomega, p *corev1.Pod, name string) int32 {
	for _, port := range p.Spec.Containers[0].Ports {
		if port.Name == name {
			return port.ContainerPort
		}
	}
	g.Expect(name).To(BeEmpty(), "no port %s in %s", name, p.Name)
	return 0
}

// reachable tells whether addr can be reached from inside a network namespace within
// policySettle, judged the way the policy engine works: eventually. kube-router rewrites a pod's
// rules on every event of the pod (a container restart among them), and a connection tried in
// the middle of that can fail; so a connection counts as allowed when one attempt gets through,
// and as refused only when every attempt for all of policySettle is.
func reachable(ctx context.Context, netns, addr string) bool {
	deadline := time.Now().Add(policySettle)
	for {
		if dialIn(ctx, netns, addr) == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// policySettle is how long reachable gives the policies to settle.
const policySettle = 10 * time.Second

// dialIn opens a TCP connection to addr from inside a network namespace and closes it again.
func dialIn(ctx context.Context, netns, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c, err := realnode.DialIn(ctx, netns, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// getIn GETs url from inside a network namespace and returns the status and body.
func getIn(ctx context.Context, netns, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return realnode.DialIn(ctx, netns, network, addr)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func verdict(ok bool) string {
	if ok {
		return "allowed"
	}
	return "refused"
}
