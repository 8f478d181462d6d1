package apply

import (
	"context"
	"encoding/json"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Record sets one annotation on the live object obj as the applier's owner: a record of what the
// cluster did (a rollout seen complete), not part of any desired state, so an apply that leaves it
// out never removes it when Owner is a field owner of its own.
//
// It is a merge patch of that annotation only, with obj's UID as a precondition, so that a
// record never lands on an object that replaced obj. An object gone or replaced meanwhile is not
// an error: its own events bring the reconciler back to decide again.
func (a *Applier) Record(ctx context.Context, obj client.Object, key, value string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         obj.GetUID(),
		"annotations": map[string]string{key: value},
	}})
	if err != nil {
		return err
	}
	target := obj.DeepCopyObject().(client.Object)
	err = a.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(a.Owner))
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	gvk, gerr := apiutil.GVKForObject(obj, a.Client.Scheme())
	if gerr != nil {
		gvk = obj.GetObjectKind().GroupVersionKind()
	}
	return a.objectError(OpApply, gvk, client.ObjectKeyFromObject(obj), err)
}
