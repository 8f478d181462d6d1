package guest

import (
	"fmt"

	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// nodeWorkload is the CSI node DaemonSet's conditions.
var nodeWorkload = conditions.Workload{
	Available:   names.ConditionNodeAvailable,
	Progressing: names.ConditionNodeProgressing,
	Degraded:    names.ConditionNodeDegraded,
	Creating:    "The CSI node DaemonSet is being created.",
	Applying:    "Applying the CSI node DaemonSet",
}

// setNodeConditions sets the node plugin's Available, Progressing and Degraded conditions from
// the live DaemonSet. waitingFor explains why there is no DaemonSet yet.
func setNodeConditions(s *conditions.Set, ds *appsv1.DaemonSet, waitingFor string, applyErr error) {
	nodeWorkload.Set(s, nodeRollout(ds), waitingFor, applyErr)
}

// nodeRollout reads the DaemonSet's per-node counts; nil when there is no DaemonSet. A
// DaemonSet has no progress deadline, so it is never stuck.
func nodeRollout(ds *appsv1.DaemonSet) *conditions.Rollout {
	if ds == nil {
		return nil
	}
	st := ds.Status
	r := &conditions.Rollout{
		Available: conditions.Verdict{Status: operatorv1.ConditionFalse, Reason: names.ReasonNotAvailable,
			Message: "The CSI node plugin is not available on any node yet; check the openstack-cinder-csi-driver-node pods."},
		Progressing: conditions.Verdict{Status: operatorv1.ConditionFalse, Reason: names.ReasonAsExpected, Message: "The CSI node plugin is rolled out."},
	}
	switch {
	case st.NumberAvailable > 0:
		r.Available = conditions.Verdict{Status: operatorv1.ConditionTrue, Reason: names.ReasonAsExpected,
			Message: fmt.Sprintf("The CSI node plugin is available on %d of %d nodes.", st.NumberAvailable, st.DesiredNumberScheduled)}
	case st.DesiredNumberScheduled == 0 && st.ObservedGeneration >= ds.Generation:
		r.Available = conditions.Verdict{Status: operatorv1.ConditionTrue, Reason: names.ReasonAsExpected, Message: "The cluster has no nodes for the CSI node plugin yet."}
	}
	if nodeRollingOut(ds) {
		r.Progressing = conditions.Verdict{Status: operatorv1.ConditionTrue, Reason: names.ReasonRollingOut,
			Message: fmt.Sprintf("The CSI node plugin is rolling out: %d of %d nodes updated.", st.UpdatedNumberScheduled, st.DesiredNumberScheduled)}
	}
	return r
}

// nodeRollingOut reports whether the DaemonSet has not yet rolled out its current template.
func nodeRollingOut(ds *appsv1.DaemonSet) bool {
	st := ds.Status
	return st.ObservedGeneration < ds.Generation ||
		st.UpdatedNumberScheduled < st.DesiredNumberScheduled ||
		st.NumberAvailable < st.DesiredNumberScheduled
}
