package clusters

import (
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestNewScheme(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	s, err := NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	tests := []struct {
		name string
		gvk  schema.GroupVersionKind
	}{
		{name: "When a manager reads Deployments, it should know them", gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}},
		{name: "When a manager watches CRDs, it should know them", gvk: apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")},
		{name: "When a manager reads the Infrastructure, it should know it", gvk: schema.GroupVersionKind{Group: "config.openshift.io", Version: "v1", Kind: "Infrastructure"}},
		{name: "When a manager writes ClusterCSIDriver conditions, it should know it", gvk: schema.GroupVersionKind{Group: "operator.openshift.io", Version: "v1", Kind: "ClusterCSIDriver"}},
		{name: "When the control-plane manager reads the HostedControlPlane, it should know it", gvk: schema.GroupVersionKind{Group: "hypershift.openshift.io", Version: "v1beta1", Kind: "HostedControlPlane"}},
		{name: "When the guest manager applies a VolumeSnapshotClass, it should know it", gvk: schema.GroupVersionKind{Group: "snapshot.storage.k8s.io", Version: "v1", Kind: "VolumeSnapshotClass"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			g.Expect(s.Recognizes(tt.gvk)).To(BeTrue())
		})
	}
}

func TestEstablished(t *testing.T) {
	t.Parallel()
	cond := func(typ apiextensionsv1.CustomResourceDefinitionConditionType, status apiextensionsv1.ConditionStatus) apiextensionsv1.CustomResourceDefinitionCondition {
		return apiextensionsv1.CustomResourceDefinitionCondition{Type: typ, Status: status}
	}
	tests := []struct {
		name  string
		conds []apiextensionsv1.CustomResourceDefinitionCondition
		want  bool
	}{
		{name: "When the CRD has no conditions yet, it should not be established"},
		{
			name:  "When names are accepted but the CRD is not established yet, it should not be established",
			conds: []apiextensionsv1.CustomResourceDefinitionCondition{cond(apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionTrue), cond(apiextensionsv1.Established, apiextensionsv1.ConditionFalse)},
		},
		{
			name:  "When Established is True, it should be established",
			conds: []apiextensionsv1.CustomResourceDefinitionCondition{cond(apiextensionsv1.NamesAccepted, apiextensionsv1.ConditionTrue), cond(apiextensionsv1.Established, apiextensionsv1.ConditionTrue)},
			want:  true,
		},
		{
			name:  "When Established is Unknown, it should not be established",
			conds: []apiextensionsv1.CustomResourceDefinitionCondition{cond(apiextensionsv1.Established, apiextensionsv1.ConditionUnknown)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			crd := &apiextensionsv1.CustomResourceDefinition{Status: apiextensionsv1.CustomResourceDefinitionStatus{Conditions: tt.conds}}
			g.Expect(Established(crd)).To(Equal(tt.want))
		})
	}
}
