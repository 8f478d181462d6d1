//go:build e2e

package storage

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/clusterstorage"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/imagetars"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realnode"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

var previousRelease = flag.String("previous-release", "", "directory of the operator's previous release, its binary and manifests/install (make builds it, PREVIOUS_RELEASE): the real cloud's worlds start from it and upgrade to this tree; empty starts them from this tree and skips the upgrade")

const (
	// previousReleaseName keeps the previous release's operator image apart from this tree's
	// (imagetars.BuildOperatorOf).
	previousReleaseName = "previous"
	// nextOperandTag is appended to the operand images' tags for the release the upgrade moves to:
	// a new OpenShift release names its operand images anew.
	nextOperandTag = "-next"
	// upgradeWorkerLabel marks the workers the upgrade's writers may run on, and drains.
	upgradeWorkerLabel = "e2e.cinder-csi-operator/upgrade-worker"
	// upgradeWorkers is how many workers the upgrade drains and reboots, one after another.
	upgradeWorkers = 2
	// writerInterval is the pause between two of a writer's synced appends.
	writerInterval = "0.2"
)

// operandImages are the images a release's operand image variables name: the ones the upgrade
// renames.
var operandImages = []string{
	imagetars.Driver, imagetars.Provisioner, imagetars.Attacher, imagetars.Resizer, imagetars.Snapshotter,
	imagetars.NodeDriverRegistrar, imagetars.LivenessProbe, imagetars.KubeRBACProxy,
}

// upgradeWorker is a worker the upgrade drains and reboots: its node and its Nova server.
type upgradeWorker struct {
	node     *realnode.Node
	serverID string
}

func (u upgradeWorker) name() string { return u.node.Name() }

// upgradeWriter is a Deployment of one pod that appends a sequence to its claim, and what the
// test saw of it.
type upgradeWriter struct {
	name, claim string
	volumeID    string
	// last is the highest write a pod of it logged, as last read.
	last int
}

