//go:build e2e

package storage

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/csioperator"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// maxWriterGap is the longest pause the writer of a switch may see between two writes: the
// switch rolls the node plugin and the controller, neither of which a mounted volume needs.
const maxWriterGap = 10 * time.Second

// csiOperatorOptions describes this world's cluster as csi-operator would have run in it, from
// what the platform seeded: the credentials, the CA, the metrics certificate and, on HyperShift,
// the HostedControlPlane.
func (w *world) csiOperatorOptions(t testing.TB) csioperator.Options {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	hyperShift := w.Env.Mode == env.ModeHyperShift
	creds := &corev1.Secret{}
	g.Expect(w.Mgmt.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: names.CredentialsSecret}, creds)).To(Succeed())
	cert := &corev1.Secret{}
	g.Expect(w.Mgmt.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: names.ControllerMetricsSecret}, cert)).To(Succeed())
	ca := string(w.OpenStack.CACertPEM())
	o := csioperator.Options{
		HyperShift: hyperShift, Namespace: w.Namespace, Images: w.Env.Real.Images.Env(),
		InfraID: w.InfraID, CloudName: env.CloudName, CABundle: ca,
		Credentials: creds.Data, GuestCredentials: creds.Data, MetricsCert: cert.Data,
	}
	if hyperShift {
		hcp := &hyperv1.HostedControlPlane{}
		g.Expect(w.Mgmt.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: env.DefaultHostedCluster}, hcp)).To(Succeed())
		o.HostedControlPlane = hcp
	} else {
		// The network operator fills csi-operator's trusted CA bundle once it exists; csi-operator
		// mounts the bundle only when it has been filled. (After managementState Removed, this
		// operator's copy is recreated empty, and nothing here fills it again.)
		o.TrustedCA = ca
		cm := &corev1.ConfigMap{}
		if err := w.Mgmt.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: names.TrustedCABundleConfigMap}, cm); err == nil {
			o.TrustedCA = cm.Data[names.KeyTrustedCA]
		}
	}
	return o
}

// installCSIOperator writes csi-operator's objects and conditions into the world and waits until
// its controller and node plugin run.
func (w *world) installCSIOperator(t testing.TB) {
	t.Helper()
	defer took(t, "csi-operator's driver rolled out")()
	ctx := context.Background()
	g := NewWithT(t)
	o := w.csiOperatorOptions(t)
	w.CSIOperator = &o
	objs := csioperator.Build(o)
	g.Expect(csioperator.Install(ctx, w.Mgmt, w.Guest, o, objs)).To(Succeed())
	g.Expect(csioperator.WriteConditions(ctx, w.Guest, csioperator.Conditions(o.HyperShift, metav1.Now()))).To(Succeed())
	w.waitCSIOperatorRolledOut(t)
}

// waitCSIOperatorRolledOut waits until csi-operator's controller Deployment and node DaemonSet
// run their current templates, all replicas available, as its own controllers judge a rollout.
func (w *world) waitCSIOperatorRolledOut(t testing.TB) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		w.expectRolledOut(g)
		g.Expect(w.csiOperatorTemplate(w.controllerDeployment(g).Spec.Template.Spec)).To(BeTrue(), "the controller runs csi-operator's template")
		g.Expect(w.csiOperatorTemplate(w.daemonSet(g).Spec.Template.Spec)).To(BeTrue(), "the node plugin runs csi-operator's template")
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	NewWithT(t).Expect(csioperator.RecordStableGeneration(context.Background(), w.Guest)).To(Succeed())
}

