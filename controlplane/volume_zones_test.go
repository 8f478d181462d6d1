package controlplane

import (
	"fmt"
	"maps"
	"runtime"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/metrics"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// pvIn returns a PersistentVolume of driver whose node affinity requires zones (none: no
// affinity), with the fields a cache transform must drop.
func pvIn(name, driver string, zones ...string) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: "uid-" + types.UID(name), ResourceVersion: "7",
			Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": driver}},
		Spec: corev1.PersistentVolumeSpec{
			ClaimRef:         &corev1.ObjectReference{Namespace: "apps", Name: "data"},
			StorageClassName: "standard-csi",
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: driver, VolumeHandle: "0b5c6c5e-volume", VolumeAttributes: map[string]string{"a": "b"},
			}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
	if len(zones) > 0 {
		var terms []corev1.NodeSelectorTerm
		for _, z := range zones {
			terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpExists},
				{Key: names.TopologyKey, Operator: corev1.NodeSelectorOpIn, Values: []string{z}},
			}})
		}
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}
	}
	return pv
}

func TestVolumeZone(t *testing.T) {
	for _, tc := range []struct {
		pv         *corev1.PersistentVolume
		zone       string
		driverOnes bool
	}{
		{pvIn("zoned", names.DriverName, "az-1"), "az-1", true},
		{pvIn("no-topology", names.DriverName), "", true},
		{pvIn("two-terms", names.DriverName, "az-2", "az-1"), "az-1", true},
		{pvIn("other-driver", "manila.csi.openstack.org", "az-1"), "", false},
		{&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "nfs"}}, "", false},
	} {
		t.Run(tc.pv.Name, func(t *testing.T) {
			zone, ours := volumeZone(tc.pv)
			if zone != tc.zone || ours != tc.driverOnes {
				t.Errorf("volumeZone = %q, %v; want %q, %v", zone, ours, tc.zone, tc.driverOnes)
			}
		})
	}
}

// TestVolumeZoneOnly checks that the cache keeps of a volume only its name and what the count
// reads, and counts the same from it.
func TestVolumeZoneOnly(t *testing.T) {
	g := NewWithT(t)
	for _, pv := range []*corev1.PersistentVolume{
		pvIn("zoned", names.DriverName, "az-1"), pvIn("no-topology", names.DriverName),
		pvIn("two-terms", names.DriverName, "az-2", "az-1"), pvIn("other-driver", "manila.csi.openstack.org", "az-1"),
	} {
		out, err := volumeZoneOnly(pv)
		g.Expect(err).NotTo(HaveOccurred())
		kept := out.(*corev1.PersistentVolume)
		g.Expect(kept.Name).To(Equal(pv.Name))
		g.Expect(kept.ResourceVersion).To(Equal(pv.ResourceVersion))
		g.Expect(kept.Labels).To(BeEmpty())
		g.Expect(kept.Annotations).To(BeEmpty())
		g.Expect(kept.Spec.ClaimRef).To(BeNil())
		g.Expect(kept.Status).To(BeZero())
		if kept.Spec.CSI != nil {
			g.Expect(*kept.Spec.CSI).To(Equal(corev1.CSIPersistentVolumeSource{Driver: names.DriverName}))
		}
		zone, ours := volumeZone(pv)
		keptZone, keptOurs := volumeZone(kept)
		g.Expect([]any{keptZone, keptOurs}).To(Equal([]any{zone, ours}), pv.Name)
	}
	tombstone := toolscache.DeletedFinalStateUnknown{Key: "x"}
	out, err := volumeZoneOnly(tombstone)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(tombstone))
}

// TestVolumeCounter drives the counter as the informer does: the volumes of the driver are
// counted by zone, a zone without volumes reports none, another driver's volumes never count,
// a volume moved counts in its new zone, a deletion seen late (a tombstone) is counted, and past
// metrics.MaxVolumeZones zones the rest go under metrics.OtherZones.
func TestVolumeCounter(t *testing.T) {
	g := NewWithT(t)
	v := newVolumeCounter()
	var last map[string]int
	v.set = func(m map[string]int) { last = maps.Clone(m) }

	v.OnAdd(pvIn("a", names.DriverName, "az-1"), true)
	v.OnAdd(pvIn("b", names.DriverName, "az-1"), true)
	v.OnAdd(pvIn("c", names.DriverName, "az-2"), true)
	v.OnAdd(pvIn("d", names.DriverName), false)
	v.OnAdd(pvIn("manila", "manila.csi.openstack.org", "az-1"), false)
	g.Expect(last).To(Equal(map[string]int{"az-1": 2, "az-2": 1, "": 1}))

	// An update that changes nothing the count reads records nothing.
	last = nil
	v.OnUpdate(pvIn("a", names.DriverName, "az-1"), pvIn("a", names.DriverName, "az-1"))
	g.Expect(last).To(BeNil())

	v.OnUpdate(pvIn("c", names.DriverName, "az-2"), pvIn("c", names.DriverName, "az-1"))
	g.Expect(last).To(Equal(map[string]int{"az-1": 3, "": 1}))
	v.OnDelete(pvIn("a", names.DriverName, "az-1"))
	v.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "b", Obj: pvIn("b", names.DriverName, "az-1")})
	g.Expect(last).To(Equal(map[string]int{"az-1": 1, "": 1}))
	last = nil
	v.OnDelete(pvIn("manila", "manila.csi.openstack.org", "az-1"))
	g.Expect(last).To(BeNil(), "another driver's volume changes no count")

	for i := range metrics.MaxVolumeZones + 3 {
		v.OnAdd(pvIn(fmt.Sprintf("many-%02d", i), names.DriverName, fmt.Sprintf("zone-%02d", i)), false)
	}
	g.Expect(last).To(HaveLen(metrics.MaxVolumeZones + 1))
	total := 0
	for _, n := range last {
		total += n
	}
	g.Expect(total).To(Equal(2 + metrics.MaxVolumeZones + 3))
	// In name order "" and az-1 come first, so the last five zones are counted together.
	g.Expect(last).To(HaveKeyWithValue(metrics.OtherZones, 5))
}

// BenchmarkVolumeCacheMemory reports what the cache holds per PersistentVolume of the driver once
// volumeZoneOnly has cut it down, against the whole volume as the API server sends it.
func BenchmarkVolumeCacheMemory(b *testing.B) {
	const n = 10000
	var whole, kept uint64
	for b.Loop() {
		before := liveHeap()
		full := make([]*corev1.PersistentVolume, n)
		for i := range full {
			full[i] = pvIn(fmt.Sprintf("pvc-%036d", i), names.DriverName, "az-1")
		}
		afterFull := liveHeap()
		cut := make([]any, n)
		for i, pv := range full {
			cut[i], _ = volumeZoneOnly(pv)
		}
		full = nil
		afterCut := liveHeap()
		whole, kept = (afterFull-before)/n, (afterCut-before)/n
		runtime.KeepAlive(cut)
		runtime.KeepAlive(full)
	}
	b.ReportMetric(float64(whole), "B/whole-volume")
	b.ReportMetric(float64(kept), "B/cached-volume")
}

// liveHeap is the live heap after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
