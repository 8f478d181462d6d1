package apply

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestApplier_Create(t *testing.T) {
	t.Parallel()
	ours := func() *storagev1.StorageClass {
		return &storagev1.StorageClass{
			ObjectMeta:  metav1.ObjectMeta{Name: "standard-csi-nova", Labels: map[string]string{"app.kubernetes.io/managed-by": "op"}},
			Provisioner: "cinder.csi.openstack.org", Parameters: map[string]string{"availability": "nova"},
		}
	}

	t.Run("When no object of the name exists, it should create it as the owner", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		var manager string
		c := fakeClient(t, interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			manager = (&client.CreateOptions{}).ApplyOptions(opts).FieldManager
			return c.Create(ctx, obj, opts...)
		}})
		res, err := New(c, "owner").Create(t.Context(), ours())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(Applied))
		g.Expect(manager).To(Equal("owner"))
		var got storagev1.StorageClass
		g.Expect(c.Get(t.Context(), client.ObjectKey{Name: "standard-csi-nova"}, &got)).To(Succeed())
		g.Expect(got.Labels).To(Equal(ours().Labels))
		g.Expect(got.Parameters).To(Equal(ours().Parameters))
	})

	t.Run("When someone else's object has the name, it should leave it and say so", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		users := &storagev1.StorageClass{
			ObjectMeta:  metav1.ObjectMeta{Name: "standard-csi-nova", Labels: map[string]string{"team": "storage"}},
			Provisioner: "example.com/other",
		}
		c := fakeClient(t, interceptor.Funcs{}, users.DeepCopy())
		res, err := New(c, "owner").Create(t.Context(), ours())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(Exists))
		var got storagev1.StorageClass
		g.Expect(c.Get(t.Context(), client.ObjectKey{Name: "standard-csi-nova"}, &got)).To(Succeed())
		g.Expect(got.Labels).To(Equal(users.Labels))
		g.Expect(got.Provisioner).To(Equal(users.Provisioner))
	})

	t.Run("When the create fails, it should return an ObjectError naming the object", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		denied := apierrors.NewForbidden(schema.GroupResource{Group: "storage.k8s.io", Resource: "storageclasses"}, "standard-csi-nova", errors.New("denied"))
		c := fakeClient(t, interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error { return denied }})
		_, err := New(c, "owner").Create(t.Context(), ours())
		var oe *ObjectError
		g.Expect(errors.As(err, &oe)).To(BeTrue())
		g.Expect(oe.Op).To(Equal(OpApply))
		g.Expect(oe.Name).To(Equal("standard-csi-nova"))
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue())
	})
}
