package guest

import (
	"testing"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/cinder-csi-operator/cinder-csi-operator/guest/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/zoneclasses"
)

func node(name string, labels map[string]string) metav1.PartialObjectMetadata {
	return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func TestNodeZones(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	got := nodeZones([]metav1.PartialObjectMetadata{
		node("a", map[string]string{zoneLabel: "az1"}),
		node("b", map[string]string{zoneLabel: "az1", names.TopologyKey: "other"}),
		node("c", map[string]string{names.TopologyKey: "az2"}),
		node("d", nil),
	})
	g.Expect(got).To(Equal(map[string]int{"az1": 2, "az2": 1}))
}

func TestClaimsByClass(t *testing.T) {
	t.Parallel()
	claim := func(class *string, beta string, phase corev1.PersistentVolumeClaimPhase) corev1.PersistentVolumeClaim {
		c := corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: class}, Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
		if beta != "" {
			c.Annotations = map[string]string{corev1.BetaStorageClassAnnotation: beta}
		}
		return c
	}
	classes := []string{"standard-csi-a", "standard-csi-b"}
	for _, tt := range []struct {
		name   string
		claims []corev1.PersistentVolumeClaim
		want   map[string]int
	}{
		{name: "When no claim names the classes, it should count none", claims: []corev1.PersistentVolumeClaim{claim(ptr.To("standard-csi"), "", corev1.ClaimBound)}, want: map[string]int{}},
		{name: "When claims are Bound or Pending, it should count them", claims: []corev1.PersistentVolumeClaim{
			claim(ptr.To("standard-csi-a"), "", corev1.ClaimBound), claim(ptr.To("standard-csi-a"), "", corev1.ClaimPending),
			claim(ptr.To("standard-csi-b"), "", corev1.ClaimBound),
		}, want: map[string]int{"standard-csi-a": 2, "standard-csi-b": 1}},
		{name: "When a claim is Lost, it should not count it", claims: []corev1.PersistentVolumeClaim{claim(ptr.To("standard-csi-a"), "", corev1.ClaimLost)}, want: map[string]int{}},
		{name: "When a claim names the class by the beta annotation, it should count it", claims: []corev1.PersistentVolumeClaim{claim(nil, "standard-csi-b", corev1.ClaimBound)}, want: map[string]int{"standard-csi-b": 1}},
		{name: "When the field and the annotation differ, it should follow the field", claims: []corev1.PersistentVolumeClaim{claim(ptr.To("other"), "standard-csi-b", corev1.ClaimBound)}, want: map[string]int{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(claimsByClass(tt.claims, classes)).To(Equal(tt.want))
		})
	}
}

