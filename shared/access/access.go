// Package access asks the API server what the operator's own identity may do, with
// SelfSubjectAccessReviews, which every authenticated user may create.
//
// The operator runs under two RBAC sets: its own install manifests, and the one
// cluster-storage-operator grants csi-operator's ServiceAccount when this operator replaces
// csi-operator by an image swap. Where the second grants less (no list or watch of
// ServiceMonitors, no SubjectAccessReviews), the operator asks and does without, instead of
// failing, or retrying a forbidden watch forever. An administrator may grant what was missing
// while the operator runs, so a denial is asked again after an interval rather than kept. A Gate
// starts a watch behind such a question, once the operator may list and watch the kind.
package access

import (
	"context"
	"fmt"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// DefaultInterval is how long a denial is kept before the question is asked again, for a
// Question or an apply.UpdateFallback whose own interval is zero. Five minutes bound how long an
// administrator's grant goes unseen, at one SelfSubjectAccessReview per denied question per
// interval. It is a variable for the tests that run a whole operator in their own process and
// cannot reach the reconcilers' fields; they shorten it before they start the operator.
var DefaultInterval = 5 * time.Minute

// Allowed reports whether the client's identity may do every one of verbs on the resource
// (group, resource, in namespace ns; "" for cluster scope).
func Allowed(ctx context.Context, c client.Client, ns, group, resource string, verbs ...string) (bool, error) {
	return ask(ctx, c, ns, group, resource, "", verbs...)
}

// ask is Allowed on the object named name, or on any object of the resource when name is "".
func ask(ctx context.Context, c client.Client, ns, group, resource, name string, verbs ...string) (bool, error) {
	for _, verb := range verbs {
		r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource, Name: name},
		}}
		if err := c.Create(ctx, r); err != nil {
			return false, fmt.Errorf("asking whether %s on %s.%s is allowed: %w", verb, resource, group, err)
		}
		if !r.Status.Allowed {
			return false, nil
		}
	}
	return true, nil
}

// Question is one question asked of the API server: asked on first use, then kept while the
// answer is yes, and asked again once per interval while it is no, so that a grant made after
// start takes effect without a restart. The zero value has asked nothing yet and uses
// DefaultInterval.
//
// A yes is kept for the life of the process: what it decides cannot be taken back anyway
// (controller-runtime cannot stop a watch once started, and a role the operator wrote stays as
// written), and asking again would cost a review and a reconcile at rest on every healthy
// install. Taking back what the operator's own install grants is not a supported change.
type Question struct {
	// Interval is how long a denial is kept; zero means DefaultInterval.
	Interval time.Duration
	// Name, when set, asks about that one object of the resource: what a Role that grants
	// writes by resourceNames allows.
	Name string

	mu       sync.Mutex
	asked    bool
	allowed  bool
	deniedAt time.Time
}

// Allowed returns the answer, asking with the package's Allowed when nothing was asked yet or a
// denial is older than the interval. An error is returned and the question asked again on the
// next call. denied is true on the call that found the answer no after none or a yes, so that
// the caller can say so once; a denial asked again and still no does not repeat it. A yes that
// follows a no is logged here, since the callers cannot tell it from any other yes.
func (q *Question) Allowed(ctx context.Context, c client.Client, ns, group, resource string, verbs ...string) (allowed, denied bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	if q.asked && (q.allowed || now.Before(q.deniedAt.Add(q.interval()))) {
		return q.allowed, false, nil
	}
	ok, err := ask(ctx, c, ns, group, resource, q.Name, verbs...)
	if err != nil {
		return false, false, err
	}
	wasDenied := q.asked && !q.allowed
	q.asked, q.allowed = true, ok
	if !ok {
		q.deniedAt = now
		return false, !wasDenied, nil
	}
	if wasDenied {
		logf.FromContext(ctx).Info("Access granted since the operator asked last", "verbs", verbs,
			"resource", resource, "group", group, "namespace", ns)
	}
	return true, false, nil
}

// Recheck returns how long until a denial is asked again, for a reconciler to come back then
// (its RequeueAfter): nothing else would make it ask, since a grant changes no object it
// watches. It is zero when nothing was denied: no question asked yet, or the answer is yes.
func (q *Question) Recheck() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.asked || q.allowed {
		return 0
	}
	// Overdue: the next call asks again; come back soon, not at once.
	return max(time.Until(q.deniedAt.Add(q.interval())), time.Second)
}

func (q *Question) interval() time.Duration {
	if q.Interval > 0 {
		return q.Interval
	}
	return DefaultInterval
}

// Soonest returns the shortest of the positive durations ds, or zero when there is none: the
// RequeueAfter of a reconciler that has several reasons to come back, zero meaning none.
func Soonest(ds ...time.Duration) time.Duration {
	var out time.Duration
	for _, d := range ds {
		if d > 0 && (out == 0 || d < out) {
			out = d
		}
	}
	return out
}
