//go:build e2e

package storage

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realnode"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/tlscheck"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// metricsUnderModern sets the cluster's TLS security profile to Modern and checks every metrics
// port the operator serves or deploys, with real handshakes inside the management node's network
// namespace, where Prometheus would scrape from: the CSI controller's kube-rbac-proxy ports and
// the operator's own /metrics refuse a TLS 1.2 client and serve a TLS 1.3 one; a scrape without
// a token or with one that may not get /metrics is refused, an authorised one gets the metrics.
// The profile change rolls the controller once and the node plugin not at all.
func metricsUnderModern(t *testing.T, w *world) {
	ctx := context.Background()
	g := NewWithT(t)
	cs, err := kubernetes.NewForConfig(w.Env.MgmtConfig())
	g.Expect(err).NotTo(HaveOccurred())
	if w.Env.Mode == env.ModeHyperShift {
		// kube-rbac-proxy reviews each scrape with the API server of the cluster its pod runs
		// in, the management cluster, where nothing grants the controller's ServiceAccount the
		// reviews: a management cluster that has the controller's metrics scraped binds
		// system:auth-delegator to it, as it does for the operator (see manifests/install).
		g.Expect(env.BindAuthDelegator(ctx, w.Mgmt, w.Namespace, names.ControllerServiceAccount)).To(Succeed())
	}
	rsBefore := len(w.controllerReplicaSets(g))
	nodeBefore := w.daemonSet(g)

	rolled := took(t, "controller rolled to the Modern profile")
	g.Expect(w.Env.SetTLSProfile(ctx, &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType, Modern: &configv1.ModernTLSProfile{}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(w.controllerReplicaSets(g)).To(HaveLen(rsBefore+1), "the controller rolls once")
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	w.waitAvailable(t)
	rolled()
	g.Consistently(func(g Gomega) {
		g.Expect(w.controllerReplicaSets(g)).To(HaveLen(rsBefore+1), "and only once")
		g.Expect(w.daemonSet(g).Generation).To(Equal(nodeBefore.Generation), "the node plugin does not roll")
	}).WithTimeout(10 * time.Second).WithPolling(poll).Should(Succeed())

	reader, err := tlscheck.ServiceAccountToken(ctx, cs, w.Namespace, "metrics-reader", true)
	g.Expect(err).NotTo(HaveOccurred())
	stranger, err := tlscheck.ServiceAccountToken(ctx, cs, w.Namespace, "metrics-stranger", false)
	g.Expect(err).NotTo(HaveOccurred())
	netns := w.Env.Real.MgmtNode.NetnsPath()
	opts := tlscheck.Options{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return realnode.DialIn(ctx, netns, network, addr)
	}}

	// Available can be reported from the rolled Deployment's status a moment before the new
	// controller pod is Ready (or while the old one is still listed as terminating): wait for it.
	var ports map[string]string
	g.Eventually(func(g Gomega) {
		ports = w.metricsPorts(g)
		g.Expect(ports).To(HaveLen(6), "five kube-rbac-proxy ports of the controller and the operator's own: %v", ports)
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	for name, addr := range ports {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := tlscheck.Handshake(ctx, addr, tls.VersionTLS12, opts)
			g.Expect(err).To(HaveOccurred(), "a TLS 1.2 client is refused")
			st, err := tlscheck.Handshake(ctx, addr, tls.VersionTLS13, opts)
			g.Expect(err).NotTo(HaveOccurred(), "a TLS 1.3 client is served")
			g.Expect(st.Version).To(BeEquivalentTo(tls.VersionTLS13))
			for who, token := range map[string]string{"no token": "", "a ServiceAccount without the right": stranger} {
				code, body, err := tlscheck.Scrape(ctx, addr, "/metrics", token, opts)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(code).To(BeElementOf(http.StatusUnauthorized, http.StatusForbidden), "%s: %s", who, body)
			}
			code, body, err := tlscheck.Scrape(ctx, addr, "/metrics", reader, opts)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(code).To(Equal(http.StatusOK), "the reader: %s", body)
			g.Expect(string(body)).To(ContainSubstring("# TYPE "))
		})
	}
}

// metricsPorts returns the HTTPS metrics addresses (pod IP and port) of the running controller
// pods' kube-rbac-proxy containers and of the operator's pod, by a readable name.
func (w *world) metricsPorts(g Gomega) map[string]string {
	ctx := context.Background()
	out := map[string]string{}
	pods := &corev1.PodList{}
	g.Expect(w.Mgmt.List(ctx, pods, client.InNamespace(w.Namespace), client.MatchingLabels{"app": names.ControllerDeployment})).To(Succeed())
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || !ready(&p) {
			continue
		}
		for _, c := range p.Spec.Containers {
			if !strings.Contains(c.Name, "kube-rbac-proxy") {
				continue
			}
			for _, port := range c.Ports {
				out["controller "+c.Name] = net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(port.ContainerPort)))
			}
		}
		break // one controller pod is enough: its replicas run the same template
	}
	op, err := w.Operator.Pod(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	for _, port := range op.Spec.Containers[0].Ports {
		if port.Name == "metrics" {
			out["operator"] = net.JoinHostPort(op.Status.PodIP, strconv.Itoa(int(port.ContainerPort)))
		}
	}
	return out
}