func TestZoneWarning(t *testing.T) {
	t.Parallel()
	on := desired.Features{Known: true, Contents: nodeconf.Contents{Topology: true, VolumeZones: []string{"nova"}}}
	const nodesFix = "Map these compute zones to volume zones with zone_mapping and set zone_storage_classes \"true\" in ConfigMap openshift-config/cinder-csi-config, then use the per-zone classes; or set enable_topology \"false\" there."
	asExpected := conditions.Verdict{Status: operatorv1.ConditionFalse, Reason: names.ReasonAsExpected}
	for _, tt := range []struct {
		name string
		in   zoneInputs
		want conditions.Verdict
	}{
		{name: "When every node is in a volume zone, it should be False", in: zoneInputs{Features: on, NodeZones: map[string]int{"nova": 3}}, want: asExpected},
		{name: "When topology is off, it should be False whatever the nodes' zones", in: zoneInputs{
			Features: desired.Features{Known: true, Contents: nodeconf.Contents{VolumeZones: []string{"nova"}}}, NodeZones: map[string]int{"az1": 3}}, want: asExpected},
		{name: "When no zone listing succeeded yet, it should be False", in: zoneInputs{
			Features: desired.Features{Known: true, Contents: nodeconf.Contents{Topology: true}}, NodeZones: map[string]int{"az1": 3}}, want: asExpected},
		{name: "When the nodes were not read, it should be False", in: zoneInputs{Features: on}, want: asExpected},
		{name: "When nodes are in one compute zone that is no volume zone, it should say which and how to fix it", in: zoneInputs{
			Features: on, NodeZones: map[string]int{"nova": 2, "az1": 1}},
			want: conditions.Verdict{Status: operatorv1.ConditionTrue, Reason: names.ReasonNodesOutsideVolumeZones,
				Message: "Compute zone az1 (1 node) has no Cinder volume zone of the same name, and topology is on: claims of StorageClass standard-csi cannot be provisioned on its nodes. " + nodesFix}},
		{name: "When nodes are in many such zones, it should name a few sorted and count the rest", in: zoneInputs{
			Features: on, NodeZones: map[string]int{"e": 1, "d": 1, "c": 2, "b": 1, "a": 5}},
			want: conditions.Verdict{Status: operatorv1.ConditionTrue, Reason: names.ReasonNodesOutsideVolumeZones,
				Message: "Compute zones a, b, c and 2 more (10 nodes) have no Cinder volume zone of the same name, and topology is on: claims of StorageClass standard-csi cannot be provisioned on their nodes. " + nodesFix}},
		{name: "When a per-zone class is mapped to the compute zone, it should still warn: standard-csi's claims there fail", in: zoneInputs{
			Features:  desired.Features{Known: true, Contents: nodeconf.Contents{Topology: true, VolumeZones: []string{"nova"}, ZoneClasses: []zoneclasses.Class{{VolumeZone: "nova", ComputeZones: []string{"az1"}}}}},
			NodeZones: map[string]int{"az1": 4}},
			want: conditions.Verdict{Status: operatorv1.ConditionTrue, Reason: names.ReasonNodesOutsideVolumeZones,
				Message: "Compute zone az1 (4 nodes) has no Cinder volume zone of the same name, and topology is on: claims of StorageClass standard-csi cannot be provisioned on its nodes. " + nodesFix}},
		{name: "When a per-zone class is kept for its claims, it should say which, why and what to do", in: zoneInputs{
			Features: on, Kept: map[string]int{"standard-csi-old": 2}},
			want: conditions.Verdict{Status: operatorv1.ConditionTrue, Reason: names.ReasonZoneClassInUse,
				Message: "StorageClass standard-csi-old is kept because 2 claims use it, although it is no longer asked for (its volume zone went away, or zone_storage_classes was turned off): " +
					"new claims of it would be provisioned into a zone that may be gone. Delete those claims to have the class removed, or keep it by asking for it again " +
					"(zone_storage_classes \"true\" and, for a compute zone of another name, zone_mapping in ConfigMap openshift-config/cinder-csi-config)."}},
		{name: "When claims cannot be watched to count them, it should say the class is kept and what to grant", in: zoneInputs{
			Features: on, Kept: map[string]int{"standard-csi-old": claimsUnknown}},
			want: conditions.Verdict{Status: operatorv1.ConditionTrue, Reason: names.ReasonZoneClassInUse,
				Message: "StorageClass standard-csi-old is kept, although it is no longer asked for: the operator may not list and watch claims in every namespace " +
					"to tell whether a claim uses it. Grant it list and watch of persistentvolumeclaims, or delete the class once no claim uses it."}},
		{name: "When a class that is not the operator's holds a per-zone name asked for, it should name it, its zone and the way out", in: zoneInputs{
			Features: on, Foreign: []string{"standard-csi-nova"}},
			want: conditions.Verdict{Status: operatorv1.ConditionTrue, Reason: names.ReasonZoneClassNameTaken,
				Message: "StorageClass standard-csi-nova exists and is not the operator's (it lacks the operator's labels), so the operator leaves it alone " +
					"and volume zone nova has no per-zone class. Rename or delete that StorageClass to let the operator create it."}},
		{name: "When several such classes exist, it should name them all", in: zoneInputs{
			Features: on, Foreign: []string{"standard-csi-a", "standard-csi-b"}},
			want: conditions.Verdict{Status: operatorv1.ConditionTrue, Reason: names.ReasonZoneClassNameTaken,
				Message: "StorageClasses standard-csi-a, standard-csi-b exist and are not the operator's (they lack the operator's labels), so the operator leaves them alone " +
					"and volume zones a, b have no per-zone class. Rename or delete those StorageClasses to let the operator create them."}},
		{name: "When a VolumeSnapshotClass that is not the operator's holds the backup class's name, it should name it, why it is left and the way out", in: zoneInputs{
			Features: desired.Features{Known: true, Contents: nodeconf.Contents{BackupClass: true}}, BackupClassTaken: true},
			want: conditions.Verdict{Status: operatorv1.ConditionTrue, Reason: names.ReasonBackupClassNameTaken,
				Message: "VolumeSnapshotClass standard-csi-backup exists and is not the operator's (it lacks the label app.kubernetes.io/managed-by=cinder-csi-operator), " +
					"so the operator leaves it alone and does not make the backup class that backup_snapshot_class \"true\" in ConfigMap openshift-config/cinder-csi-config asks for. " +
					"Rename or delete that VolumeSnapshotClass to let the operator create it."}},
		{name: "When a volume zone cannot name a class, it should name it", in: zoneInputs{Features: on, InvalidZones: []string{"AZ 1"}},
			want: conditions.Verdict{Status: operatorv1.ConditionTrue, Reason: names.ReasonZoneNameInvalid,
				Message: `Volume zone "AZ 1" cannot name a StorageClass (lower-case letters, digits, '-' and '.' only), so it gets no per-zone class.`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(zoneWarning(tt.in)).To(Equal(tt.want))
		})
	}

	t.Run("When several causes hold, it should give the first's reason and every message", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		v := zoneWarning(zoneInputs{Features: on, NodeZones: map[string]int{"az1": 1}, Kept: map[string]int{"standard-csi-a": 1, "standard-csi-b": 1}})
		g.Expect(v.Reason).To(Equal(names.ReasonNodesOutsideVolumeZones))
		g.Expect(v.Message).To(ContainSubstring("Compute zone az1 (1 node)"))
		g.Expect(v.Message).To(ContainSubstring("StorageClasses standard-csi-a, standard-csi-b are kept because 2 claims use them, although they are no longer asked for (their volume zones went away"))
	})
}

