package guest

import (
	"context"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cinder-csi-operator/cinder-csi-operator/guest/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operand"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/zoneclasses"
)

// testController is the part of a controller the reconciler uses: it starts the sources it is
// given on its queue and waits for them to sync, so that an event sent afterwards reaches a
// handler.
type testController struct {
	ctx   context.Context
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]

	mu      sync.Mutex
	watches int
}

func (c *testController) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	return reconcile.Result{}, nil
}

func (c *testController) Watch(src source.Source) error {
	c.mu.Lock()
	c.watches++
	c.mu.Unlock()
	if err := src.Start(c.ctx, c.queue); err != nil {
		return err
	}
	if s, ok := src.(source.SyncingSource); ok {
		return s.WaitForSync(c.ctx)
	}
	return nil
}

func (c *testController) Start(context.Context) error { return nil }

func (c *testController) GetLogger() logr.Logger { return logr.Discard() }

// drain returns the requests queued so far and empties the queue.
func (c *testController) drain() []reconcile.Request {
	var out []reconcile.Request
	for c.queue.Len() > 0 {
		req, _ := c.queue.Get()
		c.queue.Done(req)
		c.queue.Forget(req)
		out = append(out, req)
	}
	return out
}

// claimOf returns a claim in namespace ns of the named class.
func claimOf(ns, name, class string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(class)},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: phase},
	}
}

