// Package access asks the API server what the operator's own identity may do, with
// SelfSubjectAccessReviews, which every authenticated user may create.
//
// The operator runs under two RBAC sets: its own install manifests, and the one
// cluster-storage-operator grants csi-operator's ServiceAccount when this operator replaces
// csi-operator by an image swap. Where the second grants less (no list or watch of
// ServiceMonitors, no SubjectAccessReviews), the operator asks once and does without, instead of
// failing, or retrying a forbidden watch forever.
package access

import (
	"context"
	"fmt"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Allowed reports whether the client's identity may do every one of verbs on the resource
// (group, resource, in namespace ns; "" for cluster scope).
func Allowed(ctx context.Context, c client.Client, ns, group, resource string, verbs ...string) (bool, error) {
	for _, verb := range verbs {
		r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource},
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

// Once is one question asked of the API server once per process: what a process's RBAC grants
// does not change while it runs. The zero value has asked nothing yet.
type Once struct {
	mu      sync.Mutex
	decided bool
	allowed bool
}

// Allowed returns the answer, asking with the package's Allowed until an answer comes; an error is
// returned and the question asked again on the next call. denied is true on the one call that
// found the answer no, so that the caller can say so once.
func (o *Once) Allowed(ctx context.Context, c client.Client, ns, group, resource string, verbs ...string) (allowed, denied bool, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.decided {
		return o.allowed, false, nil
	}
	ok, err := Allowed(ctx, c, ns, group, resource, verbs...)
	if err != nil {
		return false, false, err
	}
	o.decided, o.allowed = true, ok
	return ok, !ok, nil
}
