package guest

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// setNodeConditions sets the node plugin's Available, Progressing and Degraded conditions from
// the live DaemonSet. waitingFor explains why there is no DaemonSet yet.
func setNodeConditions(s *conditions.Set, ds *appsv1.DaemonSet, waitingFor string, applyErr error) {
	if ds == nil {
		s.Absent(names.ConditionNodeAvailable, names.ConditionNodeProgressing, waitingFor, "The CSI node DaemonSet is being created.")
	} else {
		st := ds.Status
		switch {
		case st.NumberAvailable > 0:
			s.True(names.ConditionNodeAvailable, names.ReasonAsExpected,
				fmt.Sprintf("The CSI node plugin is available on %d of %d nodes.", st.NumberAvailable, st.DesiredNumberScheduled))
		case st.DesiredNumberScheduled == 0 && st.ObservedGeneration >= ds.Generation:
			s.True(names.ConditionNodeAvailable, names.ReasonAsExpected, "The cluster has no nodes for the CSI node plugin yet.")
		default:
			s.False(names.ConditionNodeAvailable, names.ReasonNotAvailable,
				"The CSI node plugin is not available on any node yet; check the openstack-cinder-csi-driver-node pods.")
		}
		if nodeRollingOut(ds) {
			s.True(names.ConditionNodeProgressing, names.ReasonRollingOut,
				fmt.Sprintf("The CSI node plugin is rolling out: %d of %d nodes updated.", st.UpdatedNumberScheduled, st.DesiredNumberScheduled))
		} else {
			s.False(names.ConditionNodeProgressing, names.ReasonAsExpected, "The CSI node plugin is rolled out.")
		}
	}
	s.Fold(names.ConditionNodeDegraded, applyErr, "Applying the CSI node DaemonSet")
}

// nodeRollingOut reports whether the DaemonSet has not yet rolled out its current template.
func nodeRollingOut(ds *appsv1.DaemonSet) bool {
	st := ds.Status
	return st.ObservedGeneration < ds.Generation ||
		st.UpdatedNumberScheduled < st.DesiredNumberScheduled ||
		st.NumberAvailable < st.DesiredNumberScheduled
}
