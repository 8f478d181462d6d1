package env

import (
	operatorv1 "github.com/openshift/api/operator/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
)

// ConditionTrue reports whether conds holds a condition of type condType with status True: what
// the suites wait for and what run-local reports. The operator itself never asks it.
func ConditionTrue(conds []operatorv1.OperatorCondition, condType string) bool {
	c := conditions.Find(conds, condType)
	return c != nil && c.Status == operatorv1.ConditionTrue
}