// realUpgrade lives through an OpenShift upgrade on the real cloud, as the platform runs one: the
// operator from its previous release to this tree (its image and install manifests, the operand
// images renamed as a new release names them), then every worker cordoned, drained, rebooted and
// uncordoned in turn, with a writer per worker whose volume moves between Nova servers. Every
// version of the ClusterCSIDriver is recorded throughout, with what ClusterOperator storage
// would say from it (cluster-storage-operator's aggregation, package clusterstorage): Available
// at every one, Degraded at none, Progressing only while the operator's and the operands'
// rollouts run.
func realUpgrade(t *testing.T, w *world) {
	if w.release == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("the upgrade needs the previous release (-previous-release, make builds it)")
		}
		t.Skip("SKIPPED: no -previous-release: the world started from this tree")
	}
	ctx := context.Background()
	g := NewWithT(t)
	workers := w.upgradeWorkers(t)
	// The previous release's node plugin runs on every worker before anything starts.
	w.waitAvailable(t)

	rec, err := clusterstorage.Watch(w.Env.GuestConfig(), w.Guest.Scheme())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(rec.Stop)
	since := time.Now()

	ns := w.realNamespace(t, "upgrade")
	writers := make([]*upgradeWriter, len(workers))
	for i, wk := range workers {
		writers[i] = w.startUpgradeWriter(t, ns, fmt.Sprintf("writer-%d", i), wk.name())
	}
	for _, wr := range writers {
		w.waitWriterRunning(t, ns, wr, "")
		pv := w.waitBound(t, ns, wr.claim)
		wr.volumeID = pv.Spec.CSI.VolumeHandle
	}

	// The operator and its operands: one rollout of each workload, every object kept.
	uids := w.managedUIDs(g)
	controllerRev, nodeRev := w.controllerRevision(g), w.nodeRevision(g)
	base := imagetars.Set{}
	for _, n := range operandImages {
		base[n] = w.Env.Real.Images[n]
	}
	bin, err := filepath.Abs(*binDir)
	g.Expect(err).NotTo(HaveOccurred())
	next, err := base.Retagged(bin, nextOperandTag)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Env.ImportImages(ctx, next.Tars()...)).To(Succeed())
	upgradeStart := time.Now()
	op, err := w.Env.UpgradeOperator(ctx, w.Operator, env.PodOptions{
		Binary: w.operatorBinary, ExtraArgs: operatorTestArgs(), Operands: next.Env(),
	})
	g.Expect(err).NotTo(HaveOccurred(), "upgrading the operator")
	w.Operator, w.release = op, ""
	operatorDone := time.Now()
	t.Logf("Upgrade: the operator's pod of this release Ready %s after the upgrade began", operatorDone.Sub(upgradeStart).Round(time.Millisecond))
	w.waitOperandsRolledOut(t, next)
	operandsDone := time.Now()
	t.Logf("Upgrade: the controller and the node plugin rolled out to the new operand images %s after the operator",
		operandsDone.Sub(operatorDone).Round(time.Millisecond))
	g.Expect(w.controllerRevision(g)).To(Equal(controllerRev+1), "one rollout of the controller")
	g.Expect(w.nodeRevision(g)).To(Equal(nodeRev+1), "one rollout of the node plugin")
	after := w.managedUIDs(g)
	for key, uid := range uids {
		g.Expect(after).To(HaveKeyWithValue(key, uid), "the upgrade keeps every object it found")
	}
	// The volumes stayed mounted through the node plugin's rollout: the writers never stopped.
	for _, wr := range writers {
		w.expectWriterUnmoved(t, ns, wr)
	}

	// The machine-config operator's part: each worker in turn.
	for i, wk := range workers {
		w.drainAndReboot(t, ns, wk, workers[(i+1)%len(workers)], writers)
	}
	// Progressing after the operands' rollout ended once the conditions said so; the samples
	// after that must have none.
	end := time.Now()
	rec.Stop()
	samples := rec.Since(since)
	t.Logf("%d versions of the ClusterCSIDriver recorded from before the upgrade to after the last node", len(samples))
	settled := settledAfter(samples, operandsDone)
	t.Logf("Progressing while the rollouts ran (+%s the operator's upgrade began, +%s the operands had rolled out, +%s Progressing False again):\n%s",
		upgradeStart.Sub(since).Round(time.Millisecond), operandsDone.Sub(since).Round(time.Millisecond),
		settled.Sub(since).Round(time.Millisecond), clusterstorage.Describe(samples, since, clusterstorage.ProgressingTypes...))
	for _, s := range samples {
		at := "+" + s.At.Sub(since).Round(time.Millisecond).String()
		g.Expect(s.True(degradedTypes(s)...)).To(BeEmpty(), "Degraded at %s", at)
		g.Expect(notTrue(s, availableTypes(s))).To(BeEmpty(), "not Available at %s", at)
		if s.At.Before(upgradeStart) || s.At.After(settled) {
			g.Expect(s.True(clusterstorage.ProgressingTypes...)).To(BeEmpty(), "Progressing at %s, with no rollout of the operator's", at)
		}
	}
	t.Logf("Upgrade: from the operator's upgrade to the last node's return: %s", end.Sub(upgradeStart).Round(time.Second))
}

// degradedTypes are the types of s's Degraded conditions, the driver's and ClusterOperator
// storage's.
func degradedTypes(s clusterstorage.Sample) []string {
	return typesWithSuffix(s, clusterstorage.Degraded)
}

// availableTypes are the types of s's Available conditions.
func availableTypes(s clusterstorage.Sample) []string {
	return typesWithSuffix(s, clusterstorage.Available)
}

func typesWithSuffix(s clusterstorage.Sample, suffix string) []string {
	var out []string
	for _, c := range slices.Concat(s.Driver, s.Operator) {
		if strings.HasSuffix(c.Type, suffix) {
			out = append(out, c.Type)
		}
	}
	return out
}

