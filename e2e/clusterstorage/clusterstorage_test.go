package clusterstorage

import (
	"testing"

	operatorv1 "github.com/openshift/api/operator/v1"
)

func cond(t string, s operatorv1.ConditionStatus, reason, msg string) operatorv1.OperatorCondition {
	return operatorv1.OperatorCondition{Type: t, Status: s, Reason: reason, Message: msg}
}

func TestClusterOperator(t *testing.T) {
	const (
		tr = operatorv1.ConditionTrue
		fa = operatorv1.ConditionFalse
	)
	for _, tc := range []struct {
		name        string
		driver      []operatorv1.OperatorCondition
		available   operatorv1.ConditionStatus
		progressing operatorv1.ConditionStatus
		degraded    operatorv1.ConditionStatus
		reason      string // of Progressing
	}{
		{
			name:      "When the driver has written no condition yet, storage should be unavailable and progressing, waiting for the operator",
			available: fa, progressing: tr, degraded: fa, reason: "OpenStackCinderCSIDriverOperatorCR_WaitForOperator",
		},
		{
			name: "When every condition is as expected, storage should be available and neither progressing nor degraded",
			driver: []operatorv1.OperatorCondition{
				cond("OpenStackCinderNodeAvailable", tr, "AsExpected", ""), cond("OpenStackCinderNodeProgressing", fa, "AsExpected", ""),
				cond("OpenStackCinderNodeDegraded", fa, "AsExpected", ""),
			},
			available: tr, progressing: fa, degraded: fa, reason: "AsExpected",
		},
		{
			name: "When one workload is progressing, storage should be progressing and name it in the reason",
			driver: []operatorv1.OperatorCondition{
				cond("OpenStackCinderNodeAvailable", tr, "AsExpected", ""), cond("OpenStackCinderNodeProgressing", tr, "RollingOut", "1 of 2 nodes updated."),
				cond("OpenStackCinderControllerProgressing", fa, "AsExpected", ""),
			},
			available: tr, progressing: tr, degraded: fa, reason: "OpenStackCinderCSIDriverOperatorCR_OpenStackCinderNode_RollingOut",
		},
		{
			name: "When one Available is False, storage should be unavailable",
			driver: []operatorv1.OperatorCondition{
				cond("OpenStackCinderNodeAvailable", fa, "NotAvailable", "none"), cond("OpenStackCinderControllerAvailable", tr, "AsExpected", ""),
				cond("OpenStackCinderNodeProgressing", fa, "AsExpected", ""),
			},
			available: fa, progressing: fa, degraded: fa, reason: "AsExpected",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			co := ClusterOperator(tc.driver)
			for i, want := range []operatorv1.ConditionStatus{tc.available, tc.progressing, tc.degraded, tr} {
				if co[i].Status != want {
					t.Errorf("%s = %s (%s: %s), want %s", co[i].Type, co[i].Status, co[i].Reason, co[i].Message, want)
				}
			}
			if co[1].Reason != tc.reason {
				t.Errorf("Progressing reason %q, want %q", co[1].Reason, tc.reason)
			}
		})
	}
}

func TestUnionMessage(t *testing.T) {
	got := Union(Degraded, operatorv1.ConditionFalse, []operatorv1.OperatorCondition{
		cond("BDegraded", operatorv1.ConditionTrue, "Y", "two\ntwo\nthree"),
		cond("ADegraded", operatorv1.ConditionTrue, "", "one"),
		cond("CDegraded", operatorv1.ConditionFalse, "AsExpected", "fine"),
	})
	if got.Status != operatorv1.ConditionTrue || got.Reason != "A::B_Y" || got.Message != "ADegraded: one\nBDegraded: two\nBDegraded: three" {
		t.Errorf("union %+v", got)
	}
}
