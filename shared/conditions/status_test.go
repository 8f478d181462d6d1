package conditions

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// A failed status write is one request against a fake client: what the API server does with a
// status write that succeeds is covered by shared/apply's tests, which start one.
func TestApplyStatus_Error(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	scheme, err := clusters.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(driverGVK, meta.RESTScopeRoot)
	denied := apierrors.NewForbidden(schema.GroupResource{Group: "operator.openshift.io", Resource: "clustercsidrivers"}, names.ClusterCSIDriverName,
		errors.New(`User "`+secret+`" cannot patch resource "clustercsidrivers/status"`))
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithInterceptorFuncs(interceptor.Funcs{
		SubResourceApply: func(context.Context, client.Client, string, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
			return denied
		},
	}).Build()

	s := New(nil, now)
	s.True(names.ConditionNodeAvailable, names.ReasonAsExpected, "")
	err = ApplyStatus(t.Context(), apply.New(c, names.FieldOwnerGuest).On(apply.ClusterGuest), names.ClusterCSIDriverName, s.List(), nil)

	g.Expect(err).To(MatchError(ContainSubstring("writing ClusterCSIDriver conditions: writing the status of ClusterCSIDriver " + names.ClusterCSIDriverName + " on the guest cluster: ")))
	oe, ok := errors.AsType[*apply.ObjectError](err)
	g.Expect(ok).To(BeTrue())
	g.Expect(oe.Op).To(Equal(apply.OpWriteStatus))
	g.Expect(oe.GVK).To(Equal(operatorv1.GroupVersion.WithKind("ClusterCSIDriver")))
	g.Expect(oe.Resource).To(Equal("clustercsidrivers"))

	reason, msg := Classify(err, "Writing the conditions")
	g.Expect(reason).To(Equal(ReasonForbidden))
	g.Expect(msg).To(Equal("Writing the status of ClusterCSIDriver cluster-wide failed: the guest cluster's API server forbade it. " +
		"The user of the operator's guest kubeconfig needs the RBAC verbs patch on clustercsidrivers/status (API group operator.openshift.io) cluster-wide: " +
		"grant them with a ClusterRole and ClusterRoleBinding. The operator retries."))
}
func TestRecordTransitions(t *testing.T) {
	t.Parallel()
	const degraded = "ControlPlaneDegraded"
	const warning = names.ConditionAttachLimitWarning
	tests := []struct {
		name   string
		before []operatorv1.OperatorCondition
		now    []operatorv1.OperatorCondition
		want   []string
	}{
		{
			name:   "When a Degraded condition turns True, it should record a Warning with its reason and message",
			before: []operatorv1.OperatorCondition{cond(degraded, operatorv1.ConditionFalse, earlier, "AsExpected", "")},
			now:    []operatorv1.OperatorCondition{cond(degraded, operatorv1.ConditionTrue, now, "InvalidConfig", "Fix the ConfigMap")},
			want:   []string{"Warning InvalidConfig ControlPlaneDegraded: Fix the ConfigMap"},
		},
		{
			name: "When a Degraded condition is True for the first time, it should record a Warning",
			now:  []operatorv1.OperatorCondition{cond(degraded, operatorv1.ConditionTrue, now, "InvalidConfig", "Fix the ConfigMap")},
			want: []string{"Warning InvalidConfig ControlPlaneDegraded: Fix the ConfigMap"},
		},
		{
			name:   "When a Degraded condition stays True, it should record nothing",
			before: []operatorv1.OperatorCondition{cond(degraded, operatorv1.ConditionTrue, earlier, "InvalidConfig", "Fix the ConfigMap")},
			now:    []operatorv1.OperatorCondition{cond(degraded, operatorv1.ConditionTrue, earlier, "InvalidConfig", "Fix the ConfigMap")},
		},
		{
			name:   "When a Degraded condition stops being True, it should record a Normal recovery",
			before: []operatorv1.OperatorCondition{cond(degraded, operatorv1.ConditionTrue, earlier, "InvalidConfig", "Fix the ConfigMap")},
			now:    []operatorv1.OperatorCondition{cond(degraded, operatorv1.ConditionUnknown, now, "Unknown", "")},
			want:   []string{"Normal Recovered ControlPlaneDegraded is no longer degraded."},
		},
		{
			name:   "When a warning turns True, it should record a Warning with its reason and message",
			before: []operatorv1.OperatorCondition{cond(warning, operatorv1.ConditionFalse, earlier, "AsExpected", "")},
			now:    []operatorv1.OperatorCondition{cond(warning, operatorv1.ConditionTrue, now, "NoAttachLimit", "Set node-volume-attach-limit")},
			want:   []string{"Warning NoAttachLimit " + warning + ": Set node-volume-attach-limit"},
		},
		{
			name:   "When a warning stops being True, it should record a Normal event saying it no longer applies",
			before: []operatorv1.OperatorCondition{cond(warning, operatorv1.ConditionTrue, earlier, "NoAttachLimit", "Set node-volume-attach-limit")},
			now:    []operatorv1.OperatorCondition{cond(warning, operatorv1.ConditionFalse, now, "AsExpected", "")},
			want:   []string{"Normal Recovered " + warning + " no longer applies."},
		},
		{
			name:   "When a warning stays False, it should record nothing",
			before: []operatorv1.OperatorCondition{cond(warning, operatorv1.ConditionFalse, earlier, "AsExpected", "")},
			now:    []operatorv1.OperatorCondition{cond(warning, operatorv1.ConditionFalse, earlier, "AsExpected", "")},
		},
		{
			name:   "When a condition that is neither Degraded nor a warning changes, it should record nothing",
			before: []operatorv1.OperatorCondition{cond("ControlPlaneAvailable", operatorv1.ConditionTrue, earlier, "AsExpected", "")},
			now:    []operatorv1.OperatorCondition{cond("ControlPlaneAvailable", operatorv1.ConditionFalse, now, "Unavailable", "Down")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			rec := events.NewFakeRecorder(10)
			driver := &operatorv1.ClusterCSIDriver{}
			driver.Status.Conditions = tt.before
			RecordTransitions(rec, driver, tt.now)
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
	t.Run("When there is no recorder, it should neither panic nor change the driver", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		driver := &operatorv1.ClusterCSIDriver{}
		driver.Status.Conditions = []operatorv1.OperatorCondition{cond(degraded, operatorv1.ConditionFalse, earlier, "R", "")}
		before := driver.DeepCopy()
		g.Expect(func() {
			RecordTransitions(nil, driver, []operatorv1.OperatorCondition{cond(degraded, operatorv1.ConditionTrue, now, "R", "M")})
		}).NotTo(Panic())
		g.Expect(driver).To(Equal(before))
	})
}

// actionRecorder keeps the action of every Event.
type actionRecorder struct{ actions []string }

func (r *actionRecorder) Eventf(_ runtime.Object, _ runtime.Object, _, _, action, _ string, _ ...any) {
	r.actions = append(r.actions, action)
}

// The events recorder folds Events of one object, reason and action into one series, keeping the
// first note: two conditions that clear in one reconcile must differ in action to show as two.
func TestRecordTransitions_ActionIsTheConditionType(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	rec := &actionRecorder{}
	driver := &operatorv1.ClusterCSIDriver{}
	driver.Status.Conditions = []operatorv1.OperatorCondition{
		cond(names.ConditionAttachLimitWarning, operatorv1.ConditionTrue, earlier, "AttachLimitNotSet", "Set it"),
		cond(names.ConditionConfigKeysWarning, operatorv1.ConditionTrue, earlier, "IgnoredConfiguration", "Drop it"),
	}
	RecordTransitions(rec, driver, []operatorv1.OperatorCondition{
		cond(names.ConditionAttachLimitWarning, operatorv1.ConditionFalse, now, "AsExpected", ""),
		cond(names.ConditionConfigKeysWarning, operatorv1.ConditionFalse, now, "AsExpected", ""),
		cond("ControlPlaneDegraded", operatorv1.ConditionTrue, now, "InvalidConfig", "Fix it"),
	})
	g.Expect(rec.actions).To(Equal([]string{names.ConditionAttachLimitWarning, names.ConditionConfigKeysWarning, "ControlPlaneDegraded"}))
}
