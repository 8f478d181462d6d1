package guest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
)

// zoneClassRecheck is how often a per-zone class kept for its claims is checked again: claims are
// not watched (a guest may have thousands, and only this rare case needs them), so their deletion
// is noticed at the next check. Short, so that the warning clears within seconds of the last
// claim's deletion; the list it costs runs only while a class is kept, a state that lasts until
// an administrator acts.
const zoneClassRecheck = 10 * time.Second

// claimsPageSize bounds one page of the claims list.
const claimsPageSize = 500

// nodeMetadata returns the object the guest manager watches nodes as: metadata only, since it
// needs nothing but two labels of each node, and a node's status changes all the time.
func nodeMetadata() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}}
}

// nodeMetadataList returns the list type of nodeMetadata.
func nodeMetadataList() *metav1.PartialObjectMetadataList {
	return &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NodeList"}}
}

// nodeZonesOnly is the node cache's transform: it keeps of each node its name, resource version
// and zone labels, so that a guest of a thousand nodes costs the cache little more than their
// names. Any other object (a tombstone) passes unchanged.
func nodeZonesOnly(obj any) (any, error) {
	n, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	out := &metav1.PartialObjectMetadata{
		TypeMeta:   n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion},
	}
	for _, k := range []string{zoneLabel, topologyKey} {
		if v, ok := n.Labels[k]; ok {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[k] = v
		}
	}
	return out, nil
}

// nodeCache caches nodes as nodeZonesOnly leaves them.
var nodeCache = cache.ByObject{Transform: nodeZonesOnly}

// nodeZoneChanged passes the node events that can change the zone warning: a node added or
// deleted, or one of its zone labels changed; not the status and heartbeat updates of every node.
var nodeZoneChanged = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return true },
	DeleteFunc: func(event.DeleteEvent) bool { return true },
	UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return true
		}
		return nodeComputeZone(e.ObjectOld.GetLabels()) != nodeComputeZone(e.ObjectNew.GetLabels())
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// nodeWatch starts the node watch once, when the zone warning first needs the nodes: a guest
// without topology never lists them.
type nodeWatch struct {
	mu      sync.Mutex
	started bool
}

// readNodeZones returns the nodes of each compute zone when the zone warning needs them (see
// watchesNodes), else nil. Under RBAC that does not let the operator watch nodes (it asks once,
// and says so once), the node check is left out.
func (r *Reconciler) readNodeZones(ctx context.Context, f features) (map[string]int, error) {
	if !watchesNodes(f) {
		return nil, nil
	}
	may, denied, err := r.nodeAccess.Allowed(ctx, r.Guest, "", "", "nodes", "list", "watch")
	if err != nil {
		return nil, err
	}
	if denied {
		ctrl.LoggerFrom(ctx).Info("Nodes may not be listed and watched: the zone warning leaves out nodes outside the volume zones")
	}
	if !may {
		return nil, nil
	}
	r.nodes.mu.Lock()
	if !r.nodes.started {
		if err := r.controller.Watch(clusters.Watch(r.cache, nodeMetadata(), nodeZoneChanged)); err != nil {
			r.nodes.mu.Unlock()
			return nil, fmt.Errorf("watching nodes: %w", err)
		}
		r.nodes.started = true
	}
	r.nodes.mu.Unlock()
	list := nodeMetadataList()
	if err := apply.List(ctx, r.Guest, r.errCluster(), list); err != nil {
		return nil, err
	}
	return nodeZones(list.Items), nil
}

// retireZoneClasses deletes each of the named per-zone classes that no claim uses (see
// claimsByClass) and returns the claims of those it keeps. The claims are listed from the API
// server, page by page, only when there is a class to retire. When they cannot be listed, every
// class is kept and the error returned.
func (r *Reconciler) retireZoneClasses(ctx context.Context, appliers plan.Appliers, classes []string) (map[string]int, error) {
	if len(classes) == 0 {
		return nil, nil
	}
	var claims []corev1.PersistentVolumeClaim
	opts := &client.ListOptions{Limit: claimsPageSize}
	for {
		var page corev1.PersistentVolumeClaimList
		if err := apply.List(ctx, r.GuestAPI, r.errCluster(), &page, opts); err != nil {
			return nil, fmt.Errorf("listing the claims of StorageClasses no longer asked for: %w", err)
		}
		claims = append(claims, page.Items...)
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	inUse := claimsByClass(claims, classes)
	log := ctrl.LoggerFrom(ctx)
	var steps []plan.Step
	kept := map[string]int{}
	for _, name := range classes {
		if n := inUse[name]; n > 0 {
			kept[name] = n
			log.V(2).Info("Keeping a per-zone StorageClass for its claims", "StorageClass", klog.KRef("", name), "claims", n)
			continue
		}
		sc := &storagev1.StorageClass{}
		sc.SetGroupVersionKind(storagev1.SchemeGroupVersion.WithKind("StorageClass"))
		sc.Name = name
		steps = append(steps, plan.Step{Cluster: plan.Guest, Group: groupClasses, Object: sc})
	}
	if len(kept) == 0 {
		kept = nil
	}
	return kept, appliers.Delete(ctx, log, steps)
}

// applyRecreating deletes the objects of p.Recreate, then applies p.Apply: the recreated objects
// with an applier that reads the API server (the cache still holds them for a moment after their
// deletion), the others as usual. It returns the failed groups, as plan.Appliers.Apply does.
func (r *Reconciler) applyRecreating(ctx context.Context, appliers plan.Appliers, p *Plan) map[string]error {
	log := ctrl.LoggerFrom(ctx)
	failed := map[string]error{}
	recreated := map[string]bool{}
	for _, st := range p.Recreate {
		recreated[stepKey(st)] = true
		log.Info("Recreating, since a field that cannot change differs", "kind", plan.Kind(st.Object), "object", klog.KObj(st.Object))
	}
	if len(p.Recreate) > 0 {
		if err := appliers.Delete(ctx, log, p.Recreate); err != nil {
			failed[groupClasses] = err
		}
	}
	var cached, fresh []plan.Step
	for _, st := range p.Apply {
		if recreated[stepKey(st)] {
			fresh = append(fresh, st)
		} else {
			cached = append(cached, st)
		}
	}
	uncached := r.applier()
	uncached.Reader = r.GuestAPI
	for _, res := range []map[string]error{appliers.Apply(ctx, log, cached), plan.Appliers{plan.Guest: uncached}.Apply(ctx, log, fresh)} {
		for g, err := range res {
			failed[g] = errors.Join(failed[g], err)
		}
	}
	return failed
}

// stepKey names a step's object by Go type and name (the steps here are cluster-scoped).
func stepKey(st plan.Step) string {
	return fmt.Sprintf("%T/%s", st.Object, st.Object.GetName())
}