// expectRolledOut fails unless the controller Deployment and the node DaemonSet run their
// current templates only, every replica available.
func (w *world) expectRolledOut(g Gomega) {
	dep := w.controllerDeployment(g)
	g.Expect(dep.Status.ObservedGeneration).To(Equal(dep.Generation))
	g.Expect(dep.Status.UpdatedReplicas).To(Equal(ptr.Deref(dep.Spec.Replicas, 1)), "controller updated")
	g.Expect(dep.Status.AvailableReplicas).To(Equal(ptr.Deref(dep.Spec.Replicas, 1)), "controller available")
	g.Expect(dep.Status.Replicas).To(Equal(ptr.Deref(dep.Spec.Replicas, 1)), "no old controller pod left")
	ds := w.daemonSet(g)
	g.Expect(ds.Status.ObservedGeneration).To(Equal(ds.Generation))
	g.Expect(ds.Status.DesiredNumberScheduled).To(BeNumerically(">", 0))
	g.Expect(ds.Status.UpdatedNumberScheduled).To(Equal(ds.Status.DesiredNumberScheduled), "node plugin updated")
	g.Expect(ds.Status.NumberAvailable).To(Equal(ds.Status.DesiredNumberScheduled), "node plugin available")
}

// waitSidecarLeases waits until each sidecar's leader lease (names.SidecarLeases, in the guest
// namespace, held under the controller pods' names) is held by a controller pod that exists.
func (w *world) waitSidecarLeases(t testing.TB) {
	t.Helper()
	defer took(t, "the controller's sidecar leases held by a current pod")()
	NewWithT(t).Eventually(func(g Gomega) {
		current := map[string]bool{}
		for _, p := range w.controllerPods(g) {
			if p.DeletionTimestamp == nil {
				current[p.Name] = true
			}
		}
		for name, holder := range w.sidecarLeaseHolders(g) {
			g.Expect(current).To(HaveKey(holder), "lease %s is held by %q, not a current controller pod", name, holder)
		}
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
}

// controllerPods returns the controller's pods, terminating or not.
func (w *world) controllerPods(g Gomega) []corev1.Pod {
	pods := &corev1.PodList{}
	g.Expect(w.Mgmt.List(context.Background(), pods, client.InNamespace(w.Namespace),
		client.MatchingLabels{names.ControllerPodLabel: names.ControllerDeployment})).To(Succeed())
	return pods.Items
}

// sidecarLeaseHolders returns the holder of each sidecar's leader lease (names.SidecarLeases, in
// the guest namespace), "" for a released one; a missing lease fails g.
func (w *world) sidecarLeaseHolders(g Gomega) map[string]string {
	holders := map[string]string{}
	for _, name := range names.SidecarLeases {
		l := &coordinationv1.Lease{}
		g.Expect(w.Guest.Get(context.Background(), client.ObjectKey{Namespace: names.GuestNamespace, Name: name}, l)).To(Succeed())
		holders[name] = ptr.Deref(l.Spec.HolderIdentity, "")
	}
	return holders
}

// csiOperatorTemplate tells csi-operator's pod templates from this operator's: only csi-operator's
// driver container takes the topology decision from cloud-conf through $(ENABLE_TOPOLOGY).
func (w *world) csiOperatorTemplate(pod corev1.PodSpec) bool {
	for _, c := range pod.Containers {
		if c.Name != driverContainer {
			continue
		}
		for _, e := range c.Env {
			if e.Name == "ENABLE_TOPOLOGY" {
				return true
			}
		}
	}
	return false
}

// How the switch from csi-operator deploys this operator.
const (
	// byImageSwap runs cluster-storage-operator's Deployment of csi-operator with only the
	// image changed, under csi-operator's ServiceAccount and RBAC: the switch as a platform
	// (or a release payload) makes it.
	byImageSwap = "cluster-storage-operator's Deployment with the image swapped"
	// byInstallManifests deploys from manifests/install, with the shorter zone re-detection
	// the scenarios after it need.
	byInstallManifests = "the install manifests"
)

// takeOver replaces csi-operator by this operator, deployed as how says.
func (w *world) takeOver(ctx context.Context, how string) error {
	if how == byImageSwap {
		w.OperatorStarted = time.Now()
		op, err := w.Env.DeployFromClusterStorageOperator(ctx, w.operatorBinary)
		if err != nil {
			return err
		}
		w.Operator = op
		return nil
	}
	return w.deployOperator(ctx)
}

// switchFromCSIOperator switches the world from csi-operator's install to this operator with a
// volume in use, and checks what a cluster owner relies on: the writer sees no error and no long
// pause, each workload rolls once, every object is kept, csi-operator's conditions go, the
// default StorageClass is the same object with the same parameters, and no Degraded condition of
// this operator's is ever True from the moment it starts (a take-over is not a failure, and
// cluster-storage-operator would page on one). With userZoneClass, the user asks for per-zone
// classes and already has one of that name: the operator must leave it alone and say so.
//
// After the image swap it also makes a new claim and a pod that writes to it, and returns, as
// finish, the check that they ran and that no Degraded condition rose until then: the claim
// waits for csi-operator's sidecar leases to lapse (see waitSidecarLeases), and the caller runs
// what needs no new volume meanwhile. After the switch from the install manifests, which ends
// the world, finish checks the Degraded conditions only.
//
// afterNS is the namespace of that claim: the caller's, so that it outlives this subtest.
func switchFromCSIOperator(t *testing.T, w *world, how string, userZoneClass bool, afterNS string) (finish func(*testing.T)) {
	ctx := context.Background()
	g := NewWithT(t)
	g.Expect(w.CSIOperator).NotTo(BeNil(), "the world did not start from csi-operator's install")
	g.Expect(w.Operator).To(BeNil(), "the operator runs already")
	var checkZoneClass func(*testing.T)
	if userZoneClass {
		var cleanup func()
		checkZoneClass, cleanup = w.withUserZoneClass(t)
		defer cleanup()
	}
	ns := w.namespace(t, "switch")
	g.Expect(w.Guest.Create(ctx, claim(ns, "data", "", "1Gi"))).To(Succeed())
	writer := w.startWriter(t, ns, "writer", "data")
	w.waitWrites(t, writer, 10)

	objs := csioperator.Build(*w.CSIOperator)
	uids := w.uids(g, objs)
	scBefore := w.defaultStorageClass(g)
	depRev, nodeRev := w.controllerRevision(g), w.nodeRevision(g)
	depGen, dsGen := w.controllerDeployment(g).Generation, w.daemonSet(g).Generation

	degraded := w.watchDegraded(t)
	start := time.Now()
	g.Expect(w.takeOver(ctx, how)).To(Succeed())
	ready := time.Since(start)
	// Done when the driver is Available and not Progressing and both workloads run this
	// operator's templates, rolled out. The conditions alone can say so a moment early: while
	// the guest manager waits for the controlplane manager's node copy of cloud-conf, they follow
	// csi-operator's DaemonSet, which is rolled out.
	var availableAt time.Duration
	g.Eventually(func(g Gomega) {
		available := w.available(ctx)
		if available && availableAt == 0 {
			availableAt = time.Since(start)
		}
		g.Expect(available).To(BeTrue(), "the driver is Available and not Progressing")
		w.expectRolledOut(g)
		g.Expect(w.csiOperatorTemplate(w.controllerDeployment(g).Spec.Template.Spec)).To(BeFalse(), "the controller runs this operator's template")
		g.Expect(w.csiOperatorTemplate(w.daemonSet(g).Spec.Template.Spec)).To(BeFalse(), "the node plugin runs this operator's template")
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	t.Logf("Switch to this operator by %s: its pod Ready after %s, the driver first reported Available after %s, Available with both workloads rolled out to this operator's templates %s after the switch began",
		how, ready.Round(100*time.Millisecond), availableAt.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))

	t.Run("When the operator takes over, it should roll the controller once and the node plugin at most once", func(t *testing.T) {
		g := NewWithT(t)
		// The revisions say how often each workload rolled. The conditions are logged, not
		// asserted, while the operator finishes its first writes: a spec write that does not
		// touch the pod template (the adoption of csi-operator's fields) makes the Deployment
		// Progressing until its controller has observed it, a moment without a rollout.
		var notAvailable []string
		g.Consistently(func(g Gomega) {
			g.Expect(w.controllerRevision(g)).To(Equal(depRev+1), "one new controller revision")
			g.Expect(w.nodeRevision(g)).To(BeNumerically("<=", nodeRev+1), "at most one new node plugin revision")
			if !w.available(ctx) {
				notAvailable = append(notAvailable, w.conditionSummary(ctx))
			}
		}).WithTimeout(15 * time.Second).WithPolling(poll).Should(Succeed())
		if len(notAvailable) > 0 {
			t.Logf("Not Available, or Progressing, at %d of the checks after the switch: %s", len(notAvailable), strings.Join(slices.Compact(notAvailable), "; "))
		}
		g.Eventually(func(g Gomega) {
			g.Expect(w.available(ctx)).To(BeTrue(), "the driver is Available and not Progressing")
			w.expectRolledOut(g)
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
		t.Logf("Controller Deployment generation %d -> %d, revision %d -> %d; node DaemonSet generation %d -> %d, revision %d -> %d",
			depGen, w.controllerDeployment(g).Generation, depRev, w.controllerRevision(g), dsGen, w.daemonSet(g).Generation, nodeRev, w.nodeRevision(g))
	})

	t.Run("When the operator takes over, it should keep every object csi-operator left: same UIDs", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(w.uids(g, objs)).To(Equal(uids))
	})

	t.Run("When the operator takes over, csi-operator's conditions should be gone from the ClusterCSIDriver", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(w.csiOperatorConditions).WithTimeout(time.Minute).WithPolling(poll).Should(BeEmpty(), "csi-operator's conditions left")
	})

	t.Run("When the operator has taken over, the default StorageClass should be the same object, default, with the same parameters", func(t *testing.T) {
		g := NewWithT(t)
		sc := w.defaultStorageClass(g)
		g.Expect(sc.UID).To(Equal(scBefore.UID))
		g.Expect(sc.Annotations).To(HaveKeyWithValue(names.DefaultStorageClassAnnotation, "true"))
		g.Expect(sc.Parameters).To(Equal(scBefore.Parameters))
		g.Expect(sc.Provisioner).To(Equal(scBefore.Provisioner))
	})

	if checkZoneClass != nil {
		t.Run("When the user already has a per-zone class of that name, the operator should leave it untouched and name it in its zone warning", checkZoneClass)
	}

	// A new claim, with a pod that writes to it, made as soon as the operator has taken over.
	var token string
	if afterNS != "" {
		g.Expect(w.Guest.Create(ctx, claim(afterNS, "after", "", "1Gi"))).To(Succeed())
		token = fmt.Sprintf("after-switch-%d", time.Now().UnixNano())
		g.Expect(w.Guest.Create(ctx, w.pod(afterNS, "after", "after",
			"set -e; echo "+token+" > /data/file; sync; cat /data/file > /dev/termination-log", corev1.RestartPolicyNever))).To(Succeed())
	}

	t.Run("When the operator has taken over, the writer should have seen no error and no long pause", func(t *testing.T) {
		w.expectWriting(t, writer)
	})
	w.deletePod(t, ns, "writer")

	return func(t *testing.T) {
		defer func() {
			seen := degraded.Stop()
			t.Logf("Degraded=True conditions seen from the operator's start to the end of the switch: %d", len(seen))
			NewWithT(t).Expect(seen).To(BeEmpty(), "no Degraded condition of the operator's at any moment")
		}()
		if token == "" {
			return
		}
		g := NewWithT(t)
		// csi-operator's sidecars keep their leader leases when they stop (this operator's
		// release theirs); the operator deletes those whose pod is gone once they lapsed, and
		// the current controller's sidecars take them at their next try: the switch's one
		// pause, for new volumes only.
		w.waitSidecarLeases(t)
		t.Logf("The controller holds every sidecar lease %s after the switch began", time.Since(start).Round(100*time.Millisecond))
		g.Expect(w.waitTerminated(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: afterNS, Name: "after"}}, podTimeout)).To(Equal(token))
		t.Logf("The claim made right after the take-over was mounted and written %s after the switch began", time.Since(start).Round(100*time.Millisecond))
		pv := w.waitBound(t, afterNS, "after")
		g.Expect(pv.Spec.CSI).NotTo(BeNil())
		g.Expect(pv.Spec.CSI.Driver).To(Equal(names.DriverName))
		// Its volume goes now, not at the end of the world: the scenarios after it start
		// from a cloud without volumes.
		w.deletePod(t, afterNS, "after")
		g.Expect(w.Guest.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: afterNS, Name: "after"}})).To(Succeed())
		g.Eventually(func(g Gomega) {
			_, exists := w.OpenStack.Volume(pv.Spec.CSI.VolumeHandle)
			g.Expect(exists).To(BeFalse(), "the Cinder volume is deleted")
		}).WithTimeout(goneTimeout).WithPolling(poll).Should(Succeed())
	}
}

