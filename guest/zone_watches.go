package guest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/cinder-csi-operator/cinder-csi-operator/guest/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/access"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
)

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
	for _, k := range []string{zoneLabel, names.TopologyKey} {
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

// readNodeZones returns the nodes of each compute zone when the zone warning needs them (see
// watchesNodes), else nil. Under RBAC that does not let the operator watch nodes (it asks once,
// and says so once), the node check is left out.
func (r *Reconciler) readNodeZones(ctx context.Context, f desired.Features) (map[string]int, error) {
	if !watchesNodes(f) {
		return nil, nil
	}
	may, err := r.nodes.Open(ctx, r.Guest, "", "", "nodes", func() error {
		if err := r.controller.Watch(clusters.Watch(r.cache, nodeMetadata(), nodeZoneChanged)); err != nil {
			return fmt.Errorf("watching nodes: %w", err)
		}
		return nil
	}, "Nodes may not be listed and watched: the zone warning leaves out nodes outside the volume zones")
	if !may || err != nil {
		return nil, err
	}
	list := nodeMetadataList()
	if err := apply.List(ctx, r.Guest, r.errCluster(), list); err != nil {
		return nil, err
	}
	return nodeZones(list.Items), nil
}

// claimsUnknown is the count retireZoneClasses gives a class kept because the operator may not
// list and watch claims to count them.
const claimsUnknown = -1

// claimClassIndex is the cache index of claims by the StorageClass they name (see claimClass).
const claimClassIndex = "spec.storageClassName"

// claimClass returns the StorageClass a claim names: spec.storageClassName, else the beta
// annotation some old claims carry instead; "" when it names none.
func claimClass(c *corev1.PersistentVolumeClaim) string {
	if c.Spec.StorageClassName != nil {
		return *c.Spec.StorageClassName
	}
	return c.Annotations[corev1.BetaStorageClassAnnotation]
}

// claimClassKeys is the extractor of claimClassIndex.
func claimClassKeys(obj client.Object) []string {
	c, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return nil
	}
	if name := claimClass(c); name != "" {
		return []string{name}
	}
	return nil
}

// claimClassOnly is the claim cache's transform: it keeps of each claim what claimsByClass and the
// watch's predicate read (its name, the class it names, its phase), so that the cache of a guest
// of ten thousand claims holds little more than their names. Any other object (a tombstone)
// passes unchanged.
func claimClassOnly(obj any) (any, error) {
	c, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return obj, nil
	}
	out := &corev1.PersistentVolumeClaim{
		TypeMeta:   c.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name, UID: c.UID, ResourceVersion: c.ResourceVersion},
		Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: c.Spec.StorageClassName},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: c.Status.Phase},
	}
	if beta, ok := c.Annotations[corev1.BetaStorageClassAnnotation]; ok {
		out.Annotations = map[string]string{corev1.BetaStorageClassAnnotation: beta}
	}
	return out, nil
}

// claimCache caches the claims of every namespace (an empty Namespaces overrides the cache's
// default of the operator's namespace) as claimClassOnly leaves them. The API server cannot
// select claims by class (a claim's only field selectors are its name and namespace), so the
// whole kind is watched, and only while claimWatch runs.
var claimCache = cache.ByObject{Namespaces: map[string]cache.Config{}, Transform: claimClassOnly}

// claimWatch watches the guest's claims while a per-zone class is to be retired, and only then:
// the reconciler reads the claims of each such class from the cache, by claimClassIndex, and a
// claim of one of them that is added, deleted or changes phase triggers a reconcile, so that a
// class is deleted as soon as its last claim is, without reading anything at rest. The informer
// is removed again at the first reconcile under managementState Managed that has nothing to
// retire, so that a guest without a kept class holds no claim in memory.
type claimWatch struct {
	// gate starts the watch once the operator may list and watch claims in every namespace.
	gate access.Gate

	// classesMu guards classes, which the watch's predicate reads from the informer's
	// goroutine (a lock of its own, so that no event waits for a watch's start).
	classesMu sync.Mutex
	classes   map[string]bool
}

// retiring sets the classes whose claims' events pass.
func (w *claimWatch) retiring(classes []string) {
	w.classesMu.Lock()
	defer w.classesMu.Unlock()
	w.classes = map[string]bool{}
	for _, c := range classes {
		w.classes[c] = true
	}
}

