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
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

const leaseTestNamespace = "clusters-example"

var (
	// leaseTestNow is the fake clock's time in the lease tests.
	leaseTestNow = time.Date(2026, 5, 6, 7, 0, 0, 0, time.UTC)
	goneHolder   = names.ControllerDeployment + "-7d9f8-old"
	liveHolder   = names.ControllerDeployment + "-5c6b7-new"
)

// sidecarLease returns a lease held by holder and last renewed renewedAgo before leaseTestNow;
// a negative renewedAgo leaves renewTime unset.
func sidecarLease(name, holder string, renewedAgo time.Duration) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: names.GuestNamespace, Name: name},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](137)},
	}
	if renewedAgo >= 0 {
		l.Spec.RenewTime = &metav1.MicroTime{Time: leaseTestNow.Add(-renewedAgo)}
	}
	return l
}

// controllerPod returns a controller pod, terminating or not.
func controllerPod(name string, terminating bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: leaseTestNamespace, Name: name}}
	if terminating {
		p.DeletionTimestamp = &metav1.Time{Time: leaseTestNow}
		p.Finalizers = []string{"example.com/keep"}
	}
	return p
}

// newLeaseReclaimer returns a reclaimer over the given clients that tells time by clk.
func newLeaseReclaimer(mgmt client.Reader, guest client.Client, clk *clocktesting.FakePassiveClock, rec *events.FakeRecorder) *LeaseReclaimer {
	return &LeaseReclaimer{Mgmt: mgmt, Guest: guest, GuestWriter: guest, Namespace: leaseTestNamespace, Recorder: rec, Clock: clk}
}

// leaseNames lists the leases left in the guest.
func leaseNames(g Gomega, guest client.Client) []string {
	left := &coordinationv1.LeaseList{}
	g.Expect(guest.List(context.Background(), left)).To(Succeed())
	var kept []string
	for _, l := range left.Items {
		kept = append(kept, l.Name)
	}
	return kept
}

