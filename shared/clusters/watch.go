package clusters

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// DriverRequest is the one request every event maps to: both managers reconcile the one
// ClusterCSIDriver as a whole.
var DriverRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: names.ClusterCSIDriverName}}

// EnqueueDriver maps every event to DriverRequest.
var EnqueueDriver = handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
	return []reconcile.Request{DriverRequest}
})

// Watch returns a source of the events of obj's kind in c that pass preds, each mapped to
// DriverRequest.
func Watch(c cache.Cache, obj client.Object, preds ...predicate.Predicate) source.Source {
	return source.Kind(c, obj, EnqueueDriver, preds...)
}

// DriverChanged passes ClusterCSIDriver events that change its spec or annotations, not the
// status writes both managers make.
var DriverChanged = predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{})

// CarriesConditions passes ClusterCSIDriver events whose object carries a condition of one of
// types, status writes included: the guest manager removes csi-operator's conditions
// (names.CSIOperatorConditions) whenever they appear, also when csi-operator, still running
// during a switch, writes one after the last change of the spec.
func CarriesConditions(types ...string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		d, ok := o.(*operatorv1.ClusterCSIDriver)
		if !ok {
			return false
		}
		return slices.ContainsFunc(d.Status.Conditions, func(c operatorv1.OperatorCondition) bool { return slices.Contains(types, c.Type) })
	})
}

// Named passes objects with one of the given names.
func Named(nameList ...string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return slices.Contains(nameList, o.GetName()) })
}

// InNamespace passes objects in namespace ns.
func InNamespace(ns string) predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == ns })
}

// LateWatch adds a watch to a built controller once, when its kind is first found served:
// watching a kind the API server does not serve fails, and a CRD (the VolumeSnapshotClass's, the
// ServiceMonitor's) may appear at any time. A failed start (the kind's REST mapping not yet
// discovered, say) is tried again on the next call. The zero value is ready to use.
type LateWatch struct {
	mu      sync.Mutex
	started bool
}

// lateSyncTimeout bounds the wait for a late watch's first list.
const lateSyncTimeout = time.Minute

// Start makes ctl watch obj's kind in c, mapping every event to DriverRequest, unless an earlier
// call succeeded, and returns once the watch's cache has listed the kind. A watch added to a
// running controller starts on its own, without the wait for its first list that the
// controller's start gives the others; an object deleted before that list is in neither the
// list nor any event. So the caller starts the watch before it applies the kind's objects, and
// every change after the apply reaches the controller. kinds names the kind in the plural for
// the error.
func (w *LateWatch) Start(ctx context.Context, ctl controller.Controller, c cache.Cache, obj client.Object, kinds string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return nil
	}
	if err := ctl.Watch(Watch(c, obj)); err != nil {
		return fmt.Errorf("watching %s: %w", kinds, err)
	}
	w.started = true
	// GetInformer blocks until the informer the watch shares has synced.
	ctx, cancel := context.WithTimeout(ctx, lateSyncTimeout)
	defer cancel()
	if _, err := c.GetInformer(ctx, obj); err != nil {
		return fmt.Errorf("waiting for the first list of %s: %w", kinds, err)
	}
	return nil
}
