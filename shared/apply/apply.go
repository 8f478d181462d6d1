// Package apply is the operator's one write path: server-side apply with a fixed field owner and
// forced ownership, which sends nothing when the live object already matches.
//
// Sending an apply that changes nothing still costs a mutating request, an audit record and, for
// some kinds, a watch event in every other client. The operator must be silent at rest, so before
// each apply this package compares the desired object with the live one from the informer cache:
// it skips the request when every field it would set already has the desired value and the field
// owner's managed-field set is exactly the set of fields it would send (otherwise the apply would
// remove a field the owner no longer sets, or take over fields after adoption).
package apply

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Result says what an apply did.
type Result int

const (
	// Unchanged means the live object already matched and no request was sent.
	Unchanged Result = iota
	// Applied means an apply request was sent.
	Applied
	// Deleted means a delete request was sent.
	Deleted
	// Exists means a create found an object of the name already there and left it (see Create).
	Exists
)

// Applier applies objects to one cluster as one field owner.
type Applier struct {
	// Client sends the apply requests.
	Client client.Client
	// Reader reads the live object to compare with; normally the cache-backed client, so the
	// comparison itself costs no request.
	Reader client.Reader
	// Owner is the server-side apply field manager.
	Owner string
	// Adopt names field managers whose Update-style ownership the applier takes over before
	// its first apply to an object: the operator this one replaces. See Adopting.
	Adopt []string
	// Cluster names the cluster Client talks to in the errors the applier returns; it is
	// ClusterUnnamed in a standalone install. See On.
	Cluster Cluster
	// Fallback, when set, names the kinds written with create and update once a patch of
	// theirs was forbidden. See UpdateFallback.
	Fallback *UpdateFallback
}

// New returns an Applier that writes through c, compares against c's reads and applies as owner.
func New(c client.Client, owner string) *Applier {
	return &Applier{Client: c, Reader: c, Owner: owner}
}

// Adopting makes the applier take over the fields that managers, which wrote an object with
// create and update rather than apply (csi-operator's library-go), own on it, and returns a.
//
// A forced apply takes over only the fields it sends: fields an adopted object has and the
// applier does not send (a Secret volume, an env var, a hash annotation of the replaced operator)
// would stay forever under the old manager. So before the first apply to an object that still
// has such a manager, its field set is merged into Owner's (client-go's csaupgrade, as kubectl
// does when it moves from client-side to server-side apply); the apply then removes what Owner
// no longer sends, in the same single change that takes the object over, so a workload rolls
// once.
//
// Adopted objects are often outside the cache (which selects the managed-by label they do not
// carry yet), so when the cache does not have an object it is read once from the API server;
// Client must therefore read unstructured objects uncached, controller-runtime's default. At rest
// every applied object is in the cache and nothing more is read.
func (a *Applier) Adopting(managers ...string) *Applier {
	a.Adopt = managers
	return a
}

// On makes the errors of the applier say that they come from cluster c, and returns a.
func (a *Applier) On(c Cluster) *Applier {
	a.Cluster = c
	return a
}

// Apply server-side-applies obj (its metadata and spec; never its status) unless the live object
// already matches. obj must carry its name (and namespace), and be either of a type the client's
// scheme knows or an *unstructured.Unstructured with its apiVersion and kind. A failed read,
// adoption or apply request is returned as an *ObjectError.
//
// A resourceVersion on obj makes the apply conditional: a plan that took a value from the live
// object (a default-class annotation a user may have changed) sets the resourceVersion it read, and
// the API server refuses the apply when the object changed since. A cache that lags behind a user's
// edit then costs a retry (the watch brings the newer version, and Unchanged is returned meanwhile)
// instead of writing the user's choice over. It is not part of the comparison: an apply that would
// change nothing is still not sent.
func (a *Applier) Apply(ctx context.Context, obj client.Object) (Result, error) {
	return a.apply(ctx, obj, "")
}

// ApplyStatus server-side-applies the status of obj through the status subresource, sending only
// obj's status. It is how each manager writes its own ClusterCSIDriver conditions without
// touching the other manager's. A failed apply request is returned as an *ObjectError with
// OpWriteStatus.
func (a *Applier) ApplyStatus(ctx context.Context, obj client.Object) (Result, error) {
	return a.apply(ctx, obj, "status")
}