// switchBackToCSIOperator goes back from this operator to csi-operator with a volume in use: the
// operator's Deployment is deleted, then csi-operator's objects are written again as its first
// reconcile would. The writer must keep writing without a long pause, and the volume must stay
// readable through csi-operator's driver: detached, attached and mounted again by it.
func switchBackToCSIOperator(t *testing.T, w *world) {
	ctx := context.Background()
	g := NewWithT(t)
	g.Expect(w.Operator).NotTo(BeNil(), "the operator is not deployed")
	ns := w.namespace(t, "switchback")
	// A controller recreated by the scenario before (managementState Removed, then Managed) may
	// still wait for the leases of the one it replaced: the writer's claim waits for them too,
	// separately, so that its own wait stays a pod's.
	w.waitSidecarLeases(t)
	g.Expect(w.Guest.Create(ctx, claim(ns, "data", "", "1Gi"))).To(Succeed())
	writer := w.startWriter(t, ns, "writer", "data")
	w.waitWrites(t, writer, 10)

	start := time.Now()
	w.Operator.Stop()
	w.removeOperator(t)
	o := w.csiOperatorOptions(t)
	g.Expect(csioperator.Restore(ctx, w.Mgmt, w.Guest, csioperator.Build(o))).To(Succeed())
	g.Expect(csioperator.WriteConditions(ctx, w.Guest, csioperator.Conditions(o.HyperShift, metav1.Now()))).To(Succeed())
	w.Operator, w.CSIOperator = nil, &o
	w.waitCSIOperatorRolledOut(t)
	t.Logf("Switch back to csi-operator: its workloads rolled out %s after the switch back began", time.Since(start).Round(100*time.Millisecond))

	t.Run("When csi-operator is back, the writer should have seen no error and no long pause", func(t *testing.T) {
		w.expectWriting(t, writer)
	})

	t.Run("When csi-operator is back, the volume should be readable through its driver, with every write in order", func(t *testing.T) {
		g := NewWithT(t)
		w.deletePod(t, ns, "writer")
		reader := w.pod(ns, "reader", "data", "cat /data/writes", corev1.RestartPolicyNever)
		w.runToEnd(t, reader)
		gap, lines, err := longestGap(w.podLog(g, reader))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lines).To(BeNumerically(">", 10))
		t.Logf("The volume's file, read back through csi-operator's driver: %d writes, longest gap %s", lines, gap)
		g.Expect(gap).To(BeNumerically("<=", maxWriterGap))
	})
}

