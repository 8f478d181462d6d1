//go:build e2e

package storage

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/backups"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/snapshots"
	"github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/volumes"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/realcloud"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// TestStorageRealCloud runs the driver the operator installs against a real OpenStack (Keystone,
// Placement, Nova and Cinder from Debian's packages, package realcloud) instead of the fake: a
// HyperShift world and a standalone world at the same time, on one cloud. The cloud's
// credential is a member-role user's, as OpenShift's installer hands a cluster; volumes live in
// Cinder's NFS backends, Nova attaches them to the guest node's server, and the cloud's
// hypervisor stand-in gives the node a block device for each. Each world is a cluster of its own
// (its own infrastructure ID, so its own volumes); where a scenario changes the cloud itself (a
// service stopped, a zone renamed, the member's password changed) the two worlds do it in step,
// once for both (see lockstep).
//
// What the file backend cannot do here stays on the fake cloud's worlds (TestStorageHyperShift,
// TestStorageStandalone): a snapshot of a volume in use needs Nova's assisted snapshots, which the
// fake virt driver lacks, and after a snapshot the NFS driver keeps the volume as a qcow2 image,
// which no raw block device here can expose, so growing a volume in use and snapshotting one run
// there.
func TestStorageRealCloud(t *testing.T) {
	t.Parallel()
	// Both worlds' places, taken before the cloud starts: its start-up is the heaviest part.
	giveBack := takePlaces(t, 2)
	if testing.Short() {
		t.Skip("starts a real OpenStack and real nodes")
	}
	cloud := env.StartRealCloudForTest(t)
	steps := newLockstep(lockstepWait)
	t.Cleanup(func() {
		if err := steps.runAfterAll(); err != nil {
			t.Errorf("undoing a scenario's change to the shared cloud: %v", err)
		}
	})
	// The worlds' subtests run side by side from goroutines, not as parallel tests, so that both
	// run at once whatever -parallel allows: the lockstep needs both.
	var wg sync.WaitGroup
	for _, mode := range []string{env.ModeHyperShift, env.ModeStandalone} {
		leave := steps.join()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer giveBack()
			defer leave()
			t.Run(mode, func(t *testing.T) {
				realCloudScenarios(t, startWorld(t, mode, worldOptions{
					cloud: cloud, lockstep: steps, leaveLockstep: leave, infraID: mode + "-x7k2p",
					release: *previousRelease,
				}))
			})
		}()
	}
	wg.Wait()
}