// notTrue returns those of types whose condition in s is not True.
func notTrue(s clusterstorage.Sample, types []string) []string {
	var out []string
	for _, c := range slices.Concat(s.Driver, s.Operator) {
		if slices.Contains(types, c.Type) && c.Status != operatorv1.ConditionTrue {
			out = append(out, c.Type+"="+string(c.Status)+" ("+c.Reason+")")
		}
	}
	return out
}

// settledAfter returns when, at or after t, the samples first had no Progressing True: the end of
// the rollouts as the conditions tell it. With none such, the last sample's time.
func settledAfter(samples []clusterstorage.Sample, t time.Time) time.Time {
	for _, s := range samples {
		if !s.At.Before(t) && len(s.True(clusterstorage.ProgressingTypes...)) == 0 {
			return s.At
		}
	}
	if len(samples) == 0 {
		return t
	}
	return samples[len(samples)-1].At
}

// upgradeWorkers returns the workers the upgrade drains: on HyperShift the guest's worker and
// one more, standalone two beside the master (whose reboot, in the master pool, is not the
// workers'). Each added one is a Nova server of its own and is stopped when the test ends, its
// server deleted.
func (w *world) upgradeWorkers(t *testing.T) []upgradeWorker {
	t.Helper()
	ctx := context.Background()
	var out []upgradeWorker
	if w.Env.Mode == env.ModeHyperShift {
		out = append(out, upgradeWorker{node: w.Env.Real.GuestNode, serverID: w.GuestServerID})
	}
	for i := len(out); i < upgradeWorkers; i++ {
		start := time.Now()
		wk, err := w.Env.AddWorker(ctx, fmt.Sprintf("worker-%d", i), map[string]string{upgradeWorkerLabel: "true"})
		if err != nil {
			t.Fatalf("adding a worker: %v", err)
		}
		t.Cleanup(func() {
			if err := wk.Stop(); err != nil {
				t.Errorf("stopping worker %s: %v", wk.Node.Name(), err)
			}
		})
		t.Logf("Worker %s (server %s) Ready %s after it was asked for", wk.Node.Name(), wk.ServerID, time.Since(start).Round(time.Millisecond))
		out = append(out, upgradeWorker{node: wk.Node, serverID: wk.ServerID})
	}
	for _, wk := range out {
		g := NewWithT(t)
		g.Expect(env.Edit(ctx, w.Guest, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: wk.name()}}, "someone",
			func(n *corev1.Node) { n.Labels[upgradeWorkerLabel] = "true" })).To(Succeed())
		t.Cleanup(func() {
			_ = env.Edit(ctx, w.Guest, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: wk.name()}}, "someone",
				func(n *corev1.Node) { delete(n.Labels, upgradeWorkerLabel) })
		})
	}
	return out
}

// sequenceScript checks the sequence a pod before it left in /data/seq, says so on its first line
// ("complete <n>", or "broken ..." and it exits), then appends the next numbers, each synced
// before it is logged as "<n> <uptime>", every writerInterval seconds.
const sequenceScript = `f=/data/seq
last=0
if [ -f "$f" ]; then
  while read -r line; do
    if [ "$line" != "$((last + 1))" ]; then
      msg="broken: line $((last + 1)) is \"$line\""
      echo "$msg"; echo "$msg" > /dev/termination-log; exit 1
    fi
    last=$((last + 1))
  done < "$f"
fi
echo "complete $last"
n=$last
while :; do
  n=$((n + 1))
  read -r up rest < /proc/uptime
  echo "$n" >> "$f" || { echo "write $n failed" > /dev/termination-log; exit 1; }
  sync "$f" || { echo "fsync $n failed" > /dev/termination-log; exit 1; }
  echo "$n $up"
  sleep ` + writerInterval + `
done`

