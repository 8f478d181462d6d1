package apply_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/access"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
)

// managedBy is the label the operator's objects carry and its guest cache selects.
var managedBy = map[string]string{"app.kubernetes.io/managed-by": "cinder-csi-operator"}

// Kinds that fall back under cluster-storage-operator's RBAC.
var (
	csiDriverKind     = schema.GroupKind{Group: storagev1.GroupName, Kind: "CSIDriver"}
	storageClassKind  = schema.GroupKind{Group: storagev1.GroupName, Kind: "StorageClass"}
	snapshotClassKind = schema.GroupKind{Group: snapshotv1.GroupName, Kind: "VolumeSnapshotClass"}
)

// rbac is the API server's answer to the operator's patches, and counts its requests.
type rbac struct {
	// patchAllowed says whether a patch (an apply, or adoption's JSON patch) is allowed.
	patchAllowed atomic.Bool
	applies      atomic.Int32
	jsonPatches  atomic.Int32
	creates      atomic.Int32
	updates      atomic.Int32
	reviews      atomic.Int32
}

// noPatch is a client under RBAC that grants create and update and, while r says so, no patch:
// every apply and JSON patch is refused. SelfSubjectAccessReviews of patch are answered as r
// says. Its REST mapper knows the kinds that fall back, so that the applier can name their
// resources.
func noPatch(t *testing.T, r *rbac, funcs interceptor.Funcs, objs ...client.Object) client.Client {
	t.Helper()
	s, err := clusters.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(storagev1.SchemeGroupVersion.WithKind("CSIDriver"), meta.RESTScopeRoot)
	mapper.Add(storagev1.SchemeGroupVersion.WithKind("StorageClass"), meta.RESTScopeRoot)
	mapper.Add(snapshotv1.SchemeGroupVersion.WithKind("VolumeSnapshotClass"), meta.RESTScopeRoot)
	forbidden := func(obj client.Object) error {
		return apierrors.NewForbidden(schema.GroupResource{Group: storagev1.GroupName, Resource: "storageclasses"}, obj.GetName(), errors.New("no patch"))
	}
	base := interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			r.applies.Add(1)
			if !r.patchAllowed.Load() {
				return apierrors.NewForbidden(schema.GroupResource{Group: storagev1.GroupName, Resource: "storageclasses"}, "", errors.New("no patch"))
			}
			return c.Apply(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			r.jsonPatches.Add(1)
			if !r.patchAllowed.Load() {
				return forbidden(obj)
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if review, ok := obj.(*authorizationv1.SelfSubjectAccessReview); ok {
				r.reviews.Add(1)
				review.Status.Allowed = review.Spec.ResourceAttributes.Verb != "patch" || r.patchAllowed.Load()
				return nil
			}
			r.creates.Add(1)
			if funcs.Create != nil {
				return funcs.Create(ctx, c, obj, opts...)
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			r.updates.Add(1)
			return c.Update(ctx, obj, opts...)
		},
		Get: funcs.Get,
	}
	return fake.NewClientBuilder().WithScheme(s).WithRESTMapper(mapper).WithObjects(objs...).WithInterceptorFuncs(base).Build()
}

// notCached is a cache that holds nothing: the guest's cache, which selects the managed-by label,
// seen from an object someone else created without it.
type notCached struct{}

func (notCached) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
}

func (notCached) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func desiredClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "standard-csi", Labels: managedBy},
		Provisioner: "cinder.csi.openstack.org",
		Parameters:  map[string]string{"csi.storage.k8s.io/fstype": "ext4"},
	}
}

// othersObject is one kind that falls back: the operator's desired object, and the object as
// csi-operator created it, without the operator's label and with an annotation of its own.
type othersObject struct {
	kind    schema.GroupKind
	desired func() client.Object
	others  func() client.Object
}

var othersObjects = []othersObject{
	{
		kind: csiDriverKind,
		desired: func() client.Object {
			return &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "cinder.csi.openstack.org", Labels: managedBy},
				Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(true)}}
		},
		others: func() client.Object {
			return &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "cinder.csi.openstack.org", Annotations: map[string]string{"csi.openshift.io/managed": "true"}},
				Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(true)}}
		},
	},
	{
		kind:    storageClassKind,
		desired: func() client.Object { return desiredClass() },
		others: func() client.Object {
			sc := desiredClass()
			sc.Labels = nil
			sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
			return sc
		},
	},
	{
		kind: snapshotClassKind,
		desired: func() client.Object {
			return &snapshotv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: "standard-csi", Labels: managedBy},
				Driver: "cinder.csi.openstack.org", DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete}
		},
		others: func() client.Object {
			return &snapshotv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: "standard-csi", Annotations: map[string]string{"snapshot.storage.kubernetes.io/is-default-class": "true"}},
				Driver: "cinder.csi.openstack.org", DeletionPolicy: snapshotv1.VolumeSnapshotContentDelete}
		},
	},
}