// realCloudScenarios run in order on a world on the real cloud; each leaves nothing of the
// world's in Cinder. Once one fails, the others are skipped: the world leaves the lockstep, and
// the shared cloud's changes are the other world's alone from then on.
func realCloudScenarios(t *testing.T, w *world) {
	failed := false
	run := func(name string, scenario func(*testing.T)) {
		t.Run(name, func(t *testing.T) {
			if failed {
				t.Skip("an earlier scenario of this world failed")
			}
			defer func() {
				if t.Failed() {
					failed = true
					w.leaveLockstep()
				}
			}()
			scenario(t)
		})
	}
	defer w.leaveLockstep()
	run("When the operator has installed the driver against a real OpenStack with a member-role credential, it should be Available", func(t *testing.T) {
		w.waitAvailable(t)
	})
	run("When the cluster is upgraded, the operator from its previous release, the operand images renamed and every worker drained and rebooted in turn, the driver should stay Available and never Degraded, Progressing only while its rollouts run, and each writer's volume should follow it across Nova servers with every synced write", func(t *testing.T) {
		realUpgrade(t, w)
	})
	run("When a pod uses a claim, real Cinder should create the volume in the node's zone, real Nova attach it to the node's server and the pod keep its data; deleting the claim should leave nothing in Cinder", func(t *testing.T) {
		realProvisionAttachDelete(t, w)
	})
	run("When a claim not in use grows, Cinder should extend the volume and the next pod find a larger file system with its data", func(t *testing.T) {
		realExpandOffline(t, w)
	})
	run("When a volume not in use is snapshotted, a claim restored from the snapshot should have its data", func(t *testing.T) {
		realSnapshotRestore(t, w)
	})
	run("When the backup class and per-zone classes are asked for, the classes should follow Cinder's real zones, a member-role credential should get a warning that says what to ask for, and a backup snapshot should restore", func(t *testing.T) {
		realBackupAndZones(t, w)
	})
	run("When a Nova zone is renamed so that Cinder lacks it, the operator should turn topology off, a new volume should have no zone, and topology should come on again when the name comes back", func(t *testing.T) {
		realTopologyFollowsZones(t, w)
	})
	run("When every volume zone is renamed so that no compute zone has its name, topology should go off and say why; with zone_mapping and enable_topology the per-zone classes should pin the mapped compute zones and a claim on the node's class get a volume in the mapped zone", func(t *testing.T) {
		realZonesDiffer(t, w)
	})
	run("When cinder-api stops, TopologyDegraded should say so within seconds and clear within seconds of its return", func(t *testing.T) {
		realCinderOutage(t, w)
	})
	run("When nova-api stops for five minutes with Prometheus watching, a volume stuck attaching should be explained with Cinder's view and alerted on, the outage should raise TopologyDegraded and fire the unreachable alert, and once nova-api is back the attacher's next try should attach the volume, the pod run and everything clear", func(t *testing.T) {
		realNovaOutageAlerts(t, w)
	})
	run("When the credentials rotate with a volume in use from the member's password to an application credential and the password is then changed, only the controller should roll, the volume should stay usable, nothing should fail and no credential should reach the guest", func(t *testing.T) {
		realRotation(t, w)
	})
	run("When the credential may list Cinder's services, the backup warning should follow cinder-backup: clear while it is up, raised when the backup zone has none or it stops", func(t *testing.T) {
		realBackupWarning(t, w)
	})
	// The last change of the shared cloud is behind: the other world need not wait for this one.
	w.leaveLockstep()
	if w.Env.Mode == env.ModeHyperShift {
		run("When the upstream external-storage suite's CI subset runs against the driver on the real cloud, it should pass and leave nothing in Cinder", func(t *testing.T) {
			upstreamSubset(t, w)
		})
	}
}

// realNamespace is namespace for a scenario on the real cloud: once the namespace is gone, the
// cluster must have nothing left in Cinder.
func (w *world) realNamespace(t testing.TB, name string) string {
	t.Helper()
	// Cleanups run last first: this one after the namespace's.
	t.Cleanup(func() { w.expectCinderClean(t) })
	return w.namespace(t, name)
}

// cinder is a block-storage client of the member user, the cluster's own credential.
func (w *world) cinder(t testing.TB) *gophercloud.ServiceClient {
	t.Helper()
	ctx := context.Background()
	provider, err := w.Cloud.Client(ctx, w.Cloud.Member())
	if err != nil {
		t.Fatalf("authenticating to the real cloud: %v", err)
	}
	c, err := openstack.NewBlockStorageV3(provider, gophercloud.EndpointOpts{Region: w.Cloud.Region()})
	if err != nil {
		t.Fatalf("finding Cinder: %v", err)
	}
	return c
}

// volumeZone is the Cinder zone paired with the node's compute zone.
func (w *world) volumeZone() string {
	compute, volume := w.Cloud.ComputeZones(), w.Cloud.VolumeZones()
	for i, z := range compute {
		if z == w.Zone {
			return volume[i]
		}
	}
	return ""
}

// writeDetached creates claim claimName on class ("": the default), has a pod write a token to it
// and end, and returns the token and the claim's volume once Cinder has it detached. Snapshots
// here are of volumes not in use: of one in use, Cinder's NFS driver needs Nova's assisted
// snapshot, which the fake virt driver never completes.
func (w *world) writeDetached(t testing.TB, ns, claimName, class string) (string, *corev1.PersistentVolume) {
	t.Helper()
	g := NewWithT(t)
	c := w.cinder(t)
	g.Expect(w.Guest.Create(context.Background(), claim(ns, claimName, class, "1Gi"))).To(Succeed())
	token := fmt.Sprintf("%s-%s-%d", ns, claimName, time.Now().UnixNano())
	g.Expect(w.runToEnd(t, w.pod(ns, "writer", claimName, "set -e; echo "+token+" > /data/file; sync; cat /data/file > /dev/termination-log", corev1.RestartPolicyNever))).To(Equal(token))
	w.deletePod(t, ns, "writer")
	pv := w.waitBound(t, ns, claimName)
	defer took(t, "volume detached")()
	g.Eventually(func(g Gomega) {
		vol, _ := cinderVolume(g, c, pv.Spec.CSI.VolumeHandle)
		g.Expect(vol.Status).To(Equal("available"), "detached once no pod uses it")
	}).WithTimeout(goneTimeout).WithPolling(poll).Should(Succeed())
	return token, pv
}

