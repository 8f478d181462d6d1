package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
)

// TestRemovedInventory proves that managementState Removed removes every object the operator
// created, in both clusters and both modes, by inventory rather than by a list of expected names:
// a leak of an object nobody thought of fails it as well.
//
// The inventory of a cluster holds, for every kind the API server lists (found by discovery), the
// objects the operator is answerable for:
//
//   - those carrying the managed-by label, which every object the operator applies carries;
//   - those a field manager of the operator wrote outside the status subresource, which catches
//     an object written without the label; status writes are left out, because the operator
//     reports on the ClusterCSIDriver, the user's object, and must leave it in place;
//   - those owned, through ownerReferences, by an object already in the inventory: the
//     ReplicaSets and Pods of the controller Deployment, the ControllerRevisions and Pods of the
//     node DaemonSet, the EndpointSlices of the metrics Service. The operator does not create
//     them, but they exist because of it; garbage collection (or the controller that made them)
//     deletes them once their owner is gone, so they must be gone too.
//
// Leases (leader election, node heartbeats) and Events are left out: the operator's own Lease
// lives as long as the operator, not its operands, and Events expire by themselves.
//
// The operator runs here with admin rights, so the test is about what the plans delete. That the
// install RBAC allows each of those deletions is e2e/install's part: it runs Removed under
// exactly that RBAC and fails on any denied request.
func TestRemovedInventory(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{env.ModeHyperShift, env.ModeStandalone} {
		t.Run("When "+mode+" is set to Removed and Managed again, it should remove everything it created and restore the same objects", func(t *testing.T) {
			t.Parallel()
			e := env.StartForTest(t, env.Options{Mode: mode})
			clusters := map[string]*rest.Config{env.ClusterManagement: e.MgmtConfig()}
			if mode == env.ModeHyperShift {
				clusters[env.ClusterGuest] = e.GuestConfig()
			}
			before := takeInventory(NewWithT(t), clusters)
			if len(before) > 0 {
				t.Logf("Inventory before the operator starts:\n%s", before)
			}

			e.RunOperatorForTest(t, env.OperatorOptions{})
			waitAvailable(t, e)
			// The install settles (Endpoints, pods of the single rollout) before it is recorded.
			var installed inventory
			NewWithT(t).Eventually(func(g Gomega) {
				installed = takeInventory(g, clusters)
				g.Expect(installed.named(names.ControllerDeployment)).NotTo(BeEmpty())
				g.Expect(installed.kinds()).To(ContainElements("Pod", "ReplicaSet", "DaemonSet"))
				g.Expect(installed.names()).To(Equal(takeInventory(g, clusters).names()), "the install still changes")
			}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
			t.Logf("Installed inventory:\n%s", installed)

			var lingering *corev1.Pod
			if mode == env.ModeStandalone {
				lingering = lingeringControllerPod(t, e)
			}
			setSpec(t, e, func(s *operatorv1.ClusterCSIDriverSpec) { s.ManagementState = operatorv1.Removed })
			NewWithT(t).Eventually(func(g Gomega) {
				for _, c := range []string{names.ConditionControllerAvailable, names.ConditionNodeAvailable} {
					cond := condition(g, e, c)
					g.Expect(cond.Reason).To(Equal(names.ReasonRemoved), c)
				}
			}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
			if lingering != nil {
				removalWaitsForPod(t, e, lingering)
			}
			// Garbage collection runs after the Removed conditions are written; what it
			// deletes is given the time it takes.
			NewWithT(t).Eventually(func(g Gomega) {
				g.Expect(takeInventory(g, clusters).names()).To(Equal(before.names()), "left behind after Removed")
			}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())

			setSpec(t, e, func(s *operatorv1.ClusterCSIDriverSpec) { s.ManagementState = operatorv1.Managed })
			waitAvailable(t, e)
			NewWithT(t).Eventually(func(g Gomega) {
				g.Expect(takeInventory(g, clusters).names()).To(Equal(installed.names()), "restored after Managed")
			}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		})
	}
}

// inventory is what takeInventory found: one entry per object, keyed by cluster, kind,
// namespace and name.
type inventory map[string]inventoryItem

type inventoryItem struct {
	cluster, kind, namespace, name string
	// generated is set for a name the API server generated (a Pod of a ReplicaSet, an
	// EndpointSlice): only its prefix is stable across a reinstall.
	generated bool
}

// key identifies the object across a reinstall: a generated name counts by its prefix.
func (i inventoryItem) key() string {
	name := i.name
	if i.generated {
		name += "<generated>"
	}
	return fmt.Sprintf("%s %s %s/%s", i.cluster, i.kind, i.namespace, name)
}

// names returns the sorted keys, a generated name once per object.
func (inv inventory) names() []string {
	out := make([]string, 0, len(inv))
	for _, i := range inv {
		out = append(out, i.key())
	}
	slices.Sort(out)
	return out
}

// named returns the entries with name.
func (inv inventory) named(name string) []inventoryItem {
	var out []inventoryItem
	for _, i := range inv {
		if i.name == name {
			out = append(out, i)
		}
	}
	return out
}

// kinds returns the kinds in the inventory.
func (inv inventory) kinds() []string {
	set := map[string]bool{}
	for _, i := range inv {
		set[i.kind] = true
	}
	return slices.Sorted(maps.Keys(set))
}

func (inv inventory) String() string { return strings.Join(inv.names(), "\n") }

// takeInventory lists every listable kind of each cluster and returns the objects the operator is
// answerable for (see TestRemovedInventory).
func takeInventory(g Gomega, clusters map[string]*rest.Config) inventory {
	inv := inventory{}
	for cluster, cfg := range clusters {
		takeClusterInventory(g, cluster, cfg, inv)
	}
	return inv
}

func takeClusterInventory(g Gomega, cluster string, cfg *rest.Config, inv inventory) {
	ctx := context.Background()
	// Listing every kind lists deprecated ones too; their warnings would flood the test log.
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	mc, err := metadata.NewForConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	lists, err := dc.ServerPreferredResources()
	g.Expect(err).NotTo(HaveOccurred(), "discovery of the %s cluster", cluster)

	type object struct {
		kind string
		meta metav1.ObjectMeta
	}
	var all []object
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		g.Expect(err).NotTo(HaveOccurred())
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || ignoredKind(gv.Group, r.Kind) {
				continue
			}
			items, err := mc.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{})
			g.Expect(err).NotTo(HaveOccurred(), "listing %s in the %s cluster", r.Name, cluster)
			for _, item := range items.Items {
				all = append(all, object{kind: r.Kind, meta: item.ObjectMeta})
			}
		}
	}

	// The objects the operator wrote, then, to a fixed point, those they own.
	answerable := map[types.UID]bool{}
	for _, o := range all {
		if o.meta.Labels[names.ManagedByLabel] == names.ManagedByValue || wroteOutsideStatus(o.meta) {
			answerable[o.meta.UID] = true
		}
	}
	for grew := true; grew; {
		grew = false
		for _, o := range all {
			if answerable[o.meta.UID] {
				continue
			}
			for _, ref := range o.meta.OwnerReferences {
				if answerable[ref.UID] {
					answerable[o.meta.UID], grew = true, true
					break
				}
			}
		}
	}
	for _, o := range all {
		if !answerable[o.meta.UID] {
			continue
		}
		item := inventoryItem{cluster: cluster, kind: o.kind, namespace: o.meta.Namespace, name: o.meta.Name,
			generated: o.meta.GenerateName != "" && strings.HasPrefix(o.meta.Name, o.meta.GenerateName)}
		if item.generated {
			item.name = o.meta.GenerateName
		}
		// Keyed by UID: two Pods of one ReplicaSet share their key.
		inv[cluster+"/"+string(o.meta.UID)] = item
	}
}

