// Tests the ClusterCSIDriver's spec switches (managementState, storageClassState), the user's
// own default StorageClass, and the VolumeSnapshotClass following its CRD when it appears late.
package integration

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// setSpec changes the ClusterCSIDriver spec as `oc patch --type=merge` does: a merge patch of the
// changed fields, without the object's resourceVersion, so the operator's status writes in
// between cannot make it conflict (an update retried on conflict for a second lost that race on
// a loaded machine).
func setSpec(t *testing.T, e *env.Env, change func(*operatorv1.ClusterCSIDriverSpec)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		d := &operatorv1.ClusterCSIDriver{}
		if err := e.GuestClient.Get(context.Background(), client.ObjectKey{Name: names.ClusterCSIDriverName}, d); err != nil {
			return err
		}
		before := d.DeepCopy()
		change(&d.Spec)
		return e.GuestClient.Patch(context.Background(), d, client.MergeFrom(before))
	}).WithTimeout(reactTimeout).WithPolling(poll).Should(Succeed())
}

func gone(c client.Client, obj client.Object) func() bool {
	return func() bool {
		err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err)
	}
}

func TestManagementState(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
	e.RunOperatorForTest(t, env.OperatorOptions{})
	waitAvailable(t, e)
	ctx := context.Background()

	t.Run("When managementState is Unmanaged, it should leave a user's edit alone and say so", func(t *testing.T) {
		g := NewWithT(t)
		setSpec(t, e, func(s *operatorv1.ClusterCSIDriverSpec) { s.ManagementState = operatorv1.Unmanaged })
		g.Eventually(func(g Gomega) {
			c := condition(g, e, names.ConditionControllerProgressing)
			g.Expect(c.Reason).To(Equal(names.ReasonUnmanaged))
			g.Expect(condition(g, e, names.ConditionNodeProgressing).Reason).To(Equal(names.ReasonUnmanaged))
		}).WithTimeout(installTimeout).Should(Succeed())

		update(t, e.GuestClient, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: names.NodeDaemonSet}},
			"someone", func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.PriorityClassName = "" })
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.ControllerMetricsService}}
		g.Expect(e.MgmtClient.Delete(ctx, svc)).To(Succeed())
		// Observing that nothing happens needs a window: the operator would have reacted
		// within a second or two when Managed.
		g.Consistently(func(g Gomega) {
			g.Expect(nodeDaemonSet(g, e).Spec.Template.Spec.PriorityClassName).To(BeEmpty())
			g.Expect(gone(e.MgmtClient, &corev1.Service{ObjectMeta: svc.ObjectMeta})()).To(BeTrue())
		}).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	})

	t.Run("When managementState is Managed again, it should put everything back", func(t *testing.T) {
		g := NewWithT(t)
		setSpec(t, e, func(s *operatorv1.ClusterCSIDriverSpec) { s.ManagementState = operatorv1.Managed })
		g.Eventually(func(g Gomega) {
			g.Expect(nodeDaemonSet(g, e).Spec.Template.Spec.PriorityClassName).To(Equal("system-node-critical"))
			g.Expect(e.MgmtClient.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: names.ControllerMetricsService}, &corev1.Service{})).To(Succeed())
		}).WithTimeout(installTimeout).Should(Succeed())
		waitAvailable(t, e)
	})

	t.Run("When managementState is Removed, it should delete what the operator created and report it", func(t *testing.T) {
		g := NewWithT(t)
		setSpec(t, e, func(s *operatorv1.ClusterCSIDriverSpec) { s.ManagementState = operatorv1.Removed })
		removed := []struct {
			c   client.Client
			obj client.Object
		}{
			{e.MgmtClient, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.ControllerDeployment}}},
			{e.MgmtClient, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.CloudConfConfigMap}}},
			{e.GuestClient, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: names.CloudConfConfigMap}}},
			{e.GuestClient, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: names.NodeDaemonSet}}},
			{e.GuestClient, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: names.DriverName}}},
			{e.GuestClient, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: names.StorageClass}}},
		}
		for _, r := range removed {
			g.Eventually(gone(r.c, r.obj)).WithTimeout(installTimeout).Should(BeTrue(), "%T %s", r.obj, r.obj.GetName())
		}
		g.Eventually(func(g Gomega) {
			for _, c := range []string{names.ConditionControllerAvailable, names.ConditionNodeAvailable} {
				cond := condition(g, e, c)
				g.Expect(cond.Reason).To(Equal(names.ReasonRemoved), c)
				g.Expect(cond.Status).To(Equal(operatorv1.ConditionTrue), c)
			}
		}).WithTimeout(installTimeout).Should(Succeed())
	})

	t.Run("When managementState is Managed after Removed, it should install again", func(t *testing.T) {
		setSpec(t, e, func(s *operatorv1.ClusterCSIDriverSpec) { s.ManagementState = operatorv1.Managed })
		waitAvailable(t, e)
	})
}

