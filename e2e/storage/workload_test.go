//go:build e2e

package storage

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/machine"
)

// Timeouts of the storage steps. Provisioning and attaching go through the real sidecars, the
// driver and the fake OpenStack; a pod start includes formatting the volume on a loop device.
// They stop a hang, where a step usually takes seconds; their minutes are the reference
// machine's and stretch on a slower one (package machine), as a pod's deletion took over four
// minutes on a loaded one. A bound a scenario promises (a pod running within a minute of an
// outage's end, say) is its own and does not stretch.
var (
	bindTimeout = machine.Scale(3 * time.Minute)
	podTimeout  = machine.Scale(4 * time.Minute)
	goneTimeout = machine.Scale(4 * time.Minute)
)

const poll = time.Second

// namespace creates a namespace for one scenario in the guest and deletes it, and everything in
// it, when the test ends; the test then waits for the volumes to be gone from OpenStack so that
// the next scenario starts clean.
func (w *world) namespace(t testing.TB, name string) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	NewWithT(t).Expect(w.Guest.Create(ctx, ns)).To(Succeed())
	t.Cleanup(func() {
		defer took(t, "namespace "+name+" and its volumes gone")()
		g := NewWithT(t)
		pods := &corev1.PodList{}
		if err := w.Guest.List(ctx, pods, client.InNamespace(name)); err == nil {
			for i := range pods.Items {
				_ = w.Guest.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(0))
			}
		}
		_ = w.Guest.DeleteAllOf(ctx, &corev1.PersistentVolumeClaim{}, client.InNamespace(name))
		_ = w.Guest.Delete(ctx, ns)
		g.Eventually(func() error {
			return w.Guest.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{})
		}).WithTimeout(goneTimeout).WithPolling(poll).Should(Satisfy(apierrors.IsNotFound),
			"namespace %s is not gone", name)
	})
	return name
}

// claim is a PersistentVolumeClaim of size on class; an empty class means the cluster's default
// StorageClass, which is the operator's standard-csi.
func claim(ns, name, class, size string) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			},
		},
	}
	if class != "" {
		pvc.Spec.StorageClassName = ptr.To(class)
	}
	return pvc
}

// pod runs script with sh in the toolbox image, with the claim mounted at /data, on the guest's
// real node. A pod that ends writes what the test should see to /dev/termination-log: the API
// server then carries it in the container status, so no log or exec call is needed.
func (w *world) pod(ns, name, claimName, script string, restart corev1.RestartPolicy) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 restart,
			NodeSelector:                  map[string]string{corev1.LabelHostname: w.GuestNode},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name:            "work",
				Image:           w.Toolbox,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"/bin/sh", "-c", script},
				VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{
				Name: "data",
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
					ClaimName: claimName,
				}},
			}},
		},
	}
}

// syncedWriter is a pod "writer" that writes token to /data/file of claimName, syncs it, then
// appends a line to /data/log every interval seconds. It turns Ready only once the token is
// synced, not when it starts: a snapshot taken after startRunning then holds the token, where
// one taken before would rightly lack it.
func (w *world) syncedWriter(ns, claimName, token, interval string) *corev1.Pod {
	p := w.pod(ns, "writer", claimName, "set -e; echo "+token+" > /data/file; sync; touch /tmp/synced; i=0; "+
		"while :; do i=$((i+1)); echo $i >> /data/log; sleep "+interval+"; done", corev1.RestartPolicyNever)
	p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "test -f /tmp/synced"}}},
		PeriodSeconds: 1,
	}
	return p
}

// runToEnd creates a pod that ends by itself and returns its termination message once it has
// succeeded; a failed pod fails the test with that message.
func (w *world) runToEnd(t testing.TB, p *corev1.Pod) string {
	t.Helper()
	return w.runToEndWithin(t, p, podTimeout)
}

// runRestoredToEnd is runToEnd for the first pod of a claim restored on the real cloud. There
// Cinder fills the new volume after it has answered the create (from a backup: the volume is
// restoring-backup; from a snapshot: creating, while the NFS driver copies), and the driver
// returns the volume at once, as upstream's does. Until Cinder has filled it, Nova refuses to
// attach it, and csi-attacher tries again after waits that double up to its --retry-interval-max
// (a minute: with csi-attacher's default of five, a restore that took two minutes on a loaded
// machine delayed the pod by four more). The fake cloud fills a restored volume before it answers.
func (w *world) runRestoredToEnd(t testing.TB, p *corev1.Pod) string {
	t.Helper()
	return w.runToEndWithin(t, p, podTimeout+attacherFlag(t, "retry-interval-max"))
}

// readRestored makes claim "restored" in ns from VolumeSnapshot snap and returns what its first
// pod, "reader", finds in the file the source's writer wrote.
func (w *world) readRestored(t testing.TB, ns, snap string) string {
	t.Helper()
	restored := claim(ns, "restored", "", "1Gi")
	restored.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: snap}
	NewWithT(t).Expect(w.Guest.Create(context.Background(), restored)).To(Succeed())
	return w.runRestoredToEnd(t, w.pod(ns, "reader", "restored", "cat /data/file > /dev/termination-log", corev1.RestartPolicyNever))
}

