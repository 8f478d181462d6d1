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
	"errors"
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

// ReasonAsExpected is the reason of a Degraded condition that is False.
const ReasonAsExpected = "AsExpected"

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
// shared/names, all of which pass ValidType (checked by this package's tests).
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

// Unknown records a condition with status Unknown.
func (s *Set) Unknown(condType, reason, message string) {
	s.Set(condType, operatorv1.ConditionUnknown, reason, message)
}

// FoldError records the Degraded condition degradedType from a reconcile's outcome: False with
// ReasonAsExpected when err is nil, else True with the reason and message of the first
// ReasonError in err's chain, or the given reason and message when there is none. The text of
// err itself never reaches the condition: raw errors carry generated names, resource versions
// and multi-line API responses that would make the message change on every retry (and could
// carry secret material), so callers pass a stable message that says what the user must do.
func (s *Set) FoldError(degradedType string, err error, reason, message string) {
	if err == nil {
		s.False(degradedType, ReasonAsExpected, "")
		return
	}
	if re, ok := errors.AsType[*ReasonError](err); ok {
		reason, message = re.Reason, re.Message
	}
	s.True(degradedType, reason, message)
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

// ReasonError carries the condition reason and user-facing message for an error, so that the
// step that fails decides what the Degraded condition says while FoldError, usually deferred,
// writes it.
type ReasonError struct {
	// Reason is the CamelCase condition reason.
	Reason string
	// Message is the stable, actionable condition message.
	Message string
	// Err is the underlying error, for logs and events; it never reaches the condition.
	Err error
}

// Error returns the message followed by the underlying error, for logs.
func (e *ReasonError) Error() string {
	if e.Err == nil {
		return e.Message
	}
	return e.Message + ": " + e.Err.Error()
}

// Unwrap returns the underlying error, so that errors.Is and errors.As see through a
// ReasonError (for example to a reconcile.TerminalError).
func (e *ReasonError) Unwrap() error { return e.Err }

// WithReason wraps err in a ReasonError, or returns nil when err is nil so that it can wrap a
// call's result directly.
func WithReason(err error, reason, message string) error {
	if err == nil {
		return nil
	}
	return &ReasonError{Reason: reason, Message: message, Err: err}
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

// IsTrue reports whether conds holds a condition of type condType with status True.
func IsTrue(conds []operatorv1.OperatorCondition, condType string) bool {
	c := Find(conds, condType)
	return c != nil && c.Status == operatorv1.ConditionTrue
}

// ValidType reports whether t is a condition type this operator may write: it starts with
// TypePrefix, ends in a suffix cluster-storage-operator aggregates, and is CamelCase letters and
// digits in between.
func ValidType(t string) bool {
	rest, ok := strings.CutPrefix(t, TypePrefix)
	if !ok {
		return false
	}
	for _, r := range rest {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	for _, suffix := range typeSuffixes {
		if strings.HasSuffix(rest, suffix) {
			return true
		}
	}
	return false
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