// removeOperator stops this operator as the switch back does: its Deployment deleted, its pods
// gone before anything of csi-operator's is written, so that it cannot revert them.
func (w *world) removeOperator(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: w.OperatorNamespace, Name: w.Operator.Name}}
	g.Expect(w.Mgmt.Delete(ctx, dep, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
	g.Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(w.Mgmt.List(ctx, pods, client.InNamespace(w.OperatorNamespace), client.MatchingLabels(w.Operator.PodLabels()))).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty(), "the operator's pods are gone")
		err := w.Mgmt.Get(ctx, client.ObjectKeyFromObject(dep), &appsv1.Deployment{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the operator's Deployment is gone: %v", err)
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
}

// writerScript appends "<n> <uptime>" to /data/writes every 200 ms and fsyncs the file, and
// prints the same line to its log; a failed write or fsync ends the pod with the reason as its
// termination message. The host's uptime is a monotonic clock with 10 ms resolution.
const writerScript = `n=0
while :; do
  n=$((n+1))
  read up rest < /proc/uptime
  echo "$n $up" >> /data/writes || { echo "write $n failed" > /dev/termination-log; exit 1; }
  sync /data/writes || { echo "fsync $n failed" > /dev/termination-log; exit 1; }
  echo "$n $up"
  sleep 0.2
done`

// startWriter starts the writer on a claim and returns it once it runs.
func (w *world) startWriter(t testing.TB, ns, name, claimName string) *corev1.Pod {
	t.Helper()
	p := w.pod(ns, name, claimName, writerScript, corev1.RestartPolicyNever)
	w.startRunning(t, p)
	return p
}

// waitWrites waits until the writer has logged n writes.
func (w *world) waitWrites(t testing.TB, writer *corev1.Pod, n int) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		_, lines, err := longestGap(w.podLog(g, writer))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(lines).To(BeNumerically(">=", n))
	}).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed())
}

