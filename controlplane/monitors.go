package controlplane

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/controlplane/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/access"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// monitoringAccess holds the questions of whether the operator may write each monitoring object
// next to the controller, by name: its own install grants them all, cluster-storage-operator's
// RBAC for csi-operator grants the ServiceMonitors standalone and nothing of the kind on
// HyperShift, and no PrometheusRule anywhere. What may not be written is left out, never a
// Degraded condition; a denial is asked again after its interval.
type monitoringAccess struct {
	controllerMonitor, operatorMonitor, rule access.Question
	// unserved is set while, on HyperShift, the management cluster serves no ServiceMonitors:
	// no watch says when it starts to (the operator may not read CRDs there), so discovery is
	// asked again on the access interval.
	unserved atomic.Bool
}

func newMonitoringAccess() *monitoringAccess {
	return &monitoringAccess{
		controllerMonitor: access.Question{Name: names.ControllerServiceMonitor},
		operatorMonitor:   access.Question{Name: names.OperatorServiceMonitor},
		rule:              access.Question{Name: names.AlertsRule},
	}
}

// recheck is when the soonest denial, or a kind not served on HyperShift, is asked again (zero
// when none).
func (a *monitoringAccess) recheck() time.Duration {
	var unserved time.Duration
	if a.unserved.Load() {
		unserved = access.DefaultInterval
	}
	return access.Soonest(a.controllerMonitor.Recheck(), a.operatorMonitor.Recheck(), a.rule.Recheck(), unserved)
}

// monitoring says which monitoring objects the operator applies: the ServiceMonitors when the
// cluster of the controller serves the kind (standalone: its CRD is established, which the
// reconciler watches; on HyperShift, where the operator may not read CRDs, the management
// cluster's discovery says so) and the operator may write both, the PrometheusRule when that kind
// is served too and it may write it. Discovery is asked again only while a kind is missing.
func (r *Reconciler) monitoring(ctx context.Context, monitorCRD bool) desired.Monitoring {
	served := monitorCRD
	if r.Config.HyperShift {
		served = r.served(ctx, desired.ServiceMonitorGVK)
		r.monitoringAccess.unserved.Store(!served)
	}
	if !served {
		return desired.Monitoring{}
	}
	var m desired.Monitoring
	m.ServiceMonitors = r.mayWrite(ctx, &r.monitoringAccess.controllerMonitor, "servicemonitors") &&
		r.mayWrite(ctx, &r.monitoringAccess.operatorMonitor, "servicemonitors")
	m.PrometheusRules = r.served(ctx, desired.PrometheusRuleGVK) && r.mayWrite(ctx, &r.monitoringAccess.rule, "prometheusrules")
	return m
}

// served reports whether the cluster of the controller serves gvk.
func (r *Reconciler) served(ctx context.Context, gvk schema.GroupVersionKind) bool {
	_, err := r.Mgmt.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil && !meta.IsNoMatchError(err) {
		ctrl.LoggerFrom(ctx).V(2).Info("Asking whether the cluster serves a kind", "kind", gvk.Kind, "error", err.Error())
	}
	return err == nil
}

// mayWrite asks q whether the operator may patch its object of resource (the applier's create
// and update) and delete it (managementState Removed), and says once when it may not.
func (r *Reconciler) mayWrite(ctx context.Context, q *access.Question, resource string) bool {
	ok, denied, err := q.Allowed(ctx, r.Mgmt, r.Config.Namespace, desired.ServiceMonitorGVK.Group, resource, "patch", "delete")
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Asking whether the operator may write a monitoring object", "name", q.Name)
		return false
	}
	if denied {
		ctrl.LoggerFrom(ctx).Info("The operator may not write this monitoring object: it is left out", "resource", resource, "name", q.Name, "namespace", r.Config.Namespace)
	}
	return ok
}

// monitorsWatchable reports whether the operator may list and watch ServiceMonitors in the
// controller namespace, asking gate (again after its interval while the answer is no, so that a
// grant made after start is taken up). Its own install grants both; the Role
// cluster-storage-operator gives csi-operator's ServiceAccount grants get, create, update, patch
// and delete only, because library-go reads the ServiceMonitor with a GET each time. Without
// list and watch, a cache of ServiceMonitors could never sync: its watch would be retried
// forever and every read of the cache would wait for it. So then the ServiceMonitors are read
// from the API server at each reconcile that applies or deletes them, and not watched: an edit
// of one is repaired at the next reconcile (any input's change, or the topology recheck), not at
// once. Once allowed, the watch starts at the first reconcile after the question was asked again.
func monitorsWatchable(ctx context.Context, gate *access.Gate, c client.Client, namespace string) (bool, error) {
	// The watch itself starts later, once the kind is served (Reconciler.monitors).
	return gate.Open(ctx, c, namespace, desired.ServiceMonitorGVK.Group, "servicemonitors", nil,
		"ServiceMonitors may not be listed or watched: reading the operator's ServiceMonitors directly, without a watch", "namespace", namespace)
}

// newServiceMonitor returns an empty ServiceMonitor, for the watch.
func newServiceMonitor() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(desired.ServiceMonitorGVK)
	return u
}

// monitorReader reads the monitoring kinds without a watch from the API server and everything
// else from the cache. The PrometheusRule is never watched: it is one object, edited by nobody
// else, so it is read at the reconciles that apply it rather than kept in an informer.
type monitorReader struct {
	cached, direct client.Reader
	// watchedMonitors is set when ServiceMonitors come from the cache.
	watchedMonitors bool
}

// Get reads a kind without a watch with direct and anything else with cached.
func (r monitorReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		switch u.GroupVersionKind().GroupKind() {
		case desired.PrometheusRuleGVK.GroupKind():
			return r.direct.Get(ctx, key, obj, opts...)
		case desired.ServiceMonitorGVK.GroupKind():
			if !r.watchedMonitors {
				return r.direct.Get(ctx, key, obj, opts...)
			}
		}
	}
	return r.cached.Get(ctx, key, obj, opts...)
}

// List lists from the cache.
func (r monitorReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.cached.List(ctx, list, opts...)
}
