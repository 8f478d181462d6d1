//go:build e2e

package storage

import (
	"context"
	"fmt"
	"testing"
	"time"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/zoneclasses"
)

// The opt-in features, on real nodes, in a cloud of two compute zones and two volume zones where
// one pair has different names: the world's zone (both), computeOnlyZone (compute) and
// volumeOnlyZone (volume), mapped to each other in the user's configuration. Each warning is
// shown raised by its cause and cleared once the cause is gone, with how long that took.

const (
	computeOnlyZone = "az-compute-b"
	volumeOnlyZone  = "az-volume-b"
	// hostZoneLabel is the zone label the cloud provider puts on nodes.
	hostZoneLabel = "topology.kubernetes.io/zone"
)

// featureConfig is the user's cinder-csi-config with every feature on.
func featureConfig(blockStorage string) map[string]string {
	return map[string]string{
		names.KeyUserConfig:          "[BlockStorage]\n" + blockStorage,
		names.KeyZoneStorageClasses:  "true",
		names.KeyZoneMapping:         computeOnlyZone + "=" + volumeOnlyZone,
		names.KeyBackupSnapshotClass: "true",
		names.KeyPVCAnnotations:      "true",
	}
}

func features(t *testing.T, w *world) {
	ctx := context.Background()
	w.OpenStack.SetComputeZones(fakeopenstack.Zone{Name: w.Zone, Available: true}, fakeopenstack.Zone{Name: computeOnlyZone, Available: true})
	w.OpenStack.SetVolumeZones(fakeopenstack.Zone{Name: w.Zone, Available: true}, fakeopenstack.Zone{Name: volumeOnlyZone, Available: true})
	// Two backends in the node's zone, for placement hints to choose between; they stay after the
	// scenario, where they only spread volumes.
	w.OpenStack.SetBackends(fakeopenstack.Backend{Host: "cinder@lvm-1", Zone: w.Zone}, fakeopenstack.Backend{Host: "cinder@lvm-2", Zone: w.Zone},
		fakeopenstack.Backend{Host: "cinder@lvm-b", Zone: volumeOnlyZone})
	t.Cleanup(func() {
		w.OpenStack.SetComputeZones(fakeopenstack.Zone{Name: w.Zone, Available: true})
		w.OpenStack.SetVolumeZones(fakeopenstack.Zone{Name: w.Zone, Available: true})
		_ = w.Guest.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.OpenShiftConfigNamespace, Name: names.UserConfigMap}})
	})

	// The zone scenarios' claims outlive their subtests: the class of a zone that goes away is
	// kept while one of them uses it.
	ns := w.namespace(t, "zones")

	t.Run("When the configuration holds a [Global] section, an unknown [BlockStorage] key and no attach limit, warnings should say so without echoing values, and clear within seconds of the fix", func(t *testing.T) {
		g := NewWithT(t)
		w.setUserConfig(t, map[string]string{names.KeyUserConfig: "[Global]\npassword = not-for-the-guest\n[BlockStorage]\nno-such-key = 1\n"})
		var keys, limit operatorv1.OperatorCondition
		g.Eventually(func(g Gomega) {
			keys = w.condition(g, names.ConditionConfigKeysWarning)
			limit = w.condition(g, names.ConditionAttachLimitWarning)
			g.Expect(keys.Status).To(Equal(operatorv1.ConditionTrue))
			g.Expect(limit.Status).To(Equal(operatorv1.ConditionTrue))
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
		g.Expect(keys.Message).To(And(ContainSubstring("Global"), ContainSubstring("no-such-key")))
		g.Expect(keys.Message + limit.Message).NotTo(ContainSubstring("not-for-the-guest"))
		g.Expect(limit.Message).To(ContainSubstring("node-volume-attach-limit"))
		t.Logf("%s: %s", names.ConditionConfigKeysWarning, keys.Message)
		t.Logf("%s: %s", names.ConditionAttachLimitWarning, limit.Message)
		g.Eventually(func(g Gomega) {
			g.Expect(w.driverEventNotes(g, corev1.EventTypeWarning, keys.Reason)).To(ContainElement(And(
				HavePrefix(names.ConditionConfigKeysWarning+": "), ContainSubstring("no-such-key"), Not(ContainSubstring("not-for-the-guest")))))
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed(), "a Warning Event says the warning rose")

		cleared := took(t, "both warnings cleared after the fix")
		w.setUserConfig(t, featureConfig("node-volume-attach-limit = 25\n"))
		g.Eventually(func(g Gomega) {
			g.Expect(w.condition(g, names.ConditionConfigKeysWarning).Status).To(Equal(operatorv1.ConditionFalse))
			g.Expect(w.condition(g, names.ConditionAttachLimitWarning).Status).To(Equal(operatorv1.ConditionFalse))
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
		cleared()
		g.Eventually(func(g Gomega) {
			g.Expect(w.driverEventNotes(g, corev1.EventTypeNormal, "Recovered")).To(ContainElements(
				names.ConditionConfigKeysWarning+" no longer applies.", names.ConditionAttachLimitWarning+" no longer applies."))
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed(), "Normal Events say the warnings cleared")
		w.waitAvailable(t)
		g.Eventually(func(g Gomega) {
			n := &storagev1.CSINode{}
			g.Expect(w.Guest.Get(ctx, client.ObjectKey{Name: w.GuestNode}, n)).To(Succeed())
			var count *int32
			for _, d := range n.Spec.Drivers {
				if d.Name == names.DriverName && d.Allocatable != nil {
					count = d.Allocatable.Count
				}
			}
			g.Expect(count).To(HaveValue(BeEquivalentTo(25)), "the node plugin reports the limit to the scheduler")
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	})

	t.Run("When OpenStack stops answering the zone listing, TopologyDegraded should rise and clear within seconds of its return", func(t *testing.T) {
		g := NewWithT(t)
		w.OpenStack.SetFault(fakeopenstack.EndpointVolume, fakeopenstack.FaultServerError)
		g.Eventually(func(g Gomega) {
			g.Expect(w.condition(g, names.ConditionTopologyDegraded).Status).To(Equal(operatorv1.ConditionTrue))
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
		cleared := took(t, "TopologyDegraded cleared after OpenStack answered again")
		w.OpenStack.ClearFaults()
		g.Eventually(func(g Gomega) {
			g.Expect(w.condition(g, names.ConditionTopologyDegraded).Status).To(Equal(operatorv1.ConditionFalse))
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
		cleared()
	})

	t.Run("When per-zone classes are asked for with topology off, each volume zone should get a class that pods use; with topology on, classes should pin the compute zones, the mapped pair included", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			g.Expect(w.driverTopology(g)).To(Equal("false"), "a compute zone Cinder does not have turns topology off")
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
		w.waitAvailable(t)
		for _, zone := range []string{w.Zone, volumeOnlyZone} {
			sc := w.zoneClass(g, zone, nil)
			g.Expect(sc.Annotations).NotTo(HaveKey(names.DefaultStorageClassAnnotation))
			name := "in-" + zone
			g.Expect(w.Guest.Create(ctx, claim(ns, name, sc.Name, "1Gi"))).To(Succeed())
			g.Expect(w.runToEnd(t, w.pod(ns, name, name, "echo "+zone+" > /data/zone; sync; cat /data/zone > /dev/termination-log", corev1.RestartPolicyNever))).To(Equal(zone))
			pv := w.waitBound(t, ns, name)
			vol, ok := w.OpenStack.Volume(pv.Spec.CSI.VolumeHandle)
			g.Expect(ok).To(BeTrue())
			g.Expect(vol.AvailabilityZone).To(Equal(zone), "the class creates its volumes in its zone")
		}

		pinned := took(t, "classes pinned after topology turned on")
		// Topology on with zones of different names: the mapped class sets availability, and
		// ignore-volume-az pins its volumes to the compute zone the claim's pod was placed in
		// rather than to the volume zone, where no node is.
		cfg := featureConfig("node-volume-attach-limit = 25\nignore-volume-az = true\n")
		cfg[names.KeyEnableTopology] = "true"
		w.setUserConfig(t, cfg)
		w.zoneClass(g, w.Zone, []string{w.Zone})
		w.zoneClass(g, volumeOnlyZone, []string{computeOnlyZone})
		pinned()
		g.Eventually(func(g Gomega) {
			g.Expect(w.driverTopology(g)).To(Equal("true"))
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
		w.waitAvailable(t)
		g.Expect(w.Guest.Create(ctx, claim(ns, "pinned", zoneclasses.ClassPrefix+w.Zone, "1Gi"))).To(Succeed())
		w.runToEnd(t, w.pod(ns, "pinned", "pinned", "true", corev1.RestartPolicyNever))
		g.Expect(pvZones(w.waitBound(t, ns, "pinned"))).To(ConsistOf(w.Zone))
	})

	t.Run("When a node is in a compute zone no volume zone serves under topology, a warning should say so and clear within seconds once the node is not", func(t *testing.T) {
		g := NewWithT(t)
		w.labelNodeZone(t, computeOnlyZone)
		var c operatorv1.OperatorCondition
		g.Eventually(func(g Gomega) {
			c = w.condition(g, names.ConditionZoneWarning)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue))
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
		g.Expect(c.Message).To(ContainSubstring(computeOnlyZone))
		t.Logf("%s: %s", names.ConditionZoneWarning, c.Message)
		cleared := took(t, "zone warning cleared after the node's label was fixed")
		w.labelNodeZone(t, w.Zone)
		g.Eventually(func(g Gomega) {
			g.Expect(w.condition(g, names.ConditionZoneWarning).Status).To(Equal(operatorv1.ConditionFalse))
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
		cleared()
	})

	t.Run("When a volume zone goes away while a claim uses its class, the class should stay with a warning until the claim is gone", func(t *testing.T) {
		g := NewWithT(t)
		w.OpenStack.SetVolumeZones(fakeopenstack.Zone{Name: w.Zone, Available: true})
		class := zoneclasses.ClassPrefix + volumeOnlyZone
		var c operatorv1.OperatorCondition
		g.Eventually(func(g Gomega) {
			c = w.condition(g, names.ConditionZoneWarning)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue))
			g.Expect(c.Message).To(ContainSubstring(class))
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
		t.Logf("%s: %s", names.ConditionZoneWarning, c.Message)
		g.Expect(w.Guest.Get(ctx, client.ObjectKey{Name: class}, &storagev1.StorageClass{})).To(Succeed(), "the class a claim uses is kept")

		gone := took(t, "class deleted after its last claim")
		// A claim stays while a pod that used it exists, even one that has ended.
		w.deletePod(t, ns, "in-"+volumeOnlyZone)
		g.Expect(w.Guest.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "in-" + volumeOnlyZone}})).To(Succeed())
		g.Eventually(func(g Gomega) {
			err := w.Guest.Get(ctx, client.ObjectKey{Name: class}, &storagev1.StorageClass{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the class is deleted: %v", err)
			g.Expect(w.condition(g, names.ConditionZoneWarning).Status).To(Equal(operatorv1.ConditionFalse))
		}).WithTimeout(2 * podTimeout).WithPolling(poll).Should(Succeed())
		gone()
		w.OpenStack.SetVolumeZones(fakeopenstack.Zone{Name: w.Zone, Available: true}, fakeopenstack.Zone{Name: volumeOnlyZone, Available: true})
	})

	t.Run("When a claim in use is snapshotted to a Cinder backup, a claim restored from it should have the data after the source volume is deleted", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			g.Expect(w.condition(g, names.ConditionBackupWarning).Status).To(Equal(operatorv1.ConditionFalse))
			vsc := &snapshotv1.VolumeSnapshotClass{}
			g.Expect(w.Guest.Get(ctx, client.ObjectKey{Name: names.BackupSnapshotClass}, vsc)).To(Succeed())
			g.Expect(vsc.Parameters).To(HaveKeyWithValue("type", "backup"))
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
		ns := w.namespace(t, "backup")
		token := fmt.Sprintf("backed-up-%d", time.Now().UnixNano())
		g.Expect(w.Guest.Create(ctx, claim(ns, "source", "", "1Gi"))).To(Succeed())
		w.startRunning(t, w.syncedWriter(ns, "source", token, "1"))
		pv := w.waitBound(t, ns, "source")
		backedUp := took(t, "backup snapshot ready")
		snap := w.snapshotWith(t, ns, "backup", "source", names.BackupSnapshotClass)
		backedUp()
		g.Expect(w.OpenStack.Backups()).NotTo(BeEmpty(), "Cinder has the backup")

		w.deletePod(t, ns, "writer")
		g.Expect(w.Guest.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "source"}})).To(Succeed())
		g.Eventually(func(g Gomega) {
			_, exists := w.OpenStack.Volume(pv.Spec.CSI.VolumeHandle)
			g.Expect(exists).To(BeFalse(), "the source volume is deleted")
		}).WithTimeout(goneTimeout).WithPolling(poll).Should(Succeed())

		restored := claim(ns, "restored", "", "1Gi")
		restored.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: snap}
		g.Expect(w.Guest.Create(ctx, restored)).To(Succeed())
		g.Expect(w.runToEnd(t, w.pod(ns, "reader", "restored", "cat /data/file > /dev/termination-log", corev1.RestartPolicyNever))).To(Equal(token))
	})

	t.Run("When Cinder's backup service goes down, a warning should say so and clear within seconds of its return", func(t *testing.T) {
		g := NewWithT(t)
		w.OpenStack.SetBackupServices(fakeopenstack.BackupService{Zone: w.Zone, Down: true})
		var c operatorv1.OperatorCondition
		g.Eventually(func(g Gomega) {
			c = w.condition(g, names.ConditionBackupWarning)
			g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue))
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
		t.Logf("%s: %s", names.ConditionBackupWarning, c.Message)
		cleared := took(t, "backup warning cleared after the service returned")
		w.OpenStack.SetBackupServices(fakeopenstack.BackupService{Zone: w.Zone})
		g.Eventually(func(g Gomega) {
			g.Expect(w.condition(g, names.ConditionBackupWarning).Status).To(Equal(operatorv1.ConditionFalse))
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
		cleared()
	})

	t.Run("When a claim asks for anti-affinity with a volume, or affinity, Cinder's scheduler should follow the hint against its own choice", func(t *testing.T) {
		g := NewWithT(t)
		ns := w.namespace(t, "placement")
		// The fake's scheduler, without hints, takes the backend of the zone with the fewest
		// volumes, the first on a tie. Each claim names, as its hint, a volume that makes the
		// hinted backend the one the scheduler would not have taken: anti-affinity with a volume
		// on its choice, affinity with a volume on the other backend.
		backends := []string{"cinder@lvm-1#pool", "cinder@lvm-2#pool"}
		choice := func() (chosen, other string, on map[string][]string) {
			on = map[string][]string{}
			for _, v := range w.OpenStack.Volumes() {
				on[v.Backend] = append(on[v.Backend], v.ID)
			}
			if len(on[backends[1]]) < len(on[backends[0]]) {
				return backends[1], backends[0], on
			}
			return backends[0], backends[1], on
		}
		provision := func(name string, annotations map[string]string) string {
			pvc := claim(ns, name, "", "1Gi")
			pvc.Annotations = annotations
			g.Expect(w.Guest.Create(ctx, pvc)).To(Succeed())
			w.runToEnd(t, w.pod(ns, name, name, "true", corev1.RestartPolicyNever))
			vol, ok := w.OpenStack.Volume(w.waitBound(t, ns, name).Spec.CSI.VolumeHandle)
			g.Expect(ok).To(BeTrue())
			return vol.Backend
		}
		for _, c := range []struct{ name, annotation string }{
			{"apart", "cinder.csi.openstack.org/anti-affinity"},
			{"together", "cinder.csi.openstack.org/affinity"},
		} {
			var chosen, other, target string
			for i := 0; target == "" && i < 3; i++ {
				var on map[string][]string
				chosen, other, on = choice()
				hinted := on[chosen]
				if c.name == "together" {
					hinted = on[other]
				}
				if len(hinted) > 0 {
					target = hinted[0]
					break
				}
				// No volume to name yet: one more claim without a hint fills the chosen backend.
				provision(fmt.Sprintf("%s-filler-%d", c.name, i), nil)
			}
			g.Expect(target).NotTo(BeEmpty(), "a volume to name in the hint")
			got := provision(c.name, map[string]string{c.annotation: target})
			t.Logf("%s (%s=%s): on %s; without the hint the scheduler takes %s", c.name, c.annotation, target, got, chosen)
			g.Expect(got).To(Equal(other), c.name)
		}
	})

	t.Run("When the features are turned off again, their classes should be deleted and the warnings clear", func(t *testing.T) {
		g := NewWithT(t)
		off := took(t, "features off")
		g.Expect(w.Guest.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.OpenShiftConfigNamespace, Name: names.UserConfigMap}})).To(Succeed())
		w.OpenStack.SetComputeZones(fakeopenstack.Zone{Name: w.Zone, Available: true})
		w.OpenStack.SetVolumeZones(fakeopenstack.Zone{Name: w.Zone, Available: true})
		g.Eventually(func(g Gomega) {
			scs := &storagev1.StorageClassList{}
			g.Expect(w.Guest.List(ctx, scs, client.HasLabels{names.ZoneClassLabel})).To(Succeed())
			var left []string
			for _, sc := range scs.Items {
				left = append(left, sc.Name)
			}
			// The zone's class is kept while the zones scenario's claims use it.
			g.Expect(left).To(ConsistOf(zoneclasses.ClassPrefix + w.Zone))
			err := w.Guest.Get(ctx, client.ObjectKey{Name: names.BackupSnapshotClass}, &snapshotv1.VolumeSnapshotClass{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the backup class is deleted: %v", err)
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
		g.Expect(w.Guest.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))).To(Succeed())
		g.Expect(w.Guest.DeleteAllOf(ctx, &corev1.PersistentVolumeClaim{}, client.InNamespace(ns))).To(Succeed())
		g.Eventually(func(g Gomega) {
			scs := &storagev1.StorageClassList{}
			g.Expect(w.Guest.List(ctx, scs, client.HasLabels{names.ZoneClassLabel})).To(Succeed())
			g.Expect(scs.Items).To(BeEmpty())
			g.Expect(w.condition(g, names.ConditionZoneWarning).Status).To(Equal(operatorv1.ConditionFalse))
		}).WithTimeout(2 * podTimeout).WithPolling(poll).Should(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(w.driverTopology(g)).To(Equal("true"))
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
		w.waitAvailable(t)
		off()
	})
}

// setUserConfig creates or replaces the user's openshift-config/cinder-csi-config.
func (w *world) setUserConfig(t testing.TB, data map[string]string) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.OpenShiftConfigNamespace}}
	if err := w.Guest.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: names.OpenShiftConfigNamespace, Name: names.UserConfigMap}}
	err := w.Guest.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	switch {
	case apierrors.IsNotFound(err):
		cm.Data = data
		g.Expect(w.Guest.Create(ctx, cm)).To(Succeed())
	case err == nil:
		g.Expect(env.Edit(ctx, w.Guest, cm, "someone", func(cm *corev1.ConfigMap) { cm.Data = data })).To(Succeed())
	default:
		t.Fatal(err)
	}
}

// condition returns the ClusterCSIDriver's condition of type typ, failing g while there is none.
func (w *world) condition(g Gomega, typ string) operatorv1.OperatorCondition {
	d := &operatorv1.ClusterCSIDriver{}
	g.Expect(w.Guest.Get(context.Background(), client.ObjectKey{Name: names.ClusterCSIDriverName}, d)).To(Succeed())
	c := conditions.Find(d.Status.Conditions, typ)
	g.Expect(c).NotTo(BeNil(), "no condition %s yet", typ)
	return *c
}

// zoneClass waits for the per-zone class of zone, pinned to computeZones (none: not pinned), and
// returns it.
func (w *world) zoneClass(g Gomega, zone string, computeZones []string) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{}
	g.Eventually(func(g Gomega) {
		g.Expect(w.Guest.Get(context.Background(), client.ObjectKey{Name: zoneclasses.ClassPrefix + zone}, sc)).To(Succeed())
		g.Expect(sc.Parameters).To(HaveKeyWithValue("availability", zone))
		g.Expect(sc.Labels).To(HaveKeyWithValue(names.ZoneClassLabel, zone))
		var pinned []string
		for _, term := range sc.AllowedTopologies {
			for _, e := range term.MatchLabelExpressions {
				pinned = append(pinned, e.Values...)
			}
		}
		if len(computeZones) == 0 {
			g.Expect(pinned).To(BeEmpty())
		} else {
			g.Expect(pinned).To(ConsistOf(computeZones))
		}
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	return sc
}

// labelNodeZone sets the cloud provider's zone label on the guest's node.
func (w *world) labelNodeZone(t testing.TB, zone string) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: w.GuestNode}}
	g := NewWithT(t)
	g.Expect(env.Edit(context.Background(), w.Guest, node, "someone", func(n *corev1.Node) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[hostZoneLabel] = zone
	})).To(Succeed())
}

// driverEventNotes returns the notes of the Events of type and reason about the ClusterCSIDriver
// in the guest cluster (it is cluster-scoped: its Events are in the default namespace).
func (w *world) driverEventNotes(g Gomega, eventType, reason string) []string {
	l := &eventsv1.EventList{}
	g.Expect(w.Guest.List(context.Background(), l)).To(Succeed())
	var notes []string
	for _, ev := range l.Items {
		if ev.Regarding.Kind == "ClusterCSIDriver" && ev.Regarding.Name == names.ClusterCSIDriverName && ev.Type == eventType && ev.Reason == reason {
			notes = append(notes, ev.Note)
		}
	}
	return notes
}
