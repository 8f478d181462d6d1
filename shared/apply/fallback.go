package apply

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// UpdateFallback lets an Applier write objects of some kinds with create and update once the API
// server has forbidden it to patch them, and remembers, for the life of the process, the kinds
// for which that happened.
//
// Server-side apply is a PATCH. cluster-storage-operator grants the ServiceAccount of the
// operator it starts (csi-operator's, whose image this operator replaces) create and update but
// no patch on CSIDrivers, StorageClasses and VolumeSnapshotClasses, because library-go writes
// those with create and update. Under that RBAC the first apply of such a kind is refused once;
// from then on the applier creates a missing object, and updates an existing one only when a value
// it sets differs, merging its values into the live object so that what others set (the default
// StorageClass annotation, labels, fields of the replaced operator) stays. What the fallback
// cannot do is remove a field the operator set before and no longer sets: that needs the field
// ownership only an apply has.
//
// The zero value falls back for no kind. One UpdateFallback is shared by the appliers of one
// reconciler, so that the switch is logged once, not on every reconcile.
type UpdateFallback struct {
	kinds map[schema.GroupKind]bool
	mu    sync.Mutex
	on    map[schema.GroupKind]bool
}

// NewUpdateFallback returns an UpdateFallback for the given kinds.
func NewUpdateFallback(kinds ...schema.GroupKind) *UpdateFallback {
	f := &UpdateFallback{kinds: map[schema.GroupKind]bool{}, on: map[schema.GroupKind]bool{}}
	for _, k := range kinds {
		f.kinds[k] = true
	}
	return f
}

// Active reports whether objects of kind gk are written with create and update.
func (f *UpdateFallback) Active(gk schema.GroupKind) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.on[gk]
}

// activate switches kind gk to create and update if err is a refusal of the API server and the
// kind may fall back, and reports whether it did. The first switch of a kind is logged.
func (f *UpdateFallback) activate(ctx context.Context, gk schema.GroupKind, err error) bool {
	if f == nil || !f.kinds[gk] || !apierrors.IsForbidden(err) {
		return false
	}
	f.mu.Lock()
	first := !f.on[gk]
	f.on[gk] = true
	f.mu.Unlock()
	if first {
		logf.FromContext(ctx).Info("Server-side apply forbidden, writing with create and update from now on",
			"kind", gk.String(), "reason", err.Error())
	}
	return true
}

// WithUpdateFallback makes the applier fall back to create and update as f says, and returns a.
func (a *Applier) WithUpdateFallback(f *UpdateFallback) *Applier {
	a.Fallback = f
	return a
}

// createOrUpdate writes desired (as prepared for an apply) with create, when live is nil, or with
// an update of live into which desired's values are merged, unless live already holds them all.
func (a *Applier) createOrUpdate(ctx context.Context, gvk schema.GroupVersionKind, desired map[string]any, live client.Object) (Result, error) {
	key := client.ObjectKey{Namespace: nestedString(desired, "metadata", "namespace"), Name: nestedString(desired, "metadata", "name")}
	if live == nil {
		u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(desired)}
		if err := a.Client.Create(ctx, u, client.FieldOwner(a.Owner)); err != nil {
			return Unchanged, a.objectError(OpApply, gvk, key, err)
		}
		return Applied, nil
	}
	liveMap, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		return Unchanged, a.objectError(OpApply, gvk, key, err)
	}
	if holds(desired, liveMap) {
		return Unchanged, nil
	}
	merged := runtime.DeepCopyJSON(liveMap)
	mergeValues(merged, desired)
	// Without managedFields the API server keeps the recorded ones and adds this update's; sent,
	// they would replace them. The resourceVersion stays: a concurrent change fails the update
	// with a conflict and the reconcile is retried.
	if meta, ok := merged["metadata"].(map[string]any); ok {
		delete(meta, "managedFields")
	}
	delete(merged, "status")
	u := &unstructured.Unstructured{Object: merged}
	u.SetGroupVersionKind(gvk)
	if err := a.Client.Update(ctx, u, client.FieldOwner(a.Owner)); err != nil {
		return Unchanged, a.objectError(OpApply, gvk, key, err)
	}
	return Applied, nil
}

// holds reports whether every value desired sets is already in live; lists compare whole.
func holds(desired, live map[string]any) bool {
	for k, v := range desired {
		if k == "apiVersion" || k == "kind" {
			continue
		}
		if !subset(v, live[k], nil) {
			return false
		}
	}
	return true
}

// mergeValues sets every value of src in dst: maps are merged key by key, anything else (lists
// included) replaces what dst has.
func mergeValues(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = runtime.DeepCopyJSONValue(v)
	}
}

func nestedString(m map[string]any, fields ...string) string {
	s, _, _ := unstructured.NestedString(m, fields...)
	return s
}
