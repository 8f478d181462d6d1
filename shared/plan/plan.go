// Package plan holds what both managers share about their desired state: a plan is the list of
// objects to apply, per cluster and in order, and the identities to delete. Each manager computes
// its plan with one pure function; its reconciler executes the plan, `render` prints it, and the
// golden fixtures snapshot it, so the three cannot drift apart.
package plan

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/go-logr/logr"
	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
)

// Object is an object of a plan: client.Object, named here so that the plan packages, which the
// linter keeps free of the client packages, can name their objects.
type Object = client.Object

// Step is one object of a plan: where it goes, which condition reports on it, and the object
// (complete for an apply, only its kind, namespace and name for a delete).
type Step struct {
	// Cluster is the API server the step goes to: apply.ClusterManagement or
	// apply.ClusterGuest (in standalone mode both name the one cluster).
	Cluster apply.Cluster
	// Group names the set of steps one Degraded condition reports on; the steps of a group
	// stop at the first error, other groups go on.
	Group  string
	Object client.Object
}

// String names the step as cluster/Kind/namespace/name: the same for an object and its identity.
func (s Step) String() string {
	return fmt.Sprintf("%s/%s/%s/%s", s.Cluster, Kind(s.Object), s.Object.GetNamespace(), s.Object.GetName())
}

// Steps returns one step per object, all in the same cluster and group.
func Steps(c apply.Cluster, group string, objs ...client.Object) []Step {
	out := make([]Step, 0, len(objs))
	for _, o := range objs {
		out = append(out, Step{Cluster: c, Group: group, Object: o})
	}
	return out
}

// Identities returns the steps with each object reduced to its kind, namespace and name: what a
// delete needs, and all that a plan's deletions may depend on.
func Identities(steps []Step) []Step {
	out := make([]Step, 0, len(steps))
	for _, s := range steps {
		s.Object = Identity(s.Object)
		out = append(out, s)
	}
	return out
}

// Identity returns an empty object of obj's type carrying only obj's kind, namespace and name.
func Identity(obj client.Object) client.Object {
	id := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	id.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	id.SetNamespace(obj.GetNamespace())
	id.SetName(obj.GetName())
	return id
}

// Appliers are the appliers of a manager, one per cluster it writes to.
type Appliers map[apply.Cluster]*apply.Applier

// Apply applies the steps in order. The steps of a group stop at the group's first error; the
// result maps every group that failed to its error.
func (a Appliers) Apply(ctx context.Context, log logr.Logger, steps []Step) map[string]error {
	failed := map[string]error{}
	for _, s := range steps {
		if failed[s.Group] != nil {
			continue
		}
		res, err := a.applier(s.Cluster).Apply(ctx, s.Object)
		if err != nil {
			failed[s.Group] = err
			continue
		}
		if res == apply.Applied {
			log.V(2).Info("Applied", "cluster", s.Cluster, "kind", Kind(s.Object), "object", klog.KObj(s.Object))
		}
	}
	return failed
}

// Create creates the steps' objects in order, each only if no object of its name exists (see
// apply.Applier.Create): one that exists is left as it is, which is no error. The steps of a group
// stop at the group's first error; the result maps every group that failed to its error.
func (a Appliers) Create(ctx context.Context, log logr.Logger, steps []Step) map[string]error {
	failed := map[string]error{}
	for _, s := range steps {
		if failed[s.Group] != nil {
			continue
		}
		res, err := a.applier(s.Cluster).Create(ctx, s.Object)
		switch {
		case err != nil:
			failed[s.Group] = err
		case res == apply.Applied:
			log.V(2).Info("Created", "cluster", s.Cluster, "kind", Kind(s.Object), "object", klog.KObj(s.Object))
		case res == apply.Exists:
			log.V(2).Info("Not created, since an object of its name exists", "cluster", s.Cluster, "kind", Kind(s.Object), "object", klog.KObj(s.Object))
		}
	}
	return failed
}

// Delete deletes every step's object (a missing one is no error) and joins the errors.
func (a Appliers) Delete(ctx context.Context, log logr.Logger, steps []Step) error {
	var errs []error
	for _, s := range steps {
		res, err := a.applier(s.Cluster).Delete(ctx, s.Object)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if res == apply.Deleted {
			log.V(2).Info("Deleted", "cluster", s.Cluster, "kind", Kind(s.Object), "object", klog.KObj(s.Object))
		}
	}
	return errors.Join(errs...)
}

func (a Appliers) applier(c apply.Cluster) *apply.Applier {
	ap, ok := a[c]
	if !ok {
		// A plan names only the clusters its manager was given appliers for.
		panic("plan: no applier for cluster " + string(c))
	}
	return ap
}

// Kind returns an object's kind for logs: the type meta when set, else the Go type's name.
func Kind(o client.Object) string {
	if k := o.GetObjectKind().GroupVersionKind().Kind; k != "" {
		return k
	}
	return reflect.TypeOf(o).Elem().Name()
}

// Base is the part of every manager's plan that its reconciler executes.
type Base struct {
	// ManagementState is the ClusterCSIDriver's, "" read as Managed.
	ManagementState operatorv1.ManagementState
	// Apply holds the objects to apply, in order.
	Apply []Step
	// Delete holds the identities of the objects to delete.
	Delete []Step
	// Held holds, under managementState Removed, the identities of objects Removed deletes only
	// once what still uses them has ended (see Hold); Waiting says what, for the conditions.
	// Both are empty when Delete holds everything.
	Held    []Step
	Waiting string
}

// Hold moves the steps of Delete that in reports to Held, and sets Waiting to why when it moved
// any: the reconciler deletes them on a later pass, once why no longer holds.
func (b *Base) Hold(in func(Step) bool, why string) {
	keep := b.Delete[:0:0]
	for _, s := range b.Delete {
		if in(s) {
			b.Held = append(b.Held, s)
		} else {
			keep = append(keep, s)
		}
	}
	b.Delete = keep
	if len(b.Held) > 0 {
		b.Waiting = why
	}
}

// Driver returns driver, or a Managed ClusterCSIDriver with defaults when it is nil (an offline
// render without one).
func Driver(driver *operatorv1.ClusterCSIDriver) *operatorv1.ClusterCSIDriver {
	if driver == nil {
		return &operatorv1.ClusterCSIDriver{}
	}
	return driver
}

// Start begins a plan for driver (nil reads as a Managed one) and reports whether it is complete
// already: under Unmanaged nothing is planned, and under Removed only the deletion of everything
// the manager can create, which everything returns. A removal depends on nothing else, since the
// inputs may be gone or invalid by then.
func Start(driver *operatorv1.ClusterCSIDriver, everything func() ([]Step, error)) (b Base, complete bool, err error) {
	if driver != nil {
		b.ManagementState = driver.Spec.ManagementState
	}
	switch b.ManagementState {
	case operatorv1.Unmanaged:
		return b, true, nil
	case operatorv1.Removed:
		all, err := everything()
		if err != nil {
			return b, true, err
		}
		b.Delete = Identities(all)
		return b, true, nil
	}
	return b, false, nil
}

// UsesInputs reports whether the plan for driver (nil reads as a Managed one) depends on the
// manager's inputs: not under Unmanaged, where nothing is planned, nor under Removed, where only
// the deletion of everything is.
func UsesInputs(driver *operatorv1.ClusterCSIDriver) bool {
	if driver == nil {
		return true
	}
	switch driver.Spec.ManagementState {
	case operatorv1.Unmanaged, operatorv1.Removed:
		return false
	}
	return true
}
