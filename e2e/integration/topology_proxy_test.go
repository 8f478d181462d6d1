// Case 3, topology behind an egress proxy: in standalone mode the operator lists the OpenStack
// availability zones through the cluster-wide proxy (the Proxy object cluster), honours its
// noProxy, and when the proxy refuses or is down says so in the topology condition, naming the
// proxy but never the credentials of its URL. On HyperShift the proxy is the operator's own
// environment.
package integration

import (
	"net"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/connectproxy"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
)

// proxyOnlyHost is the name clouds.yaml gives the fake OpenStack in the proxy tests. Only the
// test's proxy resolves it. Go's resolver never looks .onion names up in DNS (RFC 7686), so the
// operator cannot reach the name by itself, and trying sends nothing off loopback: a decision
// made from its zones was made through the proxy.
const proxyOnlyHost = "openstack.onion"

// proxyUser and proxyPassword are the credentials in the proxy URL, which must never show.
const (
	proxyUser     = "csi"
	proxyPassword = "proxy-pa55word"
)

func TestTopologyProxy(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeStandalone, Masters: 1, Workers: 1})

	proxy := startProxy(t)
	target := nameOpenStackByProxyOnlyHost(t, e)
	// The cluster network operator publishes the proxy in the Proxy's status, which is what
	// components follow.
	clusterProxy := configv1.ProxyStatus{
		HTTPSProxy: "http://" + proxyUser + ":" + proxyPassword + "@" + proxy.Addr(),
		NoProxy:    ".cluster.local,.svc,localhost",
	}
	setClusterProxy(t, e, clusterProxy)
	logs := &logBuffer{}
	opts := topologyOperatorOptions
	opts.LogOutput = logs
	e.RunOperatorForTest(t, opts)

	t.Run("When the cluster-wide proxy is set, it should list the zones through it and decide topology", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			c := condition(g, e, names.ConditionTopologyDegraded)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse), c.Message)
			g.Expect(c.Reason).To(Equal(names.ReasonAsExpected))
			g.Expect(c.Message).To(ContainSubstring("Topology is enabled"))
			expectTopology(g, e, true)
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())

		connects := proxy.Connects()
		g.Expect(connects).NotTo(BeEmpty())
		for _, c := range connects {
			g.Expect(c.Target).To(Equal(target))
			g.Expect(c.Status).To(Equal(http.StatusOK))
			g.Expect(c.User).To(Equal(proxyUser), "the operator authenticates with the proxy URL's credentials")
		}
		g.Expect(e.OpenStack.CountTokenRequests()).To(BeNumerically(">", 0))
	})

	t.Run("When the proxy refuses the tunnel, it should name the proxy in the condition and the Event, never its credentials", func(t *testing.T) {
		g := NewWithT(t)
		proxy.Refuse(http.StatusForbidden)

		g.Eventually(func(g Gomega) {
			c := condition(g, e, names.ConditionTopologyDegraded)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue), c.Message)
			g.Expect(c.Reason).To(Equal(names.ReasonOpenStackUnavailable))
			g.Expect(c.Message).To(ContainSubstring("The HTTP proxy " + proxy.Addr() + " refused to connect to the OpenStack API"))
			g.Expect(c.Message).To(ContainSubstring("403 Forbidden"))
			g.Expect(c.Message).To(ContainSubstring("Topology stays enabled"))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		g.Expect(proxy.Connects()).To(ContainElement(connectproxy.Connect{Target: target, User: proxyUser, Status: http.StatusForbidden}))
		g.Eventually(func(g Gomega) {
			var found bool
			for _, ev := range driverEvents(g, e) {
				if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Note, "The HTTP proxy "+proxy.Addr()+" refused") {
					found = true
				}
			}
			g.Expect(found).To(BeTrue(), "a Warning Event naming the proxy")
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		expectNoProxyPassword(g, e, logs)
	})

	t.Run("When noProxy names the OpenStack host, it should bypass the refusing proxy", func(t *testing.T) {
		g := NewWithT(t)
		bypass := clusterProxy
		bypass.NoProxy += "," + proxyOnlyHost
		setClusterProxy(t, e, bypass)

		// Directly, the name cannot be reached: that failure instead of the proxy's refusal,
		// and a proxy that records no more CONNECTs, show that detection went around it.
		g.Eventually(func(g Gomega) {
			c := condition(g, e, names.ConditionTopologyDegraded)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue), c.Message)
			g.Expect(c.Reason).To(Equal(names.ReasonOpenStackUnavailable))
			g.Expect(c.Message).To(ContainSubstring(openstack.Message(openstack.ReasonUnreachable) + ". Topology stays enabled"))
			g.Expect(c.Message).NotTo(ContainSubstring(proxy.Addr()))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		seen := len(proxy.Connects())
		g.Consistently(func(g Gomega) {
			g.Expect(proxy.Connects()).To(HaveLen(seen))
			expectTopology(g, e, true)
		}).WithTimeout(3 * recheckInterval).WithPolling(poll).Should(Succeed())
		// The log has the detail: a direct attempt at the OpenStack host, not at the proxy.
		var direct []string
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, `"reason": "Unreachable"`) {
				direct = append(direct, line)
			}
		}
		g.Expect(direct).NotTo(BeEmpty())
		g.Expect(direct).To(HaveEach(ContainSubstring(proxyOnlyHost)))
		g.Expect(direct).To(HaveEach(Not(ContainSubstring("proxy"))))
	})

	t.Run("When the proxy is down, it should say the proxy cannot be reached", func(t *testing.T) {
		g := NewWithT(t)
		proxy.Close()
		setClusterProxy(t, e, clusterProxy)
		g.Eventually(func(g Gomega) {
			c := condition(g, e, names.ConditionTopologyDegraded)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue), c.Message)
			g.Expect(c.Message).To(ContainSubstring("The HTTP proxy " + proxy.Addr() + " cannot be reached"))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		expectTopology(g, e, true)
		expectNoProxyPassword(g, e, logs)
	})

	t.Run("When the cluster-wide proxy moves to a working one, it should recover by itself", func(t *testing.T) {
		g := NewWithT(t)
		replacement := startProxy(t)
		moved := clusterProxy
		moved.HTTPSProxy = "http://" + proxyUser + ":" + proxyPassword + "@" + replacement.Addr()
		setClusterProxy(t, e, moved)
		g.Eventually(func(g Gomega) {
			c := condition(g, e, names.ConditionTopologyDegraded)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse), c.Message)
			g.Expect(c.Reason).To(Equal(names.ReasonAsExpected))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		g.Expect(replacement.Connects()).NotTo(BeEmpty())
		expectTopology(g, e, true)
	})
}

