package conditions

import (
	"testing"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/client-go/tools/events"
)

func TestRecordTransitions(t *testing.T) {
	t.Parallel()
	const degraded = "ControlPlaneDegraded"
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
			name:   "When a condition that is not a Degraded one changes, it should record nothing",
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
	t.Run("When there is no recorder, it should do nothing", func(t *testing.T) {
		t.Parallel()
		RecordTransitions(nil, &operatorv1.ClusterCSIDriver{}, []operatorv1.OperatorCondition{cond(degraded, operatorv1.ConditionTrue, now, "R", "M")})
	})
}
