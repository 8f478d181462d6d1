package controlplane

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

func TestLeaseReclaimer(t *testing.T) {
	t.Parallel()
	const ns = "clusters-example"
	gone := names.ControllerDeployment + "-7d9f8-old"
	current := names.ControllerDeployment + "-5c6b7-new"
	lease := func(name, holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: name},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)},
		}
	}
	pod := func(name string, terminating bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if terminating {
			p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			p.Finalizers = []string{"example.com/keep"}
		}
		return p
	}
	forbidden := func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "x", nil)
	}
	tests := []struct {
		name     string
		mgmt     []client.Object
		leases   []client.Object
		podGet   func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error
		kept     []string
		requeue  bool
		recorded int
	}{
		{
			name:     "When a lease is held by a controller pod that is gone, it should be deleted and recorded",
			mgmt:     []client.Object{pod(current, false)},
			leases:   []client.Object{lease(names.SidecarLeases[0], gone), lease(names.SidecarLeases[1], current)},
			kept:     []string{names.SidecarLeases[1]},
			recorded: 1,
		},
		{
			name:    "When the holder pod is still terminating, the lease should be kept and looked at again",
			mgmt:    []client.Object{pod(gone, true), pod(current, false)},
			leases:  []client.Object{lease(names.SidecarLeases[0], gone)},
			kept:    []string{names.SidecarLeases[0]},
			requeue: true,
		},
		{
			name:   "When a lease is held by a name that is not a controller pod's, it should be kept",
			leases: []client.Object{lease(names.SidecarLeases[2], "someone-else"), lease(names.SidecarLeases[3], "")},
			kept:   []string{names.SidecarLeases[2], names.SidecarLeases[3]},
		},
		{
			name:   "When reading pods is forbidden, the lease should be kept and nothing fail",
			leases: []client.Object{lease(names.SidecarLeases[0], gone)},
			podGet: forbidden,
			kept:   []string{names.SidecarLeases[0]},
		},
		{
			name:   "When a lease that is not a sidecar's is held by a gone controller pod, it should be kept",
			leases: []client.Object{lease("some-other-lease", gone)},
			kept:   []string{"some-other-lease"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s, err := clusters.NewScheme()
			g.Expect(err).NotTo(HaveOccurred())
			mb := fake.NewClientBuilder().WithScheme(s).WithObjects(tt.mgmt...)
			if tt.podGet != nil {
				mb = mb.WithInterceptorFuncs(interceptor.Funcs{Get: tt.podGet})
			}
			guest := fake.NewClientBuilder().WithScheme(s).WithObjects(tt.leases...).Build()
			rec := &events.FakeRecorder{Events: make(chan string, 10)}
			r := &LeaseReclaimer{Mgmt: mb.Build(), Guest: guest, GuestWriter: guest, Namespace: ns, Recorder: rec}
			res, err := r.Reconcile(t.Context(), clusters.DriverRequest)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.RequeueAfter > 0).To(Equal(tt.requeue))
			left := &coordinationv1.LeaseList{}
			g.Expect(guest.List(t.Context(), left)).To(Succeed())
			var kept []string
			for _, l := range left.Items {
				kept = append(kept, l.Name)
			}
			g.Expect(kept).To(ConsistOf(tt.kept))
			g.Expect(rec.Events).To(HaveLen(tt.recorded))
		})
	}
}
