package clusters

import (
	"testing"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

func TestCarriesConditions(t *testing.T) {
	t.Parallel()
	driver := func(types ...string) *operatorv1.ClusterCSIDriver {
		d := &operatorv1.ClusterCSIDriver{}
		d.Name = names.ClusterCSIDriverName
		for _, typ := range types {
			d.Status.Conditions = append(d.Status.Conditions, operatorv1.OperatorCondition{Type: typ, Status: operatorv1.ConditionTrue})
		}
		return d
	}
	// The guest manager's ClusterCSIDriver predicate.
	p := predicate.Or(DriverChanged, CarriesConditions(names.CSIOperatorConditions...))
	tests := []struct {
		name     string
		old, new client.Object
		want     bool
	}{
		{
			name: "When a status write adds one of csi-operator's conditions, it should pass",
			old:  driver(names.ConditionNodeAvailable), new: driver(names.ConditionNodeAvailable, "ConfigSyncDegraded"), want: true,
		},
		{
			name: "When a status write leaves only this operator's conditions, it should be filtered out",
			old:  driver("ConfigSyncDegraded"), new: driver(names.ConditionNodeAvailable),
		},
		{
			name: "When the object is not a ClusterCSIDriver, it should be filtered out",
			old:  &corev1.ConfigMap{}, new: &corev1.ConfigMap{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			g.Expect(p.Update(event.UpdateEvent{ObjectOld: tt.old, ObjectNew: tt.new})).To(Equal(tt.want))
		})
	}
}
