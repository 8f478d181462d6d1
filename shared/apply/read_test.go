package apply

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestGet(t *testing.T) {
	t.Parallel()
	t.Run("When the object is missing, it should return an ObjectError that is still NotFound", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		c := fakeClient(t, interceptor.Funcs{})
		err := Get(t.Context(), c, ClusterGuest, client.ObjectKey{Namespace: "ns", Name: "cloud-conf"}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		oe, ok := errors.AsType[*ObjectError](err)
		g.Expect(ok).To(BeTrue())
		g.Expect(oe.Op).To(Equal(OpRead))
		g.Expect(oe.Cluster).To(Equal(ClusterGuest))
		g.Expect(oe.GVK).To(Equal(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}))
		g.Expect(oe.Resource).To(Equal("configmaps"))
		g.Expect(oe.Namespace).To(Equal("ns"))
		g.Expect(oe.Name).To(Equal("cloud-conf"))
		g.Expect(err.Error()).To(HavePrefix("reading ConfigMap ns/cloud-conf on the guest cluster: "))
	})
	t.Run("When the object exists, it should return nil and the object", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		c := fakeClient(t, interceptor.Funcs{}, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cloud-conf"}, Data: map[string]string{"k": "v"}})
		cm := &corev1.ConfigMap{}
		g.Expect(Get(t.Context(), c, ClusterGuest, client.ObjectKey{Namespace: "ns", Name: "cloud-conf"}, cm)).To(Succeed())
		g.Expect(cm.Data).To(Equal(map[string]string{"k": "v"}))
	})
}

func TestList(t *testing.T) {
	t.Parallel()
	failing := interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		return errDenied
	}}
	tests := []struct {
		name    string
		list    client.ObjectList
		opts    []client.ListOption
		want    ObjectError
		wantMsg string
	}{
		{
			name:    "When a namespaced list fails, it should name the items' kind and the namespace",
			list:    &appsv1.DeploymentList{},
			opts:    []client.ListOption{client.InNamespace("clusters-demo")},
			want:    ObjectError{Op: OpRead, Cluster: ClusterManagement, GVK: deploymentGVK, Resource: "deployments", Namespace: "clusters-demo"},
			wantMsg: "reading Deployment in namespace clusters-demo on the management cluster: " + errDenied.Error(),
		},
		{
			name:    "When a cluster-wide list fails, it should name the items' kind without a namespace",
			list:    &storagev1.StorageClassList{},
			want:    ObjectError{Op: OpRead, Cluster: ClusterManagement, GVK: schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"}, Resource: "storageclasses"},
			wantMsg: "reading StorageClass on the management cluster: " + errDenied.Error(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			err := List(t.Context(), fakeClient(t, failing), ClusterManagement, tt.list, tt.opts...)
			oe, ok := errors.AsType[*ObjectError](err)
			g.Expect(ok).To(BeTrue())
			got := *oe
			got.Err = nil
			g.Expect(got).To(Equal(tt.want))
			g.Expect(err.Error()).To(Equal(tt.wantMsg))
			g.Expect(errors.Is(err, errDenied)).To(BeTrue())
		})
	}
}