func TestStorageClassState(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
	ctx := context.Background()
	// A user's own default class exists before the operator installs.
	mine := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "fast", Annotations: map[string]string{names.DefaultStorageClassAnnotation: "true"}},
		Provisioner: names.DriverName,
		Parameters:  map[string]string{"type": "ssd"},
	}
	NewWithT(t).Expect(e.GuestClient.Create(ctx, mine)).To(Succeed())
	e.RunOperatorForTest(t, env.OperatorOptions{})
	waitAvailable(t, e)
	sc := func(g Gomega) *storagev1.StorageClass {
		s := &storagev1.StorageClass{}
		g.Expect(e.GuestClient.Get(ctx, client.ObjectKey{Name: names.StorageClass}, s)).To(Succeed())
		return s
	}

	t.Run("When the user already has a default class, it should not make standard-csi a second default", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			g.Expect(sc(g).Annotations).To(HaveKeyWithValue(names.DefaultStorageClassAnnotation, "false"))
		}).WithTimeout(installTimeout).Should(Succeed())
	})

	t.Run("When the user makes standard-csi the default, it should keep the user's choice", func(t *testing.T) {
		g := NewWithT(t)
		s := sc(g)
		s.Annotations[names.DefaultStorageClassAnnotation] = "true"
		g.Expect(e.GuestClient.Update(ctx, s, client.FieldOwner("someone"))).To(Succeed())
		// Make the guest manager reconcile, then check the choice stands.
		g.Expect(e.GuestClient.Delete(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: names.DriverName}})).To(Succeed())
		g.Eventually(func() error {
			return e.GuestClient.Get(ctx, client.ObjectKey{Name: names.DriverName}, &storagev1.CSIDriver{})
		}).WithTimeout(installTimeout).Should(Succeed())
		g.Consistently(func(g Gomega) {
			g.Expect(sc(g).Annotations).To(HaveKeyWithValue(names.DefaultStorageClassAnnotation, "true"))
		}).WithTimeout(3 * time.Second).Should(Succeed())
	})

	t.Run("When storageClassState is Unmanaged, it should leave the class alone", func(t *testing.T) {
		g := NewWithT(t)
		setSpec(t, e, func(s *operatorv1.ClusterCSIDriverSpec) { s.StorageClassState = operatorv1.UnmanagedStorageClass })
		g.Eventually(func(g Gomega) {
			g.Expect(driver(g, e).Status.ObservedGeneration).To(Equal(driver(g, e).Generation))
		}).WithTimeout(installTimeout).Should(Succeed())
		s := sc(g)
		s.AllowVolumeExpansion = ptr.To(false)
		g.Expect(e.GuestClient.Update(ctx, s, client.FieldOwner("someone"))).To(Succeed())
		g.Consistently(func(g Gomega) {
			g.Expect(*sc(g).AllowVolumeExpansion).To(BeFalse())
		}).WithTimeout(3 * time.Second).Should(Succeed())
	})

	t.Run("When storageClassState is Managed, it should revert an edit of a managed field", func(t *testing.T) {
		g := NewWithT(t)
		setSpec(t, e, func(s *operatorv1.ClusterCSIDriverSpec) { s.StorageClassState = operatorv1.ManagedStorageClass })
		g.Eventually(func(g Gomega) {
			g.Expect(*sc(g).AllowVolumeExpansion).To(BeTrue())
		}).WithTimeout(installTimeout).Should(Succeed())
	})

	t.Run("When storageClassState is Removed, it should delete standard-csi and leave the user's class", func(t *testing.T) {
		g := NewWithT(t)
		setSpec(t, e, func(s *operatorv1.ClusterCSIDriverSpec) { s.StorageClassState = operatorv1.RemovedStorageClass })
		g.Eventually(gone(e.GuestClient, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: names.StorageClass}})).
			WithTimeout(installTimeout).Should(BeTrue())
		g.Expect(e.GuestClient.Get(ctx, client.ObjectKeyFromObject(mine), &storagev1.StorageClass{})).To(Succeed())
	})
}

func TestVolumeSnapshotClassFollowsCRD(t *testing.T) {
	t.Parallel()
	// A guest without the snapshot CRD, as before the snapshot controller is installed.
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift, WithoutSnapshotClassCRD: true})
	ctx := context.Background()
	crd := snapshotClassCRD(t)

	e.RunOperatorForTest(t, env.OperatorOptions{})
	t.Run("When the VolumeSnapshotClass CRD does not exist, it should install the rest and report Available", func(t *testing.T) {
		waitAvailable(t, e)
		NewWithT(t).Expect(condition(NewWithT(t), e, names.ConditionStorageClassDegraded).Status).To(Equal(operatorv1.ConditionFalse))
	})
	t.Run("When the CRD appears later, it should create the VolumeSnapshotClass", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(e.GuestClient.Create(ctx, crd)).To(Succeed())
		vsc := &snapshotv1.VolumeSnapshotClass{}
		g.Eventually(func() error {
			return e.GuestClient.Get(ctx, client.ObjectKey{Name: names.VolumeSnapshotCls}, vsc)
		}).WithTimeout(installTimeout).Should(Succeed())
		g.Expect(vsc.Driver).To(Equal(names.DriverName))
		g.Expect(vsc.DeletionPolicy).To(Equal(snapshotv1.VolumeSnapshotContentDelete))
	})
	t.Run("When the VolumeSnapshotClass is deleted, it should be recreated", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(e.GuestClient.Delete(ctx, &snapshotv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: names.VolumeSnapshotCls}})).To(Succeed())
		g.Eventually(func() error {
			return e.GuestClient.Get(ctx, client.ObjectKey{Name: names.VolumeSnapshotCls}, &snapshotv1.VolumeSnapshotClass{})
		}).WithTimeout(installTimeout).Should(Succeed())
	})
}

// snapshotClassCRD reads the VolumeSnapshotClass CRD the snapshot client module ships.
func snapshotClassCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	paths, err := localcluster.GuestCRDs()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if !strings.Contains(p, "volumesnapshotclasses") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(b, crd); err != nil {
			t.Fatal(err)
		}
		return crd
	}
	t.Fatal("the VolumeSnapshotClass CRD is not among the guest CRDs")
	return nil
}
