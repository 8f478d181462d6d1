package controlplane

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/access"
)

// monitorsWatchable reports whether the operator may list and watch ServiceMonitors in the
// controller namespace, asking q (again after its interval while the answer is no, so that a
// grant made after start is taken up). Its own install grants both; the Role
// cluster-storage-operator gives csi-operator's ServiceAccount grants get, create, update, patch
// and delete only, because library-go reads the ServiceMonitor with a GET each time. Without
// list and watch, a cache of ServiceMonitors could never sync: its watch would be retried
// forever and every read of the cache would wait for it. So then the ServiceMonitor is read from
// the API server at each reconcile that applies or deletes it, and not watched: an edit of it is
// repaired at the next reconcile (any input's change, or the topology recheck), not at once.
// Once allowed, the watch starts at the first reconcile after the question was asked again.
func monitorsWatchable(ctx context.Context, q *access.Question, c client.Client, namespace string) (bool, error) {
	ok, denied, err := q.Allowed(ctx, c, namespace, serviceMonitorGVK.Group, "servicemonitors", "list", "watch")
	if denied {
		ctrl.LoggerFrom(ctx).Info("ServiceMonitors may not be listed or watched: reading the controller's ServiceMonitor directly, without a watch", "namespace", namespace)
	}
	return ok, err
}

// monitorReader reads ServiceMonitors from the API server and everything else from the cache,
// for when ServiceMonitors may not be watched.
type monitorReader struct {
	cached, direct client.Reader
}

// Get reads a ServiceMonitor with direct and anything else with cached.
func (r monitorReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if u, ok := obj.(*unstructured.Unstructured); ok && u.GroupVersionKind().GroupKind() == serviceMonitorGVK.GroupKind() {
		return r.direct.Get(ctx, key, obj, opts...)
	}
	return r.cached.Get(ctx, key, obj, opts...)
}

// List lists from the cache.
func (r monitorReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.cached.List(ctx, list, opts...)
}
