package apply_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
)

// noPatch is a client under RBAC that grants create and update but no patch: every apply is
// refused, and the applies are counted.
func noPatch(t *testing.T, objs ...client.Object) (client.Client, *int) {
	t.Helper()
	s := runtime.NewScheme()
	if err := storagev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	applies := 0
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
			applies++
			return apierrors.NewForbidden(schema.GroupResource{Group: storagev1.GroupName, Resource: "storageclasses"}, "standard-csi", nil)
		},
	}).Build()
	return c, &applies
}

func desiredClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "standard-csi", Labels: map[string]string{"app.kubernetes.io/managed-by": "cinder-csi-operator"}},
		Provisioner: "cinder.csi.openstack.org",
		Parameters:  map[string]string{"csi.storage.k8s.io/fstype": "ext4"},
	}
}

func TestUpdateFallback(t *testing.T) {
	t.Parallel()
	storageClass := schema.GroupKind{Group: storagev1.GroupName, Kind: "StorageClass"}

	t.Run("When a patch of the kind is forbidden, it should create the object and not patch again", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		c, applies := noPatch(t)
		f := apply.NewUpdateFallback(storageClass)
		a := apply.New(c, "owner").WithUpdateFallback(f)
		res, err := a.Apply(t.Context(), desiredClass())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Applied))
		g.Expect(f.Active(storageClass)).To(BeTrue())
		got := &storagev1.StorageClass{}
		g.Expect(c.Get(t.Context(), client.ObjectKey{Name: "standard-csi"}, got)).To(Succeed())
		g.Expect(got.Provisioner).To(Equal("cinder.csi.openstack.org"))

		res, err = a.Apply(t.Context(), desiredClass())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Unchanged), "the live object holds every value")
		g.Expect(*applies).To(Equal(1), "one refused patch, then create and update only")
	})

	t.Run("When the live object has fields of others, an update should keep them and add the operator's", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		live := desiredClass()
		live.Labels = map[string]string{"team": "storage"}
		live.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "false"}
		c, _ := noPatch(t, live)
		a := apply.New(c, "owner").WithUpdateFallback(apply.NewUpdateFallback(storageClass))
		_, err := a.Apply(t.Context(), desiredClass())
		g.Expect(err).NotTo(HaveOccurred())
		got := &storagev1.StorageClass{}
		g.Expect(c.Get(t.Context(), client.ObjectKey{Name: "standard-csi"}, got)).To(Succeed())
		g.Expect(got.Labels).To(Equal(map[string]string{"team": "storage", "app.kubernetes.io/managed-by": "cinder-csi-operator"}))
		g.Expect(got.Annotations).To(HaveKeyWithValue("storageclass.kubernetes.io/is-default-class", "false"))
	})

	t.Run("When the kind may not fall back, the refusal should be returned", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		c, _ := noPatch(t)
		a := apply.New(c, "owner").WithUpdateFallback(apply.NewUpdateFallback(schema.GroupKind{Group: storagev1.GroupName, Kind: "CSIDriver"}))
		_, err := a.Apply(t.Context(), desiredClass())
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	})
}
