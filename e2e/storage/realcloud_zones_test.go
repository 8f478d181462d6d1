//go:build e2e

package storage

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	volumeazs "github.com/gophercloud/gophercloud/v2/openstack/blockstorage/v3/availabilityzones"
	computeazs "github.com/gophercloud/gophercloud/v2/openstack/compute/v2/availabilityzones"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/zoneclasses"
)

// realZonesDiffer runs the third zone shape on the real cloud: no compute zone has a volume zone
// of its name. Both of Cinder's zones are renamed (the cloud's administrators' rename, which
// restarts cinder-volume, cinder-api and cinder-backup), and the operator is checked against
// what it promises for that shape:
//
//   - the topology decision compares names only (shared/openstack.TopologyEnabled), so topology goes
//     off, and TopologyDegraded says why;
//   - zone_mapping does not turn it on again: with topology off the per-zone classes are one
//     per volume zone and pin no compute zone (zoneclasses.Decide), the mapping unused;
//   - with enable_topology "true" as well, the classes pin the compute zones the mapping names
//     for their volume zones, ignore-volume-az keeps the volumes' topology on the node's
//     compute zone, and ZoneWarning says that standard-csi cannot provision on the node's zone,
//     which Cinder confirms by refusing that zone.
//
// The names come back before the configuration goes: topology, on by the override, then stays on
// when detection decides again, and the driver rolls once more only for the cloud.conf without
// ignore-volume-az.
func realZonesDiffer(t *testing.T, w *world) {
	ctx := context.Background()
	g := NewWithT(t)
	compute, volume := w.Cloud.ComputeZones(), w.Cloud.VolumeZones()
	g.Expect(volume).To(Equal(compute), "the scenario starts from the same names on both sides")
	g.Expect(w.driverTopology(g)).To(Equal("true"))
	node := slices.Index(compute, w.Zone)
	g.Expect(node).NotTo(BeNumerically("<", 0), "the node's zone %q is a compute zone", w.Zone)
	renamed := make([]string, len(volume))
	var pairs []string
	for i, z := range volume {
		renamed[i] = z + "-volume"
		pairs = append(pairs, compute[i]+"="+renamed[i])
	}
	// Runs last, after the namespace's cleanup and the wait for Cinder to be clean: a failure
	// leaves the next world the cloud and the configuration it started with.
	t.Cleanup(func() {
		if !slices.Equal(w.Cloud.VolumeZones(), volume) {
			if err := w.Cloud.SetVolumeZones(ctx, volume); err != nil {
				t.Errorf("naming the volume zones back: %v", err)
			}
		}
		w.setUserConfig(t, map[string]string{})
	})
	ns := w.realNamespace(t, "real-zones")
	degraded := w.watchDegraded(t)
	t.Cleanup(func() { degraded.Stop() })

	off := took(t, "topology turned off after the volume zones were renamed")
	w.cloudChange(t, "rename every volume zone", func() error { return w.Cloud.SetVolumeZones(ctx, renamed) })
	w.logZoneListings(t)
	g.Eventually(func(g Gomega) {
		c := w.condition(g, names.ConditionTopologyDegraded)
		g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse), "%s: %s", c.Reason, c.Message)
		g.Expect(c.Reason).To(Equal(names.ReasonAsExpected))
		g.Expect(c.Message).To(ContainSubstring("no volume availability zone of the same name"))
		g.Expect(w.driverTopology(g)).To(Equal("false"))
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	w.waitAvailable(t)
	off()
	w.logCondition(t, names.ConditionTopologyDegraded)

	// The mapping alone: topology stays as detected, and each volume zone gets a class any
	// node may use.
	config := map[string]string{names.KeyZoneStorageClasses: "true", names.KeyZoneMapping: strings.Join(pairs, ",")}
	classes := took(t, "a class per renamed volume zone, pinned to no compute zone")
	w.setUserConfig(t, config)
	for _, z := range renamed {
		w.zoneClass(g, z, nil)
	}
	classes()
	g.Expect(w.driverTopology(g)).To(Equal("false"), "zone_mapping does not turn topology on")
	g.Expect(w.condition(g, names.ConditionZoneWarning).Status).To(Equal(operatorv1.ConditionFalse))

	pinned := took(t, "topology on and the classes pinned to the mapped compute zones")
	config[names.KeyEnableTopology] = "true"
	config[names.KeyUserConfig] = "[BlockStorage]\nignore-volume-az = true\n"
	w.setUserConfig(t, config)
	for i, z := range renamed {
		w.zoneClass(g, z, []string{compute[i]})
	}
	g.Eventually(func(g Gomega) {
		g.Expect(w.driverTopology(g)).To(Equal("true"))
		c := w.condition(g, names.ConditionTopologyDegraded)
		g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse), "%s: %s", c.Reason, c.Message)
		g.Expect(c.Reason).To(Equal(names.ReasonTopologyOverridden))
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	w.waitAvailable(t)
	pinned()
	w.logCondition(t, names.ConditionTopologyDegraded)
	g.Eventually(func(g Gomega) {
		c := w.condition(g, names.ConditionZoneWarning)
		g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue), "%s: %s", c.Reason, c.Message)
		g.Expect(c.Reason).To(Equal(names.ReasonNodesOutsideVolumeZones))
		g.Expect(c.Message).To(And(ContainSubstring(w.Zone), ContainSubstring(names.StorageClass), ContainSubstring(names.KeyZoneMapping)))
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	w.logCondition(t, names.ConditionZoneWarning)

	// What the warning says, from Cinder: a claim of standard-csi asks for the node's compute
	// zone, which is no volume zone. Its pod waits beside the mapped claim's.
	g.Expect(w.Guest.Create(ctx, claim(ns, "default", "", "1Gi"))).To(Succeed())
	g.Expect(w.Guest.Create(ctx, w.pod(ns, "default", "default", "true", corev1.RestartPolicyNever))).To(Succeed())

	c := w.cinder(t)
	follower := w.Env.Real.Follower()
	class := zoneclasses.ClassPrefix + renamed[node]
	g.Expect(w.Guest.Create(ctx, claim(ns, "mapped", class, "1Gi"))).To(Succeed())
	token := fmt.Sprintf("mapped-%d", time.Now().UnixNano())
	w.startRunning(t, w.pod(ns, "writer", "mapped", "set -e; echo "+token+" > /data/file; sync; sleep 3600", corev1.RestartPolicyNever))
	pv := w.waitBound(t, ns, "mapped")
	id := pv.Spec.CSI.VolumeHandle
	g.Expect(pvZones(pv)).To(ConsistOf(w.Zone), "the PV carries the node's compute zone (ignore-volume-az)")
	g.Eventually(func(g Gomega) {
		vol, ok := cinderVolume(g, c, id)
		g.Expect(ok).To(BeTrue(), "Cinder has no volume %s", id)
		g.Expect(vol.AvailabilityZone).To(Equal(renamed[node]), "the volume is in the volume zone mapped to the node's")
		g.Expect(vol.Status).To(Equal("in-use"))
		g.Expect(vol.Attachments).To(HaveLen(1))
		g.Expect(vol.Attachments[0].ServerID).To(Equal(w.GuestServerID), "attached to the guest node's server")
		d, ok := follower.Device(id)
		g.Expect(ok).To(BeTrue(), "the hypervisor knows the attachment")
		g.Expect(d.Exposed()).To(BeTrue(), "the node has a device for the volume: %s", d.Reason)
	}).WithTimeout(bindTimeout).WithPolling(poll).Should(Succeed())
	t.Logf("Claim on %s: Cinder volume %s in %q, attached to server %s in compute zone %q; PV zones %v",
		class, id, renamed[node], w.GuestServerID, w.Zone, pvZones(pv))
	w.deletePod(t, ns, "writer")
	g.Expect(w.runToEnd(t, w.pod(ns, "reader", "mapped", "cat /data/file > /dev/termination-log", corev1.RestartPolicyNever))).To(Equal(token))

	var refusal string
	g.Eventually(func(g Gomega) {
		refusal = w.claimEvent(g, ns, "default", "ProvisioningFailed")
		g.Expect(refusal).To(ContainSubstring(fmt.Sprintf("Availability zone '%s' is invalid", w.Zone)))
	}).WithTimeout(bindTimeout).WithPolling(poll).Should(Succeed())
	t.Logf("Claim on %s: %s", names.StorageClass, refusal)
	pvc := &corev1.PersistentVolumeClaim{}
	g.Expect(w.Guest.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, pvc)).To(Succeed())
	g.Expect(pvc.Status.Phase).To(Equal(corev1.ClaimPending))

	gone := took(t, "the claims gone and nothing of the cluster left in Cinder")
	for _, name := range []string{"default", "reader"} {
		w.deletePod(t, ns, name)
	}
	g.Expect(w.Guest.DeleteAllOf(ctx, &corev1.PersistentVolumeClaim{}, client.InNamespace(ns))).To(Succeed())
	w.expectCinderClean(t)
	gone()

	back := took(t, "the names back, the configuration removed and topology detected on")
	w.cloudChange(t, "name the volume zones back", func() error { return w.Cloud.SetVolumeZones(ctx, volume) })
	w.logZoneListings(t)
	w.setUserConfig(t, map[string]string{})
	g.Eventually(func(g Gomega) {
		c := w.condition(g, names.ConditionTopologyDegraded)
		g.Expect(c.Status).To(Equal(operatorv1.ConditionFalse), "%s: %s", c.Reason, c.Message)
		g.Expect(c.Reason).To(Equal(names.ReasonAsExpected))
		g.Expect(c.Message).To(ContainSubstring("Topology is enabled"))
		g.Expect(w.driverTopology(g)).To(Equal("true"))
		g.Expect(w.condition(g, names.ConditionZoneWarning).Status).To(Equal(operatorv1.ConditionFalse))
		scs := &storagev1.StorageClassList{}
		g.Expect(w.Guest.List(ctx, scs, client.HasLabels{names.ZoneClassLabel})).To(Succeed())
		g.Expect(scs.Items).To(BeEmpty(), "no per-zone class is asked for")
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	w.waitAvailable(t)
	back()
	w.logCondition(t, names.ConditionTopologyDegraded)

	// cinder-api restarts with each rename, and the operator's zone listing fails meanwhile:
	// that is the only Degraded condition the shape may raise.
	var seen []string
	for _, s := range degraded.Stop() {
		t.Logf("Degraded during the scenario: %s", s)
		if !strings.HasPrefix(s, names.ConditionTopologyDegraded+"=True ("+names.ReasonOpenStackUnavailable+")") {
			seen = append(seen, s)
		}
	}
	g.Expect(seen).To(BeEmpty(), "no Degraded condition but the zone listing's while cinder-api restarted")
}

// logZoneListings logs the zones Nova and Cinder list to the member user, the cluster's
// credential: what the operator decides from.
func (w *world) logZoneListings(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	provider, err := w.Cloud.Client(ctx, w.Cloud.Member())
	g.Expect(err).NotTo(HaveOccurred())
	eo := gophercloud.EndpointOpts{Region: w.Cloud.Region()}
	compute, err := openstack.NewComputeV2(provider, eo)
	g.Expect(err).NotTo(HaveOccurred())
	volume, err := openstack.NewBlockStorageV3(provider, eo)
	g.Expect(err).NotTo(HaveOccurred())
	pages, err := computeazs.List(compute).AllPages(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	czs, err := computeazs.ExtractAvailabilityZones(pages)
	g.Expect(err).NotTo(HaveOccurred())
	pages, err = volumeazs.List(volume).AllPages(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	vzs, err := volumeazs.ExtractAvailabilityZones(pages)
	g.Expect(err).NotTo(HaveOccurred())
	var c, v []string
	for _, z := range czs {
		c = append(c, z.ZoneName)
	}
	for _, z := range vzs {
		v = append(v, z.ZoneName)
	}
	t.Logf("The member's zone lists: Nova %q, Cinder %q", c, v)
}

// logCondition logs the ClusterCSIDriver's condition of type typ.
func (w *world) logCondition(t testing.TB, typ string) {
	t.Helper()
	c := w.condition(NewWithT(t), typ)
	t.Logf("%s=%s (%s): %s", typ, c.Status, c.Reason, c.Message)
}

// claimEvent returns the message of the newest Event of reason about claim ns/name, failing g
// while there is none.
func (w *world) claimEvent(g Gomega, ns, name, reason string) string {
	list := &corev1.EventList{}
	g.Expect(w.Guest.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	var newest *corev1.Event
	for i := range list.Items {
		e := &list.Items[i]
		if e.InvolvedObject.Kind != "PersistentVolumeClaim" || e.InvolvedObject.Name != name || e.Reason != reason {
			continue
		}
		if newest == nil || eventTime(e).After(eventTime(newest)) {
			newest = e
		}
	}
	g.Expect(newest).NotTo(BeNil(), "no %s Event about claim %s/%s", reason, ns, name)
	return newest.Message
}

// eventTime is when an Event last happened, whichever of its times its recorder set.
func eventTime(e *corev1.Event) time.Time {
	for _, t := range []metav1.Time{e.LastTimestamp, e.FirstTimestamp} {
		if !t.IsZero() {
			return t.Time
		}
	}
	return e.EventTime.Time
}
