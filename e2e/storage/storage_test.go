//go:build e2e

// Package storage proves on real nodes that the driver the operator installs gives pods
// volumes: a real kubelet and containerd run the operator's controller Deployment and node
// DaemonSet from locally built images of the real cinder-csi-plugin and kubernetes-csi sidecars.
// Each scenario runs in HyperShift mode (controller on a real management node, node plugin on a
// real guest node) and in standalone mode (both on one real node). TestStorageRealCloud runs
// against a real OpenStack (package realcloud); TestStorageHyperShift and TestStorageStandalone
// against the fake (package fakeopenstack), whose attachments are loop devices: the take-over
// from csi-operator, whose worlds these are, and what a real cloud here cannot do (a snapshot of a
// volume in use needs Nova's assisted snapshots, which its fake virt driver lacks). A scenario the
// real cloud's worlds run (provision, attach and delete, topology following the zones, rotation
// with a volume in use) does not run again on the fake.
package storage

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// TestStorageHyperShift and TestStorageStandalone each start from a cluster that only ever ran
// csi-operator (its objects as it creates them, none of this operator's labels) and switch it to
// this operator as a platform does: by the image swap in cluster-storage-operator's Deployment,
// under csi-operator's RBAC, with a volume in use; standalone, the user also asks for per-zone
// classes and already has one of that name. The operator then moves to its install manifests and
// the scenarios run on the adopted driver (see run). Both worlds then go back to csi-operator and
// switch to this operator again from its install manifests. So each mode shows both directions
// with a volume in use, and both ways of deploying the operator; fresh installs on real nodes are
// the real cloud's worlds (TestStorageRealCloud) and run-local's, and the integration tests' on
// simulated nodes. The upstream suite's CI subset runs in make test on the real cloud only; on the
// fake it is make test-external-storage-ci's.
//
// These two worlds take their places after TestStorageRealCloud's two (see takePlaces): each
// world has clusters and nodes of its own, and their scenarios mostly wait on pods and volumes,
// but on two cores four worlds at once would mostly add contention.
func TestStorageHyperShift(t *testing.T) {
	t.Parallel()
	takePlaces(t, 1)
	run(t, startWorld(t, env.ModeHyperShift, worldOptions{fromCSIOperator: true}), false)
}

func TestStorageStandalone(t *testing.T) {
	t.Parallel()
	takePlaces(t, 1)
	run(t, startWorld(t, env.ModeStandalone, worldOptions{fromCSIOperator: true}), true)
}

// run takes the world over from csi-operator by the image swap and hands the operator to its
// install manifests. A claim made right after the take-over provisions only once
// csi-operator's sidecar leases have lapsed, two and a half minutes after the swap, so the
// scenarios that make no volume run meanwhile and the claim is checked after them. Then the
// other scenarios, the switch back to csi-operator and the switch from the install manifests.
func run(t *testing.T, w *world, userZoneClass bool) {
	finish := switchToOperator(t, w, byImageSwap, userZoneClass)
	handOver(t, w)
	volumeFreeScenarios(t, w)
	t.Run("When the operator has taken over by the image swap, a claim made right after it should be provisioned, attached and mounted once csi-operator's sidecar leases have lapsed, and no Degraded condition of the operator's should have been True from its start until then", finish)
	scenarios(t, w)
	switchBack(t, w)
	t.Run("When the operator has taken over from its install manifests, no Degraded condition of the operator's should have been True from its start", switchToOperator(t, w, byInstallManifests, false))
}

// switchToOperator runs the switch from csi-operator by how and returns what remains to be
// checked of it (see switchFromCSIOperator).
func switchToOperator(t *testing.T, w *world, how string, userZoneClass bool) (finish func(*testing.T)) {
	title := "When a cluster runs csi-operator's driver with a volume in use, the switch to this operator by " + how +
		" should keep the volume writing, every object and the default StorageClass, and roll each workload once"
	if userZoneClass {
		title += ", leaving the user's own per-zone class alone"
	}
	var afterNS string
	if how == byImageSwap {
		afterNS = w.namespace(t, "after-switch")
	}
	t.Run(title, func(t *testing.T) {
		finish = switchFromCSIOperator(t, w, how, userZoneClass, afterNS)
	})
	if w.Operator == nil || finish == nil {
		t.Fatal("the operator was not deployed by the switch")
	}
	return finish
}

func switchBack(t *testing.T, w *world) {
	t.Run("When the cluster switches back to csi-operator with a volume in use, the volume should keep writing and stay readable through csi-operator's driver", func(t *testing.T) {
		switchBackToCSIOperator(t, w)
	})
}

