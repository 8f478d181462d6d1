package desired

import (
	"bytes"
	"os"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil/golden"
)

func TestDesiredMonitoring(t *testing.T) {
	t.Parallel()
	const ns = names.GuestNamespace
	d := testutil.Decoder(t)
	all := Monitoring{ServiceMonitors: true, PrometheusRules: true}
	byName := func(g Gomega, objs []client.Object) map[string]*unstructured.Unstructured {
		out := map[string]*unstructured.Unstructured{}
		for _, o := range objs {
			u, ok := o.(*unstructured.Unstructured)
			g.Expect(ok).To(BeTrue(), "%T", o)
			g.Expect(u.GetLabels()).To(HaveKeyWithValue(names.ManagedByLabel, names.ManagedByValue))
			out[u.GetKind()+"/"+u.GetName()] = u
		}
		return out
	}

	t.Run("When rendered for the standalone namespace, it should match the fixture", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		objs, err := desiredMonitoring(d, all, ns)
		g.Expect(err).NotTo(HaveOccurred())
		for _, o := range objs {
			g.Expect(o.GetNamespace()).To(Equal(ns))
		}
		fixture := make([]any, 0, len(objs))
		for _, o := range objs {
			fixture = append(fixture, o)
		}
		golden.CompareWithFixture(t, fixture...)
	})

	t.Run("When a kind is not served or not writable, it should leave its objects out", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		objs, err := desiredMonitoring(d, Monitoring{}, ns)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(objs).To(BeEmpty())
		objs, err = desiredMonitoring(d, Monitoring{ServiceMonitors: true}, ns)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(byName(g, objs)).To(HaveLen(2))
		g.Expect(byName(g, objs)).To(HaveKey("ServiceMonitor/" + names.OperatorServiceMonitor))
		objs, err = desiredMonitoring(d, Monitoring{PrometheusRules: true}, ns)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(byName(g, objs)).To(HaveKey("PrometheusRule/" + names.AlertsRule))
	})

	t.Run("When rendered, the controller's ServiceMonitor should scrape every metrics Service port over TLS checked against the Service's name", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		objs, err := desiredMonitoring(d, all, ns)
		g.Expect(err).NotTo(HaveOccurred())
		sm := byName(g, objs)["ServiceMonitor/"+names.ControllerServiceMonitor]
		g.Expect(sm).NotTo(BeNil())
		svc, err := manifests.Object[*corev1.Service](d, "controller_metrics_service.yaml")
		g.Expect(err).NotTo(HaveOccurred())
		expectScrapes(g, sm, svc, names.ControllerMetricsService+"."+ns+".svc")
	})

	t.Run("When rendered, the operator's ServiceMonitor should scrape the metrics Service of either install over TLS checked against its name", func(t *testing.T) {
		t.Parallel()
		for _, file := range []string{"standalone/operator.yaml", "hypershift/management.yaml"} {
			g := NewWithT(t)
			svc := installedService(t, "../../manifests/install/"+file, names.OperatorMetricsService)
			objs, err := desiredMonitoring(d, all, svc.Namespace)
			g.Expect(err).NotTo(HaveOccurred())
			sm := byName(g, objs)["ServiceMonitor/"+names.OperatorServiceMonitor]
			g.Expect(sm).NotTo(BeNil())
			expectScrapes(g, sm, svc, names.OperatorMetricsService+"."+svc.Namespace+".svc")
		}
	})

	t.Run("When rendered, every alert should read the operator's metrics and have a severity, a summary, a description and a runbook section", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		objs, err := desiredMonitoring(d, all, ns)
		g.Expect(err).NotTo(HaveOccurred())
		rule := byName(g, objs)["PrometheusRule/"+names.AlertsRule]
		g.Expect(rule).NotTo(BeNil())
		readme, err := os.ReadFile("../../README.md")
		g.Expect(err).NotTo(HaveOccurred())
		groups, _, err := unstructured.NestedSlice(rule.Object, "spec", "groups")
		g.Expect(err).NotTo(HaveOccurred())
		var alerts []string
		for _, gr := range groups {
			rules, _, _ := unstructured.NestedSlice(gr.(map[string]any), "rules")
			for _, r := range rules {
				r := r.(map[string]any)
				name, _ := r["alert"].(string)
				alerts = append(alerts, name)
				g.Expect(name).To(HavePrefix("OpenStackCinder"))
				g.Expect(r["expr"]).To(ContainSubstring("cinder_csi_operator_"), name)
				g.Expect(r["expr"]).To(ContainSubstring("by (namespace"), "%s: one alert per hosted cluster", name)
				severity, _, _ := unstructured.NestedString(r, "labels", "severity")
				g.Expect(severity).To(BeElementOf("warning", "critical", "info"), name)
				annotations, _, _ := unstructured.NestedStringMap(r, "annotations")
				g.Expect(annotations).To(HaveKeyWithValue("summary", Not(BeEmpty())), name)
				g.Expect(annotations).To(HaveKeyWithValue("description", Not(BeEmpty())), name)
				g.Expect(string(readme)).To(ContainSubstring("#### "+name+"\n"), "the README's runbook has a section for %s", name)
			}
		}
		g.Expect(alerts).To(ConsistOf("OpenStackCinderVolumeAttachmentStuck", "OpenStackCinderOpenStackUnreachable",
			"OpenStackCinderControllerUnavailable", "OpenStackCinderNodePluginUnavailable", "OpenStackCinderNodesAtAttachLimit"))
	})
}

// expectScrapes checks that ServiceMonitor sm selects svc and scrapes each of its ports over
// HTTPS with a ServiceAccount token, checking the certificate against serverName.
func expectScrapes(g Gomega, sm *unstructured.Unstructured, svc *corev1.Service, serverName string) {
	selector, _, err := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(selector).NotTo(BeEmpty())
	for k, v := range selector {
		g.Expect(svc.Labels).To(HaveKeyWithValue(k, v), "the selector must select Service %s", svc.Name)
	}
	endpoints, _, err := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	g.Expect(err).NotTo(HaveOccurred())
	var ports []string
	for _, e := range endpoints {
		ep := e.(map[string]any)
		ports = append(ports, ep["port"].(string))
		g.Expect(ep).To(HaveKeyWithValue("scheme", "https"))
		g.Expect(ep).To(HaveKeyWithValue("interval", "30s"))
		g.Expect(ep).To(HaveKeyWithValue("bearerTokenFile", "/var/run/secrets/kubernetes.io/serviceaccount/token"))
		name, _, _ := unstructured.NestedString(ep, "tlsConfig", "serverName")
		g.Expect(name).To(Equal(serverName))
	}
	var svcPorts []string
	for _, p := range svc.Spec.Ports {
		svcPorts = append(svcPorts, p.Name)
	}
	g.Expect(ports).To(ConsistOf(svcPorts))
}

// installedService returns the Service called name in the install manifest file.
func installedService(t *testing.T, file, name string) *corev1.Service {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var svc corev1.Service
		if err := dec.Decode(&svc); err != nil {
			t.Fatalf("no Service %s in %s: %v", name, file, err)
		}
		if svc.Kind == "Service" && svc.Name == name {
			return &svc
		}
	}
}
