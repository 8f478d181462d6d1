package desired

import (
	"errors"
	"testing"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil/golden"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/zoneclasses"
)

func zoneClass(t testing.TB, c zoneclasses.Class) *storagev1.StorageClass {
	return testutil.Build(t, func(d *manifests.Decoder) (*storagev1.StorageClass, error) { return desiredZoneClass(d, c) })
}

func TestDesiredZoneClass(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		class zoneclasses.Class
	}{
		{name: "When topology is on, it should match the fixture", class: zoneclasses.Class{VolumeZone: "nova", ComputeZones: []string{"az2", "az1"}}},
		{name: "When topology is off, it should match the fixture", class: zoneclasses.Class{VolumeZone: "nova"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			golden.CompareWithFixture(t, zoneClass(t, tt.class))
		})
	}

	t.Run("When rendered, it should have standard-csi's shape plus its zone, and never be the default class", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		std := testutil.Build(t, func(d *manifests.Decoder) (*storagev1.StorageClass, error) { return desiredStorageClass(d, "true") })
		sc := zoneClass(t, zoneclasses.Class{VolumeZone: "nova", ComputeZones: []string{"az1"}})
		g.Expect(sc.Name).To(Equal("standard-csi-nova"))
		g.Expect(sc.Labels).To(Equal(map[string]string{names.ManagedByLabel: names.ManagedByValue, names.ZoneClassLabel: "nova"}))
		g.Expect(sc.Annotations).NotTo(HaveKey(names.DefaultStorageClassAnnotation))
		g.Expect(sc.Provisioner).To(Equal(std.Provisioner))
		g.Expect(sc.ReclaimPolicy).To(Equal(std.ReclaimPolicy))
		g.Expect(sc.VolumeBindingMode).To(HaveValue(Equal(storagev1.VolumeBindingWaitForFirstConsumer)))
		g.Expect(sc.AllowVolumeExpansion).To(Equal(std.AllowVolumeExpansion))
		want := map[string]string{paramAvailability: "nova"}
		for k, v := range std.Parameters {
			want[k] = v
		}
		g.Expect(sc.Parameters).To(Equal(want))
		g.Expect(sc.AllowedTopologies).To(Equal([]corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: "topology.cinder.csi.openstack.org/zone", Values: []string{"az1"}}}}}))
	})
}

func TestValidZoneClass(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		zone string
		want bool
	}{
		{"nova", true},
		{"az-1.example", true},
		{"AZ1", false},
		{"zone one", false},
		{"zone_1", false},
		{"a234567890123456789012345678901234567890123456789012345678901234", false}, // 64: too long a label value
	} {
		t.Run("When the volume zone is "+tt.zone+", it should be valid: "+map[bool]string{true: "yes", false: "no"}[tt.want], func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(validZoneClass(zoneclasses.Class{VolumeZone: tt.zone})).To(Equal(tt.want))
		})
	}
}

func TestStorageClassNeedsRecreate(t *testing.T) {
	t.Parallel()
	desired := zoneClass(t, zoneclasses.Class{VolumeZone: "nova", ComputeZones: []string{"az1", "az2"}})
	live := func(edit func(*storagev1.StorageClass)) *storagev1.StorageClass {
		sc := desired.DeepCopy()
		edit(sc)
		return sc
	}
	for _, tt := range []struct {
		name string
		live *storagev1.StorageClass
		want bool
	}{
		{name: "When there is no live class, it should not recreate", want: false},
		{name: "When the live class matches, it should not recreate", live: live(func(*storagev1.StorageClass) {}), want: false},
		{name: "When only the order of compute zones differs, it should not recreate", live: live(func(sc *storagev1.StorageClass) {
			sc.AllowedTopologies[0].MatchLabelExpressions[0].Values = []string{"az2", "az1"}
		}), want: false},
		{name: "When the live class omits the defaulted reclaim policy, it should not recreate", live: live(func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = nil }), want: false},
		{name: "When labels or annotations differ, it should not recreate (an apply fixes them)", live: live(func(sc *storagev1.StorageClass) {
			sc.Annotations = map[string]string{"x": "y"}
			sc.Labels["x"] = "y"
		}), want: false},
		{name: "When the volume zone differs, it should recreate", live: live(func(sc *storagev1.StorageClass) { sc.Parameters[paramAvailability] = "other" }), want: true},
		{name: "When a compute zone was added, it should recreate", live: live(func(sc *storagev1.StorageClass) {
			sc.AllowedTopologies[0].MatchLabelExpressions[0].Values = []string{"az1"}
		}), want: true},
		{name: "When topology was turned off, it should recreate", live: live(func(sc *storagev1.StorageClass) {
			sc.AllowedTopologies = nil
		}), want: true},
		{name: "When the binding mode differs, it should recreate", live: live(func(sc *storagev1.StorageClass) { sc.VolumeBindingMode = nil }), want: true},
		{name: "When the provisioner differs, it should recreate", live: live(func(sc *storagev1.StorageClass) { sc.Provisioner = "other" }), want: true},
		{name: "When the reclaim policy differs, it should recreate", live: live(func(sc *storagev1.StorageClass) {
			sc.ReclaimPolicy = ptr.To(corev1.PersistentVolumeReclaimRetain)
		}), want: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(storageClassNeedsRecreate(tt.live, desired)).To(Equal(tt.want))
		})
	}

	t.Run("When the live class is pinned and the desired one is not, it should recreate", func(t *testing.T) {
		t.Parallel()
		unpinned := zoneClass(t, zoneclasses.Class{VolumeZone: "nova"})
		NewWithT(t).Expect(storageClassNeedsRecreate(desired, unpinned)).To(BeTrue())
	})
}