// startUpgradeWriter creates a claim and a Deployment whose one pod runs sequenceScript on it, on
// an upgrade worker, home when it can.
func (w *world) startUpgradeWriter(t testing.TB, ns, name, home string) *upgradeWriter {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	claimName := name + "-data"
	g.Expect(w.Guest.Create(ctx, claim(ns, claimName, "", "1Gi"))).To(Succeed())
	pod := w.pod(ns, name, claimName, sequenceScript, corev1.RestartPolicyAlways)
	pod.Spec.NodeSelector = nil
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: upgradeWorkerLabel, Operator: corev1.NodeSelectorOpExists}},
		}}},
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{home}}},
		}}},
	}}
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			// A ReadWriteOnce volume: the new pod starts once the old one is gone.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
		},
	}
	g.Expect(w.Guest.Create(ctx, d)).To(Succeed())
	return &upgradeWriter{name: name, claim: claimName}
}

// writerPod returns the writer's pod that is not being deleted, if there is one.
func (w *world) writerPod(g Gomega, ns string, wr *upgradeWriter) *corev1.Pod {
	list := &corev1.PodList{}
	g.Expect(w.Guest.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{"app": wr.name})).To(Succeed())
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			return &list.Items[i]
		}
	}
	return nil
}

// waitWriterRunning waits until a pod of the writer other than notPod runs and has logged writes
// past wr.last, checks that it found the sequence complete up to at least wr.last (every write a
// pod before it synced and logged), and returns it.
func (w *world) waitWriterRunning(t testing.TB, ns string, wr *upgradeWriter, notPod types.UID) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	NewWithT(t).Eventually(func(g Gomega) {
		pod = w.writerPod(g, ns, wr)
		g.Expect(pod).NotTo(BeNil())
		g.Expect(pod.UID).NotTo(Equal(notPod))
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning), "writer %s: %s", wr.name, podSummary(pod))
		found, last := w.writerLog(g, pod)
		g.Expect(found).To(BeNumerically(">=", wr.last), "writer %s found its sequence complete up to %d, but a pod before it had synced %d", wr.name, found, wr.last)
		g.Expect(last).To(BeNumerically(">", max(wr.last, found)+2), "writer %s writing again", wr.name)
		wr.last = last
	}).WithTimeout(goneTimeout).WithPolling(poll).Should(Succeed())
	return pod
}

// writerLog reads a writer pod's log: the sequence it found complete when it started, and the
// last write it logged (each logged write was synced first). Every logged write follows the one
// before it.
func (w *world) writerLog(g Gomega, pod *corev1.Pod) (found, last int) {
	lines := strings.Split(strings.TrimRight(w.podLog(g, pod), "\n"), "\n")
	g.Expect(lines).NotTo(BeEmpty())
	head, ok := strings.CutPrefix(lines[0], "complete ")
	g.Expect(ok).To(BeTrue(), "the writer's check of its sequence: %q", lines[0])
	found, err := strconv.Atoi(head)
	g.Expect(err).NotTo(HaveOccurred())
	last = found
	for i, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) != 2 {
			// The last line may be cut short by the read.
			g.Expect(i).To(Equal(len(lines)-2), "line %d of the writer's log: %q", i+2, line)
			break
		}
		n, err := strconv.Atoi(f[0])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(last+1), "the writer's writes in order")
		last = n
	}
	return found, last
}

// expectWriterUnmoved checks that the writer's pod still runs where it ran, never restarted,
// and goes on writing.
func (w *world) expectWriterUnmoved(t testing.TB, ns string, wr *upgradeWriter) {
	t.Helper()
	g := NewWithT(t)
	pod := w.writerPod(g, ns, wr)
	g.Expect(pod).NotTo(BeNil())
	g.Expect(pod.Status.ContainerStatuses).NotTo(BeEmpty())
	g.Expect(pod.Status.ContainerStatuses[0].RestartCount).To(BeZero(), "writer %s restarted: %s", wr.name, podSummary(pod))
	before := wr.last
	g.Eventually(func(g Gomega) {
		_, last := w.writerLog(g, pod)
		g.Expect(last).To(BeNumerically(">", before+2))
		wr.last = last
	}).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed())
}