// expectWriting checks that the writer still runs, never restarted, and that its log has every
// write in order with no gap longer than maxWriterGap; it logs the longest gap.
func (w *world) expectWriting(t testing.TB, writer *corev1.Pod) {
	t.Helper()
	g := NewWithT(t)
	got := &corev1.Pod{}
	g.Expect(w.Guest.Get(context.Background(), client.ObjectKeyFromObject(writer), got)).To(Succeed())
	g.Expect(got.Status.Phase).To(Equal(corev1.PodRunning), "the writer: %s", podSummary(got))
	g.Expect(got.Status.ContainerStatuses[0].RestartCount).To(BeZero())
	gap, lines, err := longestGap(w.podLog(g, writer))
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("Writer %s/%s: %d writes, longest gap %s", writer.Namespace, writer.Name, lines, gap)
	g.Expect(gap).To(BeNumerically("<=", maxWriterGap), "the longest pause between two writes")
}

// podLog returns the log of a pod's container, through the guest's API server.
func (w *world) podLog(g Gomega, p *corev1.Pod) string {
	cs, err := kubernetes.NewForConfig(w.Env.GuestConfig())
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "work"}).DoRaw(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	return string(b)
}

// longestGap reads the writer's lines ("<n> <uptime>") and returns the longest time between two
// consecutive writes and how many there were; a missing or repeated write is an error. A last
// line cut short (the file read while a write was under way) is ignored.
func longestGap(text string) (time.Duration, int, error) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	var (
		gap      time.Duration
		count    int
		lastN    int
		lastTime float64
	)
	for i, line := range lines {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		var n int
		var up float64
		var err error
		if len(f) == 2 {
			if n, err = strconv.Atoi(f[0]); err == nil {
				up, err = strconv.ParseFloat(f[1], 64)
			}
		}
		if len(f) != 2 || err != nil {
			if i == len(lines)-1 {
				break
			}
			return 0, count, fmt.Errorf("line %d is not a write: %q", i+1, line)
		}
		if count > 0 {
			if n != lastN+1 {
				return 0, count, fmt.Errorf("write %d follows write %d", n, lastN)
			}
			if d := time.Duration((up - lastTime) * float64(time.Second)); d > gap {
				gap = d
			}
		}
		count, lastN, lastTime = count+1, n, up
	}
	return gap.Round(10 * time.Millisecond), count, nil
}