func TestNodeZonesOnly(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	in := &metav1.PartialObjectMetadata{
		TypeMeta: nodeMetadata().TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u", ResourceVersion: "7",
			Labels:        map[string]string{zoneLabel: "az1", names.TopologyKey: "az1", "kubernetes.io/hostname": "n"},
			Annotations:   map[string]string{"big": "value"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
	}
	out, err := nodeZonesOnly(in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(&metav1.PartialObjectMetadata{
		TypeMeta:   nodeMetadata().TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u", ResourceVersion: "7", Labels: map[string]string{zoneLabel: "az1", names.TopologyKey: "az1"}},
	}))
	other := "tombstone"
	g.Expect(nodeZonesOnly(other)).To(Equal(other))
}

func TestNodeZoneChanged(t *testing.T) {
	t.Parallel()
	n := func(labels map[string]string) *metav1.PartialObjectMetadata {
		o := node("n", labels)
		return &o
	}
	for _, tt := range []struct {
		name     string
		old, new map[string]string
		want     bool
	}{
		{name: "When nothing about the zone changed, it should not pass", old: map[string]string{zoneLabel: "a"}, new: map[string]string{zoneLabel: "a"}},
		{name: "When the zone label changed, it should pass", old: map[string]string{zoneLabel: "a"}, new: map[string]string{zoneLabel: "b"}, want: true},
		{name: "When the driver's label appeared on a node without a zone label, it should pass", old: nil, new: map[string]string{names.TopologyKey: "a"}, want: true},
		{name: "When the driver's label changed under a zone label, it should not pass", old: map[string]string{zoneLabel: "a", names.TopologyKey: "x"}, new: map[string]string{zoneLabel: "a", names.TopologyKey: "y"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(nodeZoneChanged.Update(event.UpdateEvent{ObjectOld: n(tt.old), ObjectNew: n(tt.new)})).To(Equal(tt.want))
		})
	}
	t.Run("When a node is added or deleted, it should pass", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		g.Expect(nodeZoneChanged.Create(event.CreateEvent{Object: n(nil)})).To(BeTrue())
		g.Expect(nodeZoneChanged.Delete(event.DeleteEvent{Object: n(nil)})).To(BeTrue())
	})
}