// TestRetireZoneClasses runs the retirement of a per-zone class against a guest whose claims a
// cache serves (a fake client, indexed as the cache is) and whose API server counts the claim
// lists it is sent: a class kept for its claims must cost no list of claims from the API server,
// and a claim's deletion must bring the reconciler back, with no poll.
func TestRetireZoneClasses(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := t.Context()
	scheme, err := clusters.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())

	const old = "standard-csi-old"
	oldClass := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: old, Labels: map[string]string{names.ManagedByLabel: names.ManagedByValue, names.ZoneClassLabel: "old"}},
		Provisioner: "cinder.csi.openstack.org",
	}
	bound, pending := claimOf("apps", "data", old, corev1.ClaimBound), claimOf("db", "wal", old, corev1.ClaimPending)
	other := claimOf("apps", "logs", names.StorageClass, corev1.ClaimBound)
	objects := []client.Object{oldClass, bound, pending, other}

	// The cache: claims indexed by the class they name, as the guest cache indexes them.
	guest := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objects...).
		WithIndex(&corev1.PersistentVolumeClaim{}, "spec.storageClassName", func(o client.Object) []string {
			if c := o.(*corev1.PersistentVolumeClaim); c.Spec.StorageClassName != nil {
				return []string{*c.Spec.StorageClassName}
			}
			return nil
		}).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			// The operator may list and watch claims.
			if r, ok := obj.(*authorizationv1.SelfSubjectAccessReview); ok {
				r.Status.Allowed = true
				return nil
			}
			return c.Create(ctx, obj, opts...)
		}}).
		Build()
	// The API server: it serves the same claims, and counts the lists of them.
	var mu sync.Mutex
	apiLists := 0
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objects...).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.PersistentVolumeClaimList); ok {
				mu.Lock()
				apiLists++
				mu.Unlock()
			}
			return c.List(ctx, list, opts...)
		}}).
		Build()
	informers := &informertest.FakeInformers{Scheme: scheme}
	// Created here, so that the watch's start only reads the fake's map of informers.
	claimInformer, err := informers.FakeInformerFor(ctx, &corev1.PersistentVolumeClaim{})
	g.Expect(err).NotTo(HaveOccurred())
	ctl := &testController{ctx: ctx, queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())}
	t.Cleanup(ctl.queue.ShutDown)
	r := &Reconciler{Guest: guest, GuestAPI: api, cache: informers, controller: ctl}
	appliers := plan.Appliers{apply.ClusterGuest: apply.New(guest, names.FieldOwnerGuest)}

	t.Run("When claims use a class no longer asked for, it should keep it without listing claims from the API server", func(t *testing.T) {
		g := NewWithT(t)
		kept, err := r.retireZoneClasses(ctx, appliers, []string{old})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(kept).To(Equal(map[string]int{old: 2}))
		g.Expect(guest.Get(ctx, client.ObjectKeyFromObject(oldClass), &storagev1.StorageClass{})).To(Succeed())
		// Again, as the next reconcile would.
		kept, err = r.retireZoneClasses(ctx, appliers, []string{old})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(kept).To(Equal(map[string]int{old: 2}))
		mu.Lock()
		defer mu.Unlock()
		g.Expect(apiLists).To(BeZero(), "claim lists sent to the API server")
	})

	t.Run("When a claim of another class is deleted, it should not reconcile", func(t *testing.T) {
		g := NewWithT(t)
		ctl.drain()
		claimInformer.Delete(other)
		g.Expect(ctl.drain()).To(BeEmpty())
	})

	t.Run("When a claim of the kept class is deleted, it should reconcile and then delete the class once no claim uses it", func(t *testing.T) {
		g := NewWithT(t)
		ctl.drain()
		claimInformer.Delete(bound)
		g.Expect(ctl.drain()).To(Equal([]reconcile.Request{clusters.DriverRequest}), "a reconcile on the claim's deletion")
		for _, c := range []client.Object{bound, pending} {
			g.Expect(guest.Delete(ctx, c)).To(Succeed())
		}
		kept, err := r.retireZoneClasses(ctx, appliers, []string{old})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(kept).To(BeEmpty())
		err = guest.Get(ctx, client.ObjectKeyFromObject(oldClass), &storagev1.StorageClass{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the class is deleted: %v", err)
	})

	t.Run("When nothing is left to retire, it should stop watching claims", func(t *testing.T) {
		g := NewWithT(t)
		kept, err := r.retireZoneClasses(ctx, appliers, nil)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(kept).To(BeEmpty())
		g.Expect(informers.InformersByGVK).NotTo(HaveKey(corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")), "the claim informer is removed")
		ctl.mu.Lock()
		defer ctl.mu.Unlock()
		g.Expect(ctl.watches).To(Equal(1), "one watch while the class was kept")
	})
}

// TestRetireZoneClassesDenied checks that under RBAC that does not let the operator list and
// watch claims, a class to retire is kept, with its claims unknown, and nothing watched.
func TestRetireZoneClassesDenied(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := t.Context()
	scheme, err := clusters.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())
	reviews := 0
	guest := fake.NewClientBuilder().WithScheme(scheme).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if _, ok := obj.(*authorizationv1.SelfSubjectAccessReview); ok {
					reviews++
					return nil
				}
				return c.Create(ctx, obj, opts...)
			},
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if _, ok := list.(*corev1.PersistentVolumeClaimList); ok {
					t.Errorf("claims listed although they may not be")
				}
				return c.List(ctx, list, opts...)
			},
		}).
		Build()
	ctl := &testController{ctx: ctx, queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())}
	t.Cleanup(ctl.queue.ShutDown)
	r := &Reconciler{Guest: guest, GuestAPI: guest, cache: &informertest.FakeInformers{Scheme: scheme}, controller: ctl}
	appliers := plan.Appliers{apply.ClusterGuest: apply.New(guest, names.FieldOwnerGuest)}
	for range 2 {
		kept, err := r.retireZoneClasses(ctx, appliers, []string{"standard-csi-old"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(kept).To(Equal(map[string]int{"standard-csi-old": claimsUnknown}))
	}
	g.Expect(reviews).To(Equal(1), "a denial is asked again only after an interval")
	g.Expect(ctl.watches).To(BeZero())
	g.Expect(r.claims.gate.Access.Recheck()).To(BeNumerically(">", 0), "the reconciler comes back to ask again")
}

// classesInput is a standalone guest with topology whose node copy of cloud-conf, as the
// controlplane manager writes it, asks for the per-zone class of zone nova and the backup class.
func classesInput() desired.Input {
	nodeCopy := &corev1.ConfigMap{Data: nodeconf.Encode(nodeconf.Contents{
		Topology: true, VolumeZones: []string{"nova"}, BackupClass: true,
		ZoneClasses: []zoneclasses.Class{{VolumeZone: "nova", ComputeZones: []string{"nova"}}},
	})}
	operand.Managed(nodeCopy)
	nodeconf.Seal(nodeCopy)
	return desired.Input{
		Config:      desired.Config{Images: operandimages.Node{Driver: "driver", NodeDriverRegistrar: "registrar", LivenessProbe: "livenessprobe"}},
		Driver:      &operatorv1.ClusterCSIDriver{},
		CloudConf:   nodeCopy,
		SnapshotCRD: true,
	}
}

// planFor returns the guest manager's plan for in.
func planFor(t testing.TB, in desired.Input) *desired.Plan {
	return testutil.Build(t, func(d *manifests.Decoder) (*desired.Plan, error) { return desired.Compute(d, in) })
}

// TestApplyRecreatingLeavesClassesOfOthers runs a plan computed while the classes under the
// operator's names did not exist yet against a guest where someone else has created them since
// (the cache had not seen them): neither the per-zone StorageClass nor the backup
// VolumeSnapshotClass may be written over.
func TestApplyRecreatingLeavesClassesOfOthers(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := t.Context()
	scheme, err := clusters.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())

	s := classesInput()
	p := planFor(t, s)
	g.Expect(testutil.StepNames(p.Apply)).To(ContainElements("guest/StorageClass//standard-csi-nova", "guest/VolumeSnapshotClass//"+names.BackupSnapshotClass))

	usersClass := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "standard-csi-nova", Labels: map[string]string{"team": "storage"}},
		Provisioner: "example.com/other", Parameters: map[string]string{"tier": "gold"},
	}
	usersBackup := &snapshotv1.VolumeSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: names.BackupSnapshotClass, Labels: map[string]string{"team": "storage"}},
		Driver:     "example.com/other", DeletionPolicy: snapshotv1.VolumeSnapshotContentRetain, Parameters: map[string]string{"tier": "cold"},
	}
	guest := fake.NewClientBuilder().WithScheme(scheme).WithObjects(usersClass.DeepCopy(), usersBackup.DeepCopy()).Build()
	r := &Reconciler{Guest: guest, GuestAPI: guest}
	appliers := plan.Appliers{apply.ClusterGuest: apply.New(guest, names.FieldOwnerGuest)}
	failed := r.applyRecreating(ctx, appliers, p)
	g.Expect(failed).To(BeEmpty())

	var sc storagev1.StorageClass
	g.Expect(guest.Get(ctx, client.ObjectKeyFromObject(usersClass), &sc)).To(Succeed())
	g.Expect(sc.Labels).To(Equal(usersClass.Labels))
	g.Expect(sc.Provisioner).To(Equal(usersClass.Provisioner))
	g.Expect(sc.Parameters).To(Equal(usersClass.Parameters))
	var vsc snapshotv1.VolumeSnapshotClass
	g.Expect(guest.Get(ctx, client.ObjectKeyFromObject(usersBackup), &vsc)).To(Succeed())
	g.Expect(vsc.Labels).To(Equal(usersBackup.Labels))
	g.Expect(vsc.Driver).To(Equal(usersBackup.Driver))
	g.Expect(vsc.Parameters).To(Equal(usersBackup.Parameters))
	g.Expect(vsc.DeletionPolicy).To(Equal(usersBackup.DeletionPolicy))

	// The operator's own objects of the plan were written.
	g.Expect(guest.Get(ctx, client.ObjectKey{Name: names.StorageClass}, &storagev1.StorageClass{})).To(Succeed())

	// The next plan reads the classes and finds them someone else's.
	s.StorageClasses = []storagev1.StorageClass{sc}
	s.BackupSnapshotClass = &vsc
	next := planFor(t, s)
	g.Expect(next.ForeignClasses).To(Equal([]string{"standard-csi-nova"}))
	g.Expect(next.BackupClassTaken).To(BeTrue())
}

