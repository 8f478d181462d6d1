package conditions

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

func TestWorkloadRemoved(t *testing.T) {
	t.Parallel()
	w := Workload{Available: names.ConditionControllerAvailable, Progressing: names.ConditionControllerProgressing, Degraded: names.ConditionControllerDegraded}
	const other = "CinderOtherWarning"
	for _, tt := range []struct {
		name        string
		err         error
		waiting     string
		progressing Verdict
		degraded    operatorv1.ConditionStatus
	}{
		{
			name:        "When everything is deleted, it should report Available and not Progressing, with reason Removed",
			progressing: Verdict{Status: operatorv1.ConditionFalse, Reason: names.ReasonRemoved, Message: "managementState is Removed: the things are removed."},
			degraded:    operatorv1.ConditionFalse,
		},
		{
			name:    "When the removal waits for something to end, it should report Progressing with reason Removing and say what it waits for",
			waiting: "The account stays until its pods have ended.",
			progressing: Verdict{Status: operatorv1.ConditionTrue, Reason: names.ReasonRemoving,
				Message: "managementState is Removed: the things are removed. The account stays until its pods have ended."},
			degraded: operatorv1.ConditionFalse,
		},
		{
			name:        "When a deletion failed, it should report Degraded",
			err:         errors.New("boom"),
			progressing: Verdict{Status: operatorv1.ConditionFalse, Reason: names.ReasonRemoved, Message: "managementState is Removed: the things are removed."},
			degraded:    operatorv1.ConditionTrue,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := New(nil, now)
			w.Removed(s, tt.err, "the things", tt.waiting, other)
			conds := s.List()
			available := Find(conds, w.Available)
			g.Expect(available.Status).To(Equal(operatorv1.ConditionTrue))
			g.Expect(available.Reason).To(Equal(names.ReasonRemoved))
			progressing := Find(conds, w.Progressing)
			g.Expect(Verdict{Status: progressing.Status, Reason: progressing.Reason, Message: progressing.Message}).To(Equal(tt.progressing))
			g.Expect(Find(conds, w.Degraded).Status).To(Equal(tt.degraded))
			g.Expect(Find(conds, other).Status).To(Equal(operatorv1.ConditionFalse))
		})
	}
}
