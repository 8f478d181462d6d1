// Package integration runs the operator's managers in-process against real local clusters
// (kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok) and a fake OpenStack
// over HTTPS, and checks the behaviour users rely on.
package integration

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

const (
	installTimeout = 2 * time.Minute
	poll           = 250 * time.Millisecond
)

// driver reads the ClusterCSIDriver.
func driver(g Gomega, e *env.Env) *operatorv1.ClusterCSIDriver {
	d := &operatorv1.ClusterCSIDriver{}
	g.Expect(e.GuestClient.Get(context.Background(), client.ObjectKey{Name: names.ClusterCSIDriverName}, d)).To(Succeed())
	return d
}

// condition returns a ClusterCSIDriver condition, or an empty one.
func condition(g Gomega, e *env.Env, t string) operatorv1.OperatorCondition {
	if c := conditions.Find(driver(g, e).Status.Conditions, t); c != nil {
		return *c
	}
	return operatorv1.OperatorCondition{}
}

// waitAvailable waits until the controller and the node plugin are reported Available and
// rolled out.
func waitAvailable(t *testing.T, e *env.Env) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		d := driver(g, e)
		for _, c := range []string{names.ConditionControllerAvailable, names.ConditionNodeAvailable} {
			g.Expect(env.ConditionTrue(d.Status.Conditions, c)).To(BeTrue(), c)
		}
		for _, c := range []string{names.ConditionControllerProgressing, names.ConditionNodeProgressing} {
			g.Expect(env.ConditionTrue(d.Status.Conditions, c)).To(BeFalse(), c)
		}
	}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
}

func controllerDeployment(g Gomega, e *env.Env) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	g.Expect(e.MgmtClient.Get(context.Background(), client.ObjectKey{Namespace: e.Namespace, Name: names.ControllerDeployment}, d)).To(Succeed())
	return d
}

func nodeDaemonSet(g Gomega, e *env.Env) *appsv1.DaemonSet {
	d := &appsv1.DaemonSet{}
	g.Expect(e.GuestClient.Get(context.Background(), client.ObjectKey{Namespace: names.GuestNamespace, Name: names.NodeDaemonSet}, d)).To(Succeed())
	return d
}

// replicaSets returns the controller Deployment's ReplicaSets.
func replicaSets(g Gomega, e *env.Env) []appsv1.ReplicaSet {
	l := &appsv1.ReplicaSetList{}
	g.Expect(e.MgmtClient.List(context.Background(), l, client.InNamespace(e.Namespace),
		client.MatchingLabels{"app": names.ControllerDeployment})).To(Succeed())
	return l.Items
}

// daemonSetRevisions returns the node DaemonSet's ControllerRevisions.
func daemonSetRevisions(g Gomega, e *env.Env) []appsv1.ControllerRevision {
	l := &appsv1.ControllerRevisionList{}
	g.Expect(e.GuestClient.List(context.Background(), l, client.InNamespace(names.GuestNamespace),
		client.MatchingLabels{"app": names.NodeDaemonSet})).To(Succeed())
	return l.Items
}

// waitRolledOut waits until the controller Deployment and the node DaemonSet have rolled out.
func waitRolledOut(g Gomega, e *env.Env) {
	g.Eventually(func(g Gomega) {
		expectDeploymentRolledOut(g, controllerDeployment(g, e))
		expectDaemonSetRolledOut(g, nodeDaemonSet(g, e))
	}).WithTimeout(rolloutTimeout).WithPolling(poll).Should(Succeed())
}

// expectRolledOutOnce checks that the controller Deployment and the node DaemonSet were written
// once and rolled out once: one ReplicaSet, one revision, generation 1 each.
func expectRolledOutOnce(g Gomega, e *env.Env) {
	g.Expect(replicaSets(g, e)).To(HaveLen(1))
	g.Expect(daemonSetRevisions(g, e)).To(HaveLen(1))
	g.Expect(controllerDeployment(g, e).Generation).To(Equal(int64(1)))
	g.Expect(nodeDaemonSet(g, e).Generation).To(Equal(int64(1)))
}