// volumeFreeScenarios make no volume: they run while new claims still wait for the sidecar
// leases of the controller the take-over replaced. Neither leaves the world as it found it for
// the next: the TLS profile stays Modern, so every scenario after it runs under Modern.
func volumeFreeScenarios(t *testing.T, w *world) {
	t.Run("When the operator's pod lacks the labels the platform's NetworkPolicies select on, it should not reach its API server and its readiness should say so", func(t *testing.T) {
		policiesEnforced(t, w)
	})
	t.Run("When the TLS profile is Modern, every metrics port should refuse TLS 1.2, serve TLS 1.3 and only authorised scrapes", func(t *testing.T) {
		metricsUnderModern(t, w)
	})
}

// scenarios run in order on one world: each leaves no volume behind, so the next one starts
// from the same state.
func scenarios(t *testing.T, w *world) {
	t.Run("When the operator has installed the driver on real nodes, it should be Available", func(t *testing.T) {
		w.waitAvailable(t)
	})
	t.Run("When a bound volume in use grows, the file system should grow online", func(t *testing.T) {
		expandInUse(t, w)
	})
	t.Run("When a volume in use is snapshotted with the default class, a claim restored from the snapshot should have its data", func(t *testing.T) {
		snapshotRestore(t, w)
	})
	t.Run("When the opt-in features are asked for in a cloud of two compute and two volume zones, each should work on real nodes and each warning should rise with its cause and clear with it", func(t *testing.T) {
		features(t, w)
	})
	t.Run("When the operator's container is killed and then its pod deleted, with a volume in use, it should take its lease back and converge without rolling the driver", func(t *testing.T) {
		operatorRecovers(t, w)
	})
	t.Run("When managementState is Removed with a volume in use, the mount should stay usable until the pod ends", func(t *testing.T) {
		removedInUse(t, w)
	})
}

func expandInUse(t *testing.T, w *world) {
	ctx := context.Background()
	g := NewWithT(t)
	ns := w.namespace(t, "expand")
	// ext4 cannot grow online here (the VM withholds CAP_SYS_RESOURCE, which resize2fs needs
	// for the reserved blocks), so the claim uses xfs, through a class of the same driver.
	xfs := w.xfsClass(t)
	g.Expect(w.Guest.Create(ctx, claim(ns, "data", xfs, "1Gi"))).To(Succeed())
	// The pod reports once the mounted file system is larger than 1.5 GiB: the node plugin
	// has grown it while the pod was running.
	script := `while :; do set -- $(stat -f -c '%b %S' /data); size=$(($1 * $2));
if [ "$size" -gt 1610612736 ]; then echo "$size" > /dev/termination-log; exit 0; fi; sleep 1; done`
	p := w.pod(ns, "user", "data", script, corev1.RestartPolicyNever)
	w.startRunning(t, p)
	pv := w.waitBound(t, ns, "data")

	g.Expect(env.Edit(ctx, w.Guest, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"}}, "someone",
		func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
		})).To(Succeed())
	// The kubelet grows a mounted file system when it next syncs the pod: on its resync, up to
	// a minute and a half later, or on a change to the pod. Once the controller side is done, the
	// test changes an annotation rather than wait out the resync.
	nudged := false
	g.Eventually(func(g Gomega) {
		pvc := &corev1.PersistentVolumeClaim{}
		g.Expect(w.Guest.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data"}, pvc)).To(Succeed())
		if !nudged && slices.ContainsFunc(pvc.Status.Conditions, func(c corev1.PersistentVolumeClaimCondition) bool {
			return c.Type == corev1.PersistentVolumeClaimFileSystemResizePending
		}) {
			g.Expect(env.Edit(ctx, w.Guest, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name}}, "someone",
				func(p *corev1.Pod) {
					metav1.SetMetaDataAnnotation(&p.ObjectMeta, "e2e.cinder-csi-operator/resync", "now")
				})).To(Succeed())
			nudged = true
		}
		got := &corev1.Pod{}
		g.Expect(w.Guest.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(corev1.PodSucceeded), "pod: %s", podSummary(got))
		g.Expect(pvc.Status.Capacity.Storage().Cmp(resource.MustParse("2Gi"))).To(Equal(0))
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	vol, ok := w.OpenStack.Volume(pv.Spec.CSI.VolumeHandle)
	g.Expect(ok).To(BeTrue())
	g.Expect(vol.SizeGiB).To(Equal(2))
}