func TestSnapshotForceCreate(t *testing.T) {
	t.Parallel()
	live := func(v string) *snapshotv1.VolumeSnapshotClass {
		return &snapshotv1.VolumeSnapshotClass{Parameters: map[string]string{paramForceCreate: v}}
	}
	for _, tt := range []struct {
		name string
		f    Features
		live *snapshotv1.VolumeSnapshotClass
		want string
	}{
		{name: "When the node copy is known and the user did not opt out, it should be true, also over csi-operator's false", f: Features{Known: true, Contents: nodeconf.Defaults()}, live: live("false"), want: "true"},
		{name: "When the user opted out, it should be false", f: Features{Known: true}, live: live("true"), want: "false"},
		{name: "When the node copy is not known, it should keep the live value", live: live("false"), want: "false"},
		{name: "When the node copy is not known and there is no live class, it should be true", want: "true"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(snapshotForceCreate(tt.f, tt.live)).To(Equal(tt.want))
		})
	}
}

func TestDesiredBackupSnapshotClass(t *testing.T) {
	t.Parallel()
	backup := func(zone, force string) *snapshotv1.VolumeSnapshotClass {
		return testutil.Build(t, func(d *manifests.Decoder) (*snapshotv1.VolumeSnapshotClass, error) {
			return desiredBackupSnapshotClass(d, zone, force)
		})
	}
	t.Run("When a backup zone is set, it should match the fixture", func(t *testing.T) {
		t.Parallel()
		golden.CompareWithFixture(t, backup("backup-az", "true"))
	})
	for _, tt := range []struct {
		name        string
		zone, force string
		want        map[string]string
	}{
		{name: "When no backup zone is set, it should let Cinder choose", force: "true", want: map[string]string{"type": "backup", paramForceCreate: "true"}},
		{name: "When a backup zone is set, it should pass it", zone: "z", force: "false", want: map[string]string{"type": "backup", paramAvailability: "z", paramForceCreate: "false"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			vsc := backup(tt.zone, tt.force)
			g.Expect(vsc.Name).To(Equal(names.BackupSnapshotClass))
			g.Expect(vsc.Driver).To(Equal(names.DriverName))
			g.Expect(vsc.DeletionPolicy).To(Equal(snapshotv1.VolumeSnapshotContentDelete))
			g.Expect(vsc.Annotations).To(BeEmpty(), "never the default class")
			g.Expect(vsc.Parameters).To(Equal(tt.want))
		})
	}
}

func TestSnapshotClassNeedsRecreate(t *testing.T) {
	t.Parallel()
	vsc := func(params map[string]string) *snapshotv1.VolumeSnapshotClass {
		return &snapshotv1.VolumeSnapshotClass{Parameters: params}
	}
	desired := vsc(map[string]string{"type": "backup", paramForceCreate: "true"})
	for _, tt := range []struct {
		name string
		live *snapshotv1.VolumeSnapshotClass
		want bool
	}{
		{name: "When there is no live class, it should not recreate"},
		{name: "When only a value differs (csi-operator's force-create), it should update in place", live: vsc(map[string]string{"type": "backup", paramForceCreate: "false"})},
		{name: "When the live class lacks a parameter, it should update in place", live: vsc(map[string]string{"type": "backup"})},
		{name: "When the live class holds a parameter no longer set, it should recreate", live: vsc(map[string]string{"type": "backup", paramForceCreate: "true", paramAvailability: "z"}), want: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(snapshotClassNeedsRecreate(tt.live, desired)).To(Equal(tt.want))
		})
	}
}