func TestClaimClassOnly(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	in := &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "data", UID: "u", ResourceVersion: "7",
			Labels:        map[string]string{"app": "db"},
			Annotations:   map[string]string{corev1.BetaStorageClassAnnotation: "standard-csi-old", "big": "value"},
			Finalizers:    []string{"kubernetes.io/pvc-protection"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To("standard-csi-old"), VolumeName: "pvc-1",
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}},
	}
	out, err := claimClassOnly(in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(&corev1.PersistentVolumeClaim{
		TypeMeta: in.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "data", UID: "u", ResourceVersion: "7",
			Annotations: map[string]string{corev1.BetaStorageClassAnnotation: "standard-csi-old"}},
		Spec:   corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("standard-csi-old")},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}))
	g.Expect(claimClassKeys(out.(*corev1.PersistentVolumeClaim))).To(Equal([]string{"standard-csi-old"}))
	other := "tombstone"
	g.Expect(claimClassOnly(other)).To(Equal(other))
}

func TestClaimClassKeys(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	beta := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.BetaStorageClassAnnotation: "standard-csi-b"}}}
	g.Expect(claimClassKeys(beta)).To(Equal([]string{"standard-csi-b"}), "the beta annotation names the class when the field does not")
	g.Expect(claimClassKeys(&corev1.PersistentVolumeClaim{})).To(BeEmpty(), "a claim that names no class is in no key")
	g.Expect(claimClassKeys(&corev1.ConfigMap{})).To(BeEmpty())
}

func TestClaimWatchChanged(t *testing.T) {
	t.Parallel()
	w := &claimWatch{}
	w.retiring([]string{"standard-csi-old"})
	pred := w.changed()
	kept := claimOf("apps", "data", "standard-csi-old", corev1.ClaimBound)
	lost := claimOf("apps", "data", "standard-csi-old", corev1.ClaimLost)
	relabelled := kept.DeepCopy()
	relabelled.Labels = map[string]string{"app": "db"}
	unrelated := claimOf("apps", "logs", "standard-csi", corev1.ClaimBound)
	for _, tt := range []struct {
		name string
		got  bool
		want bool
	}{
		{name: "When a claim of a class being retired is deleted, it should pass", got: pred.Delete(event.DeleteEvent{Object: kept}), want: true},
		{name: "When a claim of a class being retired is added, it should pass", got: pred.Create(event.CreateEvent{Object: kept}), want: true},
		{name: "When a claim of a class being retired changes phase, it should pass", got: pred.Update(event.UpdateEvent{ObjectOld: kept, ObjectNew: lost}), want: true},
		{name: "When a claim of a class being retired changes otherwise, it should not pass", got: pred.Update(event.UpdateEvent{ObjectOld: kept, ObjectNew: relabelled})},
		{name: "When a claim of another class is deleted, it should not pass", got: pred.Delete(event.DeleteEvent{Object: unrelated})},
		{name: "When a claim of another class is added, it should not pass", got: pred.Create(event.CreateEvent{Object: unrelated})},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(tt.got).To(Equal(tt.want))
		})
	}
	t.Run("When nothing is being retired any more, it should pass nothing", func(t *testing.T) {
		t.Parallel()
		w := &claimWatch{}
		w.retiring([]string{"standard-csi-old"})
		w.retiring(nil)
		NewWithT(t).Expect(w.changed().Delete(event.DeleteEvent{Object: kept})).To(BeFalse())
	})
}