// TestTopologyProxyHyperShift: on HyperShift the operator runs in the management cluster, and
// HyperShift's control-plane operator gives it the proxy as HTTP_PROXY, HTTPS_PROXY and NO_PROXY.
// Detection goes through that proxy, and every controller container gets it, as csi-operator's
// do. (The command reads those variables; the in-process operator gets them as options.)
func TestTopologyProxyHyperShift(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift, Masters: 1, Workers: 1})
	proxy := startProxy(t)
	target := nameOpenStackByProxyOnlyHost(t, e)
	operatorProxy := configv1.ProxyStatus{
		HTTPSProxy: "http://" + proxyUser + ":" + proxyPassword + "@" + proxy.Addr(),
		NoProxy:    ".cluster.local,.svc,kube-apiserver",
	}
	opts := topologyOperatorOptions
	opts.Proxy = operatorProxy
	e.RunOperatorForTest(t, opts)

	t.Run("When the operator's environment names a proxy, it should list the zones through it and give it to every controller container", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			c := condition(g, e, names.ConditionTopologyDegraded)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse), c.Message)
			g.Expect(c.Message).To(ContainSubstring("Topology is enabled"))
			expectTopology(g, e, true)
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		g.Expect(proxy.Connects()).NotTo(BeEmpty())
		for _, c := range proxy.Connects() {
			g.Expect(c.Target).To(Equal(target))
			g.Expect(c.Status).To(Equal(http.StatusOK))
		}

		pod := controllerDeployment(g, e).Spec.Template.Spec
		g.Expect(pod.Containers).NotTo(BeEmpty())
		for i := range pod.Containers {
			c := &pod.Containers[i]
			g.Expect(envValues(c, "HTTPS_PROXY")).To(Equal([]string{operatorProxy.HTTPSProxy}), c.Name)
			g.Expect(envValues(c, "NO_PROXY")).To(Equal([]string{operatorProxy.NoProxy}), c.Name)
			g.Expect(envValues(c, "HTTP_PROXY")).To(BeEmpty(), c.Name)
		}
	})

	t.Run("When the operator's proxy refuses, it should name it in the condition, never its credentials", func(t *testing.T) {
		g := NewWithT(t)
		proxy.Refuse(http.StatusBadGateway)
		g.Eventually(func(g Gomega) {
			c := condition(g, e, names.ConditionTopologyDegraded)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue), c.Message)
			g.Expect(c.Message).To(ContainSubstring("The HTTP proxy " + proxy.Addr() + " refused"))
			g.Expect(c.Message).To(ContainSubstring("502 Bad Gateway"))
			g.Expect(c.Message).NotTo(ContainSubstring(proxyPassword))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		expectTopology(g, e, true)
	})
}