func TestReadFeatures(t *testing.T) {
	t.Parallel()
	cm := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names.CloudConfConfigMap}, Data: data}
	}
	for _, tt := range []struct {
		name   string
		cm     *corev1.ConfigMap
		usable bool
		want   Features
	}{
		{name: "When there is no node copy, it should know nothing", want: Features{}},
		{name: "When the node copy is not the controlplane manager's, it should know nothing",
			cm: cm(map[string]string{nodeconf.KeyBackupSnapshotClass: "true"}), want: Features{}},
		{name: "When the node copy holds no feature key, it should decide every feature off, force-create on",
			cm: cm(map[string]string{nodeconf.KeyCloudConf: "x", nodeconf.KeyEnableTopology: "false"}), usable: true,
			want: Features{Known: true, Contents: nodeconf.Contents{CloudConf: "x", SnapshotForceCreate: true}}},
		{name: "When the node copy holds every feature key, it should decode them",
			cm: cm(map[string]string{
				nodeconf.KeyEnableTopology: "true", nodeconf.KeyZoneClasses: `[{"volumeZone":"nova","computeZones":["az1"]}]`,
				nodeconf.KeyVolumeZones: "nova,cinder", nodeconf.KeyBackupSnapshotClass: "true", nodeconf.KeyBackupAvailabilityZone: " bz ",
				nodeconf.KeySnapshotForceCreate: "false",
			}), usable: true,
			want: Features{Known: true, Contents: nodeconf.Contents{Topology: true, ZoneClasses: []zoneclasses.Class{{VolumeZone: "nova", ComputeZones: []string{"az1"}}},
				VolumeZones: []string{"cinder", "nova"}, BackupClass: true, BackupZone: "bz", SnapshotForceCreate: false}}},
		{name: "When volume_zones is present but empty, it should know there are no volume zones",
			cm: cm(map[string]string{nodeconf.KeyVolumeZones: ""}), usable: true,
			want: Features{Known: true, Contents: nodeconf.Contents{VolumeZones: []string{}, SnapshotForceCreate: true}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(readFeatures(tt.cm, tt.usable)).To(Equal(tt.want))
		})
	}

	t.Run("When zone_classes does not decode, it should say so", func(t *testing.T) {
		t.Parallel()
		f := readFeatures(cm(map[string]string{nodeconf.KeyZoneClasses: "{"}), true)
		var de nodeconf.DecodeError
		NewWithT(t).Expect(errors.As(f.Err, &de)).To(BeTrue())
		NewWithT(t).Expect(de.Keys()).To(Equal([]string{nodeconf.KeyZoneClasses}))
	})
}

// TestNodeCloudConfHash checks that the node plugin's cloud-conf hash covers only the keys it
// reads: existing DaemonSets do not roll on an upgrade to it, nor when the controlplane manager
// adds its decisions for the guest manager.
func TestNodeCloudConfHash(t *testing.T) {
	t.Parallel()
	nodeKeys := map[string]string{nodeconf.KeyCloudConf: "[BlockStorage]\n", nodeconf.KeyEnableTopology: "true", nodeconf.KeyCABundle: "-----BEGIN CERTIFICATE-----\n"}
	hash := func(data map[string]string) string {
		ds := testutil.Build(t, func(d *manifests.Decoder) (*corev1.PodTemplateSpec, error) {
			cm := &corev1.ConfigMap{Data: data}
			out, err := desiredNodeFor(d, testConfig(true), cm, true, 2)
			if err != nil {
				return nil, err
			}
			return &out.Spec.Template, nil
		})
		return ds.Annotations[names.HashAnnotationPrefix+nodeconf.HashInput]
	}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range nodeKeys {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	t.Run("When the node copy holds only the keys the node plugin reads, it should hash as the whole ConfigMap did", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		g.Expect(hash(nodeKeys)).To(Equal(confighash.ConfigMap(&corev1.ConfigMap{Data: nodeKeys})))
		// The value before the change, for these data: a DaemonSet rendered then keeps it.
		g.Expect(hash(nodeKeys)).To(Equal(confighash.Data(nodeKeys, nil)))
	})
	t.Run("When the controlplane manager adds its decisions, it should not change the hash", func(t *testing.T) {
		t.Parallel()
		NewWithT(t).Expect(hash(with(map[string]string{
			nodeconf.KeyZoneClasses: `[{"volumeZone":"nova"}]`, nodeconf.KeyVolumeZones: "nova", nodeconf.KeyComputeZones: "nova",
			nodeconf.KeyBackupSnapshotClass: "true", nodeconf.KeyBackupAvailabilityZone: "z", nodeconf.KeySnapshotForceCreate: "false",
		}))).To(Equal(hash(nodeKeys)))
	})
	for _, k := range nodeconf.PluginKeys {
		t.Run("When "+k+" changes, it should change the hash", func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(hash(with(map[string]string{k: "changed"}))).NotTo(Equal(hash(nodeKeys)))
		})
	}
}

