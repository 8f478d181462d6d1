package guest

import (
	"fmt"
	"strconv"

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

// nodeRollingOut reports whether the DaemonSet is rolling out a generation not yet seen complete.
// Once its generation is recorded as stable (see stableGeneration), pods missing at it were lost
// to a node rebooted, drained, added or removed, or a pod killed: what Available says, never
// Progressing, which cluster-storage-operator folds into ClusterOperator storage and which an
// upgrade's reboots of every node would otherwise keep flapping.
func nodeRollingOut(ds *appsv1.DaemonSet) bool {
	if ds.Annotations[names.StableGenerationAnnotation] == strconv.FormatInt(ds.Generation, 10) {
		return false
	}
	return !nodeComplete(ds)
}

// nodeComplete reports whether the DaemonSet controller has observed ds's generation and every
// node it schedules on runs that generation's pod, available.
func nodeComplete(ds *appsv1.DaemonSet) bool {
	st := ds.Status
	return st.ObservedGeneration >= ds.Generation &&
		st.UpdatedNumberScheduled >= st.DesiredNumberScheduled &&
		st.NumberAvailable >= st.DesiredNumberScheduled
}

// stableGeneration returns the generation to record on ds as seen fully rolled out, or "" when
// there is nothing to record: no DaemonSet, a rollout still running, or the record in place.
func stableGeneration(ds *appsv1.DaemonSet) string {
	if ds == nil || !nodeComplete(ds) {
		return ""
	}
	gen := strconv.FormatInt(ds.Generation, 10)
	if ds.Annotations[names.StableGenerationAnnotation] == gen {
		return ""
	}
	return gen
}