func configMap(g Gomega, c client.Client, ns, name string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{}
	g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm)).To(Succeed())
	return cm
}

// setUserConfig creates or replaces openshift-config/cinder-csi-config.
func setUserConfig(t *testing.T, e *env.Env, data map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.OpenShiftConfigNamespace, Name: names.UserConfigMap}}
	ctx := context.Background()
	err := e.GuestClient.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	cm.Data = data
	if err == nil {
		NewWithT(t).Expect(e.GuestClient.Update(ctx, cm)).To(Succeed())
		return
	}
	NewWithT(t).Expect(e.GuestClient.Create(ctx, cm)).To(Succeed())
}

// update is env.Edit for a test: a failed edit fails the test.
func update[T client.Object](t *testing.T, c client.Client, obj T, fieldManager string, mutate func(T)) {
	t.Helper()
	err := env.Edit(context.Background(), c, obj, fieldManager, mutate)
	NewWithT(t).Expect(err).To(Succeed(), "updating %T %s", obj, client.ObjectKeyFromObject(obj))
}

// flagValues returns the value of every "<name>=<value>" argument, in order, so a test can
// check that a flag is set exactly once and to what.
func flagValues(args []string, name string) []string {
	var out []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			out = append(out, v)
		}
	}
	return out
}

// container returns the named container of a pod spec, or nil.
func container(pod *corev1.PodSpec, name string) *corev1.Container {
	for i := range pod.Containers {
		if pod.Containers[i].Name == name {
			return &pod.Containers[i]
		}
	}
	return nil
}

// expectDeploymentRolledOut checks that the Deployment controller has rolled out the current
// template completely: every replica updated and available, no old replica left.
func expectDeploymentRolledOut(g Gomega, dep *appsv1.Deployment) {
	want := ptr.Deref(dep.Spec.Replicas, 1)
	st := dep.Status
	g.Expect(st.ObservedGeneration).To(Equal(dep.Generation), "observed generation")
	g.Expect(st.UpdatedReplicas).To(Equal(want), "updated replicas")
	g.Expect(st.AvailableReplicas).To(Equal(want), "available replicas")
	g.Expect(st.Replicas).To(Equal(want), "replicas")
	var available bool
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			available = c.Status == corev1.ConditionTrue
		}
	}
	g.Expect(available).To(BeTrue(), "Deployment condition Available")
}

// expectDaemonSetRolledOut checks that the DaemonSet controller has rolled out the current
// template on every node it schedules to.
func expectDaemonSetRolledOut(g Gomega, ds *appsv1.DaemonSet) {
	st := ds.Status
	g.Expect(st.ObservedGeneration).To(Equal(ds.Generation), "observed generation")
	g.Expect(st.DesiredNumberScheduled).To(BeNumerically(">", 0), "desired number scheduled")
	g.Expect(st.UpdatedNumberScheduled).To(Equal(st.DesiredNumberScheduled), "updated number scheduled")
	g.Expect(st.NumberAvailable).To(Equal(st.DesiredNumberScheduled), "number available")
}

// driverEvents returns the Events (events.k8s.io/v1, which the operator's recorders write)
// regarding the ClusterCSIDriver. The object is cluster-scoped, so its Events land in the
// default namespace; all namespaces are listed so that a change there does not hide them.
func driverEvents(g Gomega, e *env.Env) []eventsv1.Event {
	l := &eventsv1.EventList{}
	g.Expect(e.GuestClient.List(context.Background(), l)).To(Succeed())
	var out []eventsv1.Event
	for _, ev := range l.Items {
		if ev.Regarding.Kind == "ClusterCSIDriver" && ev.Regarding.Name == names.ClusterCSIDriverName {
			out = append(out, ev)
		}
	}
	return out
}

// operatorLog returns a buffer for the operator's log whose last lines are printed when the
// test has failed, after the operator has stopped.
func operatorLog(t *testing.T) *logBuffer {
	out := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Operator log (last lines):\n%s", lastLines(out.String(), 150))
		}
	})
	return out
}

// logBuffer collects the operator's log (env.OperatorOptions.LogOutput); the managers write to
// it from many goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