// cinderSnapshotIDs lists the IDs of the project's Cinder snapshots and backups; with cluster set,
// only those the driver tagged with that cluster ID, as it tags both.
func cinderSnapshotIDs(g Gomega, c *gophercloud.ServiceClient, cluster string) []string {
	ctx := context.Background()
	var ids []string
	pages, err := snapshots.List(c, snapshots.ListOpts{}).AllPages(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	snaps, err := snapshots.ExtractSnapshots(pages)
	g.Expect(err).NotTo(HaveOccurred())
	for _, s := range snaps {
		if cluster == "" || s.Metadata[clusterTag] == cluster {
			ids = append(ids, s.ID)
		}
	}
	// A backup's metadata is in its detailed listing from microversion 3.43 on.
	withMetadata := *c
	withMetadata.Microversion = "3.43"
	pages, err = backups.ListDetail(&withMetadata, backups.ListDetailOpts{}).AllPages(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	bks, err := backups.ExtractBackups(pages)
	g.Expect(err).NotTo(HaveOccurred())
	for _, b := range bks {
		if cluster == "" || b.Metadata != nil && (*b.Metadata)[clusterTag] == cluster {
			ids = append(ids, b.ID)
		}
	}
	return ids
}

// cinderVolume returns a volume, and false once Cinder no longer has it.
func cinderVolume(g Gomega, c *gophercloud.ServiceClient, id string) (*volumes.Volume, bool) {
	v, err := volumes.Get(context.Background(), c, id).Extract()
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return nil, false
	}
	g.Expect(err).NotTo(HaveOccurred())
	return v, true
}

// expectCinderClean waits until the cluster has nothing left in Cinder: no volume, snapshot or
// backup tagged with its cluster ID. The servers' boot volumes carry no tag.
func (w *world) expectCinderClean(t testing.TB) {
	t.Helper()
	defer took(t, "nothing of the cluster left in Cinder")()
	ctx := context.Background()
	c := w.cinder(t)
	NewWithT(t).Eventually(func(g Gomega) {
		pages, err := volumes.List(c, volumes.ListOpts{}).AllPages(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		vols, err := volumes.ExtractVolumes(pages)
		g.Expect(err).NotTo(HaveOccurred())
		var left []string
		for _, v := range vols {
			if v.Metadata[clusterTag] == w.InfraID {
				left = append(left, v.ID+" "+v.Status)
			}
		}
		g.Expect(left).To(BeEmpty(), "volumes of the cluster left in Cinder")
		g.Expect(cinderSnapshotIDs(g, c, w.InfraID)).To(BeEmpty(), "snapshots or backups of the cluster left in Cinder")
	}).WithTimeout(goneTimeout).WithPolling(2 * time.Second).Should(Succeed())
}

func realProvisionAttachDelete(t *testing.T, w *world) {
	ctx := context.Background()
	g := NewWithT(t)
	c := w.cinder(t)
	follower := w.Env.Real.Follower()
	ns := w.namespace(t, "real-provision")
	g.Expect(w.Guest.Create(ctx, claim(ns, "data", "", "1Gi"))).To(Succeed())
	token := fmt.Sprintf("written-%d", time.Now().UnixNano())
	reader := w.pod(ns, "user", "data", "set -e; echo "+token+" > /data/file; sync; cat /data/file > /dev/termination-log; sleep 3600", corev1.RestartPolicyNever)
	w.startRunning(t, reader)
	pv := w.waitBound(t, ns, "data")
	id := pv.Spec.CSI.VolumeHandle

	vol, ok := cinderVolume(g, c, id)
	g.Expect(ok).To(BeTrue(), "Cinder has no volume %s", id)
	g.Expect(vol.Name).To(Equal(pv.Name))
	g.Expect(vol.Size).To(Equal(1))
	g.Expect(vol.Metadata).To(HaveKeyWithValue(clusterTag, w.InfraID), "the volume is tagged for --cluster")
	g.Expect(vol.AvailabilityZone).To(Equal(w.volumeZone()), "the volume is in the node's zone")
	g.Expect(pvZones(pv)).To(ConsistOf(w.Zone), "the PV carries the node's zone")
	g.Eventually(func(g Gomega) {
		vol, _ := cinderVolume(g, c, id)
		g.Expect(vol.Status).To(Equal("in-use"))
		g.Expect(vol.Attachments).To(HaveLen(1))
		g.Expect(vol.Attachments[0].ServerID).To(Equal(w.GuestServerID), "attached to the guest node's server")
		d, ok := follower.Device(id)
		g.Expect(ok).To(BeTrue(), "the hypervisor knows the attachment")
		g.Expect(d.Exposed()).To(BeTrue(), "the node has a device for the volume: %s", d.Reason)
	}).WithTimeout(bindTimeout).WithPolling(poll).Should(Succeed())

	w.deletePod(t, ns, "user")
	again := w.runToEnd(t, w.pod(ns, "again", "data", "cat /data/file > /dev/termination-log", corev1.RestartPolicyNever))
	g.Expect(again).To(Equal(token), "the data survives a detach and a new attach")
	w.deletePod(t, ns, "again")

	g.Expect(w.Guest.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, exists := cinderVolume(g, c, id)
		g.Expect(exists).To(BeFalse(), "the Cinder volume is deleted")
		g.Expect(w.Guest.Get(ctx, client.ObjectKey{Name: pv.Name}, &corev1.PersistentVolume{})).NotTo(Succeed(), "the PV is deleted")
		_, attached := follower.Device(id)
		g.Expect(attached).To(BeFalse(), "the node's device is gone")
	}).WithTimeout(goneTimeout).WithPolling(poll).Should(Succeed())
	w.expectCinderClean(t)
}

func realExpandOffline(t *testing.T, w *world) {
	ctx := context.Background()
	g := NewWithT(t)
	c := w.cinder(t)
	ns := w.realNamespace(t, "real-expand")
	// xfs grows while mounted without the capability resize2fs needs for ext4's reserved blocks.
	token, pv := w.writeDetached(t, ns, "data", w.xfsClass(t))
	id := pv.Spec.CSI.VolumeHandle

	g.Expect(env.Edit(ctx, w.Guest, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"}}, "someone",
		func(pvc *corev1.PersistentVolumeClaim) {
			pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
		})).To(Succeed())
	g.Eventually(func(g Gomega) {
		vol, _ := cinderVolume(g, c, id)
		g.Expect(vol.Size).To(Equal(2), "Cinder extended the volume")
		got := &corev1.PersistentVolume{}
		g.Expect(w.Guest.Get(ctx, client.ObjectKey{Name: pv.Name}, got)).To(Succeed())
		g.Expect(got.Spec.Capacity.Storage().Cmp(resource.MustParse("2Gi"))).To(Equal(0))
	}).WithTimeout(bindTimeout).WithPolling(poll).Should(Succeed())

	// The node plugin grows the file system when the next pod mounts the volume.
	script := `set -e; set -- $(stat -f -c '%b %S' /data); echo "$(($1 * $2)) $(cat /data/file)" > /dev/termination-log`
	var size int64
	var data string
	msg := w.runToEnd(t, w.pod(ns, "reader", "data", script, corev1.RestartPolicyNever))
	_, err := fmt.Sscanf(msg, "%d %s", &size, &data)
	g.Expect(err).NotTo(HaveOccurred(), "reader said %q", msg)
	g.Expect(data).To(Equal(token))
	g.Expect(size).To(BeNumerically(">", int64(1536)<<20), "the file system grew past 1.5 GiB")
	g.Eventually(func(g Gomega) {
		pvc := &corev1.PersistentVolumeClaim{}
		g.Expect(w.Guest.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data"}, pvc)).To(Succeed())
		g.Expect(pvc.Status.Capacity.Storage().Cmp(resource.MustParse("2Gi"))).To(Equal(0))
	}).WithTimeout(bindTimeout).WithPolling(poll).Should(Succeed())
}

func realSnapshotRestore(t *testing.T, w *world) {
	g := NewWithT(t)
	c := w.cinder(t)
	ns := w.realNamespace(t, "real-snapshot")
	token, _ := w.writeDetached(t, ns, "source", "")
	snap := w.snapshotWith(t, ns, "snap", "source", names.VolumeSnapshotCls)
	g.Expect(w.readRestored(t, ns, snap)).To(Equal(token))
	restoredPV := w.waitBound(t, ns, "restored")
	vol, ok := cinderVolume(g, c, restoredPV.Spec.CSI.VolumeHandle)
	g.Expect(ok).To(BeTrue())
	g.Expect(vol.SnapshotID).NotTo(BeEmpty(), "Cinder made the restored volume from the snapshot")
}

func realBackupAndZones(t *testing.T, w *world) {
	g := NewWithT(t)
	ns := w.realNamespace(t, "real-backup")
	w.setUserConfig(t, map[string]string{
		names.KeyZoneStorageClasses:  "true",
		names.KeyBackupSnapshotClass: "true",
	})
	t.Cleanup(func() {
		w.setUserConfig(t, map[string]string{})
		w.waitAvailable(t)
	})
	// Cinder's default policy lets only administrators list its services, so the operator cannot
	// tell whether cinder-backup runs: it says so, and what to ask the cloud's administrators.
	g.Eventually(func(g Gomega) {
		c := w.condition(g, names.ConditionBackupWarning)
		g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue), "%s: %s", c.Reason, c.Message)
		g.Expect(c.Reason).To(Equal(names.ReasonBackupServicesForbidden))
		g.Expect(c.Message).To(ContainSubstring("administrators"))
	}).WithTimeout(bindTimeout).WithPolling(poll).Should(Succeed())
	// One class per volume zone of the real listing, pinned to the compute zone of that name.
	for _, zone := range w.Cloud.VolumeZones() {
		g.Expect(w.zoneClass(g, zone, []string{zone}).Provisioner).To(Equal(names.DriverName))
	}

	token, _ := w.writeDetached(t, ns, "source", "")
	backedUp := took(t, "backup snapshot ready")
	snap := w.snapshotWith(t, ns, "backup", "source", names.BackupSnapshotClass)
	backedUp()
	g.Expect(w.readRestored(t, ns, snap)).To(Equal(token))
}

