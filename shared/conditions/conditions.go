// Package conditions builds the ClusterCSIDriver status conditions one manager owns.
//
// Both managers write conditions to the same ClusterCSIDriver with server-side apply, each under
// its own field owner, so each applies only the conditions it owns; a Set therefore starts empty
// and holds only what the manager set during this reconcile, never the other manager's types.
// LastTransitionTime is carried over from the live object while a condition's status stays the
// same, and every message is normalised, so that a reconcile that finds nothing changed produces
// byte-identical conditions and server-side apply sends no write.
package conditions

import (
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TypePrefix starts every condition type of this operator, so that users and tooling can tell
// its conditions from those of other operators on a shared ClusterCSIDriver.
const TypePrefix = "OpenStackCinder"

// typeSuffixes are the suffixes cluster-storage-operator aggregates into its own
// Available/Progressing/Degraded/Upgradeable conditions; a type with any other suffix would be
// invisible in the ClusterOperator status.
var typeSuffixes = []string{"Available", "Progressing", "Degraded", "Upgradeable"}

// WarningSuffix ends the informational condition types (names.Condition*Warning), on purpose one
// cluster-storage-operator does not aggregate: a warning never makes the cluster Degraded.
const WarningSuffix = "Warning"

// MaxMessageLength bounds a condition message in bytes: messages are read in `oc get` output
// and events, and a condition that grows with an error chain would change on every retry.
const MaxMessageLength = 1024

// Set collects the conditions one manager sets during one reconcile. The zero value is not
// usable; call New.
type Set struct {
	existing map[string]operatorv1.OperatorCondition
	now      metav1.Time
	conds    map[string]operatorv1.OperatorCondition
}

// New returns an empty Set. existing are the conditions currently on the object (of any
// owner), used only to keep LastTransitionTime; now is the time stamped on conditions whose
// status changes, truncated to seconds because the API server stores only seconds and a finer
// in-memory value would never compare equal to what is read back.
func New(existing []operatorv1.OperatorCondition, now metav1.Time) *Set {
	s := &Set{
		existing: make(map[string]operatorv1.OperatorCondition, len(existing)),
		now:      metav1.NewTime(now.UTC().Truncate(time.Second)),
		conds:    make(map[string]operatorv1.OperatorCondition),
	}
	for _, c := range existing {
		s.existing[c.Type] = c
	}
	return s
}

// Set records a condition, replacing one of the same type set earlier in this reconcile. The
// message is passed through CleanMessage. condType should be one of the constants in
// shared/names, all of which pass validType (TestValidType checks them).
func (s *Set) Set(condType string, status operatorv1.ConditionStatus, reason, message string) {
	c := operatorv1.OperatorCondition{
		Type:               condType,
		Status:             status,
		LastTransitionTime: s.now,
		Reason:             reason,
		Message:            CleanMessage(message),
	}
	if old, ok := s.existing[condType]; ok && old.Status == status && !old.LastTransitionTime.IsZero() {
		c.LastTransitionTime = old.LastTransitionTime
	}
	s.conds[condType] = c
}

// True records a condition with status True.
func (s *Set) True(condType, reason, message string) {
	s.Set(condType, operatorv1.ConditionTrue, reason, message)
}

// False records a condition with status False.
func (s *Set) False(condType, reason, message string) {
	s.Set(condType, operatorv1.ConditionFalse, reason, message)
}

// List returns the recorded conditions sorted by type, or nil when none was recorded. The
// result is a fresh slice the caller may keep.
func (s *Set) List() []operatorv1.OperatorCondition {
	if len(s.conds) == 0 {
		return nil
	}
	out := make([]operatorv1.OperatorCondition, 0, len(s.conds))
	for _, c := range s.conds {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b operatorv1.OperatorCondition) int { return strings.Compare(a.Type, b.Type) })
	return out
}

// Find returns the condition of type condType in conds, or nil. The pointer refers into conds.
func Find(conds []operatorv1.OperatorCondition, condType string) *operatorv1.OperatorCondition {
	for i := range conds {
		if conds[i].Type == condType {
			return &conds[i]
		}
	}
	return nil
}

// CleanMessage returns message on one line: runs of white space and control characters become
// one space, the ends are trimmed, and a message longer than MaxMessageLength bytes is cut at a
// character boundary and ends in "...". It cannot remove generated names or timestamps; callers
// must not pass raw errors.
func CleanMessage(message string) string {
	var b strings.Builder
	space := false
	for _, r := range message {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	out := b.String()
	if len(out) <= MaxMessageLength {
		return out
	}
	const ellipsis = "..."
	cut := MaxMessageLength - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(out[cut]) {
		cut--
	}
	return strings.TrimRight(out[:cut], " ") + ellipsis
}

// Keep sets each of the given condition types that this reconcile has not set to what existing
// holds, unchanged, where it holds one. A manager whose status apply leaves a type out drops it,
// so a reconcile that cannot compute a condition (its inputs could not be read) keeps the last
// known one this way.
func (s *Set) Keep(existing []operatorv1.OperatorCondition, types ...string) {
	for _, t := range types {
		if _, set := s.conds[t]; set {
			continue
		}
		if c := Find(existing, t); c != nil {
			s.Set(c.Type, c.Status, c.Reason, c.Message)
		}
	}
}
