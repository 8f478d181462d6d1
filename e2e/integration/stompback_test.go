// Case 4, stomp-back: a user's edit to a field the operator manages is reverted, a deleted managed
// object is recreated, and what the operator does not manage (a user's own annotation or label,
// kubectl rollout restart's pod-template annotation) is left alone, without a single write in
// reply. Server-side apply with forced ownership is what promises this; these tests hold the
// operator to it on real API servers.
package integration

import (
	"context"
	"reflect"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
)

// userManager is the field manager of the edits a user makes with kubectl edit.
const userManager = "kubectl-edit"

func TestStompBack(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
	op := e.RunOperatorForTest(t, env.OperatorOptions{})
	waitAvailable(t, e)

	// The objects as the operator made them, which every revert must restore.
	g := NewWithT(t)
	dep0 := controllerDeployment(g, e)
	ds0 := nodeDaemonSet(g, e)

	t.Run("When a user edits managed fields of the controller Deployment, it should revert them", func(t *testing.T) {
		g := NewWithT(t)
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.ControllerDeployment}}
		update(t, e.MgmtClient, dep, userManager, func(d *appsv1.Deployment) {
			d.Spec.Replicas = ptr.To[int32](3)
			c := container(&d.Spec.Template.Spec, "csi-driver")
			c.Image = "cinder-csi-plugin:edited"
			c.Args = append(c.Args, "--with-topology=false")
		})
		// The edit landed: the revert below is the operator's doing.
		g.Expect(*dep.Spec.Replicas).To(Equal(int32(3)))

		g.Eventually(func(g Gomega) {
			d := controllerDeployment(g, e)
			g.Expect(d.Spec.Replicas).To(Equal(dep0.Spec.Replicas))
			c := container(&d.Spec.Template.Spec, "csi-driver")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Image).To(Equal(env.LocalImages[operandimages.EnvDriver]))
			g.Expect(c.Args).To(Equal(container(&dep0.Spec.Template.Spec, "csi-driver").Args))
			g.Expect(mustJSON(g, d.Spec.Template)).To(MatchJSON(mustJSON(g, dep0.Spec.Template)))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		waitAvailable(t, e)
	})

	t.Run("When a user edits managed fields of the node DaemonSet, it should revert them", func(t *testing.T) {
		g := NewWithT(t)
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: names.NodeDaemonSet}}
		update(t, e.GuestClient, ds, userManager, func(d *appsv1.DaemonSet) {
			d.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("50%"))
			container(&d.Spec.Template.Spec, "csi-driver").Image = "cinder-csi-plugin:edited"
		})
		g.Expect(ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.String()).To(Equal("50%"))

		g.Eventually(func(g Gomega) {
			d := nodeDaemonSet(g, e)
			g.Expect(d.Spec.UpdateStrategy.RollingUpdate).NotTo(BeNil())
			g.Expect(d.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable).To(Equal(ptr.To(intstr.FromString("10%"))))
			c := container(&d.Spec.Template.Spec, "csi-driver")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Image).To(Equal(env.LocalImages[operandimages.EnvDriver]))
			g.Expect(mustJSON(g, d.Spec.Template)).To(MatchJSON(mustJSON(g, ds0.Spec.Template)))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		waitAvailable(t, e)
	})

	// Each deleted object must come back as a new object (another UID) with the content and
	// the managed-by label the operator gives it: the operator's caches select on that label.
	deletions := []struct {
		what    string
		c       client.Client
		obj     client.Object
		content func(client.Object) any
	}{
		{"the controller PodDisruptionBudget", e.MgmtClient,
			&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.ControllerPDB}},
			func(o client.Object) any { return o.(*policyv1.PodDisruptionBudget).Spec }},
		{"the controller metrics Service", e.MgmtClient,
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.ControllerMetricsService}},
			func(o client.Object) any {
				// The cluster IP is allocated anew; ports and selector are the operator's.
				s := o.(*corev1.Service)
				return []any{s.Spec.Ports, s.Spec.Selector, s.Annotations}
			}},
		{"the CSIDriver", e.GuestClient,
			&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: names.DriverName}},
			func(o client.Object) any { return o.(*storagev1.CSIDriver).Spec }},
		{"the StorageClass", e.GuestClient,
			&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: names.StorageClass}},
			func(o client.Object) any {
				sc := o.(*storagev1.StorageClass)
				return []any{sc.Provisioner, sc.Parameters, sc.ReclaimPolicy, sc.VolumeBindingMode, sc.AllowVolumeExpansion, sc.Annotations}
			}},
		{"the VolumeSnapshotClass", e.GuestClient,
			&snapshotv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: names.VolumeSnapshotCls}},
			func(o client.Object) any {
				v := o.(*snapshotv1.VolumeSnapshotClass)
				return []any{v.Driver, v.DeletionPolicy, v.Parameters, v.Annotations}
			}},
		{"the node copy of cloud-conf", e.GuestClient,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: names.CloudConfConfigMap}},
			func(o client.Object) any { return o.(*corev1.ConfigMap).Data }},
		{"the controller copy of cloud-conf", e.MgmtClient,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.CloudConfConfigMap}},
			func(o client.Object) any { return o.(*corev1.ConfigMap).Data }},
		{"the node DaemonSet", e.GuestClient,
			&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: names.NodeDaemonSet}},
			func(o client.Object) any {
				d := o.(*appsv1.DaemonSet)
				return []any{d.Spec.Selector, d.Spec.UpdateStrategy, d.Spec.Template}
			}},
	}
	for _, d := range deletions {
		t.Run("When a user deletes "+d.what+", it should recreate it", func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			key := client.ObjectKeyFromObject(d.obj)
			g.Expect(d.c.Get(ctx, key, d.obj)).To(Succeed())
			oldUID := d.obj.GetUID()
			want := mustJSON(g, d.content(d.obj))

			g.Expect(d.c.Delete(ctx, d.obj, client.PropagationPolicy(metav1.DeletePropagationBackground))).To(Succeed())
			g.Eventually(func(g Gomega) {
				// A new, empty object: decoding over the old one would keep its fields.
				fresh := reflect.New(reflect.TypeOf(d.obj).Elem()).Interface().(client.Object)
				g.Expect(d.c.Get(ctx, key, fresh)).To(Succeed())
				g.Expect(fresh.GetUID()).NotTo(Equal(oldUID), "still the deleted object")
				g.Expect(fresh.GetDeletionTimestamp()).To(BeNil())
				g.Expect(fresh.GetLabels()).To(HaveKeyWithValue(names.ManagedByLabel, names.ManagedByValue))
				g.Expect(mustJSON(g, d.content(fresh))).To(MatchJSON(want))
			}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		})
	}
	waitAvailable(t, e)

	t.Run("When a user adds an own annotation to the controller Deployment and the node DaemonSet, it should keep it across reconciles", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		const key, value = "example.com/owner-team", "storage"
		const userTool = "user-tooling"

		// A merge patch under the user's own field manager, as kubectl annotate does.
		dep := controllerDeployment(g, e)
		patch := client.MergeFrom(dep.DeepCopy())
		metav1.SetMetaDataAnnotation(&dep.ObjectMeta, key, value)
		g.Expect(e.MgmtClient.Patch(ctx, dep, patch, client.FieldOwner(userTool))).To(Succeed())
		ds := nodeDaemonSet(g, e)
		patch = client.MergeFrom(ds.DeepCopy())
		metav1.SetMetaDataAnnotation(&ds.ObjectMeta, key, value)
		g.Expect(e.GuestClient.Patch(ctx, ds, patch, client.FieldOwner(userTool))).To(Succeed())

		// Make the operator apply both objects after the annotation was added: edit a
		// managed field of each and wait for the revert.
		update(t, e.MgmtClient, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.ControllerDeployment}},
			userManager, func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](2) })
		update(t, e.GuestClient, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: names.NodeDaemonSet}},
			userManager, func(d *appsv1.DaemonSet) {
				d.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(2))
			})
		g.Eventually(func(g Gomega) {
			d := controllerDeployment(g, e)
			g.Expect(d.Spec.Replicas).To(Equal(dep0.Spec.Replicas))
			n := nodeDaemonSet(g, e)
			g.Expect(n.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable).To(Equal(ptr.To(intstr.FromString("10%"))))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())

		d := controllerDeployment(g, e)
		g.Expect(d.Annotations).To(HaveKeyWithValue(key, value))
		// The operator's own annotations are still there next to the user's.
		for k, v := range dep0.Annotations {
			if k != "deployment.kubernetes.io/revision" {
				g.Expect(d.Annotations).To(HaveKeyWithValue(k, v))
			}
		}
		g.Expect(nodeDaemonSet(g, e).Annotations).To(HaveKeyWithValue(key, value))
		waitAvailable(t, e)
	})

	t.Run("When a user only adds an own label to the controller Deployment or the node DaemonSet, it should reconcile without sending a write", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		// An unmanaged field changed: the reconcile it triggers finds everything in place, so
		// it must send nothing, not even a status apply that the API server then drops. A
		// label rather than an annotation: the API server bumps a Deployment's generation for
		// an annotation (it is copied to the ReplicaSets), which is a legitimate, if brief,
		// Progressing condition.
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"example.com/cost-center":"storage-42"}}}`))
		for _, w := range []struct {
			manager string
			c       client.Client
			obj     client.Object
		}{
			{"controlplane", e.MgmtClient, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.ControllerDeployment}}},
			{"guest", e.GuestClient, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: names.NodeDaemonSet}}},
		} {
			// Start from rest, so that no write of an earlier step is counted.
			g.Eventually(func(g Gomega) {
				g.Expect(writesSince(op, w.manager, time.Now().Add(-quietFor))).To(BeEmpty())
			}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
			reconciles := op.Reconciles.Count(w.manager)
			since := time.Now()
			g.Expect(w.c.Patch(ctx, w.obj, patch, client.FieldOwner("user-tooling"))).To(Succeed())
			g.Expect(w.obj.GetLabels()).To(HaveKeyWithValue("example.com/cost-center", "storage-42"))
			// A reconcile is counted when it has finished, its deferred status write included.
			g.Eventually(func() int { return op.Reconciles.Count(w.manager) }).
				WithTimeout(installTimeout).WithPolling(poll).Should(BeNumerically(">", reconciles), w.manager+" reconciled")
			g.Expect(writesSince(op, w.manager, since)).To(BeEmpty(), w.manager)
			// And the label is still there: the operator owns only its own labels.
			g.Expect(w.c.Get(ctx, client.ObjectKeyFromObject(w.obj), w.obj)).To(Succeed())
			g.Expect(w.obj.GetLabels()).To(HaveKeyWithValue("example.com/cost-center", "storage-42"))
		}
	})

	t.Run("When a user restarts the controller and the node plugin with kubectl rollout restart, it should keep the restart annotation", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		// What kubectl rollout restart patches into the pod template: an annotation the
		// operator does not set, next to the operator's own hash annotations.
		const key, value = "kubectl.kubernetes.io/restartedAt", "2026-01-02T03:04:05Z"
		const rolloutManager = "kubectl-rollout"

		depBefore := controllerDeployment(g, e)
		patch := client.MergeFrom(depBefore.DeepCopy())
		metav1.SetMetaDataAnnotation(&depBefore.Spec.Template.ObjectMeta, key, value)
		g.Expect(e.MgmtClient.Patch(ctx, depBefore, patch, client.FieldOwner(rolloutManager))).To(Succeed())
		dsBefore := nodeDaemonSet(g, e)
		patch = client.MergeFrom(dsBefore.DeepCopy())
		metav1.SetMetaDataAnnotation(&dsBefore.Spec.Template.ObjectMeta, key, value)
		g.Expect(e.GuestClient.Patch(ctx, dsBefore, patch, client.FieldOwner(rolloutManager))).To(Succeed())

		// The restart rolls both workloads, and every status change on the way triggers a
		// reconcile: once rolled out, the operator has looked at both templates many times.
		waitRolledOut(g, e)
		waitAvailable(t, e)

		d := controllerDeployment(g, e)
		g.Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue(key, value))
		// One rollout, the user's: the operator did not strip the annotation and roll again.
		g.Expect(d.Generation).To(Equal(depBefore.Generation))
		n := nodeDaemonSet(g, e)
		g.Expect(n.Spec.Template.Annotations).To(HaveKeyWithValue(key, value))
		g.Expect(n.Generation).To(Equal(dsBefore.Generation))
	})
}

// quietFor is how long a manager must not have written for the operator to count as at rest:
// the rollouts' status updates come in bursts well under a second apart on the local clusters.
const quietFor = 3 * time.Second

// writesSince returns the mutating requests a manager sent since t, leader-election lease
// renewals aside, as "METHOD path".
func writesSince(op *env.Operator, manager string, t time.Time) []string {
	var out []string
	for _, r := range op.Requests[manager].Since(t) {
		if r.Mutating() && !r.Lease() {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}