// uids returns the UID of each of objs by kind, namespace and name; a missing object has none.
func (w *world) uids(g Gomega, objs csioperator.Objects) map[string]types.UID {
	out := map[string]types.UID{}
	for _, list := range []struct {
		c    client.Client
		objs []client.Object
	}{{w.Mgmt, objs.Management}, {w.Guest, objs.Guest}} {
		for _, o := range list.objs {
			fresh := csioperator.EmptyLike(o)
			err := list.c.Get(context.Background(), client.ObjectKeyFromObject(o), fresh)
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
			gvk, err := list.c.GroupVersionKindFor(o)
			g.Expect(err).NotTo(HaveOccurred())
			out[gvk.Kind+"/"+client.ObjectKeyFromObject(o).String()] = fresh.GetUID()
		}
	}
	return out
}

// controllerRevision returns the controller Deployment's revision: one more for each rollout,
// also one back to a template it ran before.
func (w *world) controllerRevision(g Gomega) int {
	rev, err := strconv.Atoi(w.controllerDeployment(g).Annotations["deployment.kubernetes.io/revision"])
	g.Expect(err).NotTo(HaveOccurred())
	return rev
}

// nodeRevision returns the highest revision among the node DaemonSet's ControllerRevisions: one
// more for each rollout, also one back to a template it ran before.
func (w *world) nodeRevision(g Gomega) int64 {
	ds := w.daemonSet(g)
	list := &appsv1.ControllerRevisionList{}
	g.Expect(w.Guest.List(context.Background(), list, client.InNamespace(names.GuestNamespace))).To(Succeed())
	var top int64
	for _, r := range list.Items {
		if slices.ContainsFunc(r.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == ds.UID }) {
			top = max(top, r.Revision)
		}
	}
	return top
}

