package conditions

import (
	"context"

	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/client-go/tools/events"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// Unmanaged reports managementState Unmanaged: every given condition False, the operator changes
// nothing.
func (s *Set) Unmanaged(types ...string) {
	const msg = "managementState is Unmanaged: the operator changes nothing."
	for _, t := range types {
		s.False(t, names.ReasonUnmanaged, msg)
	}
}

// Removed reports managementState Removed: the operand is Available (there is nothing to wait
// for) and not Progressing, Degraded follows the removal's outcome, and every other given
// condition is False. what names what was removed, for the message.
func (s *Set) Removed(available, progressing, degraded string, err error, what string, others ...string) {
	msg := "managementState is Removed: " + what + " are removed."
	s.True(available, names.ReasonRemoved, msg)
	s.False(progressing, names.ReasonRemoved, msg)
	s.Fold(degraded, err, "Removing "+what)
	for _, t := range others {
		s.False(t, names.ReasonRemoved, msg)
	}
}

// Write records an Event for every Degraded condition of s that turned True or recovered, then
// writes s's conditions (and, when observedGeneration is not nil, status.observedGeneration) to
// the ClusterCSIDriver as a's field owner. A Set without conditions writes nothing.
func Write(ctx context.Context, rec events.EventRecorder, a *apply.Applier, driver *operatorv1.ClusterCSIDriver, s *Set, observedGeneration *int64) error {
	conds := s.List()
	if len(conds) == 0 && observedGeneration == nil {
		return nil
	}
	RecordTransitions(rec, driver, conds)
	return ApplyStatus(ctx, a, driver.Name, conds, observedGeneration)
}
