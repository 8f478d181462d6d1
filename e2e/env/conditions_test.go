package env

import (
	"testing"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

func TestConditionTrue(t *testing.T) {
	t.Parallel()
	conds := []operatorv1.OperatorCondition{
		{Type: names.ConditionNodeAvailable, Status: operatorv1.ConditionTrue},
		{Type: names.ConditionNodeDegraded, Status: operatorv1.ConditionFalse},
		{Type: names.ConditionNodeProgressing, Status: operatorv1.ConditionUnknown},
	}
	tests := []struct {
		name string
		typ  string
		want bool
	}{
		{name: "When the condition is True, it should return true", typ: names.ConditionNodeAvailable, want: true},
		{name: "When the condition is False, it should return false", typ: names.ConditionNodeDegraded},
		{name: "When the condition is Unknown, it should return false", typ: names.ConditionNodeProgressing},
		{name: "When the condition is absent, it should return false", typ: names.ConditionControllerAvailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			g.Expect(ConditionTrue(conds, tt.typ)).To(Equal(tt.want))
		})
	}
}
