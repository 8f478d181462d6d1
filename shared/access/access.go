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
