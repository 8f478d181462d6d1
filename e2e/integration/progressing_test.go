package integration

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/clusterstorage"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// TestProgressingOnlyForRollouts checks item 2 of the platform's contract for upgrades: pods lost
// after a rollout completed (what every node reboot, drain or pod kill does) and a restart of the
// operator never turn Progressing True, on the ClusterCSIDriver nor, through cluster-storage-
// operator's aggregation, on ClusterOperator storage; a change of the operands' template does,
// while it rolls out. Every version of the ClusterCSIDriver is recorded from a watch, so a
// condition True for a moment is seen too.
func TestProgressingOnlyForRollouts(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
	op, err := e.RunOperator(env.OperatorOptions{})
	if err != nil {
		t.Fatalf("starting the operator: %v", err)
	}
	t.Cleanup(func() { _ = op.Stop() })
	waitAvailable(t, e)
	ctx := context.Background()

	// The guest manager records the node plugin's generation once it has seen it complete.
	NewWithT(t).Eventually(func(g Gomega) {
		ds := nodeDaemonSet(g, e)
		g.Expect(ds.Annotations).To(HaveKeyWithValue(names.StableGenerationAnnotation, strconv.FormatInt(ds.Generation, 10)))
	}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())

	rec, err := clusterstorage.Watch(e.GuestConfig(), e.GuestClient.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Stop)
	never := func(t *testing.T, since time.Time) {
		t.Helper()
		samples := rec.Since(since)
		t.Logf("%d versions of the ClusterCSIDriver recorded", len(samples))
		if d := clusterstorage.Describe(samples, since, clusterstorage.ProgressingTypes...); d != "" {
			t.Errorf("Progressing was True with no rollout of the operator's:\n%s", d)
		}
	}

	t.Run("When the node plugin's pods are deleted, as a node's reboot or drain does, Progressing should stay False on the driver and on ClusterOperator storage", func(t *testing.T) {
		since := time.Now()
		g := NewWithT(t)
		pods := &corev1.PodList{}
		g.Expect(e.GuestClient.List(ctx, pods, client.InNamespace(names.GuestNamespace), client.MatchingLabels{"app": names.NodeDaemonSet})).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty())
		old := map[string]bool{}
		for i := range pods.Items {
			old[string(pods.Items[i].UID)] = true
			g.Expect(e.GuestClient.Delete(ctx, &pods.Items[i])).To(Succeed())
		}
		g.Eventually(func(g Gomega) {
			ds := nodeDaemonSet(g, e)
			g.Expect(ds.Status.NumberAvailable).To(Equal(ds.Status.DesiredNumberScheduled))
			expectReplaced(g, e.GuestClient, names.GuestNamespace, names.NodeDaemonSet, old, int(ds.Status.DesiredNumberScheduled))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		// The guest manager has seen the last of it once NodeAvailable counts every node again.
		g.Eventually(func() string { return condition(g, e, names.ConditionNodeAvailable).Message }).
			WithTimeout(reactTimeout).WithPolling(poll).Should(WithTransform(allOf, BeTrue()))
		never(t, since)
	})

	t.Run("When the controller's pod is evicted by a drain and waits for a node, Progressing should stay False on the driver and on ClusterOperator storage", func(t *testing.T) {
		since := time.Now()
		g := NewWithT(t)
		pods := &corev1.PodList{}
		g.Expect(e.MgmtClient.List(ctx, pods, client.InNamespace(e.Namespace), client.MatchingLabels{"app": names.ControllerDeployment})).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty())
		// A drain: the nodes cordoned, so that the replacement waits, and the operator sees the
		// Deployment short of its replica until they are uncordoned.
		nodes := &corev1.NodeList{}
		g.Expect(e.MgmtClient.List(ctx, nodes)).To(Succeed())
		cordon := func(on bool) {
			for i := range nodes.Items {
				n := &nodes.Items[i]
				before := n.DeepCopy()
				n.Spec.Unschedulable = on
				g.Expect(e.MgmtClient.Patch(ctx, n, client.MergeFrom(before))).To(Succeed())
			}
		}
		cordon(true)
		defer cordon(false)
		old := map[string]bool{}
		for i := range pods.Items {
			old[string(pods.Items[i].UID)] = true
			g.Expect(e.MgmtClient.Delete(ctx, &pods.Items[i])).To(Succeed())
		}
		g.Eventually(func() operatorv1.ConditionStatus { return condition(g, e, names.ConditionControllerAvailable).Status }).
			WithTimeout(reactTimeout).WithPolling(poll).Should(Equal(operatorv1.ConditionFalse))
		cordon(false)
		g.Eventually(func(g Gomega) {
			dep := controllerDeployment(g, e)
			g.Expect(dep.Status.AvailableReplicas).To(Equal(*dep.Spec.Replicas))
			g.Expect(dep.Status.Replicas).To(Equal(*dep.Spec.Replicas))
			expectReplaced(g, e.MgmtClient, e.Namespace, names.ControllerDeployment, old, int(*dep.Spec.Replicas))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		g.Eventually(func() string { return condition(g, e, names.ConditionControllerAvailable).Message }).
			WithTimeout(reactTimeout).WithPolling(poll).Should(WithTransform(allOf, BeTrue()))
		never(t, since)
	})

	t.Run("When the operator restarts after its rollouts completed, Progressing should stay False", func(t *testing.T) {
		since := time.Now()
		g := NewWithT(t)
		g.Expect(op.Stop()).To(Succeed())
		// The parent's cleanup stops whichever operator runs at its end.
		op, err = e.RunOperator(env.OperatorOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Eventually(func() int {
			return min(op.Reconciles.Count("guest"), op.Reconciles.Count("controlplane"))
		}).
			WithTimeout(reactTimeout).WithPolling(poll).Should(BeNumerically(">=", 2))
		never(t, since)
	})

	t.Run("When the log level changes the operands' templates, Progressing should be True while they roll out and False after, on the driver and on ClusterOperator storage", func(t *testing.T) {
		since := time.Now()
		g := NewWithT(t)
		dsBefore, depBefore := nodeDaemonSet(g, e).Generation, controllerDeployment(g, e).Generation
		setSpec(t, e, func(s *operatorv1.ClusterCSIDriverSpec) { s.LogLevel = operatorv1.Debug })
		defer func() {
			t.Logf("node DaemonSet generation %d -> %d, controller Deployment %d -> %d; %d versions of the ClusterCSIDriver recorded",
				dsBefore, nodeDaemonSet(g, e).Generation, depBefore, controllerDeployment(g, e).Generation, len(rec.Since(since)))
		}()
		g.Eventually(func(g Gomega) {
			var seen []string
			for _, s := range rec.Since(since) {
				seen = append(seen, s.True(clusterstorage.ProgressingTypes...)...)
			}
			g.Expect(seen).To(ContainElements(names.ConditionControllerProgressing, names.ConditionNodeProgressing, clusterstorage.Progressing))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		waitAvailable(t, e)
		g.Eventually(func(g Gomega) {
			samples := rec.Since(since)
			g.Expect(samples).NotTo(BeEmpty())
			g.Expect(samples[len(samples)-1].True(clusterstorage.ProgressingTypes...)).To(BeEmpty())
		}).WithTimeout(reactTimeout).WithPolling(poll).Should(Succeed())
		t.Logf("Progressing while the log level rolled out:\n%s", clusterstorage.Describe(rec.Since(since), since, clusterstorage.ProgressingTypes...))
	})
}

// expectReplaced fails unless the pods labelled app=app in ns are want pods, none of them one of
// old (by UID) and none terminating.
func expectReplaced(g Gomega, c client.Client, ns, app string, old map[string]bool, want int) {
	now := &corev1.PodList{}
	g.Expect(c.List(context.Background(), now, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
	g.Expect(now.Items).To(HaveLen(want))
	for _, p := range now.Items {
		g.Expect(old).NotTo(HaveKey(string(p.UID)), "pod %s is still the deleted one", p.Name)
		g.Expect(p.DeletionTimestamp).To(BeNil())
	}
}

// allOf reports whether an Available message counts every replica or node ("2 of 2 ...",
// "available on 3 of 3 nodes").
func allOf(msg string) bool {
	m := regexp.MustCompile(`(\d+) of (\d+)`).FindStringSubmatch(msg)
	return m != nil && m[1] == m[2]
}