// retired reports whether obj is a claim of a class being retired.
func (w *claimWatch) retired(obj client.Object) bool {
	c, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return false
	}
	w.classesMu.Lock()
	defer w.classesMu.Unlock()
	return w.classes[claimClass(c)]
}

// changed passes the claim events that can change whether a class being retired is still used:
// a claim of one added or deleted, or one whose phase changed (a Lost claim does not count).
func (w *claimWatch) changed() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return w.retired(e.Object) },
		DeleteFunc: func(e event.DeleteEvent) bool { return w.retired(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return false
			}
			if !w.retired(e.ObjectOld) && !w.retired(e.ObjectNew) {
				return false
			}
			o, oldOK := e.ObjectOld.(*corev1.PersistentVolumeClaim)
			n, newOK := e.ObjectNew.(*corev1.PersistentVolumeClaim)
			return oldOK && newOK && (o.Status.Phase != n.Status.Phase || claimClass(o) != claimClass(n))
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// start makes the cache index and watch claims (once, through gate).
func (w *claimWatch) start(ctx context.Context, c cache.Cache, ctl controller.Controller) error {
	// IndexField creates the informer, which a started cache starts at once; the index is
	// added to it before anything reads it.
	if err := c.IndexField(ctx, &corev1.PersistentVolumeClaim{}, claimClassIndex, claimClassKeys); err != nil {
		return fmt.Errorf("indexing claims by StorageClass: %w", err)
	}
	if err := ctl.Watch(clusters.Watch(c, &corev1.PersistentVolumeClaim{}, w.changed())); err != nil {
		// Without the watch nothing would notice a claim's deletion: start again next time,
		// with a new informer (an index cannot be added twice to one).
		if rmErr := c.RemoveInformer(ctx, &corev1.PersistentVolumeClaim{}); rmErr != nil {
			err = errors.Join(err, rmErr)
		}
		return fmt.Errorf("watching claims: %w", err)
	}
	return nil
}

// stop removes the claim informer, if it runs; the controller's watch of it then receives
// nothing more.
func (w *claimWatch) stop(ctx context.Context, c cache.Cache) error {
	return w.gate.Close(func() error {
		if err := c.RemoveInformer(ctx, &corev1.PersistentVolumeClaim{}); err != nil {
			return fmt.Errorf("stopping the claim watch: %w", err)
		}
		return nil
	})
}

// retireZoneClasses deletes each of the named per-zone classes that no claim uses (see
// claimsByClass) and returns the claims of those it keeps. The claims are read from the cache
// (see claimWatch), which watches them only while there is a class to retire. When the operator
// may not list and watch claims, every class is kept with claimsUnknown; when the cache cannot
// be read, every class is kept and the error returned.
func (r *Reconciler) retireZoneClasses(ctx context.Context, appliers plan.Appliers, classes []string) (map[string]int, error) {
	r.claims.retiring(classes)
	if len(classes) == 0 {
		return nil, r.claims.stop(ctx, r.cache)
	}
	log := ctrl.LoggerFrom(ctx)
	may, err := r.claims.gate.Open(ctx, r.Guest, "", "", "persistentvolumeclaims", func() error {
		return r.claims.start(ctx, r.cache, r.controller)
	}, "Claims may not be listed and watched in every namespace: per-zone StorageClasses no longer asked for are kept", "storageClasses", classes)
	if err != nil {
		return nil, err
	}
	if !may {
		kept := map[string]int{}
		for _, name := range classes {
			kept[name] = claimsUnknown
		}
		return kept, nil
	}
	inUse := map[string]int{}
	for _, name := range classes {
		var list corev1.PersistentVolumeClaimList
		if err := apply.List(ctx, r.Guest, r.errCluster(), &list, client.MatchingFields{claimClassIndex: name}); err != nil {
			return nil, fmt.Errorf("reading the claims of StorageClasses no longer asked for: %w", err)
		}
		maps.Copy(inUse, claimsByClass(list.Items, classes))
	}
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
		steps = append(steps, plan.Step{Cluster: apply.ClusterGuest, Group: desired.GroupClasses, Object: sc})
	}
	if len(kept) == 0 {
		kept = nil
	}
	return kept, appliers.Delete(ctx, log, steps)
}