func snapshotRestore(t *testing.T, w *world) {
	ctx := context.Background()
	g := NewWithT(t)
	ns := w.namespace(t, "snapshot")
	g.Expect(w.Guest.Create(ctx, claim(ns, "source", "", "1Gi"))).To(Succeed())
	// standard-csi's VolumeSnapshotClass sets force-create "true": Cinder snapshots the volume
	// while a pod keeps writing to it (crash-consistent, as on other clouds), where csi-operator's
	// "false" has Cinder refuse a volume in use.
	vsc := &snapshotv1.VolumeSnapshotClass{}
	g.Expect(w.Guest.Get(ctx, client.ObjectKey{Name: names.VolumeSnapshotCls}, vsc)).To(Succeed())
	g.Expect(vsc.Parameters).To(HaveKeyWithValue("force-create", "true"))
	token := fmt.Sprintf("snapshotted-%d", time.Now().UnixNano())
	w.startRunning(t, w.syncedWriter(ns, "source", token, "0.2"))
	pv := w.waitBound(t, ns, "source")
	vol, ok := w.OpenStack.Volume(pv.Spec.CSI.VolumeHandle)
	g.Expect(ok).To(BeTrue())
	g.Expect(vol.Status).To(Equal("in-use"))

	snap := w.snapshot(t, ns, "snap", "source")
	restored := claim(ns, "restored", "", "1Gi")
	restored.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: snap}
	g.Expect(w.Guest.Create(ctx, restored)).To(Succeed())
	g.Expect(w.runToEnd(t, w.pod(ns, "reader", "restored", "cat /data/file > /dev/termination-log", corev1.RestartPolicyNever))).To(Equal(token))
	got := &corev1.Pod{}
	g.Expect(w.Guest.Get(ctx, client.ObjectKey{Namespace: ns, Name: "writer"}, got)).To(Succeed())
	g.Expect(got.Status.Phase).To(Equal(corev1.PodRunning), "the writer ran on through the snapshot: %s", podSummary(got))
}

func removedInUse(t *testing.T, w *world) {
	ctx := context.Background()
	g := NewWithT(t)
	ns := w.namespace(t, "removed")
	p := w.volumeInUse(t, ns)
	pv := w.waitBound(t, ns, "data")
	// Each lease is held by a current controller pod: what Removed must see released.
	w.waitSidecarLeases(t)
	held := w.sidecarLeaseHolders(g)

	w.setManagementState(t, operatorv1.Removed)
	g.Eventually(func(g Gomega) {
		g.Expect(w.Guest.Get(ctx, client.ObjectKey{Name: names.NodeDaemonSet, Namespace: names.GuestNamespace}, &appsv1.DaemonSet{})).NotTo(Succeed())
		g.Expect(w.Mgmt.Get(ctx, client.ObjectKey{Name: names.ControllerDeployment, Namespace: w.Namespace}, &appsv1.Deployment{})).NotTo(Succeed())
		g.Expect(w.Guest.Get(ctx, client.ObjectKey{Name: names.DriverName}, &storagev1.CSIDriver{})).NotTo(Succeed())
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	// The controller's sidecars release their leader leases as they stop: standalone, the
	// controller's ServiceAccount and RBAC stay until its pods have ended, so that they may.
	// A lease still naming a stopped pod would keep a controller installed again waiting for it
	// to expire (over two minutes) before it provisions or attaches.
	g.Eventually(w.controllerPods).WithTimeout(podTimeout).WithPolling(poll).Should(BeEmpty())
	for name, holder := range w.sidecarLeaseHolders(g) {
		g.Expect(holder).To(BeEmpty(), "lease %s was not released by %s, which held it", name, held[name])
	}

	// The operator removes the driver, not the user's data: the volume stays attached and
	// mounted, the PV and the Cinder volume stay, and the pod keeps writing.
	g.Consistently(func(g Gomega) {
		got := &corev1.Pod{}
		g.Expect(w.Guest.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(corev1.PodRunning), "pod: %s", podSummary(got))
		g.Expect(got.Status.ContainerStatuses[0].RestartCount).To(BeZero())
	}).WithTimeout(15 * time.Second).WithPolling(poll).Should(Succeed())
	vol, ok := w.OpenStack.Volume(pv.Spec.CSI.VolumeHandle)
	g.Expect(ok).To(BeTrue())
	g.Expect(vol.Status).To(Equal("in-use"))
	g.Expect(w.Guest.Get(ctx, client.ObjectKey{Name: pv.Name}, &corev1.PersistentVolume{})).To(Succeed())

	// Managed again brings the driver back, and the pod can then end and its volume be
	// unmounted, detached and deleted as usual.
	w.setManagementState(t, operatorv1.Managed)
	w.waitAvailable(t)
	w.deletePod(t, ns, "user")
}

// clusterTag is the Cinder volume property the driver sets from --cluster, so that a cluster's
// volumes can be found and cleaned up after it is gone.
const clusterTag = "cinder.csi.openstack.org/cluster"

// pvZones lists the zones a PV's node affinity allows.
func pvZones(pv *corev1.PersistentVolume) []string {
	var zones []string
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil
	}
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == names.TopologyKey {
				zones = append(zones, e.Values...)
			}
		}
	}
	return zones
}

