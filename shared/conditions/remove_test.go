package conditions

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// csiOperatorLeftovers are conditions as csi-operator leaves them on a cluster it managed: its
// node plugin Degraded, the rest healthy.
func csiOperatorLeftovers() []operatorv1.OperatorCondition {
	var out []operatorv1.OperatorCondition
	for _, t := range names.CSIOperatorConditions {
		c := cond(t, operatorv1.ConditionFalse, earlier, "AsExpected", "")
		switch t {
		case "OpenStackCinderDriverNodeServiceControllerDegraded":
			c = cond(t, operatorv1.ConditionTrue, earlier, "SyncError", "OpenStackCinderDriverNodeServiceControllerDegraded: DaemonSet was not found")
		case "OpenStackCinderDriverControllerServiceControllerAvailable", "OpenStackCinderDriverNodeServiceControllerAvailable":
			c.Status = operatorv1.ConditionTrue
		}
		out = append(out, c)
	}
	return out
}

func TestRemovalPatch(t *testing.T) {
	t.Parallel()
	own := func(t string) operatorv1.OperatorCondition {
		return cond(t, operatorv1.ConditionTrue, earlier, "AsExpected", "")
	}
	tests := []struct {
		name    string
		conds   []operatorv1.OperatorCondition
		types   []string
		want    []map[string]any
		removed []string
	}{
		{
			name:  "When the driver carries none of the types, it should send nothing",
			conds: []operatorv1.OperatorCondition{own(names.ConditionNodeAvailable)},
			types: names.CSIOperatorConditions,
		},
		{
			name: "When the types are interleaved with other writers' conditions, it should test and remove each from the last index down",
			conds: []operatorv1.OperatorCondition{
				own("ManagementStateDegraded"), own(names.ConditionNodeAvailable),
				own("ConfigSyncDegraded"), own(names.ConditionControllerAvailable), own("StorageClassControllerDegraded"),
			},
			types: names.CSIOperatorConditions,
			want: []map[string]any{
				{"op": "test", "path": "/status/conditions/4/type", "value": "StorageClassControllerDegraded"},
				{"op": "remove", "path": "/status/conditions/4"},
				{"op": "test", "path": "/status/conditions/2/type", "value": "ConfigSyncDegraded"},
				{"op": "remove", "path": "/status/conditions/2"},
				{"op": "test", "path": "/status/conditions/0/type", "value": "ManagementStateDegraded"},
				{"op": "remove", "path": "/status/conditions/0"},
			},
			removed: []string{"ManagementStateDegraded", "ConfigSyncDegraded", "StorageClassControllerDegraded"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			patch, removed, err := removalPatch(tt.conds, tt.types)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(removed).To(Equal(tt.removed))
			if tt.want == nil {
				g.Expect(patch).To(BeNil())
				return
			}
			var got []map[string]any
			g.Expect(json.Unmarshal(patch, &got)).To(Succeed())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

// TestCSIOperatorConditions keeps csi-operator's list apart from this operator's own types: a
// type in both would be removed by the guest manager on every reconcile.
func TestCSIOperatorConditions(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	for _, own := range slices.Concat(names.ControlPlaneConditions, names.AttachmentConditions, names.GuestConditions) {
		g.Expect(names.CSIOperatorConditions).NotTo(ContainElement(own))
	}
	for _, own := range conditionConstants(t) {
		g.Expect(names.CSIOperatorConditions).NotTo(ContainElement(own))
	}
	seen := map[string]bool{}
	for _, t := range names.CSIOperatorConditions {
		g.Expect(seen[t]).To(BeFalse(), "%s is listed twice", t)
		seen[t] = true
	}
}

// A ClusterCSIDriver taken over from csi-operator, through one reconcile of a manager whose
// Writer removes csi-operator's types. The fake client applies the JSON patch as the API server
// does; the status apply it does not implement is recorded instead (e2e/applier runs both
// against a real API server).
func TestReconcile_RemovesCSIOperatorConditions(t *testing.T) {
	t.Parallel()
	scheme, err := clusters.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(driverGVK, meta.RESTScopeRoot)
	ours := []operatorv1.OperatorCondition{
		cond(names.ConditionControllerAvailable, operatorv1.ConditionTrue, earlier, "AsExpected", ""),
		cond(names.ConditionNodeAvailable, operatorv1.ConditionTrue, earlier, "AsExpected", ""),
	}
	leftovers := csiOperatorLeftovers()
	driver := &operatorv1.ClusterCSIDriver{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterCSIDriverName}}
	// csi-operator's and this operator's conditions interleaved, as list-map merges leave them.
	driver.Status.Conditions = append(append(append([]operatorv1.OperatorCondition{}, leftovers[:5]...), ours[0]), append(leftovers[5:], ours[1])...)

	var applied []operatorv1.OperatorCondition
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).
		WithObjects(driver).WithStatusSubresource(driver).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceApply: func(_ context.Context, _ client.Client, _ string, obj runtime.ApplyConfiguration, _ ...client.SubResourceApplyOption) error {
				applied = appliedConditions(t, obj)
				return nil
			},
		}).Build()

	w := Writer{Applier: apply.New(c, names.FieldOwnerGuest), ObserveGeneration: true, Remove: names.CSIOperatorConditions}
	body := func(_ context.Context, _ *operatorv1.ClusterCSIDriver, st *Set) (reconcile.Result, error) {
		st.True(names.ConditionNodeAvailable, names.ReasonAsExpected, "")
		return reconcile.Result{}, nil
	}
	g := NewWithT(t)
	_, err = Reconcile(t.Context(), c, names.ClusterCSIDriverName, now.Time, w, body)
	g.Expect(err).NotTo(HaveOccurred())

	live := &operatorv1.ClusterCSIDriver{}
	g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(driver), live)).To(Succeed())
	g.Expect(summary(live.Status.Conditions)).To(Equal(summary(ours)), "none of csi-operator's is left, both managers' are untouched")
	g.Expect(applied).To(HaveLen(1))
	g.Expect(applied[0].Type).To(Equal(names.ConditionNodeAvailable))

	t.Run("When the driver no longer carries any, it should send no patch", func(t *testing.T) {
		g := NewWithT(t)
		c := interceptor.NewClient(c, interceptor.Funcs{
			SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
				t.Error("a patch was sent")
				return nil
			},
		})
		g.Expect(RemoveTypes(t.Context(), apply.New(c, names.FieldOwnerGuest), live, names.CSIOperatorConditions)).To(Succeed())
	})

	t.Run("When another writer changed the list since it was read, it should fail whole and remove nothing", func(t *testing.T) {
		g := NewWithT(t)
		stale := driver.DeepCopy()
		fresh := driver.DeepCopy()
		fresh.Name = "stale.example.com"
		fresh.Status.Conditions = append([]operatorv1.OperatorCondition{ours[1]}, driver.Status.Conditions...)
		stale.Name = fresh.Name
		c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithObjects(fresh).WithStatusSubresource(fresh).Build()
		err := RemoveTypes(t.Context(), apply.New(c, names.FieldOwnerGuest), stale, names.CSIOperatorConditions)
		g.Expect(err).To(MatchError(ContainSubstring("removing the ClusterCSIDriver conditions")))
		g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(fresh), live)).To(Succeed())
		g.Expect(live.Status.Conditions).To(HaveLen(len(fresh.Status.Conditions)))
	})
}

// summary is each condition's type, status and reason, in list order.
func summary(conds []operatorv1.OperatorCondition) [][3]string {
	out := make([][3]string, 0, len(conds))
	for _, c := range conds {
		out = append(out, [3]string{c.Type, string(c.Status), c.Reason})
	}
	return out
}

// appliedConditions decodes the conditions of a status apply.
func appliedConditions(t *testing.T, obj runtime.ApplyConfiguration) []operatorv1.OperatorCondition {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var d operatorv1.ClusterCSIDriver
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d.Status.Conditions
}
