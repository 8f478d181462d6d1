package apply

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/access"
)

// UpdateFallback lets an Applier write objects of some kinds with create and update while the
// API server forbids it to patch them, and remembers the kinds for which that happened.
//
// Server-side apply is a PATCH. cluster-storage-operator grants the ServiceAccount of the
// operator it starts (csi-operator's, whose image this operator replaces) create and update but
// no patch on CSIDrivers, StorageClasses and VolumeSnapshotClasses, because library-go writes
// those with create and update. Under that RBAC the first apply of such a kind is refused once;
// from then on the applier creates a missing object, and updates an existing one only when a value
// it sets differs, merging its values into the live object so that what others set (the default
// StorageClass annotation, labels, fields of the replaced operator) stays. What the fallback
// cannot do is remove a field the operator set before and no longer sets: that needs the field
// ownership only an apply has. So while a kind falls back, the applier asks at most once per
// interval (one SelfSubjectAccessReview, not a refused patch that would fill the audit log)
// whether a patch of it is allowed again, and goes back to server-side apply when it is.
//
// The zero value falls back for no kind. One UpdateFallback is shared by the appliers of one
// reconciler, so that a switch is logged once, not on every reconcile.
type UpdateFallback struct {
	// Interval is how often a kind that falls back asks whether it may patch again; zero means
	// access.DefaultInterval.
	Interval time.Duration

	kinds map[schema.GroupKind]bool
	mu    sync.Mutex
	// on holds the kinds that fall back, each with when it was last found unable to patch.
	on map[schema.GroupKind]time.Time
}

// NewUpdateFallback returns an UpdateFallback for the given kinds.
func NewUpdateFallback(kinds ...schema.GroupKind) *UpdateFallback {
	f := &UpdateFallback{kinds: map[schema.GroupKind]bool{}, on: map[schema.GroupKind]time.Time{}}
	for _, k := range kinds {
		f.kinds[k] = true
	}
	return f
}

// activate switches kind gk to create and update if err is a refusal of the API server and the
// kind may fall back, and reports whether it did. The first switch of a kind is logged.
func (f *UpdateFallback) activate(ctx context.Context, gk schema.GroupKind, err error) bool {
	if f == nil || !f.kinds[gk] || !apierrors.IsForbidden(err) {
		return false
	}
	f.mu.Lock()
	_, was := f.on[gk]
	f.on[gk] = time.Now()
	f.mu.Unlock()
	if !was {
		logf.FromContext(ctx).Info("Server-side apply forbidden, writing with create and update until a patch is allowed again",
			"kind", gk.String(), "reason", err.Error())
	}
	return true
}

// stillActive reports whether objects of kind gvk, in namespace ns, are still to be written with
// create and update. Once the interval has passed since the kind last could not patch, it asks c
// whether a patch is allowed now, and if so switches the kind back to server-side apply. A
// failed question keeps the fallback until the next interval: it is no reason to fail a write
// that create and update can do.
func (f *UpdateFallback) stillActive(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, ns string) bool {
	if f == nil {
		return false
	}
	gk := gvk.GroupKind()
	f.mu.Lock()
	since, on := f.on[gk]
	if !on || time.Since(since) < f.interval() {
		f.mu.Unlock()
		return on
	}
	// Claimed before asking, so that concurrent appliers ask once per interval between them.
	f.on[gk] = time.Now()
	f.mu.Unlock()

	resource := resourceFor(c, gvk)
	if resource == "" {
		return true
	}
	log := logf.FromContext(ctx)
	ok, err := access.Allowed(ctx, c, ns, gvk.Group, resource, "patch")
	if err != nil {
		log.V(2).Info("Could not ask whether server-side apply is allowed again", "kind", gk.String(), "reason", err.Error())
		return true
	}
	if !ok {
		return true
	}
	f.mu.Lock()
	delete(f.on, gk)
	f.mu.Unlock()
	log.Info("Server-side apply allowed again, no longer writing with create and update", "kind", gk.String())
	return false
}

func (f *UpdateFallback) interval() time.Duration {
	if f.Interval > 0 {
		return f.Interval
	}
	return access.DefaultInterval
}

// WithUpdateFallback makes the applier fall back to create and update as f says, and returns a.
func (a *Applier) WithUpdateFallback(f *UpdateFallback) *Applier {
	a.Fallback = f
	return a
}

// createOrUpdate writes desired (as prepared for an apply) with create, when the object does not
// exist, or with an update of the live object into which desired's values are merged, unless it
// already holds them all. live is the object as read so far, or nil.
//
// A nil live is not proof that the object is missing: the cache the applier compares with
// usually selects the operator's label, and an object someone else created (csi-operator's
// CSIDriver, which never had that label) is not in it. Creating it would fail with AlreadyExists
// on every reconcile. So the API server is asked first, with an unstructured read, which the
// client serves uncached (see Adopting); and a create that still finds the object there (created
// between the read and the create) reads it and updates it instead.
func (a *Applier) createOrUpdate(ctx context.Context, gvk schema.GroupVersionKind, desired map[string]any, live client.Object) (Result, error) {
	key := client.ObjectKey{Namespace: nestedString(desired, "metadata", "namespace"), Name: nestedString(desired, "metadata", "name")}
	if live == nil {
		var err error
		if live, err = a.readServer(ctx, gvk, key); err != nil {
			return Unchanged, err
		}
	}
	if live == nil {
		u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(desired)}
		createErr := a.Client.Create(ctx, u, client.FieldOwner(a.Owner))
		if createErr == nil {
			return Applied, nil
		}
		if !apierrors.IsAlreadyExists(createErr) {
			return Unchanged, a.objectError(OpApply, gvk, key, createErr)
		}
		var err error
		if live, err = a.readServer(ctx, gvk, key); err != nil {
			return Unchanged, err
		}
		if live == nil {
			// Created and deleted again since: the next reconcile finds out which way it ended.
			return Unchanged, a.objectError(OpApply, gvk, key, createErr)
		}
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

// readServer reads the object of kind gvk named key from the API server, not a cache (an
// unstructured read of Client), and returns nil when it does not exist.
func (a *Applier) readServer(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey) (client.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := a.Client.Get(ctx, key, u); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, a.objectError(OpRead, gvk, key, err)
	}
	return u, nil
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
