// Package clusterstorage models how openshift/cluster-storage-operator folds a ClusterCSIDriver's
// conditions into ClusterOperator storage, so that tests can show what `oc get co storage` would
// say while this operator acts, not only what it writes itself.
//
// The model follows cluster-storage-operator's own two steps, read from its source:
//
//  1. Its CSIDriverOperatorCRController unions every condition of the ClusterCSIDriver by suffix
//     into the Storage CR's conditions <prefix>CSIDriverOperatorCR{Available,Progressing,Degraded,
//     Upgradeable} (prefix OpenStackCinder for Cinder). Available defaults to True and becomes
//     False "WaitForOperator" when no *Available condition exists yet; Progressing defaults to
//     False and becomes True "WaitForOperator" when no *Progressing exists yet; Degraded defaults
//     to False; Upgradeable is True unless some *Upgradeable condition says otherwise.
//  2. Its ClusterOperator status controller (library-go's StatusSyncer, no inertia in
//     cluster-storage-operator) unions the Storage CR's conditions the same way into the
//     ClusterOperator's Available, Progressing, Degraded and Upgradeable.
//
// The union of library-go's status package: of the conditions whose type ends in the suffix, those
// whose status is not the default are "bad"; with none bad the result has the default status and
// reason AsExpected, otherwise the opposite status (Unknown when the bad ones are only Unknown),
// its reason each bad condition's type prefix and reason ("<prefix>_<reason>", sorted, joined by
// "::") and its message each bad condition's lines as "<type>: <line>". With no condition of the
// suffix at all the result is Unknown, reason NoData.
//
// Only this driver's part is modelled: the Storage CR's and the ClusterOperator's other sources
// (cluster-storage-operator's own controllers, the operator Deployment's conditions) are not.
package clusterstorage

import (
	"fmt"
	"slices"
	"strings"

	operatorv1 "github.com/openshift/api/operator/v1"
)

// Prefix is the Storage CR's condition prefix for the Cinder driver's operator.
const Prefix = "OpenStackCinderCSIDriverOperatorCR"

// The condition suffixes cluster-storage-operator unions.
const (
	Available   = "Available"
	Progressing = "Progressing"
	Degraded    = "Degraded"
	Upgradeable = "Upgradeable"
)

// StorageConditions returns the conditions cluster-storage-operator derives on its Storage CR
// from the ClusterCSIDriver's conditions (step 1).
func StorageConditions(driver []operatorv1.OperatorCondition) []operatorv1.OperatorCondition {
	available := Union(Available, operatorv1.ConditionTrue, driver)
	if available.Status == operatorv1.ConditionUnknown {
		available = waitingForOperator(operatorv1.ConditionFalse)
	}
	progressing := Union(Progressing, operatorv1.ConditionFalse, driver)
	if progressing.Status == operatorv1.ConditionUnknown {
		progressing = waitingForOperator(operatorv1.ConditionTrue)
	}
	degraded := Union(Degraded, operatorv1.ConditionFalse, driver)
	if degraded.Status == operatorv1.ConditionUnknown {
		degraded.Status = operatorv1.ConditionFalse
	}
	upgradeable := operatorv1.OperatorCondition{Status: operatorv1.ConditionTrue}
	if slices.ContainsFunc(driver, func(c operatorv1.OperatorCondition) bool { return strings.HasSuffix(c.Type, Upgradeable) }) {
		upgradeable = Union(Upgradeable, operatorv1.ConditionTrue, driver)
	}
	out := []operatorv1.OperatorCondition{available, progressing, degraded, upgradeable}
	for i, suffix := range []string{Available, Progressing, Degraded, Upgradeable} {
		out[i].Type = Prefix + suffix
	}
	return out
}

func waitingForOperator(status operatorv1.ConditionStatus) operatorv1.OperatorCondition {
	return operatorv1.OperatorCondition{Status: status, Reason: "WaitForOperator", Message: "Waiting for OpenStackCinder operator to report status"}
}

// ClusterOperator returns the ClusterOperator storage's Available, Progressing, Degraded and
// Upgradeable as the ClusterCSIDriver's conditions make them (steps 1 and 2), in that order.
func ClusterOperator(driver []operatorv1.OperatorCondition) []operatorv1.OperatorCondition {
	storage := StorageConditions(driver)
	return []operatorv1.OperatorCondition{
		Union(Available, operatorv1.ConditionTrue, storage),
		Union(Progressing, operatorv1.ConditionFalse, storage),
		Union(Degraded, operatorv1.ConditionFalse, storage),
		Union(Upgradeable, operatorv1.ConditionTrue, storage),
	}
}

// Union folds the conditions whose type ends in suffix into one of that type, as library-go's
// status package does (see the package comment). Transition times are not modelled.
func Union(suffix string, def operatorv1.ConditionStatus, conds []operatorv1.OperatorCondition) operatorv1.OperatorCondition {
	opposite := operatorv1.ConditionTrue
	if def == operatorv1.ConditionTrue {
		opposite = operatorv1.ConditionFalse
	}
	var matching, bad []operatorv1.OperatorCondition
	badStatus := operatorv1.ConditionUnknown
	for _, c := range conds {
		if !strings.HasSuffix(c.Type, suffix) {
			continue
		}
		matching = append(matching, c)
		if c.Status != def {
			bad = append(bad, c)
			if c.Status == opposite {
				badStatus = opposite
			}
		}
	}
	out := operatorv1.OperatorCondition{Type: suffix}
	switch {
	case len(matching) == 0:
		out.Status, out.Reason = operatorv1.ConditionUnknown, "NoData"
	case len(bad) == 0:
		out.Status, out.Reason, out.Message = def, "AsExpected", messageOf(matching)
		if out.Message == "" {
			out.Message = "All is well"
		}
	default:
		slices.SortFunc(bad, func(a, b operatorv1.OperatorCondition) int { return strings.Compare(a.Type, b.Type) })
		var reasons []string
		for _, c := range bad {
			r := strings.TrimSuffix(c.Type, suffix)
			if c.Reason != "" {
				r += "_" + c.Reason
			}
			reasons = append(reasons, r)
		}
		slices.Sort(reasons)
		out.Status, out.Reason, out.Message = badStatus, strings.Join(reasons, "::"), messageOf(bad)
	}
	return out
}

// messageOf returns each condition's distinct message lines, each as "<type>: <line>".
func messageOf(conds []operatorv1.OperatorCondition) string {
	var lines []string
	for _, c := range conds {
		if c.Message == "" {
			continue
		}
		var seen []string
		for _, l := range strings.Split(c.Message, "\n") {
			if slices.Contains(seen, l) {
				continue
			}
			seen = append(seen, l)
			lines = append(lines, fmt.Sprintf("%s: %s", c.Type, l))
		}
	}
	return strings.Join(lines, "\n")
}
