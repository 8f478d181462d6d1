//go:build e2e

package storage

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// operatorRecovers kills the operator's container (SIGKILL, as an out-of-memory kill does) and
// then deletes its pod, with a volume in use, and checks what a platform relies on: the kubelet
// restarts the container and the operator takes its lease back at once under the same identity
// (not after the lease's 137 s expiry); the Deployment's replacement pod converges; neither
// rolls the CSI controller or the node plugin a second time, and the volume stays usable.
func operatorRecovers(t *testing.T, w *world) {
	ctx := context.Background()
	g := NewWithT(t)
	ns := w.namespace(t, "recovery")
	p := w.volumeInUse(t, ns)
	w.waitAvailable(t)
	controllerBefore := w.controllerDeployment(g)
	rsBefore := len(w.controllerReplicaSets(g))
	nodeBefore := w.daemonSet(g)
	leaseBefore := w.operatorLease(g)
	g.Expect(leaseBefore.Spec.HolderIdentity).NotTo(BeNil())

	// kill -9: the kubelet restarts the container in the same pod, whose name is the operator's
	// leader identity, so the new process renews the lease it already holds.
	restarted := took(t, "operator container restarted and its lease renewed")
	pod, restarts, err := w.Operator.Kill(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	killed := time.Now()
	g.Expect(*leaseBefore.Spec.HolderIdentity).To(Equal(w.OperatorNamespace+"/"+pod.Name), "the holder is the pod's downward-API identity")
	g.Expect(w.Operator.WaitRestarted(ctx, pod, restarts)).To(Succeed())
	g.Eventually(func(g Gomega) {
		l := w.operatorLease(g)
		g.Expect(*l.Spec.HolderIdentity).To(Equal(*leaseBefore.Spec.HolderIdentity))
		g.Expect(l.Spec.RenewTime.Time).To(BeTemporally(">", killed), "renewed since the kill")
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	restarted()
	l := w.operatorLease(g)
	expiry := leaseBefore.Spec.RenewTime.Add(time.Duration(*leaseBefore.Spec.LeaseDurationSeconds) * time.Second)
	g.Expect(l.Spec.RenewTime.Time).To(BeTemporally("<", expiry), "taken back before the old lease would have expired")
	g.Expect(l.Spec.LeaseTransitions).To(Equal(leaseBefore.Spec.LeaseTransitions), "the same holder: no transition")
	w.waitAvailable(t)
	w.expectNoRollout(g, controllerBefore, rsBefore, nodeBefore)

	// The pod deleted: the operator shuts down, releasing its lease, and the Deployment's new
	// pod (a new identity) takes it at once and finds everything as it wants it.
	replaced := took(t, "operator pod replaced and converged")
	old, repl, err := w.Operator.DeletePod(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(repl.Name).NotTo(Equal(old.Name))
	g.Eventually(func(g Gomega) {
		g.Expect(*w.operatorLease(g).Spec.HolderIdentity).To(Equal(w.OperatorNamespace + "/" + repl.Name))
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	w.waitAvailable(t)
	replaced()
	w.expectNoRollout(g, controllerBefore, rsBefore, nodeBefore)

	got := &corev1.Pod{}
	g.Expect(w.Guest.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
	g.Expect(got.Status.Phase).To(Equal(corev1.PodRunning), "the pod using the volume: %s", podSummary(got))
	g.Expect(got.Status.ContainerStatuses[0].RestartCount).To(BeZero())
	w.deletePod(t, ns, "user")
}

// expectNoRollout fails when the CSI controller or the node plugin rolled since before.
func (w *world) expectNoRollout(g Gomega, controller *appsv1.Deployment, replicaSets int, node *appsv1.DaemonSet) {
	g.Consistently(func(g Gomega) {
		g.Expect(w.controllerDeployment(g).Generation).To(Equal(controller.Generation), "the controller Deployment is not changed")
		g.Expect(w.controllerReplicaSets(g)).To(HaveLen(replicaSets), "the controller does not roll")
		g.Expect(w.daemonSet(g).Generation).To(Equal(node.Generation), "the node plugin does not roll")
	}).WithTimeout(10 * time.Second).WithPolling(poll).Should(Succeed())
}

func (w *world) controllerDeployment(g Gomega) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	g.Expect(w.Mgmt.Get(context.Background(), client.ObjectKey{Namespace: w.Namespace, Name: names.ControllerDeployment}, d)).To(Succeed())
	return d
}

// operatorLease returns the operator's leader-election Lease, in its namespace on the cluster
// where its pod runs.
func (w *world) operatorLease(g Gomega) *coordinationv1.Lease {
	l := &coordinationv1.Lease{}
	g.Expect(w.Mgmt.Get(context.Background(), client.ObjectKey{Namespace: w.OperatorNamespace, Name: names.LeaderElectionControlPlane}, l)).To(Succeed())
	g.Expect(l.Spec.HolderIdentity).NotTo(BeNil())
	g.Expect(l.Spec.RenewTime).NotTo(BeNil())
	return l
}