// drainAndReboot does to wk what the machine-config operator does to each worker: cordon, drain
// (evicting the writers, which start again on other, whose server their volumes then attach to),
// reboot, uncordon. It logs each part's time.
func (w *world) drainAndReboot(t *testing.T, ns string, wk, other upgradeWorker, writers []*upgradeWriter) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	c := w.cinder(t)
	start := time.Now()
	setUnschedulable := func(v bool) {
		g.Expect(env.Edit(ctx, w.Guest, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: wk.name()}}, "machine-config-daemon",
			func(n *corev1.Node) { n.Spec.Unschedulable = v })).To(Succeed())
	}
	setUnschedulable(true)
	moving := map[*upgradeWriter]types.UID{}
	for _, wr := range writers {
		if pod := w.writerPod(g, ns, wr); pod != nil && pod.Spec.NodeName == wk.name() {
			// The last write it synced, read just before it goes.
			_, wr.last = w.writerLog(g, pod)
			moving[wr] = pod.UID
		}
	}
	evicted := w.evictAll(t, wk.name())
	t.Logf("Node %s: cordoned, %d pods evicted (%s)", wk.name(), len(evicted), strings.Join(evicted, ", "))
	for wr, old := range moving {
		moveStart := time.Now()
		pod := w.waitWriterRunning(t, ns, wr, old)
		g.Expect(pod.Spec.NodeName).To(Equal(other.name()), "writer %s moved to the other worker", wr.name)
		vol, _ := cinderVolume(g, c, wr.volumeID)
		g.Expect(vol.Attachments).To(HaveLen(1))
		g.Expect(vol.Attachments[0].ServerID).To(Equal(other.serverID), "volume %s attached to the server of node %s", wr.volumeID, other.name())
		t.Logf("Writer %s: volume %s moved from server %s to %s (node %s to %s) and the writer runs on it again, sequence complete to %d, %s after the eviction",
			wr.name, wr.volumeID, wk.serverID, other.serverID, wk.name(), other.name(), wr.last, time.Since(moveStart).Round(time.Millisecond))
	}
	drained := time.Now()
	nodePlugin := func(g Gomega) *corev1.Pod {
		pods := &corev1.PodList{}
		g.Expect(w.Guest.List(ctx, pods, client.InNamespace(names.GuestNamespace), client.MatchingLabels{"app": names.NodeDaemonSet},
			client.MatchingFields{"spec.nodeName": wk.name()})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		return &pods.Items[0]
	}
	before := map[string]bool{}
	for _, st := range nodePlugin(g).Status.ContainerStatuses {
		before[st.ContainerID] = true
	}
	rebootCtx, cancel := context.WithTimeout(ctx, goneTimeout)
	defer cancel()
	g.Expect(wk.node.Reboot(rebootCtx)).To(Succeed())
	rebooted := time.Now()
	setUnschedulable(false)
	// The node is back when its node plugin runs again: every container a new one, Ready.
	g.Eventually(func(g Gomega) {
		pod := nodePlugin(g)
		g.Expect(ready(pod)).To(BeTrue(), "the node plugin on %s: %s", wk.name(), podSummary(pod))
		for _, st := range pod.Status.ContainerStatuses {
			g.Expect(before).NotTo(HaveKey(st.ContainerID), "container %s of the node plugin on %s started after the reboot", st.Name, wk.name())
		}
	}).WithTimeout(goneTimeout).WithPolling(poll).Should(Succeed())
	t.Logf("Node %s: drained in %s, rebooted in %s, its node plugin Ready %s later; %s from cordon to Ready", wk.name(),
		drained.Sub(start).Round(time.Millisecond), rebooted.Sub(drained).Round(time.Millisecond),
		time.Since(rebooted).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// evictAll evicts every pod on node that a drain evicts (not the DaemonSets' pods) through the
// Eviction API, as kubectl drain does, waits until they are gone, and returns their names.
func (w *world) evictAll(t testing.TB, node string) []string {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	cs, err := kubernetes.NewForConfig(w.Env.GuestConfig())
	g.Expect(err).NotTo(HaveOccurred())
	pods, err := cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	g.Expect(err).NotTo(HaveOccurred())
	var evicted []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || slices.ContainsFunc(p.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "DaemonSet" }) {
			continue
		}
		g.Eventually(func() error {
			return cs.PolicyV1().Evictions(p.Namespace).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}})
		}).WithTimeout(goneTimeout).WithPolling(poll).Should(Succeed(), "evicting %s/%s", p.Namespace, p.Name)
		evicted = append(evicted, p.Namespace+"/"+p.Name)
	}
	g.Eventually(func(g Gomega) {
		for _, name := range evicted {
			ns, n, _ := strings.Cut(name, "/")
			_, err := cs.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
			g.Expect(err).To(HaveOccurred(), "pod %s still there", name)
		}
	}).WithTimeout(goneTimeout).WithPolling(poll).Should(Succeed())
	return evicted
}