// PatchStatus sends patch, a JSON patch, to obj's status subresource as the applier's field
// owner, and decodes the answer into obj. It is the one write that is not an apply: an apply
// removes only what its own field owner set, so the conditions another writer left (csi-operator,
// which this operator replaces) can only go by patch. Nothing is read or compared first: the
// caller builds the patch from what it read and guards it with JSON patch tests, which fail the
// request if the object changed in between. A failed request is returned as an *ObjectError with
// OpWriteStatus.
func (a *Applier) PatchStatus(ctx context.Context, obj client.Object, patch []byte) error {
	if err := a.Client.Status().Patch(ctx, obj, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(a.Owner)); err != nil {
		gvk, gvkErr := apiutil.GVKForObject(obj, a.Client.Scheme())
		if gvkErr != nil {
			return fmt.Errorf("patching the status of %T %s: %w", obj, obj.GetName(), err)
		}
		return a.objectError(OpWriteStatus, gvk, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

func (a *Applier) apply(ctx context.Context, obj client.Object, subresource string) (Result, error) {
	gvk, err := apiutil.GVKForObject(obj, a.Client.Scheme())
	if err != nil {
		return Unchanged, fmt.Errorf("finding the kind of %T: %w", obj, err)
	}
	desired, err := prepare(obj, gvk, subresource)
	if err != nil {
		return Unchanged, err
	}

	live, err := a.live(ctx, gvk, client.ObjectKeyFromObject(obj))
	if err != nil {
		return Unchanged, err
	}
	op := OpApply
	if subresource == "status" {
		op = OpWriteStatus
	}
	key := client.ObjectKeyFromObject(obj)
	if subresource == "" && a.Fallback.stillActive(ctx, a.Client, gvk, key.Namespace) {
		return a.createOrUpdate(ctx, gvk, desired, live)
	}
	adopted := false
	if subresource == "" && (len(a.Adopt) > 0 || updatedBy(live, a.Owner)) {
		var read client.Object
		read, adopted, err = a.adopt(ctx, gvk, key, live)
		// What adopt read from the API server is the live object for what follows: the
		// fallback below must update an object the cache does not hold, not create it again.
		if read != nil {
			live = read
		}
		if err != nil {
			// The adoption is a patch too.
			if a.Fallback.activate(ctx, gvk.GroupKind(), err) {
				return a.createOrUpdate(ctx, gvk, desired, live)
			}
			return Unchanged, err
		}
	}
	if !adopted && live != nil && Matches(desired, live, a.Owner, subresource) {
		return Unchanged, nil
	}

	// An adoption has just patched the object, so its version is no longer the one the plan read;
	// adoption happens once, when the operator takes an object over, and its apply goes
	// unconditionally.
	conditional := obj.GetResourceVersion() != "" && subresource == "" && !adopted
	if conditional {
		desired["metadata"].(map[string]any)["resourceVersion"] = obj.GetResourceVersion()
	}
	u := &unstructured.Unstructured{Object: desired}
	if subresource == "status" {
		err = a.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
			client.FieldOwner(a.Owner), client.ForceOwnership)
	} else {
		err = a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
			client.FieldOwner(a.Owner), client.ForceOwnership)
	}
	if conditional && apierrors.IsConflict(err) {
		// The object changed after the plan read it: the watch that delivers the newer version
		// brings the reconcile back to decide on it. Not a failure to report.
		return Unchanged, nil
	}
	if err != nil {
		if subresource == "" && a.Fallback.activate(ctx, gvk.GroupKind(), err) {
			return a.createOrUpdate(ctx, gvk, desired, live)
		}
		return Unchanged, a.objectError(op, gvk, client.ObjectKeyFromObject(obj), err)
	}
	return Applied, nil
}

// adopt merges the fields the Adopt managers own on the object into Owner's field set, and
// reports whether it did. live is the object from the cache, or nil; then the API server is asked.
// It returns the object it worked from (live, or what the API server returned; nil when the object
// does not exist), also with an error.
//
// Owner itself is adopted too, as the manager of its own updates: an object written with create
// and update while patches were forbidden (see UpdateFallback) has Owner's fields under an Update
// entry, which a forced apply would leave in place, so that a field Owner no longer sets would
// never go. An object Owner only ever applied has no such entry, and nothing is patched for it.
func (a *Applier) adopt(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey, live client.Object) (client.Object, bool, error) {
	if live == nil {
		read, err := a.readServer(ctx, gvk, key)
		if err != nil || read == nil {
			return nil, false, err
		}
		live = read
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(a.Adopt...).Insert(a.Owner), a.Owner)
	if err != nil {
		return live, false, a.objectError(OpAdopt, gvk, key, fmt.Errorf("computing the patch: %w", err))
	}
	if patch == nil {
		return live, false, nil
	}
	// The patch also sets the resourceVersion it was computed from: it fails with a conflict,
	// and the reconcile is retried, if the object changed since. A copy is patched: a refused
	// patch must leave the object as read, for the fallback to update.
	patched := live.DeepCopyObject().(client.Object)
	if err := a.Client.Patch(ctx, patched, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(a.Owner)); err != nil {
		return live, false, a.objectError(OpAdopt, gvk, key, fmt.Errorf("from field managers %v: %w", a.Adopt, err))
	}
	return patched, true, nil
}

// updatedBy reports whether owner wrote obj (its main resource, not a subresource) with an
// update, which only the create and update fallback does.
func updatedBy(obj client.Object, owner string) bool {
	if obj == nil {
		return false
	}
	for _, f := range obj.GetManagedFields() {
		if f.Manager == owner && f.Operation == metav1.ManagedFieldsOperationUpdate && f.Subresource == "" {
			return true
		}
	}
	return false
}

// Create creates obj (its metadata and spec, as Apply would send them) unless an object of its
// name exists, whoever made it: it never writes over an object. It reports Applied when it created
// obj and Exists when the name was taken. It is the first write of an object under a name a user
// may also give one (a per-zone StorageClass): a forced apply would take over a user's object
// made after the cache was read, and a create fails on it instead. Nothing is read first.
//
// The API server records a create's fields as an update by Owner; the first Apply after it
// moves them to Owner's apply entry (see adopt), once. A failed create is returned as an
// *ObjectError with OpApply, as the create of the update fallback is.
func (a *Applier) Create(ctx context.Context, obj client.Object) (Result, error) {
	gvk, err := apiutil.GVKForObject(obj, a.Client.Scheme())
	if err != nil {
		return Unchanged, fmt.Errorf("finding the kind of %T: %w", obj, err)
	}
	desired, err := prepare(obj, gvk, "")
	if err != nil {
		return Unchanged, err
	}
	if err := a.Client.Create(ctx, &unstructured.Unstructured{Object: desired}, client.FieldOwner(a.Owner)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return Exists, nil
		}
		return Unchanged, a.objectError(OpApply, gvk, client.ObjectKeyFromObject(obj), err)
	}
	return Applied, nil
}

