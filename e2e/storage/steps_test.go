//go:build e2e

package storage

import (
	"context"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// snapshot takes a VolumeSnapshot of a claim with the operator's VolumeSnapshotClass, waits
// until it is ready to use and checks that Cinder has the snapshot.
func (w *world) snapshot(t testing.TB, ns, name, claimName string) string {
	t.Helper()
	return w.snapshotWith(t, ns, name, claimName, names.VolumeSnapshotCls)
}

// snapshotWith is snapshot with the VolumeSnapshotClass class; Cinder has the snapshot, or the
// backup a backup class makes.
func (w *world) snapshotWith(t testing.TB, ns, name, claimName, class string) string {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	snap := &snapshotv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: snapshotv1.VolumeSnapshotSpec{
			Source:                  snapshotv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To(claimName)},
			VolumeSnapshotClassName: ptr.To(class),
		},
	}
	g.Expect(w.Guest.Create(ctx, snap)).To(Succeed())
	// One client for the wait: a real cloud's authenticates once, not at every poll.
	var cinder *gophercloud.ServiceClient
	if w.Cloud != nil {
		cinder = w.cinder(t)
	}
	g.Eventually(func(g Gomega) {
		got := &snapshotv1.VolumeSnapshot{}
		g.Expect(w.Guest.Get(ctx, client.ObjectKeyFromObject(snap), got)).To(Succeed())
		g.Expect(got.Status).NotTo(BeNil(), "snapshot has no status yet")
		if got.Status.Error != nil && got.Status.Error.Message != nil {
			g.Expect(*got.Status.Error.Message).To(BeEmpty())
		}
		g.Expect(got.Status.ReadyToUse).To(HaveValue(BeTrue()))
		g.Expect(got.Status.BoundVolumeSnapshotContentName).NotTo(BeNil())
		content := &snapshotv1.VolumeSnapshotContent{}
		g.Expect(w.Guest.Get(ctx, client.ObjectKey{Name: *got.Status.BoundVolumeSnapshotContentName}, content)).To(Succeed())
		g.Expect(content.Status).NotTo(BeNil())
		g.Expect(content.Status.SnapshotHandle).NotTo(BeNil())
		var ids []string
		if cinder != nil {
			ids = cinderSnapshotIDs(g, cinder, "")
		}
		if w.OpenStack != nil {
			for _, s := range w.OpenStack.Snapshots() {
				ids = append(ids, s.ID)
			}
			for _, b := range w.OpenStack.Backups() {
				ids = append(ids, b.ID)
			}
		}
		g.Expect(ids).To(ContainElement(*content.Status.SnapshotHandle), "Cinder has the snapshot or backup")
	}).WithTimeout(bindTimeout).WithPolling(poll).Should(Succeed())
	return name
}
