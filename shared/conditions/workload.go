package conditions

import (
	operatorv1 "github.com/openshift/api/operator/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// Workload names the Available, Progressing and Degraded conditions of one operand workload (the
// CSI controller Deployment, the node DaemonSet) and the phrases its messages use.
type Workload struct {
	Available, Progressing, Degraded string
	// Creating is the message while the workload does not exist yet and nothing is missing.
	Creating string
	// Applying describes applying it, for a failure's message ("Applying the CSI node DaemonSet").
	Applying string
}

// Verdict is the status, reason and message of one condition.
type Verdict struct {
	Status  operatorv1.ConditionStatus
	Reason  string
	Message string
}

// Rollout is what a live workload's status says about it.
type Rollout struct {
	Available, Progressing Verdict
	// Stuck, when not empty, is why the rollout stopped progressing: the workload is Degraded.
	Stuck string
}

// Set sets the workload's conditions. A nil live means the workload does not exist: it waits for
// its configuration (waitingFor says what) or it is being created. A failed apply makes it
// Degraded, before a stuck rollout does.
func (w Workload) Set(s *Set, live *Rollout, waitingFor string, applyErr error) {
	switch {
	case live != nil:
		s.Set(w.Available, live.Available.Status, live.Available.Reason, live.Available.Message)
		s.Set(w.Progressing, live.Progressing.Status, live.Progressing.Reason, live.Progressing.Message)
	case waitingFor != "":
		s.False(w.Available, names.ReasonWaitingForConfig, waitingFor)
		s.False(w.Progressing, names.ReasonWaitingForConfig, waitingFor)
	default:
		s.False(w.Available, names.ReasonDeploying, w.Creating)
		s.True(w.Progressing, names.ReasonDeploying, w.Creating)
	}
	if applyErr == nil && live != nil && live.Stuck != "" {
		s.True(w.Degraded, names.ReasonRolloutStuck, live.Stuck)
		return
	}
	s.Fold(w.Degraded, applyErr, w.Applying)
}

// Removed reports managementState Removed: the workload is Available (there is nothing to wait
// for), Degraded follows the removal's outcome, and every other given condition is False. what
// names what was removed, for the message. Progressing is False, or True while waiting (a
// sentence) says what the removal still waits for before it deletes the rest (plan.Base.Held).
func (w Workload) Removed(s *Set, err error, what, waiting string, others ...string) {
	msg := "managementState is Removed: " + what + " are removed."
	s.True(w.Available, names.ReasonRemoved, msg)
	if waiting != "" {
		s.True(w.Progressing, names.ReasonRemoving, msg+" "+waiting)
	} else {
		s.False(w.Progressing, names.ReasonRemoved, msg)
	}
	s.Fold(w.Degraded, err, "Removing "+what)
	for _, t := range others {
		s.False(t, names.ReasonRemoved, msg)
	}
}

// Unmanaged reports managementState Unmanaged on the workload's Progressing and Degraded
// conditions and the others given; Available keeps following the live workload.
func (w Workload) Unmanaged(s *Set, others ...string) {
	s.Unmanaged(append([]string{w.Progressing, w.Degraded}, others...)...)
}