// nameOpenStackByProxyOnlyHost rewrites the credentials' clouds.yaml so that it names the fake
// OpenStack by proxyOnlyHost (at the fake's port), adds that name to the fake's certificate, and
// returns the host:port a proxy is asked to connect to.
func nameOpenStackByProxyOnlyHost(t *testing.T, e *env.Env) string {
	t.Helper()
	g := NewWithT(t)
	g.Expect(e.OpenStack.AddHosts(proxyOnlyHost)).To(Succeed())
	_, port, err := net.SplitHostPort(strings.TrimPrefix(e.OpenStack.URL(), "https://"))
	g.Expect(err).NotTo(HaveOccurred())
	target := net.JoinHostPort(proxyOnlyHost, port)
	clouds, err := e.OpenStack.CloudsYAML(fakeopenstack.CloudOptions{CloudName: env.CloudName, Versionless: true, BaseURL: "https://" + target})
	g.Expect(err).NotTo(HaveOccurred())
	update(t, e.MgmtClient, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.CredentialsSecret}},
		"installer", func(s *corev1.Secret) { s.Data[names.KeyCloudsYAML] = clouds })
	return target
}

// startProxy starts a CONNECT proxy that resolves proxyOnlyHost to the fake OpenStack's loopback
// address, for the rest of the test.
func startProxy(t *testing.T) *connectproxy.Proxy {
	t.Helper()
	p, err := connectproxy.Start(connectproxy.Options{Hosts: map[string]string{proxyOnlyHost: "127.0.0.1"}})
	if err != nil {
		t.Fatalf("starting the proxy: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// setClusterProxy sets the Proxy cluster's status, as the cluster network operator does.
func setClusterProxy(t *testing.T, e *env.Env, p configv1.ProxyStatus) {
	t.Helper()
	updateStatus(t, e.GuestClient, &configv1.Proxy{ObjectMeta: metav1.ObjectMeta{Name: names.ProxyName}},
		func(o *configv1.Proxy) { o.Status = p })
}

// expectNoProxyPassword checks the conditions, the Events and the operator's log for the proxy
// password.
func expectNoProxyPassword(g Gomega, e *env.Env, logs *logBuffer) {
	for _, c := range driver(g, e).Status.Conditions {
		g.Expect(c.Message).NotTo(ContainSubstring(proxyPassword), c.Type)
	}
	for _, ev := range driverEvents(g, e) {
		g.Expect(ev.Note).NotTo(ContainSubstring(proxyPassword))
	}
	g.Expect(logs.String()).NotTo(ContainSubstring(proxyPassword))
}
