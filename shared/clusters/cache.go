package clusters

import (
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// ByName is the field selector of the object with the given name: the managers list and watch
// the objects they only read one by one, never a whole kind.
func ByName(name string) fields.Selector {
	return fields.OneTermEqualSelector("metadata.name", name)
}

// ManagedSelector selects the objects the operator applies (operand.Managed labels them).
var ManagedSelector = labels.SelectorFromSet(labels.Set{names.ManagedByLabel: names.ManagedByValue})

// Owned caches only the objects of a kind that the operator applies.
var Owned = cache.ByObject{Label: ManagedSelector}
