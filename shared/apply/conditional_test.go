package apply

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestApplier_Conditional: a desired object that carries the resourceVersion its plan read is
// applied only onto that version of the live object, so a cache that lags behind a user's edit
// cannot write the old value back.
func TestApplier_Conditional(t *testing.T) {
	t.Parallel()
	const key = "storageclass.kubernetes.io/is-default-class"
	class := func(isDefault string) *storagev1.StorageClass {
		return &storagev1.StorageClass{
			ObjectMeta:  metav1.ObjectMeta{Name: "standard-csi", Annotations: map[string]string{key: isDefault}},
			Provisioner: "cinder.csi.openstack.org",
		}
	}
	// sent records the resourceVersion of each apply request's body ("" when it has none).
	recording := func(sent *[]string) interceptor.Funcs {
		return interceptor.Funcs{Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			b, err := json.Marshal(obj)
			if err != nil {
				return err
			}
			var u unstructured.Unstructured
			if err := u.UnmarshalJSON(b); err != nil {
				return err
			}
			*sent = append(*sent, u.GetResourceVersion())
			return c.Apply(ctx, obj, opts...)
		}}
	}

	t.Run("When the live object changed since the plan read it, the apply should be refused, without an error, and the change stand", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		var sent []string
		c := fakeClient(t, recording(&sent), class("false"))
		read := &storagev1.StorageClass{}
		g.Expect(c.Get(t.Context(), client.ObjectKey{Name: "standard-csi"}, read)).To(Succeed())
		// A user makes the class the default after the operator's cache read it.
		edited := read.DeepCopy()
		edited.Annotations[key] = "true"
		g.Expect(c.Update(t.Context(), edited, client.FieldOwner("someone"))).To(Succeed())

		stale := class("false")
		stale.ResourceVersion = read.ResourceVersion
		a := New(c, "owner")
		a.Reader = readerFunc(func(_ context.Context, _ client.ObjectKey, obj client.Object) error {
			read.DeepCopyInto(obj.(*storagev1.StorageClass))
			return nil
		})
		res, err := a.Apply(t.Context(), stale)
		g.Expect(err).NotTo(HaveOccurred(), "a refused conditional apply waits for the watch, it is no failure")
		g.Expect(res).To(Equal(Unchanged))
		g.Expect(sent).To(Equal([]string{read.ResourceVersion}))
		got := &storagev1.StorageClass{}
		g.Expect(c.Get(t.Context(), client.ObjectKey{Name: "standard-csi"}, got)).To(Succeed())
		g.Expect(got.Annotations).To(HaveKeyWithValue(key, "true"))
	})

	t.Run("When the live object is as the plan read it, the apply should carry its version and succeed", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		var sent []string
		c := fakeClient(t, recording(&sent), class("false"))
		read := &storagev1.StorageClass{}
		g.Expect(c.Get(t.Context(), client.ObjectKey{Name: "standard-csi"}, read)).To(Succeed())
		desired := class("true")
		desired.ResourceVersion = read.ResourceVersion
		res, err := New(c, "owner").Apply(t.Context(), desired)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(Applied))
		g.Expect(sent).To(Equal([]string{read.ResourceVersion}))
	})

	t.Run("When the desired object has no resourceVersion, the apply should carry none", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		var sent []string
		c := fakeClient(t, recording(&sent))
		res, err := New(c, "owner").Apply(t.Context(), class("true"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(Applied))
		g.Expect(sent).To(Equal([]string{""}))
	})
}