// TestZoneClassesOfOthers checks that a StorageClass of a per-zone name that is not the
// operator's (it lacks the operator's labels) is never applied over, recreated, retired or
// deleted, in any state.
func TestZoneClassesOfOthers(t *testing.T) {
	t.Parallel()
	nova := zoneclasses.Class{VolumeZone: "nova", ComputeZones: []string{"az1"}}
	cinder := zoneclasses.Class{VolumeZone: "cinder", ComputeZones: []string{"az2"}}
	asked := func(cs ...zoneclasses.Class) map[string]string {
		return map[string]string{nodeconf.KeyZoneClasses: zoneClassesValue(cs), nodeconf.KeyVolumeZones: "cinder,nova"}
	}
	const novaStep = "guest/StorageClass//standard-csi-nova"
	// withLabels returns the class the operator would make for nova, with labels instead of its
	// own: as identical to it as a class of someone else's can be.
	withLabels := func(labels map[string]string) storagev1.StorageClass {
		sc := liveZoneClass(t, nova)
		sc.Labels = labels
		return sc
	}
	users := map[string]storagev1.StorageClass{
		"a user's class whose immutable fields differ": {
			ObjectMeta:  metav1.ObjectMeta{Name: "standard-csi-nova", Labels: map[string]string{"team": "storage"}},
			Provisioner: "example.com/other", Parameters: map[string]string{"tier": "gold"},
		},
		"a user's class identical to the operator's but for the labels": withLabels(nil),
		"the operator's class whose managed-by label a user removed":    withLabels(map[string]string{names.ZoneClassLabel: "nova"}),
		"a copy of standard-csi under the per-zone name":                withLabels(map[string]string{names.ManagedByLabel: names.ManagedByValue}),
	}
	steps := testutil.StepNames
	for what, other := range users {
		t.Run("When "+what+" holds a per-zone name asked for, it should neither apply nor recreate it", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := withFeatures(testState(true, true), asked(nova, cinder))
			s.StorageClasses = []storagev1.StorageClass{other}
			p := desiredPlan(t, testConfig(true), s)
			g.Expect(steps(p.Apply)).NotTo(ContainElement(novaStep))
			g.Expect(steps(p.Apply)).To(ContainElement("guest/StorageClass//standard-csi-cinder"), "the other zones' classes are applied")
			g.Expect(steps(p.Recreate)).NotTo(ContainElement(novaStep))
			g.Expect(steps(p.Delete)).NotTo(ContainElement(novaStep))
			g.Expect(p.Retire).NotTo(ContainElement("standard-csi-nova"))
		})

		t.Run("When "+what+" holds the name of a zone no longer asked for, it should never retire or delete it", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := withFeatures(testState(true, true), asked(cinder))
			s.StorageClasses = []storagev1.StorageClass{other, liveZoneClass(t, zoneclasses.Class{VolumeZone: "old"})}
			p := desiredPlan(t, testConfig(true), s)
			g.Expect(p.Retire).To(Equal([]string{"standard-csi-old"}), "the operator's own class is retired")
			g.Expect(steps(p.Delete)).NotTo(ContainElement(novaStep))

			s.Driver.Spec.StorageClassState = operatorv1.RemovedStorageClass
			p = desiredPlan(t, testConfig(true), s)
			g.Expect(steps(p.Delete)).To(ContainElement("guest/StorageClass//standard-csi-old"))
			g.Expect(steps(p.Delete)).NotTo(ContainElement(novaStep), "storageClassState Removed")

			s.Driver.Spec.StorageClassState = ""
			s.Driver.Spec.ManagementState = operatorv1.Removed
			p = desiredPlan(t, testConfig(true), s)
			g.Expect(steps(p.Delete)).To(ContainElement("guest/StorageClass//standard-csi-old"))
			g.Expect(steps(p.Delete)).NotTo(ContainElement(novaStep), "managementState Removed")
		})
	}
}

// zoneClassesValue is the node copy's zone_classes value for cs, as the controlplane manager
// writes it.
func zoneClassesValue(cs []zoneclasses.Class) string {
	return nodeconf.Encode(nodeconf.Contents{ZoneClasses: cs})[nodeconf.KeyZoneClasses]
}