// waitOperandsRolledOut waits until the controller Deployment and the node DaemonSet run the
// images of next everywhere, every pod updated and available.
func (w *world) waitOperandsRolledOut(t testing.TB, next imagetars.Set) {
	t.Helper()
	driver := next[imagetars.Driver].Ref
	NewWithT(t).Eventually(func(g Gomega) {
		d := w.controllerDeployment(g)
		g.Expect(containerImages(d.Spec.Template.Spec)).To(ContainElement(driver))
		want := ptr.Deref(d.Spec.Replicas, 1)
		g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
		g.Expect([]int32{d.Status.UpdatedReplicas, d.Status.Replicas, d.Status.AvailableReplicas}).To(HaveEach(want), "the controller rolled out")
		ds := w.daemonSet(g)
		g.Expect(containerImages(ds.Spec.Template.Spec)).To(ContainElement(driver))
		g.Expect(ds.Status.ObservedGeneration).To(Equal(ds.Generation))
		n := ds.Status.DesiredNumberScheduled
		g.Expect([]int32{ds.Status.UpdatedNumberScheduled, ds.Status.NumberAvailable}).To(HaveEach(n), "the node plugin rolled out")
	}).WithTimeout(goneTimeout).WithPolling(poll).Should(Succeed())
}

func containerImages(spec corev1.PodSpec) []string {
	var out []string
	for _, c := range spec.Containers {
		out = append(out, c.Image)
	}
	return out
}

// managedKinds are the kinds of objects the operator writes, in either cluster.
var managedKinds = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "DeploymentList"},
	{Group: "apps", Version: "v1", Kind: "DaemonSetList"},
	{Version: "v1", Kind: "ConfigMapList"},
	{Version: "v1", Kind: "SecretList"},
	{Version: "v1", Kind: "ServiceList"},
	{Version: "v1", Kind: "ServiceAccountList"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleList"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBindingList"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleList"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBindingList"},
	{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClassList"},
	{Group: "storage.k8s.io", Version: "v1", Kind: "CSIDriverList"},
	{Group: "snapshot.storage.k8s.io", Version: "v1", Kind: "VolumeSnapshotClassList"},
	{Group: "policy", Version: "v1", Kind: "PodDisruptionBudgetList"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicyList"},
}

// managedUIDs returns the UID of every object that carries the operator's label, in both
// clusters, by cluster, kind, namespace and name.
func (w *world) managedUIDs(g Gomega) map[string]types.UID {
	out := map[string]types.UID{}
	clusters := map[string]client.Client{"guest": w.Guest, "management": w.Mgmt}
	for cluster, c := range clusters {
		if cluster == "management" && w.Env.Mode == env.ModeStandalone {
			continue
		}
		for _, gvk := range managedKinds {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gvk)
			err := c.List(context.Background(), list, client.MatchingLabels{names.ManagedByLabel: names.ManagedByValue})
			if meta.IsNoMatchError(err) {
				// A kind the cluster does not serve (snapshot classes in a management cluster).
				continue
			}
			g.Expect(err).NotTo(HaveOccurred(), "listing %s", gvk.Kind)
			for _, o := range list.Items {
				key := filepath.Join(cluster, strings.TrimSuffix(gvk.Kind, "List"), o.Namespace, o.Name)
				out[key] = o.UID
			}
		}
	}
	g.Expect(out).NotTo(BeEmpty())
	return out
}
