package integration

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// serviceMonitor returns an empty ServiceMonitor named as the operator names its own, in ns.
func serviceMonitor(ns string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("monitoring.coreos.com/v1")
	u.SetKind("ServiceMonitor")
	u.SetNamespace(ns)
	u.SetName(names.ControllerServiceMonitor)
	return u
}

// TestStandaloneServiceMonitor starts the standalone operator on a cluster without the monitoring
// stack's CRD, installs the CRD later, as a cluster gains monitoring, and checks the
// ServiceMonitor appears and is kept in shape. (On HyperShift none is created: TestFreshInstall.)
func TestStandaloneServiceMonitor(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeStandalone, Masters: 1, Workers: 1})
	ctx := context.Background()
	g := NewWithT(t)

	// The local clusters serve ServiceMonitors from the start; take the CRD away before the
	// operator starts, and keep it to put back.
	crd := &apiextensionsv1.CustomResourceDefinition{}
	g.Expect(e.GuestClient.Get(ctx, client.ObjectKey{Name: names.ServiceMonitorCRD}, crd)).To(Succeed())
	g.Expect(e.GuestClient.Delete(ctx, crd)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(e.GuestClient.Get(ctx, client.ObjectKey{Name: names.ServiceMonitorCRD}, &apiextensionsv1.CustomResourceDefinition{}))
	}).WithTimeout(installTimeout).WithPolling(poll).Should(BeTrue())
	// A client whose REST mapper has not cached the kind as served.
	fresh, err := client.New(e.MgmtConfig(), client.Options{Scheme: e.MgmtClient.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())

	e.RunOperatorForTest(t, env.OperatorOptions{})

	t.Run("When the cluster does not serve ServiceMonitors, it should install the driver to Available without one", func(t *testing.T) {
		waitAvailable(t, e)
		g := NewWithT(t)
		expectNotDegraded(g, driver(g, e))
		err := fresh.Get(ctx, client.ObjectKeyFromObject(serviceMonitor(e.Namespace)), serviceMonitor(e.Namespace))
		g.Expect(meta.IsNoMatchError(err) || apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	})

	var created *unstructured.Unstructured
	t.Run("When the monitoring stack's CRD appears, it should create the ServiceMonitor for the metrics Service", func(t *testing.T) {
		g := NewWithT(t)
		crd.ObjectMeta = metav1.ObjectMeta{Name: crd.Name}
		crd.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
		g.Expect(e.GuestClient.Create(ctx, crd)).To(Succeed())
		start := time.Now()
		g.Eventually(func(g Gomega) {
			sm := serviceMonitor(e.Namespace)
			g.Expect(fresh.Get(ctx, client.ObjectKeyFromObject(sm), sm)).To(Succeed())
			created = sm
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		t.Logf("ServiceMonitor created %s after the CRD", time.Since(start).Round(100*time.Millisecond))

		g.Expect(created.GetLabels()).To(HaveKeyWithValue(names.ManagedByLabel, names.ManagedByValue))
		selector, _, _ := unstructured.NestedStringMap(created.Object, "spec", "selector", "matchLabels")
		g.Expect(selector).To(Equal(map[string]string{"app": names.ControllerMetricsService}))
		endpoints, _, _ := unstructured.NestedSlice(created.Object, "spec", "endpoints")
		svc := &corev1.Service{}
		g.Expect(e.MgmtClient.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: names.ControllerMetricsService}, svc)).To(Succeed())
		g.Expect(endpoints).To(HaveLen(len(svc.Spec.Ports)))
		for i, p := range svc.Spec.Ports {
			ep := endpoints[i].(map[string]any)
			g.Expect(ep).To(HaveKeyWithValue("port", p.Name))
			g.Expect(ep).To(HaveKeyWithValue("scheme", "https"))
			serverName, _, _ := unstructured.NestedString(ep, "tlsConfig", "serverName")
			g.Expect(serverName).To(Equal(names.ControllerMetricsService + "." + e.Namespace + ".svc"))
		}
		// Monitoring rolls nothing: the controller was rolled out once.
		g.Expect(controllerDeployment(g, e).Generation).To(Equal(int64(1)))
		expectNotDegraded(g, driver(g, e))
	})

	t.Run("When a user edits the ServiceMonitor, it should put the operator's endpoints back", func(t *testing.T) {
		g := NewWithT(t)
		sm := serviceMonitor(e.Namespace)
		g.Expect(fresh.Get(ctx, client.ObjectKeyFromObject(sm), sm)).To(Succeed())
		g.Expect(unstructured.SetNestedSlice(sm.Object, []any{map[string]any{"port": "driver-m", "interval": "5s"}}, "spec", "endpoints")).To(Succeed())
		g.Expect(fresh.Update(ctx, sm, client.FieldOwner("someone"))).To(Succeed())
		g.Eventually(func(g Gomega) {
			now := serviceMonitor(e.Namespace)
			g.Expect(fresh.Get(ctx, client.ObjectKeyFromObject(now), now)).To(Succeed())
			g.Expect(now.Object["spec"]).To(Equal(created.Object["spec"]))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
	})

	t.Run("When a user deletes the ServiceMonitor, it should recreate it", func(t *testing.T) {
		g := NewWithT(t)
		sm := serviceMonitor(e.Namespace)
		g.Expect(fresh.Get(ctx, client.ObjectKeyFromObject(sm), sm)).To(Succeed())
		uid := sm.GetUID()
		g.Expect(fresh.Delete(ctx, sm)).To(Succeed())
		g.Eventually(func(g Gomega) {
			now := serviceMonitor(e.Namespace)
			g.Expect(fresh.Get(ctx, client.ObjectKeyFromObject(now), now)).To(Succeed())
			g.Expect(now.GetUID()).NotTo(Equal(uid), "still the deleted ServiceMonitor")
			g.Expect(now.Object["spec"]).To(Equal(created.Object["spec"]))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
	})
}
