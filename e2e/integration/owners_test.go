// Case 5, two owners: the controlplane and guest managers both write conditions to the one
// ClusterCSIDriver with server-side apply, each under its own field owner; this tests that
// neither erases or alters the other's conditions (nor a third party's) when it writes.
package integration

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// The condition types each manager owns.
var (
	controlPlaneConditionTypes = []string{
		names.ConditionControllerAvailable, names.ConditionControllerProgressing, names.ConditionControllerDegraded,
		names.ConditionConfigDegraded, names.ConditionTopologyDegraded,
		names.ConditionAttachLimitWarning, names.ConditionConfigKeysWarning, names.ConditionBackupWarning,
	}
	// The attachment monitor's, written under a field owner of its own in the controlplane
	// manager.
	attachmentConditionTypes = []string{names.ConditionVolumeAttachmentWarning, names.ConditionNodeAttachLimitWarning}
	guestConditionTypes      = []string{
		names.ConditionNodeAvailable, names.ConditionNodeProgressing, names.ConditionNodeDegraded,
		names.ConditionStaticResourcesDegraded, names.ConditionStorageClassDegraded, names.ConditionGuestConfigDegraded,
		names.ConditionZoneWarning,
	}
)

// The third party: cluster-storage-operator is the other writer a ClusterCSIDriver has in
// OpenShift. Its condition has a fixed time so that "unchanged" can be compared exactly.
const (
	thirdPartyOwner         = "cluster-storage-operator"
	thirdPartyConditionType = "ClusterStorageOperatorCheckAvailable"
)

var thirdPartyCondition = operatorv1.OperatorCondition{
	Type:               thirdPartyConditionType,
	Status:             operatorv1.ConditionTrue,
	Reason:             "Checked",
	Message:            "Written by a third party with server-side apply.",
	LastTransitionTime: metav1.Date(2026, time.January, 2, 3, 4, 5, 0, time.UTC),
}

