package apply

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
)

// These cases need no API server: each makes one request fail and checks what the applier
// returns. What the API server does with requests that succeed is covered by the tests that
// start one.

// fakeClient returns a fake client over the operator's scheme holding objs, whose requests go
// through funcs first. Its REST mapper knows Deployments, ConfigMaps and StorageClasses.
func fakeClient(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) client.WithWatch {
	t.Helper()
	scheme, err := clusters.NewScheme()
	if err != nil {
		t.Fatalf("Building the scheme: %v", err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(deploymentGVK, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"}, meta.RESTScopeRoot)
	return fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
}

// readerFunc is a Reader made of a Get function.
type readerFunc func(ctx context.Context, key client.ObjectKey, obj client.Object) error

func (f readerFunc) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return f(ctx, key, obj)
}

func (readerFunc) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func controllerDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters-demo", Name: "controller"}}
}

var (
	deploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	errDenied     = apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "controller", errors.New("denied"))
)

func TestApplier_Errors(t *testing.T) {
	t.Parallel()
	wantDeployment := func(op Op) *ObjectError {
		return &ObjectError{Op: op, Cluster: ClusterManagement, GVK: deploymentGVK, Resource: "deployments",
			Namespace: "clusters-demo", Name: "controller", Err: errDenied}
	}
	// legacy is the Deployment as csi-operator left it: a field owned through Update.
	legacy := controllerDeployment()
	legacy.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: "legacy", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1",
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`),
	}}

	tests := []struct {
		name    string
		funcs   interceptor.Funcs
		objs    []client.Object
		reader  client.Reader
		adopt   bool
		call    func(ctx context.Context, a *Applier) error
		want    *ObjectError
		wantMsg string
	}{
		{
			name: "When the apply request fails, it should return an ObjectError for the apply",
			funcs: interceptor.Funcs{Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
				return errDenied
			}},
			call: func(ctx context.Context, a *Applier) error {
				_, err := a.Apply(ctx, controllerDeployment())
				return err
			},
			want:    wantDeployment(OpApply),
			wantMsg: "applying Deployment clusters-demo/controller on the management cluster: " + errDenied.Error(),
		},
		{
			name: "When reading the live object fails, it should return an ObjectError for the read",
			funcs: interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return errDenied
			}},
			call: func(ctx context.Context, a *Applier) error {
				_, err := a.Apply(ctx, controllerDeployment())
				return err
			},
			want: wantDeployment(OpRead),
		},
		{
			name: "When the adoption patch fails, it should return an ObjectError for the adoption that names the replaced managers",
			// The fake client drops managed fields, so the cache is a stub that keeps them.
			reader: readerFunc(func(_ context.Context, _ client.ObjectKey, obj client.Object) error {
				legacy.DeepCopyInto(obj.(*appsv1.Deployment))
				return nil
			}),
			funcs: interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
				return errDenied
			}},
			adopt: true,
			call: func(ctx context.Context, a *Applier) error {
				_, err := a.Apply(ctx, controllerDeployment())
				return err
			},
			want:    &ObjectError{Op: OpAdopt, Cluster: ClusterManagement, GVK: deploymentGVK, Resource: "deployments", Namespace: "clusters-demo", Name: "controller"},
			wantMsg: "taking over Deployment clusters-demo/controller on the management cluster: from field managers [legacy]: " + errDenied.Error(),
		},
		{
			name: "When the delete request fails, it should return an ObjectError for the delete",
			objs: []client.Object{controllerDeployment()},
			funcs: interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
				return errDenied
			}},
			call: func(ctx context.Context, a *Applier) error {
				_, err := a.Delete(ctx, controllerDeployment())
				return err
			},
			want:    wantDeployment(OpDelete),
			wantMsg: "deleting Deployment clusters-demo/controller on the management cluster: " + errDenied.Error(),
		},
		{
			name: "When the status apply fails, it should return an ObjectError for the status write",
			funcs: interceptor.Funcs{SubResourceApply: func(context.Context, client.Client, string, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
				return errDenied
			}},
			call: func(ctx context.Context, a *Applier) error {
				u := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "apps/v1", "kind": "Deployment",
					"metadata": map[string]any{"namespace": "clusters-demo", "name": "controller"},
					"status":   map[string]any{"replicas": int64(1)},
				}}
				_, err := a.ApplyStatus(ctx, u)
				return err
			},
			want:    wantDeployment(OpWriteStatus),
			wantMsg: "writing the status of Deployment clusters-demo/controller on the management cluster: " + errDenied.Error(),
		},
		{
			name: "When the status patch fails, it should return an ObjectError for the status write",
			funcs: interceptor.Funcs{SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
				return errDenied
			}},
			call: func(ctx context.Context, a *Applier) error {
				return a.PatchStatus(ctx, controllerDeployment(), []byte(`[{"op":"remove","path":"/status/conditions/0"}]`))
			},
			want:    wantDeployment(OpWriteStatus),
			wantMsg: "writing the status of Deployment clusters-demo/controller on the management cluster: " + errDenied.Error(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			a := New(fakeClient(t, tt.funcs, tt.objs...), "owner").On(ClusterManagement)
			if tt.reader != nil {
				a.Reader = tt.reader
			}
			if tt.adopt {
				a.Adopting("legacy")
			}
			err := tt.call(t.Context(), a)
			oe, ok := errors.AsType[*ObjectError](err)
			g.Expect(ok).To(BeTrue(), "error %v is not an ObjectError", err)
			g.Expect(errors.Is(err, errDenied)).To(BeTrue())
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue())
			got := *oe
			got.Err = nil
			want := *tt.want
			want.Err = nil
			g.Expect(got).To(Equal(want))
			if tt.wantMsg != "" {
				g.Expect(err.Error()).To(Equal(tt.wantMsg))
			}
		})
	}
}

func TestApplier_DeleteGoneWithoutObjectError(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	gone := interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
		return apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, "controller")
	}}
	a := New(fakeClient(t, gone, controllerDeployment()), "owner")
	res, err := a.Delete(t.Context(), controllerDeployment())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res).To(Equal(Unchanged))
}

func TestObjectError_Error(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	tests := []struct {
		name string
		err  *ObjectError
		want string
	}{
		{
			name: "When the object is cluster-scoped and the cluster unnamed, it should print the kind and name",
			err:  &ObjectError{Op: OpApply, GVK: schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"}, Name: "standard-csi", Err: boom},
			want: "applying StorageClass standard-csi: boom",
		},
		{
			name: "When the object is namespaced and the cluster named, it should print both",
			err:  &ObjectError{Op: OpDelete, Cluster: ClusterGuest, GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: "ns", Name: "cloud-conf", Err: boom},
			want: "deleting ConfigMap ns/cloud-conf on the guest cluster: boom",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			g.Expect(tt.err.Error()).To(Equal(tt.want))
			g.Expect(errors.Unwrap(tt.err)).To(Equal(boom))
		})
	}
}