func TestLeaseReclaimer(t *testing.T) {
	t.Parallel()
	forbidden := func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "x", nil)
	}
	lapsed := leaseLapse + time.Second
	tests := []struct {
		name     string
		mgmt     []client.Object
		leases   []client.Object
		podGet   func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error
		kept     []string
		requeue  time.Duration
		recorded int
	}{
		{
			name:     "When a lease is held by a controller pod that is gone and has lapsed, it should be deleted and recorded",
			mgmt:     []client.Object{controllerPod(liveHolder, false)},
			leases:   []client.Object{sidecarLease(names.SidecarLeases[0], goneHolder, lapsed), sidecarLease(names.SidecarLeases[1], liveHolder, 5*time.Second)},
			kept:     []string{names.SidecarLeases[1]},
			recorded: 1,
		},
		{
			// --grace-period=0 --force, or pod GC after a lost node: the containers may still run.
			name:    "When the holder pod is gone but renewed the lease 10 s ago, it should be kept and looked at again when it lapses",
			mgmt:    []client.Object{controllerPod(liveHolder, false)},
			leases:  []client.Object{sidecarLease(names.SidecarLeases[0], goneHolder, 10*time.Second)},
			kept:    []string{names.SidecarLeases[0]},
			requeue: 123 * time.Second,
		},
		{
			// Past the renew deadline, a partitioned leader may still be in its last try.
			name:    "When the holder pod is gone and renewed the lease 120 s ago, it should be kept for the rest of the retry period",
			leases:  []client.Object{sidecarLease(names.SidecarLeases[0], goneHolder, 120*time.Second)},
			kept:    []string{names.SidecarLeases[0]},
			requeue: 13 * time.Second,
		},
		{
			name:   "When the holder pod is gone and the lease has no renewTime, it should be kept for the sidecars to expire",
			leases: []client.Object{sidecarLease(names.SidecarLeases[0], goneHolder, -1)},
			kept:   []string{names.SidecarLeases[0]},
		},
		{
			name:    "When the holder pod is still terminating, the lease should be kept and looked at again",
			mgmt:    []client.Object{controllerPod(goneHolder, true), controllerPod(liveHolder, false)},
			leases:  []client.Object{sidecarLease(names.SidecarLeases[0], goneHolder, lapsed)},
			kept:    []string{names.SidecarLeases[0]},
			requeue: leaseRecheck,
		},
		{
			name: "When several leases wait, it should come back for the soonest",
			leases: []client.Object{
				sidecarLease(names.SidecarLeases[0], goneHolder, 10*time.Second),
				sidecarLease(names.SidecarLeases[1], goneHolder, 100*time.Second),
				sidecarLease(names.SidecarLeases[2], goneHolder, lapsed),
			},
			kept:     []string{names.SidecarLeases[0], names.SidecarLeases[1]},
			requeue:  33 * time.Second,
			recorded: 1,
		},
		{
			name:   "When a lease is held by a name that is not a controller pod's, it should be kept",
			leases: []client.Object{sidecarLease(names.SidecarLeases[2], "someone-else", lapsed), sidecarLease(names.SidecarLeases[3], "", lapsed)},
			kept:   []string{names.SidecarLeases[2], names.SidecarLeases[3]},
		},
		{
			name:   "When reading pods is forbidden, the lease should be kept and nothing fail",
			leases: []client.Object{sidecarLease(names.SidecarLeases[0], goneHolder, lapsed)},
			podGet: forbidden,
			kept:   []string{names.SidecarLeases[0]},
		},
		{
			name:   "When a lease that is not a sidecar's is held by a gone controller pod, it should be kept",
			leases: []client.Object{sidecarLease("some-other-lease", goneHolder, lapsed)},
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
			r := newLeaseReclaimer(mb.Build(), guest, clocktesting.NewFakePassiveClock(leaseTestNow), rec)
			res, err := r.Reconcile(t.Context(), clusters.DriverRequest)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(leaseNames(g, guest)).To(ConsistOf(tt.kept))
			g.Expect(res.RequeueAfter).To(Equal(tt.requeue))
			g.Expect(rec.Events).To(HaveLen(tt.recorded))
		})
	}

	t.Run("When a fresh lease of a gone pod is looked at again once it lapsed, it should be deleted then", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s, err := clusters.NewScheme()
		g.Expect(err).NotTo(HaveOccurred())
		guest := fake.NewClientBuilder().WithScheme(s).WithObjects(sidecarLease(names.SidecarLeases[0], goneHolder, 30*time.Second)).Build()
		clk := clocktesting.NewFakePassiveClock(leaseTestNow)
		rec := &events.FakeRecorder{Events: make(chan string, 10)}
		r := newLeaseReclaimer(fake.NewClientBuilder().WithScheme(s).Build(), guest, clk, rec)

		res, err := r.Reconcile(t.Context(), clusters.DriverRequest)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(leaseNames(g, guest)).To(ConsistOf(names.SidecarLeases[0]))
		g.Expect(res.RequeueAfter).To(Equal(leaseLapse - 30*time.Second))

		clk.SetTime(clk.Now().Add(res.RequeueAfter))
		res, err = r.Reconcile(t.Context(), clusters.DriverRequest)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.RequeueAfter).To(BeZero())
		g.Expect(leaseNames(g, guest)).To(BeEmpty())
		g.Expect(rec.Events).To(HaveLen(1))
	})

	t.Run("When the lease is renewed between its read and its deletion, the precondition should keep it", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s, err := clusters.NewScheme()
		g.Expect(err).NotTo(HaveOccurred())
		// The gone pod's sidecar, still running, renews the lease right after the reclaimer
		// read it: the reclaimer holds the old resourceVersion when it deletes.
		renewals := 0
		guest := fake.NewClientBuilder().WithScheme(s).
			WithObjects(sidecarLease(names.SidecarLeases[0], goneHolder, leaseLapse+time.Minute)).
			WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if err := c.Get(ctx, key, obj, opts...); err != nil {
					return err
				}
				l, ok := obj.(*coordinationv1.Lease)
				if !ok || renewals > 0 {
					return nil
				}
				renewals++
				renewed := l.DeepCopy()
				renewed.Spec.RenewTime = &metav1.MicroTime{Time: leaseTestNow}
				return c.Update(ctx, renewed)
			}}).Build()
		rec := &events.FakeRecorder{Events: make(chan string, 10)}
		r := newLeaseReclaimer(fake.NewClientBuilder().WithScheme(s).Build(), guest, clocktesting.NewFakePassiveClock(leaseTestNow), rec)

		res, err := r.Reconcile(t.Context(), clusters.DriverRequest)
		g.Expect(err).NotTo(HaveOccurred(), "a conflict is an answer, not a failure")
		g.Expect(renewals).To(Equal(1))
		g.Expect(leaseNames(g, guest)).To(ConsistOf(names.SidecarLeases[0]))
		g.Expect(rec.Events).To(BeEmpty(), "nothing was released")
		g.Expect(res.RequeueAfter).To(Equal(leaseRecheck), "the next look sees who renewed it")

		// The next look finds the renewal fresh and waits for it to lapse.
		res, err = r.Reconcile(t.Context(), clusters.DriverRequest)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.RequeueAfter).To(Equal(leaseLapse))
		g.Expect(leaseNames(g, guest)).To(ConsistOf(names.SidecarLeases[0]))
	})
}

func TestRunningControllerPods(t *testing.T) {
	t.Parallel()
	pod := func(name string, labels map[string]string, deletion *time.Time) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: leaseTestNamespace, Name: name, Labels: labels}}
		if deletion != nil {
			p.DeletionTimestamp = &metav1.Time{Time: *deletion}
			p.Finalizers = []string{"example.com/keep"}
		}
		return p
	}
	controller := map[string]string{names.ControllerPodLabel: names.ControllerDeployment}
	later, earlier := leaseTestNow.Add(20*time.Second), leaseTestNow.Add(-time.Second)
	reconciler := func(c client.Reader) *Reconciler {
		return &Reconciler{MgmtAPI: c, Config: Config{Namespace: leaseTestNamespace}, now: func() time.Time { return leaseTestNow }}
	}

	t.Run("When controller pods run or are within their graceful termination, it should name them, and no other pod", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		c := fake.NewClientBuilder().WithObjects(
			pod("running", controller, nil),
			pod("stopping", controller, &later),
			pod("overdue", controller, &earlier),
			pod("someone-elses", map[string]string{names.ControllerPodLabel: "other"}, nil),
		).Build()
		g.Expect(reconciler(c).runningControllerPods(context.Background())).To(ConsistOf("running", "stopping"))
	})
	t.Run("When the pods may not be listed, it should name none, so that the removal goes on", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		c := fake.NewClientBuilder().WithObjects(pod("running", controller, nil)).WithInterceptorFuncs(interceptor.Funcs{
			List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
				return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", nil)
			},
		}).Build()
		r := reconciler(c)
		g.Expect(r.runningControllerPods(context.Background())).To(BeEmpty())
		g.Expect(r.podsUnreadLogged).To(BeTrue())
	})
}