// TestTwoOwners is case 5: each manager's conditions survive the other's writes, and a third
// party's condition survives both.
func TestTwoOwners(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
	e.RunOperatorForTest(t, env.OperatorOptions{})
	ctx := context.Background()

	t.Run("When both managers have installed the driver, it should show every condition type of each, owned by that manager", func(t *testing.T) {
		waitAvailable(t, e)
		NewWithT(t).Eventually(func(g Gomega) {
			d := driver(g, e)
			g.Expect(conditionTypes(d.Status.Conditions)).To(ConsistOf(slices.Concat(controlPlaneConditionTypes, attachmentConditionTypes, guestConditionTypes)))
			expectOwnership(g, d, false)
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
	})

	t.Run("When a third party applies its own condition type, it should be added next to both managers' conditions", func(t *testing.T) {
		g := NewWithT(t)
		before := driver(g, e)
		applyThirdPartyCondition(g, e)
		after := driver(g, e)
		g.Expect(conditions.Find(after.Status.Conditions, thirdPartyConditionType)).To(HaveValue(BeComparableTo(thirdPartyCondition)))
		g.Expect(conditionsOf(after, controlPlaneConditionTypes)).To(Equal(conditionsOf(before, controlPlaneConditionTypes)))
		g.Expect(conditionsOf(after, guestConditionTypes)).To(Equal(conditionsOf(before, guestConditionTypes)))
		expectOwnership(g, after, true)
	})

	var credentials *corev1.Secret
	t.Run("When the credentials Secret is deleted, it should degrade the controlplane's conditions and leave the guest's and the third party's unchanged", func(t *testing.T) {
		g := NewWithT(t)
		before := driver(g, e)
		credentials = &corev1.Secret{}
		g.Expect(e.MgmtClient.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: names.CredentialsSecret}, credentials)).To(Succeed())
		g.Expect(e.MgmtClient.Delete(ctx, credentials)).To(Succeed())

		// The controlplane has written once ConfigDegraded says why; it is the only writer
		// that reacts to a Secret in the management cluster.
		g.Eventually(func(g Gomega) {
			c := condition(g, e, names.ConditionConfigDegraded)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(names.ReasonMissingCredentials))
		}).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed())

		after := driver(g, e)
		g.Expect(conditionsOf(after, controlPlaneConditionTypes)).NotTo(Equal(conditionsOf(before, controlPlaneConditionTypes)))
		g.Expect(conditionsOf(after, guestConditionTypes)).To(Equal(conditionsOf(before, guestConditionTypes)))
		g.Expect(conditions.Find(after.Status.Conditions, thirdPartyConditionType)).To(HaveValue(BeComparableTo(thirdPartyCondition)))
		expectOwnership(g, after, true)
	})

	t.Run("When the node DaemonSet is deleted, it should move the guest's conditions and leave the controlplane's and the third party's unchanged", func(t *testing.T) {
		g := NewWithT(t)
		before := driver(g, e)
		oldAvailable := conditions.Find(before.Status.Conditions, names.ConditionNodeAvailable)
		g.Expect(oldAvailable).NotTo(BeNil())
		g.Expect(oldAvailable.Status).To(Equal(operatorv1.ConditionTrue))
		// Transition times have a resolution of one second: start in a later second than
		// the last transition so that a new one is told apart.
		g.Eventually(time.Now).WithTimeout(5 * time.Second).WithPolling(poll).
			Should(BeTemporally(">=", oldAvailable.LastTransitionTime.Add(time.Second)))

		deleted := time.Now().Truncate(time.Second)
		g.Expect(e.GuestClient.Delete(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: names.NodeDaemonSet}})).To(Succeed())

		// The guest reconcile that finds the DaemonSet gone reports it not Available, and
		// the recreated one becomes Available again: the transition time has moved on.
		var after *operatorv1.ClusterCSIDriver
		g.Eventually(func(g Gomega) {
			after = driver(g, e)
			c := conditions.Find(after.Status.Conditions, names.ConditionNodeAvailable)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue))
			g.Expect(c.LastTransitionTime.Time).To(BeTemporally(">=", deleted))
			g.Expect(env.ConditionTrue(after.Status.Conditions, names.ConditionNodeProgressing)).To(BeFalse())
			expectDaemonSetRolledOut(g, nodeDaemonSet(g, e))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())

		g.Expect(conditionsOf(after, controlPlaneConditionTypes)).To(Equal(conditionsOf(before, controlPlaneConditionTypes)))
		g.Expect(conditions.Find(after.Status.Conditions, thirdPartyConditionType)).To(HaveValue(BeComparableTo(thirdPartyCondition)))
		expectOwnership(g, after, true)
	})

	t.Run("When the credentials Secret is restored, it should clear the controlplane's degradation and leave the guest's and the third party's conditions unchanged", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(credentials).NotTo(BeNil(), "the credentials were deleted by an earlier subtest")
		before := driver(g, e)
		restored := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: credentials.Namespace, Name: credentials.Name},
			Data:       credentials.Data,
		}
		g.Expect(e.MgmtClient.Create(ctx, restored)).To(Succeed())

		g.Eventually(func(g Gomega) {
			c := condition(g, e, names.ConditionConfigDegraded)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(names.ReasonAsExpected))
		}).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed())

		after := driver(g, e)
		g.Expect(conditionsOf(after, guestConditionTypes)).To(Equal(conditionsOf(before, guestConditionTypes)))
		g.Expect(conditions.Find(after.Status.Conditions, thirdPartyConditionType)).To(HaveValue(BeComparableTo(thirdPartyCondition)))
		expectOwnership(g, after, true)
	})

	t.Run("When spec.logLevel changes, both managers should write and each keep the other's and the third party's conditions", func(t *testing.T) {
		g := NewWithT(t)
		update(t, e.GuestClient, &operatorv1.ClusterCSIDriver{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterCSIDriverName}}, "test-user",
			func(d *operatorv1.ClusterCSIDriver) { d.Spec.LogLevel = operatorv1.Debug })

		// Each manager has acted on the new spec: the guest records the generation it
		// observed, and both workloads carry the new verbosity and have rolled out.
		g.Eventually(func(g Gomega) {
			d := driver(g, e)
			g.Expect(d.Status.ObservedGeneration).To(Equal(d.Generation))
			dep := controllerDeployment(g, e)
			g.Expect(flagValues(container(&dep.Spec.Template.Spec, "csi-driver").Args, "--v")).To(Equal([]string{"4"}))
			expectDeploymentRolledOut(g, dep)
			ds := nodeDaemonSet(g, e)
			g.Expect(flagValues(container(&ds.Spec.Template.Spec, "csi-driver").Args, "--v")).To(Equal([]string{"4"}))
			expectDaemonSetRolledOut(g, ds)
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		waitAvailable(t, e)

		after := driver(g, e)
		g.Expect(conditionTypes(after.Status.Conditions)).To(ConsistOf(
			slices.Concat(controlPlaneConditionTypes, attachmentConditionTypes, guestConditionTypes, []string{thirdPartyConditionType})))
		g.Expect(conditions.Find(after.Status.Conditions, thirdPartyConditionType)).To(HaveValue(BeComparableTo(thirdPartyCondition)))
		expectOwnership(g, after, true)
	})
}