// expectTakenOver checks that the object others created now carries the operator's label and
// still carries its creator's annotation.
func expectTakenOver(g Gomega, c client.Client, o othersObject) {
	got := o.others()
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(got), got)).To(Succeed())
	g.Expect(got.GetLabels()).To(Equal(managedBy))
	g.Expect(got.GetAnnotations()).To(Equal(o.others().GetAnnotations()))
}

func TestUpdateFallback(t *testing.T) {
	t.Parallel()

	t.Run("When a patch of the kind is forbidden, it should create the object and not patch again", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		r := &rbac{}
		c := noPatch(t, r, interceptor.Funcs{})
		f := apply.NewUpdateFallback(storageClassKind)
		a := apply.New(c, "owner").WithUpdateFallback(f)
		res, err := a.Apply(t.Context(), desiredClass())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Applied))
		g.Expect(f.Active(storageClassKind)).To(BeTrue())
		got := &storagev1.StorageClass{}
		g.Expect(c.Get(t.Context(), client.ObjectKey{Name: "standard-csi"}, got)).To(Succeed())
		g.Expect(got.Provisioner).To(Equal("cinder.csi.openstack.org"))

		res, err = a.Apply(t.Context(), desiredClass())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Unchanged), "the live object holds every value")
		g.Expect(r.applies.Load()).To(BeEquivalentTo(1), "one refused patch, then create and update only")
	})

	t.Run("When the live object has fields of others, an update should keep them and add the operator's", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		live := desiredClass()
		live.Labels = map[string]string{"team": "storage"}
		live.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "false"}
		c := noPatch(t, &rbac{}, interceptor.Funcs{}, live)
		a := apply.New(c, "owner").WithUpdateFallback(apply.NewUpdateFallback(storageClassKind))
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
		c := noPatch(t, &rbac{}, interceptor.Funcs{})
		a := apply.New(c, "owner").WithUpdateFallback(apply.NewUpdateFallback(csiDriverKind))
		_, err := a.Apply(t.Context(), desiredClass())
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	})

	for _, o := range othersObjects {
		t.Run("When a "+o.kind.Kind+" exists on the API server but not in the cache, it should update it on every reconcile, never create it", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			r := &rbac{}
			c := noPatch(t, r, interceptor.Funcs{}, o.others())
			a := apply.New(c, "owner").WithUpdateFallback(apply.NewUpdateFallback(o.kind))
			a.Reader = notCached{}
			// The first reconcile switches to the fallback; the next ones find it on.
			for i := range 3 {
				_, err := a.Apply(t.Context(), o.desired())
				g.Expect(err).NotTo(HaveOccurred(), "reconcile %d", i+1)
			}
			g.Expect(r.creates.Load()).To(BeZero(), "the object was there all along")
			g.Expect(r.updates.Load()).To(BeEquivalentTo(1), "one update adds the label; then the object holds every value")
			expectTakenOver(g, c, o)
		})

		t.Run("When a "+o.kind.Kind+" the cache does not hold is adopted under RBAC without patch, it should update the object adoption read", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			r := &rbac{}
			// The object as the API server returns it: csi-operator's library-go wrote it with
			// an update, so adoption has fields to take over and sends a JSON patch first.
			legacy := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if err := c.Get(ctx, key, obj, opts...); err != nil {
					return err
				}
				obj.SetManagedFields([]metav1.ManagedFieldsEntry{{
					Manager: "csi-operator", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: obj.GetObjectKind().GroupVersionKind().GroupVersion().String(),
					FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{}}}`),
				}})
				return nil
			}}
			c := noPatch(t, r, legacy, o.others())
			a := apply.New(c, "owner").WithUpdateFallback(apply.NewUpdateFallback(o.kind)).Adopting("csi-operator")
			a.Reader = notCached{}
			for i := range 2 {
				_, err := a.Apply(t.Context(), o.desired())
				g.Expect(err).NotTo(HaveOccurred(), "reconcile %d", i+1)
			}
			g.Expect(r.jsonPatches.Load()).To(BeEquivalentTo(1), "the adoption's patch was refused once")
			g.Expect(r.creates.Load()).To(BeZero(), "the object was there all along")
			expectTakenOver(g, c, o)
		})
	}

	t.Run("When adoption finds no field to take over and the apply is forbidden, it should update the object adoption read", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		r := &rbac{}
		o := othersObjects[0]
		c := noPatch(t, r, interceptor.Funcs{}, o.others())
		a := apply.New(c, "owner").WithUpdateFallback(apply.NewUpdateFallback(o.kind)).Adopting("csi-operator")
		a.Reader = notCached{}
		_, err := a.Apply(t.Context(), o.desired())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.applies.Load()).To(BeEquivalentTo(1))
		g.Expect(r.creates.Load()).To(BeZero(), "the object was there all along")
		expectTakenOver(g, c, o)
	})

	t.Run("When someone creates the object between the read and the create, it should read it and update it", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		o := othersObjects[1]
		r := &rbac{}
		raced := interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			if err := c.Create(ctx, o.others()); err != nil {
				return err
			}
			return apierrors.NewAlreadyExists(schema.GroupResource{Group: storagev1.GroupName, Resource: "storageclasses"}, obj.GetName())
		}}
		c := noPatch(t, r, raced)
		a := apply.New(c, "owner").WithUpdateFallback(apply.NewUpdateFallback(o.kind))
		a.Reader = notCached{}
		res, err := a.Apply(t.Context(), o.desired())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Applied))
		g.Expect(r.creates.Load()).To(BeEquivalentTo(1))
		g.Expect(r.updates.Load()).To(BeEquivalentTo(1))
		expectTakenOver(g, c, o)
	})
}

func TestUpdateFallback_Recheck(t *testing.T) {
	t.Parallel()

	t.Run("When a patch is allowed again, it should ask once per interval and go back to server-side apply", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			r := &rbac{}
			c := noPatch(t, r, interceptor.Funcs{})
			f := apply.NewUpdateFallback(storageClassKind)
			a := apply.New(c, "owner").WithUpdateFallback(f)

			_, err := a.Apply(ctx, desiredClass())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(f.Active(storageClassKind)).To(BeTrue())

			// Within the interval: create and update, nothing asked.
			time.Sleep(access.DefaultInterval - time.Second)
			_, err = a.Apply(ctx, desiredClass())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.reviews.Load()).To(BeZero())

			// The interval passed, patch still forbidden: asked once, still falling back.
			time.Sleep(time.Second)
			for range 2 {
				_, err = a.Apply(ctx, desiredClass())
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(r.reviews.Load()).To(BeEquivalentTo(1), "one review per interval")
			g.Expect(f.Active(storageClassKind)).To(BeTrue())
			g.Expect(r.applies.Load()).To(BeEquivalentTo(1), "no refused patch to find out")

			// The administrator grants patch; after the interval the next apply is an apply.
			r.patchAllowed.Store(true)
			time.Sleep(access.DefaultInterval)
			res, err := a.Apply(ctx, desiredClass())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res).To(Equal(apply.Applied))
			g.Expect(f.Active(storageClassKind)).To(BeFalse(), "back to server-side apply")
			g.Expect(r.reviews.Load()).To(BeEquivalentTo(2))
			g.Expect(r.applies.Load()).To(BeEquivalentTo(2))
		})
	})

	t.Run("When the question cannot be answered, it should keep falling back without failing the write", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			c := noPatch(t, &rbac{}, interceptor.Funcs{})
			broken := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if _, ok := obj.(*authorizationv1.SelfSubjectAccessReview); ok {
						return errors.New("connection refused")
					}
					return c.Create(ctx, obj, opts...)
				},
			})
			f := apply.NewUpdateFallback(storageClassKind)
			a := apply.New(broken, "owner").WithUpdateFallback(f)
			_, err := a.Apply(ctx, desiredClass())
			g.Expect(err).NotTo(HaveOccurred())
			time.Sleep(access.DefaultInterval)
			live := desiredClass()
			live.Parameters["type"] = "ssd"
			res, err := a.Apply(ctx, live)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res).To(Equal(apply.Applied))
			g.Expect(f.Active(storageClassKind)).To(BeTrue())
		})
	})
}
