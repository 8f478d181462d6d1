package conditions

import (
	"context"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// Begin reads the ClusterCSIDriver name through c and starts a Set of its conditions at now. The
// driver is nil when it does not exist: then there is nothing to reconcile, and no error.
func Begin(ctx context.Context, c client.Client, name string, now time.Time) (*operatorv1.ClusterCSIDriver, *Set, error) {
	driver := &operatorv1.ClusterCSIDriver{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, driver); err != nil {
		return nil, nil, client.IgnoreNotFound(err)
	}
	return driver, New(driver.Status.Conditions, metav1.NewTime(now)), nil
}

// Absent sets the Available and Progressing conditions of a workload that does not exist: it
// waits for its configuration (waitingFor says what), or it is being created (creating says so).
func (s *Set) Absent(available, progressing, waitingFor, creating string) {
	if waitingFor != "" {
		s.False(available, names.ReasonWaitingForConfig, waitingFor)
		s.False(progressing, names.ReasonWaitingForConfig, waitingFor)
		return
	}
	s.False(available, names.ReasonDeploying, creating)
	s.True(progressing, names.ReasonDeploying, creating)
}