// waitAvailable waits for both managers to report the driver Available and not Progressing.
func (w *world) waitAvailable(t testing.TB) {
	t.Helper()
	defer took(t, "driver available")()
	NewWithT(t).Eventually(w.available).WithArguments(context.Background()).
		WithTimeout(podTimeout).WithPolling(poll).Should(BeTrue(), "the driver is Available and not Progressing")
}

// available reports whether both managers say the driver is Available and not Progressing.
func (w *world) available(ctx context.Context) bool {
	d := &operatorv1.ClusterCSIDriver{}
	if err := w.Guest.Get(ctx, client.ObjectKey{Name: names.ClusterCSIDriverName}, d); err != nil {
		return false
	}
	return env.ConditionTrue(d.Status.Conditions, names.ConditionControllerAvailable) &&
		env.ConditionTrue(d.Status.Conditions, names.ConditionNodeAvailable) &&
		!env.ConditionTrue(d.Status.Conditions, names.ConditionControllerProgressing) &&
		!env.ConditionTrue(d.Status.Conditions, names.ConditionNodeProgressing)
}

// driverTopology returns the --with-topology value of the running driver containers, failing
// unless the controller's and the node plugin's agree and every pod runs the current template.
func (w *world) driverTopology(g Gomega) string {
	ctx := context.Background()
	values := map[string]bool{}
	collect := func(c client.Client, ns, app string) {
		pods := &corev1.PodList{}
		g.Expect(c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty(), "no %s pod", app)
		for _, p := range pods.Items {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "%s: %s", p.Name, podSummary(&p))
			g.Expect(p.DeletionTimestamp).To(BeNil(), "%s is terminating", p.Name)
			for _, ctr := range p.Spec.Containers {
				if ctr.Name != driverContainer {
					continue
				}
				for _, a := range ctr.Args {
					if v, ok := strings.CutPrefix(a, "--with-topology="); ok {
						values[v] = true
					}
				}
			}
		}
	}
	collect(w.Mgmt, w.Namespace, names.ControllerDeployment)
	collect(w.Guest, names.GuestNamespace, names.NodeDaemonSet)
	g.Expect(values).To(HaveLen(1), "controller and node plugin run the same --with-topology")
	for v := range values {
		return v
	}
	return ""
}

// driverContainer is the cinder-csi-plugin container's name in both workloads.
const driverContainer = "csi-driver"

func (w *world) daemonSet(g Gomega) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{}
	g.Expect(w.Guest.Get(context.Background(), client.ObjectKey{Namespace: names.GuestNamespace, Name: names.NodeDaemonSet}, ds)).To(Succeed())
	return ds
}

func (w *world) controllerReplicaSets(g Gomega) []appsv1.ReplicaSet {
	list := &appsv1.ReplicaSetList{}
	g.Expect(w.Mgmt.List(context.Background(), list, client.InNamespace(w.Namespace), client.MatchingLabels{"app": names.ControllerDeployment})).To(Succeed())
	return list.Items
}

// setManagementState sets the ClusterCSIDriver's managementState as a user would.
func (w *world) setManagementState(t *testing.T, state operatorv1.ManagementState) {
	t.Helper()
	d := &operatorv1.ClusterCSIDriver{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterCSIDriverName}}
	NewWithT(t).Expect(env.Edit(context.Background(), w.Guest, d, "someone", func(d *operatorv1.ClusterCSIDriver) {
		d.Spec.ManagementState = state
	})).To(Succeed())
}

// xfsClass creates (once) a StorageClass like standard-csi that formats volumes with xfs.
func (w *world) xfsClass(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	std := &storagev1.StorageClass{}
	g.Expect(w.Guest.Get(ctx, client.ObjectKey{Name: names.StorageClass}, std)).To(Succeed())
	sc := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: "e2e-xfs"},
		Provisioner:          std.Provisioner,
		Parameters:           map[string]string{"csi.storage.k8s.io/fstype": "xfs"},
		ReclaimPolicy:        std.ReclaimPolicy,
		VolumeBindingMode:    std.VolumeBindingMode,
		AllowVolumeExpansion: ptr.To(true),
	}
	if err := w.Guest.Create(ctx, sc); client.IgnoreAlreadyExists(err) != nil {
		t.Fatalf("creating StorageClass %s: %v", sc.Name, err)
	}
	return sc.Name
}