// ignoredKind is a kind the inventory leaves out: Events and Leases.
func ignoredKind(group, kind string) bool {
	switch {
	case kind == "Event" && (group == "" || group == "events.k8s.io"):
		return true
	case kind == "Lease" && group == "coordination.k8s.io":
		return true
	}
	return false
}

// wroteOutsideStatus is whether one of the operator's field managers (all named
// cinder-csi-operator...) wrote the object outside its status.
func wroteOutsideStatus(m metav1.ObjectMeta) bool {
	for _, mf := range m.ManagedFields {
		if strings.HasPrefix(mf.Manager, "cinder-csi-operator") && mf.Subresource == "" {
			return true
		}
	}
	return false
}

// lingeringControllerPod creates a pod that counts as one of the controller's (its label) but that
// nothing deletes: it is never scheduled, and no owner collects it. Standalone, Removed must then
// keep the controller's ServiceAccount and RBAC until the test deletes it.
func lingeringControllerPod(t *testing.T, e *env.Env) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: "lingering-controller",
			Labels: map[string]string{names.ControllerPodLabel: names.ControllerDeployment}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"e2e.cinder-csi-operator/nowhere": "true"},
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "c", Image: "lingering.invalid/none",
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
		},
	}
	NewWithT(t).Expect(e.MgmtClient.Create(context.Background(), p)).To(Succeed())
	t.Cleanup(func() {
		_ = client.IgnoreNotFound(e.MgmtClient.Delete(context.Background(), p, client.GracePeriodSeconds(0)))
	})
	return p
}

// removalWaitsForPod checks that Removed, standalone, keeps the controller's ServiceAccount and
// RBAC while pod is there and says so in both managers' Progressing, then deletes pod and waits
// until both report the removal done.
func removalWaitsForPod(t *testing.T, e *env.Env, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	held, err := testutil.Decoder(t).Operand("controller_rbac.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	held = append(held, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: names.ControllerServiceAccount}})
	g.Eventually(func(g Gomega) {
		c := condition(g, e, names.ConditionControllerProgressing)
		g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(names.ReasonRemoving))
		g.Expect(c.Message).To(ContainSubstring(pod.Name))
		g.Expect(condition(g, e, names.ConditionNodeProgressing).Reason).To(Equal(names.ReasonRemoving))
		g.Expect(e.MgmtClient.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: names.ControllerDeployment}, &appsv1.Deployment{})).
			To(MatchError(apierrors.IsNotFound, "the Deployment is not held"))
	}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		for _, o := range held {
			g.Expect(e.MgmtClient.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))).
				To(Succeed(), "%T %s is held while a controller pod is there", o, o.GetName())
		}
	}).WithTimeout(3 * time.Second).WithPolling(poll).Should(Succeed())

	g.Expect(e.MgmtClient.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, c := range []string{names.ConditionControllerProgressing, names.ConditionNodeProgressing} {
			cond := condition(g, e, c)
			g.Expect(cond.Status).To(Equal(operatorv1.ConditionFalse), c)
			g.Expect(cond.Reason).To(Equal(names.ReasonRemoved), c)
		}
		for _, o := range held {
			g.Expect(e.MgmtClient.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))).
				To(MatchError(apierrors.IsNotFound, "deleted"), "%T %s", o, o.GetName())
		}
	}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
}