func (w *world) runToEndWithin(t testing.TB, p *corev1.Pod, timeout time.Duration) string {
	t.Helper()
	defer took(t, "pod "+p.Name+" ran to its end")()
	NewWithT(t).Expect(w.Guest.Create(context.Background(), p)).To(Succeed())
	return w.waitTerminated(t, p, timeout)
}

// waitTerminated waits up to timeout until a pod has succeeded and returns its termination
// message; a pod that fails ends the wait at once.
func (w *world) waitTerminated(t testing.TB, p *corev1.Pod, timeout time.Duration) string {
	t.Helper()
	ctx := context.Background()
	defer w.explainPod(t, p.Namespace, p.Name)
	var msg string
	NewWithT(t).Eventually(func(g Gomega) {
		got := &corev1.Pod{}
		g.Expect(w.Guest.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		if got.Status.Phase == corev1.PodFailed {
			StopTrying(fmt.Sprintf("pod %s failed: %s", p.Name, terminationMessage(got))).Now()
		}
		g.Expect(got.Status.Phase).To(Equal(corev1.PodSucceeded), "pod %s: %s", p.Name, podSummary(got))
		msg = terminationMessage(got)
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return msg
}

// startRunning creates a long-running pod and waits until it is Running and Ready.
func (w *world) startRunning(t testing.TB, p *corev1.Pod) {
	t.Helper()
	defer took(t, "pod "+p.Name+" running")()
	g := NewWithT(t)
	g.Expect(w.Guest.Create(context.Background(), p)).To(Succeed())
	w.waitRunning(t, p, podTimeout)
}

// waitRunning waits up to timeout until pod p is Running and Ready.
func (w *world) waitRunning(t testing.TB, p *corev1.Pod, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	defer w.explainPod(t, p.Namespace, p.Name)
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		got := &corev1.Pod{}
		g.Expect(w.Guest.Get(ctx, client.ObjectKeyFromObject(p), got)).To(Succeed())
		g.Expect(got.Status.Phase).To(Equal(corev1.PodRunning), "pod %s: %s", p.Name, podSummary(got))
		g.Expect(ready(got)).To(BeTrue(), "pod %s: %s", p.Name, podSummary(got))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
}

// deletePod deletes a pod and waits until it is gone, which includes the kubelet unmounting its
// volumes through the node plugin.
func (w *world) deletePod(t testing.TB, ns, name string) {
	t.Helper()
	defer took(t, "pod "+name+" deleted")()
	ctx := context.Background()
	g := NewWithT(t)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	defer w.explainPod(t, ns, name)
	g.Expect(client.IgnoreNotFound(w.Guest.Delete(ctx, p))).To(Succeed())
	g.Eventually(func() error {
		return w.Guest.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{})
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Satisfy(apierrors.IsNotFound), "pod %s/%s is not gone", ns, name)
}

// waitBound waits for a claim to be Bound and returns its PersistentVolume.
func (w *world) waitBound(t testing.TB, ns, name string) *corev1.PersistentVolume {
	t.Helper()
	ctx := context.Background()
	pv := &corev1.PersistentVolume{}
	NewWithT(t).Eventually(func(g Gomega) {
		pvc := &corev1.PersistentVolumeClaim{}
		g.Expect(w.Guest.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pvc)).To(Succeed())
		g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimBound), "claim %s/%s", ns, name)
		g.Expect(w.Guest.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv)).To(Succeed())
	}).WithTimeout(bindTimeout).WithPolling(poll).Should(Succeed())
	return pv
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func terminationMessage(p *corev1.Pod) string {
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Terminated != nil {
			return strings.TrimSpace(s.State.Terminated.Message)
		}
	}
	return ""
}

// podSummary says where a pod is stuck, for failure messages: its phase, its conditions that
// are not true and each container's waiting reason.
func podSummary(p *corev1.Pod) string {
	parts := []string{string(p.Status.Phase)}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			parts = append(parts, fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Message))
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		switch {
		case s.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("%s waiting: %s %s", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message))
		case s.State.Terminated != nil:
			parts = append(parts, fmt.Sprintf("%s terminated: %s %s", s.Name, s.State.Terminated.Reason, s.State.Terminated.Message))
		}
	}
	return strings.Join(parts, "; ")
}

// took logs how long a step took when the returned function is called: the figures show where
// a slow run spends its time without any timed assertion.
func took(t testing.TB, step string) func() {
	start := time.Now()
	return func() { t.Logf("%s in %s", step, time.Since(start).Round(100*time.Millisecond)) }
}

// volumeInUse creates claim "data" on the default class in ns and pod "user", which writes a
// counter to it every second and fails if a write fails, and returns the pod once it runs.
func (w *world) volumeInUse(t testing.TB, ns string) *corev1.Pod {
	t.Helper()
	if err := w.Guest.Create(context.Background(), claim(ns, "data", "", "1Gi")); err != nil {
		t.Fatalf("creating claim %s/data: %v", ns, err)
	}
	p := w.pod(ns, "user", "data", "i=0; while :; do i=$((i+1)); echo $i > /data/counter || exit 1; sync; sleep 1; done", corev1.RestartPolicyNever)
	w.startRunning(t, p)
	return p
}