// applyThirdPartyCondition applies thirdPartyCondition to the ClusterCSIDriver status as
// thirdPartyOwner, the way another controller would, without forcing ownership.
func applyThirdPartyCondition(g Gomega, e *env.Env) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": operatorv1.GroupVersion.String(),
		"kind":       "ClusterCSIDriver",
		"metadata":   map[string]any{"name": names.ClusterCSIDriverName},
		"status": map[string]any{"conditions": []any{map[string]any{
			"type":               thirdPartyCondition.Type,
			"status":             string(thirdPartyCondition.Status),
			"reason":             thirdPartyCondition.Reason,
			"message":            thirdPartyCondition.Message,
			"lastTransitionTime": thirdPartyCondition.LastTransitionTime.UTC().Format(time.RFC3339),
		}}},
	}}
	g.Expect(e.GuestClient.Status().Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(thirdPartyOwner))).To(Succeed())
}

// expectOwnership checks that the managed fields give each condition type to the one field
// owner that writes it, through the status subresource: the controlplane's types to the
// controlplane manager, the guest's to the guest manager, and (when withThirdParty) the third
// party's to the third party.
func expectOwnership(g Gomega, d *operatorv1.ClusterCSIDriver, withThirdParty bool) {
	g.Expect(statusConditionOwners(g, d, names.FieldOwnerControlPlane)).To(ConsistOf(controlPlaneConditionTypes), "owned by %s", names.FieldOwnerControlPlane)
	g.Expect(statusConditionOwners(g, d, names.FieldOwnerGuest)).To(ConsistOf(guestConditionTypes), "owned by %s", names.FieldOwnerGuest)
	g.Expect(statusConditionOwners(g, d, names.FieldOwnerAttachments)).To(ConsistOf(attachmentConditionTypes), "owned by %s", names.FieldOwnerAttachments)
	if withThirdParty {
		g.Expect(statusConditionOwners(g, d, thirdPartyOwner)).To(ConsistOf(thirdPartyConditionType), "owned by %s", thirdPartyOwner)
	}
	// No other manager (an Update, or a second entry) may claim any condition.
	for _, e := range d.ManagedFields {
		switch e.Manager {
		case names.FieldOwnerControlPlane, names.FieldOwnerGuest, names.FieldOwnerAttachments, thirdPartyOwner:
			if e.Subresource != "status" {
				g.Expect(conditionKeys(g, e)).To(BeEmpty(), "%s owns conditions outside the status subresource", e.Manager)
			}
		default:
			g.Expect(conditionKeys(g, e)).To(BeEmpty(), "conditions owned by %s (%s)", e.Manager, e.Operation)
		}
	}
}

// statusConditionOwners returns the condition types the manager's server-side apply entry of the
// status subresource owns; it fails when the manager has no such entry.
func statusConditionOwners(g Gomega, d *operatorv1.ClusterCSIDriver, manager string) []string {
	var types []string
	found := false
	for _, e := range d.ManagedFields {
		if e.Manager != manager || e.Subresource != "status" || e.Operation != metav1.ManagedFieldsOperationApply {
			continue
		}
		g.Expect(found).To(BeFalse(), "two status apply entries of %s", manager)
		found = true
		types = conditionKeys(g, e)
	}
	g.Expect(found).To(BeTrue(), "no status apply entry of %s in %v", manager, managedFieldsSummary(d))
	return types
}

// conditionKeys decodes a managed-fields entry and returns the condition types it owns: the keys
// of status.conditions, a list map keyed by type.
func conditionKeys(g Gomega, e metav1.ManagedFieldsEntry) []string {
	if e.FieldsV1 == nil {
		return nil
	}
	var fields struct {
		Status struct {
			Conditions map[string]json.RawMessage `json:"f:conditions"`
		} `json:"f:status"`
	}
	g.Expect(json.Unmarshal(e.FieldsV1.GetRawBytes(), &fields)).To(Succeed())
	var types []string
	for k := range fields.Status.Conditions {
		key, ok := strings.CutPrefix(k, "k:")
		if !ok {
			continue
		}
		var item struct{ Type string }
		g.Expect(json.Unmarshal([]byte(key), &item)).To(Succeed())
		types = append(types, item.Type)
	}
	return types
}

func managedFieldsSummary(d *operatorv1.ClusterCSIDriver) []string {
	var out []string
	for _, e := range d.ManagedFields {
		out = append(out, e.Manager+"/"+string(e.Operation)+"/"+e.Subresource)
	}
	return out
}

// conditionTypes returns the types of conds.
func conditionTypes(conds []operatorv1.OperatorCondition) []string {
	out := make([]string, 0, len(conds))
	for _, c := range conds {
		out = append(out, c.Type)
	}
	return out
}

// conditionsOf returns d's conditions of the given types, sorted by type, for exact comparison
// (status, reason, message and transition time).
func conditionsOf(d *operatorv1.ClusterCSIDriver, types []string) []operatorv1.OperatorCondition {
	var out []operatorv1.OperatorCondition
	for _, c := range d.Status.Conditions {
		if slices.Contains(types, c.Type) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b operatorv1.OperatorCondition) int { return strings.Compare(a.Type, b.Type) })
	return out
}
