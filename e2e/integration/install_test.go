package integration

import (
	"context"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// TestFreshInstall is case 1: from an empty guest and a seeded HCP namespace to every object
// existing and the driver Available, with no manual step and a single rollout on each side.
func TestFreshInstall(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
	start := time.Now()
	e.RunOperatorForTest(t, env.OperatorOptions{})

	t.Run("When the operator starts on a seeded hosted cluster, it should report the driver Available", func(t *testing.T) {
		waitAvailable(t, e)
		t.Logf("Available %s after the operator started", time.Since(start).Round(100*time.Millisecond))
	})

	t.Run("When the install is done, every owned object should exist", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		mgmt := []client.Object{
			&corev1.ServiceAccount{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}, &corev1.ConfigMap{},
		}
		for i, name := range []string{names.ControllerServiceAccount, names.ControllerMetricsService, names.ControllerPDB, names.CloudConfConfigMap} {
			g.Expect(e.MgmtClient.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: name}, mgmt[i])).To(Succeed(), name)
		}
		sa := mgmt[0].(*corev1.ServiceAccount)
		g.Expect(sa.ImagePullSecrets).To(ContainElement(corev1.LocalObjectReference{Name: names.PullSecret}))

		guestNamespaced := map[string]client.Object{
			names.CloudConfConfigMap: &corev1.ConfigMap{},
			names.NodeServiceAccount: &corev1.ServiceAccount{},
		}
		for name, obj := range guestNamespaced {
			g.Expect(e.GuestClient.Get(ctx, client.ObjectKey{Namespace: names.GuestNamespace, Name: name}, obj)).To(Succeed(), name)
		}
		sc := &storagev1.StorageClass{}
		clusterScoped := []struct {
			name string
			obj  client.Object
		}{
			{names.DriverName, &storagev1.CSIDriver{}},
			{names.StorageClass, sc},
			{names.VolumeSnapshotCls, &snapshotv1.VolumeSnapshotClass{}},
			{"openstack-cinder-privileged-role", &rbacv1.ClusterRole{}},
			{"openstack-cinder-node-privileged-binding", &rbacv1.ClusterRoleBinding{}},
		}
		for _, o := range clusterScoped {
			g.Eventually(func() error {
				return e.GuestClient.Get(ctx, client.ObjectKey{Name: o.name}, o.obj)
			}).WithTimeout(reactTimeout).WithPolling(poll).Should(Succeed(), o.name)
		}
		g.Expect(sc.Annotations).To(HaveKeyWithValue(names.DefaultStorageClassAnnotation, "true"))
		g.Expect(*sc.VolumeBindingMode).To(Equal(storagev1.VolumeBindingWaitForFirstConsumer))
		g.Expect(*sc.AllowVolumeExpansion).To(BeTrue())
	})

	t.Run("When on HyperShift with the monitoring kinds served, it should create the ServiceMonitors and the alerts next to the controller, owned by the HostedControlPlane", func(t *testing.T) {
		g := NewWithT(t)
		for _, kind := range []struct{ kind, name string }{
			{"ServiceMonitor", names.ControllerServiceMonitor}, {"ServiceMonitor", names.OperatorServiceMonitor}, {"PrometheusRule", names.AlertsRule},
		} {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("monitoring.coreos.com/v1")
			u.SetKind(kind.kind)
			g.Eventually(func() error {
				return e.MgmtClient.Get(context.Background(), client.ObjectKey{Namespace: e.Namespace, Name: kind.name}, u)
			}).WithTimeout(reactTimeout).WithPolling(poll).Should(Succeed(), kind.name)
			g.Expect(u.GetOwnerReferences()).To(ConsistOf(HaveField("Kind", "HostedControlPlane")), kind.name)
		}
	})

	t.Run("When the install is done, each workload should have rolled out exactly once", func(t *testing.T) {
		g := NewWithT(t)
		expectRolledOutOnce(g, e)
	})

	t.Run("When topology is detected on matching zones, it should be enabled on both sides", func(t *testing.T) {
		g := NewWithT(t)
		dep := controllerDeployment(g, e)
		g.Expect(containerArgs(dep.Spec.Template.Spec, "csi-driver")).To(ContainElement("--with-topology=true"))
		ds := nodeDaemonSet(g, e)
		g.Expect(containerArgs(ds.Spec.Template.Spec, "csi-driver")).To(ContainElement("--with-topology=true"))
		g.Expect(containerArgs(dep.Spec.Template.Spec, "csi-driver")).To(ContainElement("--cluster=" + env.DefaultInfraID))
	})
}

func containerArgs(pod corev1.PodSpec, name string) []string {
	for _, c := range pod.Containers {
		if c.Name == name {
			return c.Args
		}
	}
	return nil
}