func realTopologyFollowsZones(t *testing.T, w *world) {
	ctx := context.Background()
	g := NewWithT(t)
	g.Expect(w.driverTopology(g)).To(Equal("true"), "Nova's and Cinder's real zones match")
	// The second compute host runs no server, so Nova lets its aggregate change zone; the first
	// holds the node's server and keeps its zone.
	zones := w.Cloud.ComputeZones()
	renamed := zones[1] + "-compute"
	off := took(t, "topology turned off after the rename")
	w.cloudChange(t, "rename compute zone "+zones[1], func() error { return w.Cloud.SetComputeZone(ctx, 1, renamed) })
	t.Cleanup(func() {
		if w.Cloud.ComputeZones()[1] == zones[1] {
			return
		}
		if err := w.Cloud.SetComputeZone(ctx, 1, zones[1]); err != nil {
			t.Errorf("naming the compute zone back: %v", err)
		}
	})
	g.Eventually(func(g Gomega) {
		g.Expect(w.driverTopology(g)).To(Equal("false"))
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	w.waitAvailable(t)
	off()
	// A claim made meanwhile gets a volume in Cinder's default zone, the node's, and a PV
	// without a zone.
	ns := w.realNamespace(t, "real-topology")
	g.Expect(w.Guest.Create(ctx, claim(ns, "unzoned", "", "1Gi"))).To(Succeed())
	w.runToEnd(t, w.pod(ns, "unzoned", "unzoned", "true", corev1.RestartPolicyNever))
	g.Expect(pvZones(w.waitBound(t, ns, "unzoned"))).To(BeEmpty(), "with topology off the PV has no zone")
	on := took(t, "topology turned on after the name came back")
	w.cloudChange(t, "name compute zone "+zones[1]+" back", func() error { return w.Cloud.SetComputeZone(ctx, 1, zones[1]) })
	g.Eventually(func(g Gomega) {
		g.Expect(w.driverTopology(g)).To(Equal("true"))
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	w.waitAvailable(t)
	on()
}

func realCinderOutage(t *testing.T, w *world) {
	ctx := context.Background()
	g := NewWithT(t)
	g.Expect(w.condition(g, names.ConditionTopologyDegraded).Status).To(Equal(operatorv1.ConditionFalse))
	raised := took(t, "TopologyDegraded raised after cinder-api stopped")
	startAgain := w.stopService(t, realcloud.ServiceCinderAPI)
	g.Eventually(func(g Gomega) {
		c := w.condition(g, names.ConditionTopologyDegraded)
		g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue), "%s: %s", c.Reason, c.Message)
		t.Logf("%s: %s: %s", names.ConditionTopologyDegraded, c.Reason, c.Message)
	}).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed())
	raised()
	g.Expect(w.available(ctx)).To(BeTrue(), "the driver stays Available while Cinder's API is down")
	cleared := took(t, "TopologyDegraded cleared after cinder-api returned")
	startAgain()
	g.Eventually(func(g Gomega) {
		g.Expect(w.condition(g, names.ConditionTopologyDegraded).Status).To(Equal(operatorv1.ConditionFalse))
	}).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed())
	cleared()
}