// TestApplyRecreatingCreatesClasses checks that the classes under names a user may also use are
// created with the operator's label when their names are free, and applied as the operator's
// from then on.
func TestApplyRecreatingCreatesClasses(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := t.Context()
	scheme, err := clusters.NewScheme()
	g.Expect(err).NotTo(HaveOccurred())

	s := classesInput()
	guest := fake.NewClientBuilder().WithScheme(scheme).Build()
	r := &Reconciler{Guest: guest, GuestAPI: guest}
	appliers := plan.Appliers{apply.ClusterGuest: apply.New(guest, names.FieldOwnerGuest)}
	g.Expect(r.applyRecreating(ctx, appliers, planFor(t, s))).To(BeEmpty())

	var sc storagev1.StorageClass
	g.Expect(guest.Get(ctx, client.ObjectKey{Name: "standard-csi-nova"}, &sc)).To(Succeed())
	g.Expect(sc.Labels).To(HaveKeyWithValue(names.ManagedByLabel, names.ManagedByValue))
	g.Expect(sc.Parameters).To(HaveKeyWithValue("availability", "nova"))
	var vsc snapshotv1.VolumeSnapshotClass
	g.Expect(guest.Get(ctx, client.ObjectKey{Name: names.BackupSnapshotClass}, &vsc)).To(Succeed())
	g.Expect(vsc.Labels).To(HaveKeyWithValue(names.ManagedByLabel, names.ManagedByValue))

	// The next plan reads them as the operator's: applied, neither created nor reported.
	s.StorageClasses = []storagev1.StorageClass{sc}
	s.BackupSnapshotClass = &vsc
	next := planFor(t, s)
	g.Expect(next.Create).To(BeEmpty())
	g.Expect(next.ForeignClasses).To(BeEmpty())
	g.Expect(next.BackupClassTaken).To(BeFalse())
	g.Expect(r.applyRecreating(ctx, appliers, next)).To(BeEmpty())
}
