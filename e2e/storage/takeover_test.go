//go:build e2e

package storage

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/zoneclasses"
)

// A take-over from a cluster that only ever ran csi-operator: its objects carry csi-operator's
// labels and annotations and none of this operator's, so the guest's caches (which select this
// operator's label) see none of them. Under cluster-storage-operator's RBAC the operator may not
// patch CSIDrivers, StorageClasses or VolumeSnapshotClasses and writes them with create and
// update; a write path that took "not in the cache" for "not on the server" would create again on
// every reconcile and stay Degraded. So the take-over is watched condition by condition, not only
// looked at when it is done.

// degradedWatch records every Degraded=True condition of this operator's on the ClusterCSIDriver,
// from every change the guest's API server reports, so that a Degraded condition that rose and
// cleared between two polls is seen too.
type degradedWatch struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	seen []string
	errs []string
}

// ownDegraded are the Degraded conditions of both managers.
var ownDegraded = func() []string {
	var out []string
	for _, typ := range slices.Concat(names.ControlPlaneConditions, names.GuestConditions) {
		if strings.HasSuffix(typ, "Degraded") {
			out = append(out, typ)
		}
	}
	return out
}()

// watchDegraded starts recording; Stop ends it and returns what it saw.
func (w *world) watchDegraded(t testing.TB) *degradedWatch {
	t.Helper()
	c, err := client.NewWithWatch(w.Env.GuestConfig(), client.Options{Scheme: w.Guest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &degradedWatch{cancel: cancel, done: make(chan struct{})}
	started := make(chan struct{})
	go func() {
		defer close(d.done)
		rv := ""
		first := true
		for ctx.Err() == nil {
			list := &operatorv1.ClusterCSIDriverList{}
			if rv == "" {
				if err := c.List(ctx, list); err != nil {
					d.failed(err)
					time.Sleep(time.Second)
					continue
				}
				for i := range list.Items {
					d.record(&list.Items[i])
				}
				rv = list.ResourceVersion
				if first {
					close(started)
					first = false
				}
			}
			wi, err := c.Watch(ctx, list, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
			if err != nil {
				d.failed(err)
				rv = ""
				continue
			}
			for ev := range wi.ResultChan() {
				switch ev.Type {
				case watch.Error:
					// Expired: list again, which records the current state.
					rv = ""
				case watch.Added, watch.Modified, watch.Bookmark:
					if drv, ok := ev.Object.(*operatorv1.ClusterCSIDriver); ok {
						rv = drv.ResourceVersion
						if ev.Type != watch.Bookmark {
							d.record(drv)
						}
					}
				}
			}
			wi.Stop()
		}
	}()
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatalf("the ClusterCSIDriver could not be listed: %v", d.errs)
	}
	return d
}

func (d *degradedWatch) record(drv *operatorv1.ClusterCSIDriver) {
	if drv.Name != names.ClusterCSIDriverName {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range drv.Status.Conditions {
		if c.Status != operatorv1.ConditionTrue || !slices.Contains(ownDegraded, c.Type) {
			continue
		}
		s := fmt.Sprintf("%s=True (%s): %s", c.Type, c.Reason, c.Message)
		if !slices.Contains(d.seen, s) {
			d.seen = append(d.seen, s)
		}
	}
}

func (d *degradedWatch) failed(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.errs = append(d.errs, err.Error())
}

// Stop ends the watch and returns each distinct Degraded=True condition it saw.
func (d *degradedWatch) Stop() []string {
	d.cancel()
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.seen)
}

// userZoneClass is the per-zone class name of the world's zone, made by a user before the
// take-over: not labelled by this operator, and with a provisioner and parameters (immutable
// fields) that differ from what the operator would make, so that an operator that applied over
// it would fail on every reconcile.
func (w *world) userZoneClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: zoneclasses.ClassPrefix + w.Zone, Labels: map[string]string{"owner": "storage-team"}},
		Provisioner:       names.DriverName,
		Parameters:        map[string]string{"type": "fast-ssd"},
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimRetain),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
}

// withUserZoneClass prepares a take-over in a cluster whose user asks for per-zone classes in
// cinder-csi-config and already has a class of that name of their own, and returns the checks to
// run once the operator has taken over, and the cleanup after them.
func (w *world) withUserZoneClass(t *testing.T) (check func(t *testing.T), cleanup func()) {
	ctx := context.Background()
	g := NewWithT(t)
	user := w.userZoneClass()
	g.Expect(w.Guest.Create(ctx, user)).To(Succeed())
	w.setUserConfig(t, map[string]string{names.KeyZoneStorageClasses: "true"})
	check = func(t *testing.T) {
		g := NewWithT(t)
		var c operatorv1.OperatorCondition
		g.Eventually(func(g Gomega) {
			c = w.condition(g, names.ConditionZoneWarning)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue))
			g.Expect(c.Message).To(ContainSubstring(user.Name))
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
		t.Logf("%s: %s", names.ConditionZoneWarning, c.Message)
		g.Consistently(func(g Gomega) {
			sc := &storagev1.StorageClass{}
			g.Expect(w.Guest.Get(ctx, client.ObjectKeyFromObject(user), sc)).To(Succeed())
			g.Expect(sc.UID).To(Equal(user.UID), "the user's class is the same object")
			g.Expect(sc.ResourceVersion).To(Equal(user.ResourceVersion), "the user's class is not written")
			g.Expect(sc.Labels).NotTo(HaveKey(names.ManagedByLabel))
		}).WithTimeout(10 * time.Second).WithPolling(poll).Should(Succeed())
	}
	cleanup = func() {
		// The configuration first, so that the operator plans no per-zone class when the
		// user's goes.
		_ = w.Guest.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.OpenShiftConfigNamespace, Name: names.UserConfigMap}})
		NewWithT(t).Eventually(func(g Gomega) {
			g.Expect(w.condition(g, names.ConditionZoneWarning).Status).To(Equal(operatorv1.ConditionFalse))
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
		err := w.Guest.Delete(ctx, user)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the user's class: %v", err)
		}
	}
	return check, cleanup
}

// handOver moves the operator from cluster-storage-operator's Deployment (the image swap) to its
// own install manifests, as a platform that adopts the operator for good does: the swapped
// Deployment is deleted, its pods gone, then the install manifests are applied. The scenarios
// after it need the shorter zone re-detection only those set.
func handOver(t *testing.T, w *world) {
	t.Run("When the operator moves from the swapped image to its install manifests, it should be Available again without rolling the driver", func(t *testing.T) {
		g := NewWithT(t)
		depRev, nodeRev := w.controllerRevision(g), w.nodeRevision(g)
		w.Operator.Stop()
		w.removeOperator(t)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		g.Expect(w.deployOperator(ctx)).To(Succeed())
		w.waitAvailable(t)
		g.Expect(w.controllerRevision(g)).To(Equal(depRev), "the controller did not roll")
		g.Expect(w.nodeRevision(g)).To(Equal(nodeRev), "the node plugin did not roll")
	})
	if w.Operator == nil {
		t.Fatal("the operator was not deployed from its install manifests")
	}
}