// realRotation rotates the cluster's credential as a platform team does once the cloud's
// administrators have let its user list Cinder's services (a role the cloud's policy names): to
// an application credential, which carries the user's roles as they are when it is made, then
// the old password goes. The world keeps that credential; the cloud takes the role and the
// credential back when the world's test ends.
func realRotation(t *testing.T, w *world) {
	ctx := context.Background()
	g := NewWithT(t)
	degraded := w.watchDegraded(t)
	nodeBefore := w.daemonSet(g)
	rsBefore := w.controllerReplicaSets(g)
	oldPassword := w.Cloud.Member().AuthInfo.Password
	ns := w.realNamespace(t, "real-rotation")
	inUse := w.volumeInUse(t, ns)

	w.cloudChange(t, "let the member list Cinder's services", func() error {
		w.afterCloud(func() error { return w.Cloud.AllowServiceListing(ctx, false) })
		return w.Cloud.AllowServiceListing(ctx, true)
	})
	cred, id, err := w.Cloud.NewAppCredential(ctx, "rotated-"+w.Env.Mode)
	g.Expect(err).NotTo(HaveOccurred())
	w.cleanupAfterWorld(func() error { return w.Cloud.DeleteAppCredential(ctx, id) })
	rotated := took(t, "controller rolled after the rotation")
	w.setCloud(t, cred)
	g.Eventually(func(g Gomega) {
		g.Expect(len(w.controllerReplicaSets(g))).To(BeNumerically(">", len(rsBefore)), "the controller rolls")
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	w.waitAvailable(t)
	rotated()
	g.Expect(w.daemonSet(g).Generation).To(Equal(nodeBefore.Generation), "the node plugin does not roll")

	// The old credential goes: nothing uses it any more, so nothing fails.
	w.cloudChange(t, "change the member's password", func() error {
		return w.Cloud.SetMemberPassword(ctx, fmt.Sprintf("changed-%d", time.Now().UnixNano()))
	})
	g.Expect(w.Guest.Create(ctx, claim(ns, "after", "", "1Gi"))).To(Succeed())
	w.runToEnd(t, w.pod(ns, "after", "after", "true", corev1.RestartPolicyNever))
	w.waitBound(t, ns, "after")
	got := &corev1.Pod{}
	g.Expect(w.Guest.Get(ctx, client.ObjectKeyFromObject(inUse), got)).To(Succeed())
	g.Expect(got.Status.Phase).To(Equal(corev1.PodRunning), "the pod using a volume through the rotation: %s", podSummary(got))
	g.Expect(got.Status.ContainerStatuses[0].RestartCount).To(BeZero())
	g.Expect(degraded.Stop()).To(BeEmpty(), "no Degraded condition was True through the rotation")
	if w.Env.Mode == env.ModeHyperShift {
		w.expectNoSecretInGuest(t, oldPassword, cred.AuthInfo.ApplicationCredentialSecret)
	}
}

// expectNoSecretInGuest fails if any Secret or ConfigMap of the guest holds one of secrets: on
// HyperShift the cloud's credentials stay in the management cluster.
func (w *world) expectNoSecretInGuest(t testing.TB, secrets ...string) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	sl := &corev1.SecretList{}
	g.Expect(w.Guest.List(ctx, sl)).To(Succeed())
	cl := &corev1.ConfigMapList{}
	g.Expect(w.Guest.List(ctx, cl)).To(Succeed())
	for _, secret := range secrets {
		for _, s := range sl.Items {
			for k, v := range s.Data {
				g.Expect(strings.Contains(string(v), secret)).To(BeFalse(), "Secret %s/%s key %s holds a credential", s.Namespace, s.Name, k)
			}
		}
		for _, c := range cl.Items {
			for k, v := range c.Data {
				g.Expect(strings.Contains(v, secret)).To(BeFalse(), "ConfigMap %s/%s key %s holds a credential", c.Namespace, c.Name, k)
			}
		}
	}
}

// setCloud writes cloud as the credentials Secret's clouds.yaml entry, as a platform team rotating
// the cluster's credential does.
func (w *world) setCloud(t testing.TB, cloud clouds.Cloud) {
	t.Helper()
	cloud.CACertFile = ""
	out, err := yaml.Marshal(clouds.Clouds{Clouds: map[string]clouds.Cloud{env.CloudName: cloud}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: names.CredentialsSecret}}
	NewWithT(t).Expect(env.Edit(context.Background(), w.Mgmt, s, "someone", func(s *corev1.Secret) {
		s.Data[names.KeyCloudsYAML] = out
	})).To(Succeed())
}

// realBackupWarning runs on the credential realRotation left, which may list Cinder's services.
func realBackupWarning(t *testing.T, w *world) {
	g := NewWithT(t)
	config := map[string]string{names.KeyBackupSnapshotClass: "true"}
	w.setUserConfig(t, config)
	t.Cleanup(func() { w.setUserConfig(t, map[string]string{}) })
	expect := func(status operatorv1.ConditionStatus, reason string) {
		t.Helper()
		defer took(t, fmt.Sprintf("%s %s %s", names.ConditionBackupWarning, status, reason))()
		g.Eventually(func(g Gomega) {
			c := w.condition(g, names.ConditionBackupWarning)
			g.Expect(c.Status).To(Equal(status), "%s: %s", c.Reason, c.Message)
			g.Expect(c.Reason).To(Equal(reason), c.Message)
		}).WithTimeout(3 * time.Minute).WithPolling(poll).Should(Succeed())
	}
	expect(operatorv1.ConditionFalse, names.ReasonAsExpected)

	config[names.KeyBackupAvailabilityZone] = w.Cloud.VolumeZones()[1]
	w.setUserConfig(t, config)
	expect(operatorv1.ConditionTrue, names.ReasonNoBackupServiceInZone)
	delete(config, names.KeyBackupAvailabilityZone)
	w.setUserConfig(t, config)
	expect(operatorv1.ConditionFalse, names.ReasonAsExpected)

	startAgain := w.stopService(t, realcloud.ServiceCinderBackup)
	// Cinder calls a service down once its heartbeats stop for service_down_time.
	expect(operatorv1.ConditionTrue, names.ReasonNoBackupService)
	startAgain()
	expect(operatorv1.ConditionFalse, names.ReasonAsExpected)
}
