package conditions

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	operatorv1 "github.com/openshift/api/operator/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
)

// patchOp is one JSON patch (RFC 6902) operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// removalPatch returns the JSON patch that removes from conds every condition whose type is in
// types, and those types in list order; nil when there is none. Each removal is preceded by a
// test of the type at its index, so that a list another writer changed since it was read fails
// the whole patch instead of losing someone else's condition. Removals run from the last index
// down, so that each leaves the indices of the ones still to come unchanged.
func removalPatch(conds []operatorv1.OperatorCondition, types []string) ([]byte, []string, error) {
	var ops []patchOp
	var removed []string
	for i := len(conds) - 1; i >= 0; i-- {
		if !slices.Contains(types, conds[i].Type) {
			continue
		}
		path := fmt.Sprintf("/status/conditions/%d", i)
		ops = append(ops,
			patchOp{Op: "test", Path: path + "/type", Value: conds[i].Type},
			patchOp{Op: "remove", Path: path})
		removed = append(removed, conds[i].Type)
	}
	if len(ops) == 0 {
		return nil, nil, nil
	}
	slices.Reverse(removed)
	patch, err := json.Marshal(ops)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the JSON patch: %w", err)
	}
	return patch, removed, nil
}

// RemoveTypes removes from the ClusterCSIDriver every condition whose type is in types, judged
// by the conditions driver carries (as read from the cache), with one JSON patch of the status
// subresource through a; nothing is sent when there is none. Only those list entries go: the
// conditions of every other writer, and their field ownership, stay as they are. If the list
// changed since driver was read the patch fails whole, and the next reconcile, which reads the
// change, tries again.
func RemoveTypes(ctx context.Context, a *apply.Applier, driver *operatorv1.ClusterCSIDriver, types []string) error {
	patch, removed, err := removalPatch(driver.Status.Conditions, types)
	if err != nil || patch == nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Removing conditions of another operator from the ClusterCSIDriver", "types", removed)
	target := &operatorv1.ClusterCSIDriver{ObjectMeta: metav1.ObjectMeta{Name: driver.Name}}
	if err := a.PatchStatus(ctx, target, patch); err != nil {
		return fmt.Errorf("removing the ClusterCSIDriver conditions %v: %w", removed, err)
	}
	return nil
}