func (w *world) defaultStorageClass(g Gomega) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{}
	g.Expect(w.Guest.Get(context.Background(), client.ObjectKey{Name: names.StorageClass}, sc)).To(Succeed())
	return sc
}

// conditionSummary returns this operator's Available and Progressing conditions that are not
// as a rolled-out driver has them, as type=status (reason).
func (w *world) conditionSummary(ctx context.Context) string {
	d := &operatorv1.ClusterCSIDriver{}
	if err := w.Guest.Get(ctx, client.ObjectKey{Name: names.ClusterCSIDriverName}, d); err != nil {
		return err.Error()
	}
	var out []string
	for _, c := range d.Status.Conditions {
		switch c.Type {
		case names.ConditionControllerAvailable, names.ConditionNodeAvailable:
			if c.Status != operatorv1.ConditionTrue {
				out = append(out, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason))
			}
		case names.ConditionControllerProgressing, names.ConditionNodeProgressing:
			if c.Status == operatorv1.ConditionTrue {
				out = append(out, fmt.Sprintf("%s=%s (%s)", c.Type, c.Status, c.Reason))
			}
		}
	}
	return strings.Join(out, ", ")
}

// csiOperatorConditions returns the types of csi-operator's conditions still on the
// ClusterCSIDriver.
func (w *world) csiOperatorConditions() ([]string, error) {
	d := &operatorv1.ClusterCSIDriver{}
	if err := w.Guest.Get(context.Background(), client.ObjectKey{Name: names.ClusterCSIDriverName}, d); err != nil {
		return nil, err
	}
	var left []string
	for _, t := range names.CSIOperatorConditions {
		if conditions.Find(d.Status.Conditions, t) != nil {
			left = append(left, t)
		}
	}
	return left, nil
}