// Delete deletes the object named by obj if it exists. Deleting an object that is already gone
// sends nothing when the reader (the cache) already knows it is gone. A failed read or delete
// request is returned as an *ObjectError.
func (a *Applier) Delete(ctx context.Context, obj client.Object) (Result, error) {
	gvk, err := apiutil.GVKForObject(obj, a.Client.Scheme())
	if err != nil {
		return Unchanged, fmt.Errorf("finding the kind of %T: %w", obj, err)
	}
	live, err := a.live(ctx, gvk, client.ObjectKeyFromObject(obj))
	if err != nil {
		return Unchanged, err
	}
	if live == nil {
		return Unchanged, nil
	}
	if err := a.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		if apierrors.IsNotFound(err) {
			return Unchanged, nil
		}
		return Unchanged, a.objectError(OpDelete, gvk, client.ObjectKeyFromObject(obj), err)
	}
	return Deleted, nil
}

// live returns the live object, or nil when it does not exist. A kind outside the client's
// scheme (a CRD's the operator has no Go type for) is read as unstructured; Reader decides
// whether that read is served by a cache.
func (a *Applier) live(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey) (client.Object, error) {
	var cobj client.Object
	obj, err := a.Client.Scheme().New(gvk)
	switch {
	case runtime.IsNotRegisteredError(err):
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		cobj = u
	case err != nil:
		return nil, fmt.Errorf("creating a %s: %w", gvk.Kind, err)
	default:
		var ok bool
		if cobj, ok = obj.(client.Object); !ok {
			return nil, fmt.Errorf("%s is not a client.Object", gvk.Kind)
		}
	}
	if err := a.Reader.Get(ctx, key, cobj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, a.objectError(OpRead, gvk, key, err)
	}
	return cobj, nil
}

// objectError returns err as an *ObjectError about the object of kind gvk named by key.
func (a *Applier) objectError(op Op, gvk schema.GroupVersionKind, key client.ObjectKey, err error) *ObjectError {
	return &ObjectError{
		Op:        op,
		Cluster:   a.Cluster,
		GVK:       gvk,
		Resource:  resourceFor(a.Client, gvk),
		Namespace: key.Namespace,
		Name:      key.Name,
		Err:       err,
	}
}

// prepare turns obj into the map that is sent: with apiVersion and kind, without server-owned
// metadata, without null values (which the typed-to-unstructured conversion produces for unset
// structs such as creationTimestamp), and with only the part the subresource covers.
func prepare(obj client.Object, gvk schema.GroupVersionKind, subresource string) (map[string]any, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	m["apiVersion"] = gvk.GroupVersion().String()
	m["kind"] = gvk.Kind

	meta, _ := m["metadata"].(map[string]any)
	if meta == nil {
		return nil, fmt.Errorf("%s has no metadata", gvk.Kind)
	}
	for _, k := range []string{"creationTimestamp", "resourceVersion", "uid", "generation", "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		delete(meta, k)
	}

	if subresource == "status" {
		// A status apply carries identity and status only: sending metadata or spec would
		// make this owner claim fields it does not mean to manage.
		m = map[string]any{
			"apiVersion": m["apiVersion"],
			"kind":       m["kind"],
			"metadata":   identity(meta),
			"status":     m["status"],
		}
	} else {
		delete(m, "status")
	}
	PruneNulls(m)
	return m, nil
}

func identity(meta map[string]any) map[string]any {
	out := map[string]any{"name": meta["name"]}
	if ns, ok := meta["namespace"]; ok {
		out["namespace"] = ns
	}
	return out
}

// PruneNulls removes null values from the maps in v, recursively, in place. In an apply request
// a null would be read as "no opinion" at best; leaving it out is clearer and keeps the
// comparison honest. The golden fixtures leave nulls out for the same reason.
func PruneNulls(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
				continue
			}
			PruneNulls(e)
		}
	case []any:
		for _, e := range t {
			PruneNulls(e)
		}
	}
}
