package desired

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil/golden"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/zoneclasses"
)

func testConfig(hyperShift bool) Config {
	return Config{HyperShift: hyperShift, Images: testNodeInputs(false).Images}
}

// testState is a guest whose node copy of cloud-conf exists, with the VolumeSnapshotClass CRD.
func testState(hyperShift, topology bool) Input {
	data := map[string]string{nodeconf.KeyCloudConf: "[Global]\n", nodeconf.KeyEnableTopology: fmt.Sprint(topology)}
	return Input{
		Driver: &operatorv1.ClusterCSIDriver{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterCSIDriverName}},
		CloudConf: &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: names.GuestNamespace, Name: nodeconf.Name(hyperShift),
				Labels:      map[string]string{names.ManagedByLabel: names.ManagedByValue},
				Annotations: map[string]string{nodeconf.HashAnnotation: confighash.Data(data, nil)},
			},
			Data: data,
		},
		SnapshotCRD: true,
	}
}

func desiredPlan(t testing.TB, cfg Config, s Input) *Plan {
	s.Config = cfg
	return testutil.Build(t, func(d *manifests.Decoder) (*Plan, error) { return Compute(d, s) })
}

// TestDesired snapshots the guest manager's whole plan in each mode.
func TestDesired(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name       string
		hyperShift bool
		topology   bool
	}{
		{name: "When on HyperShift with topology, it should match the fixture", hyperShift: true, topology: true},
		{name: "When standalone without topology, it should match the fixture"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			p := desiredPlan(t, testConfig(tt.hyperShift), testState(tt.hyperShift, tt.topology))
			g.Expect(p.Problems).To(BeEmpty())
			g.Expect(p.Delete).To(BeEmpty())
			for _, s := range p.Apply {
				g.Expect(s.Cluster).To(Equal(apply.ClusterGuest))
			}
			golden.CompareWithFixture(t, testutil.Objects(p.Apply)...)
		})
	}

	t.Run("When the node copy of cloud-conf is missing, it should plan no DaemonSet and say what it waits for", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := testState(true, false)
		s.CloudConf = nil
		p := desiredPlan(t, testConfig(true), s)
		g.Expect(testutil.StepNames(p.Apply)).NotTo(ContainElement(ContainSubstring("/DaemonSet/")))
		g.Expect(p.NodeWaiting).To(Equal("Waiting for ConfigMap openshift-cluster-csi-drivers/cloud-conf, which the controlplane manager writes."))
	})

	t.Run("When the node copy of cloud-conf is still csi-operator's, it should plan no DaemonSet until the controlplane manager has written its own", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := testState(true, false)
		s.CloudConf.Labels = nil
		p := desiredPlan(t, testConfig(true), s)
		g.Expect(testutil.StepNames(p.Apply)).NotTo(ContainElement(ContainSubstring("/DaemonSet/")))
		g.Expect(p.NodeWaiting).To(Equal("Waiting for the controlplane manager to take over ConfigMap openshift-cluster-csi-drivers/cloud-conf from csi-operator."))
	})

	t.Run("When csi-operator has rewritten the node copy this operator wrote, keeping its label and annotations, it should plan no DaemonSet until the controlplane manager has written it again", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := testState(true, false)
		s.CloudConf.Data[nodeconf.KeyCloudConf] = "[Global]\nuse-clouds = true\n"
		p := desiredPlan(t, testConfig(true), s)
		g.Expect(testutil.StepNames(p.Apply)).NotTo(ContainElement(ContainSubstring("/DaemonSet/")))
		g.Expect(p.NodeWaiting).To(Equal("Waiting for the controlplane manager to take over ConfigMap openshift-cluster-csi-drivers/cloud-conf from csi-operator."))
	})

	t.Run("When the log level is unknown, it should keep the live DaemonSet and report the field", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := testState(true, false)
		s.Driver.Spec.LogLevel = "Loud"
		p := desiredPlan(t, testConfig(true), s)
		g.Expect(testutil.StepNames(p.Apply)).NotTo(ContainElement(ContainSubstring("/DaemonSet/")))
		g.Expect(p.NodeWaiting).To(BeEmpty())
		g.Expect(p.Problems).To(ConsistOf(ContainSubstring(`spec.logLevel "Loud"`)))
	})

	t.Run("When the VolumeSnapshotClass CRD is not served, it should plan no VolumeSnapshotClass", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := testState(true, false)
		s.SnapshotCRD = false
		p := desiredPlan(t, testConfig(true), s)
		g.Expect(testutil.StepNames(p.Apply)).NotTo(ContainElement(ContainSubstring("VolumeSnapshotClass")))
		g.Expect(p.SnapshotClass).To(BeFalse())
	})

	for _, tt := range []struct {
		state       operatorv1.StorageClassStateName
		wantApply   bool
		wantDelete  bool
		wantProblem bool
	}{
		{state: "", wantApply: true},
		{state: operatorv1.ManagedStorageClass, wantApply: true},
		{state: operatorv1.UnmanagedStorageClass},
		{state: operatorv1.RemovedStorageClass, wantDelete: true},
		{state: "Sometimes", wantProblem: true},
	} {
		t.Run(fmt.Sprintf("When storageClassState is %q, it should apply the StorageClass: %t, delete it: %t", tt.state, tt.wantApply, tt.wantDelete), func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := testState(true, false)
			s.Driver.Spec.StorageClassState = tt.state
			p := desiredPlan(t, testConfig(true), s)
			sc := "guest/StorageClass//" + names.StorageClass
			if tt.wantApply {
				g.Expect(testutil.StepNames(p.Apply)).To(ContainElement(sc))
			} else {
				g.Expect(testutil.StepNames(p.Apply)).NotTo(ContainElement(sc))
			}
			deleted := slices.DeleteFunc(testutil.StepNames(p.Delete), func(n string) bool { return !strings.Contains(n, "/StorageClass/") })
			if tt.wantDelete {
				g.Expect(deleted).To(Equal([]string{sc}))
			} else {
				g.Expect(deleted).To(BeEmpty())
			}
			g.Expect(p.Problems != nil).To(Equal(tt.wantProblem))
			// The VolumeSnapshotClass does not depend on storageClassState.
			g.Expect(testutil.StepNames(p.Apply)).To(ContainElement(ContainSubstring("VolumeSnapshotClass")))
		})
	}

	t.Run("When the user set standard-csi's default-class annotation, it should keep the user's value", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := testState(true, false)
		s.StorageClass = &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: names.StorageClass,
			Annotations: map[string]string{names.DefaultStorageClassAnnotation: "false"}}}
		p := desiredPlan(t, testConfig(true), s)
		for _, st := range p.Apply {
			if sc, ok := st.Object.(*storagev1.StorageClass); ok {
				g.Expect(sc.Annotations).To(HaveKeyWithValue(names.DefaultStorageClassAnnotation, "false"))
			}
		}
	})
}

// TestDesiredRemoved checks that managementState Removed deletes exactly what Managed applies
// (the VolumeSnapshotClasses and the per-zone classes included), DaemonSet and classes before the
// RBAC they rely on.
func TestDesiredRemoved(t *testing.T) {
	t.Parallel()
	for _, hyperShift := range []bool{true, false} {
		for _, crd := range []bool{true, false} {
			t.Run(fmt.Sprintf("When Removed (HyperShift %t, snapshot CRD %t), it should delete every object Managed applies", hyperShift, crd), func(t *testing.T) {
				t.Parallel()
				g := NewWithT(t)
				s := withFeatures(testState(hyperShift, true), map[string]string{
					nodeconf.KeyZoneClasses:         zoneClassesValue([]zoneclasses.Class{{VolumeZone: "nova", ComputeZones: []string{"nova"}}}),
					nodeconf.KeyBackupSnapshotClass: "true",
				})
				s.SnapshotCRD = crd
				managed := desiredPlan(t, testConfig(hyperShift), s)
				// The per-zone class and the backup class exist, as Managed applied them.
				s.StorageClasses = liveClasses(managed)
				for _, st := range managed.Apply {
					if vsc, ok := st.Object.(*snapshotv1.VolumeSnapshotClass); ok && vsc.Name == names.BackupSnapshotClass {
						s.BackupSnapshotClass = vsc.DeepCopy()
					}
				}

				removed := Input{Driver: s.Driver.DeepCopy(), SnapshotCRD: crd, StorageClasses: s.StorageClasses, BackupSnapshotClass: s.BackupSnapshotClass}
				removed.Driver.Spec.ManagementState = operatorv1.Removed
				p := desiredPlan(t, testConfig(hyperShift), removed)
				g.Expect(p.Apply).To(BeEmpty())
				g.Expect(testutil.StepNames(p.Delete)).To(ConsistOf(testutil.StepNames(plan.Identities(managed.Apply))))
				g.Expect(testutil.StepNames(p.Delete)).To(ContainElement("guest/StorageClass//standard-csi-nova"))
				g.Expect(p.Delete[0].Group).To(Equal(GroupNode), "the DaemonSet goes first")
				g.Expect(p.Delete[len(p.Delete)-1].Group).To(Equal(GroupStatic), "the RBAC and CSIDriver go last")
			})
		}
	}
}

// TestDesiredRemovedHoldsControllerRBAC checks that, standalone, Removed keeps the controller's
// RBAC while its ServiceAccount exists, and deletes the rest.
func TestDesiredRemovedHoldsControllerRBAC(t *testing.T) {
	t.Parallel()
	d := testutil.Decoder(t)
	rbac, err := d.Operand("controller_rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rbacNames := testutil.StepNames(plan.Steps(apply.ClusterGuest, "", rbac...))
	for _, tt := range []struct {
		name       string
		hyperShift bool
		sa         bool
		held       []string
	}{
		{name: "When Removed standalone while the controller's ServiceAccount exists, it should keep the controller's RBAC", sa: true, held: rbacNames},
		{name: "When Removed standalone once the controller's ServiceAccount is gone, it should delete the controller's RBAC"},
		{name: "When Removed on HyperShift, it should hold nothing: the guest has no controller RBAC", hyperShift: true, sa: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			removed := Input{Driver: testState(tt.hyperShift, true).Driver.DeepCopy()}
			removed.Driver.Spec.ManagementState = operatorv1.Removed
			everything := testutil.StepNames(desiredPlan(t, testConfig(tt.hyperShift), removed).Delete)
			removed.ControllerServiceAccount = tt.sa
			p := desiredPlan(t, testConfig(tt.hyperShift), removed)
			g.Expect(testutil.StepNames(p.Held)).To(ConsistOf(tt.held))
			if len(tt.held) > 0 {
				g.Expect(p.Waiting).To(ContainSubstring(names.ControllerServiceAccount))
				g.Expect(testutil.StepNames(p.Delete)).To(ContainElement("guest/DaemonSet/" + names.GuestNamespace + "/" + names.NodeDaemonSet))
			} else {
				g.Expect(p.Waiting).To(BeEmpty())
			}
			g.Expect(append(testutil.StepNames(p.Delete), testutil.StepNames(p.Held)...)).To(ConsistOf(everything), "nothing is lost")
		})
	}
}

// withFeatures returns s with the node copy of cloud-conf also holding data, as the controlplane
// manager writes it (its data hash updated).
func withFeatures(s Input, data map[string]string) Input {
	cm := s.CloudConf.DeepCopy()
	for k, v := range data {
		cm.Data[k] = v
	}
	cm.Annotations[nodeconf.HashAnnotation] = confighash.Data(cm.Data, nil)
	s.CloudConf = cm
	return s
}

// liveClasses returns the StorageClasses p applies, as they would be live.
func liveClasses(p *Plan) []storagev1.StorageClass {
	var out []storagev1.StorageClass
	for _, st := range p.Apply {
		if sc, ok := st.Object.(*storagev1.StorageClass); ok {
			out = append(out, *sc.DeepCopy())
		}
	}
	return out
}

// liveZoneClass returns a live per-zone class of volume zone zone, as an earlier plan applied it.
func liveZoneClass(t testing.TB, c zoneclasses.Class) storagev1.StorageClass {
	return *zoneClass(t, c)
}

func TestDesiredZoneClasses(t *testing.T) {
	t.Parallel()
	nova := zoneclasses.Class{VolumeZone: "nova", ComputeZones: []string{"az1", "az2"}}
	cinder := zoneclasses.Class{VolumeZone: "cinder", ComputeZones: []string{"az3"}}
	classes := func(cs ...zoneclasses.Class) map[string]string {
		return map[string]string{nodeconf.KeyZoneClasses: zoneClassesValue(cs), nodeconf.KeyVolumeZones: "cinder,nova"}
	}
	zoneSteps := func(steps []plan.Step) []string {
		return slices.DeleteFunc(testutil.StepNames(steps), func(n string) bool { return !strings.Contains(n, "/StorageClass//standard-csi-") })
	}

	t.Run("When zone classes are asked for, it should match the fixture", func(t *testing.T) {
		t.Parallel()
		s := withFeatures(testState(true, true), classes(nova, cinder))
		s.StorageClasses = []storagev1.StorageClass{liveZoneClass(t, zoneclasses.Class{VolumeZone: "old"})}
		p := desiredPlan(t, testConfig(true), s)
		golden.CompareWithFixture(t, testutil.Objects(p.Apply)...)
	})

	for _, tt := range []struct {
		name         string
		data         map[string]string
		usable       bool
		live         []zoneclasses.Class
		scState      operatorv1.StorageClassStateName
		wantApply    []string
		wantRecreate []string
		// wantCreate are the classes written with a create, not an apply.
		wantCreate  []string
		wantRetire  []string
		wantDelete  []string
		wantInvalid []string
		wantForeign []string
		wantProblem bool
		// others are live classes of per-zone names that are not the operator's.
		others []storagev1.StorageClass
	}{
		{name: "When zone classes are asked for, it should create one per class", data: classes(nova, cinder), usable: true,
			wantApply:  []string{"guest/StorageClass//standard-csi-nova", "guest/StorageClass//standard-csi-cinder"},
			wantCreate: []string{"guest/StorageClass//standard-csi-nova", "guest/StorageClass//standard-csi-cinder"}},
		{name: "When the live classes match, it should recreate none and apply them", data: classes(nova), usable: true, live: []zoneclasses.Class{nova},
			wantApply: []string{"guest/StorageClass//standard-csi-nova"}},
		{name: "When a class's compute zones changed, it should recreate it", data: classes(nova), usable: true,
			live:      []zoneclasses.Class{{VolumeZone: "nova", ComputeZones: []string{"az1"}}},
			wantApply: []string{"guest/StorageClass//standard-csi-nova"}, wantRecreate: []string{"guest/StorageClass//standard-csi-nova"},
			wantCreate: []string{"guest/StorageClass//standard-csi-nova"}},
		{name: "When topology was turned off, it should recreate the classes unpinned", data: classes(zoneclasses.Class{VolumeZone: "nova"}), usable: true,
			live:      []zoneclasses.Class{nova},
			wantApply: []string{"guest/StorageClass//standard-csi-nova"}, wantRecreate: []string{"guest/StorageClass//standard-csi-nova"},
			wantCreate: []string{"guest/StorageClass//standard-csi-nova"}},
		{name: "When a zone is gone, it should retire its class", data: classes(nova), usable: true, live: []zoneclasses.Class{nova, cinder},
			wantApply: []string{"guest/StorageClass//standard-csi-nova"}, wantRetire: []string{"standard-csi-cinder"}},
		{name: "When the feature is turned off, it should retire every class", data: map[string]string{}, usable: true, live: []zoneclasses.Class{nova, cinder},
			wantRetire: []string{"standard-csi-cinder", "standard-csi-nova"}},
		{name: "When the node copy is not the controlplane manager's, it should leave the classes as they are", data: classes(nova), usable: false,
			live: []zoneclasses.Class{cinder}},
		{name: "When zone_classes does not decode, it should leave the classes as they are and say so", data: map[string]string{nodeconf.KeyZoneClasses: "["}, usable: true,
			live: []zoneclasses.Class{cinder}, wantProblem: true},
		{name: "When a volume zone cannot name a class, it should skip it and report it", data: classes(nova, zoneclasses.Class{VolumeZone: "Bad Zone"}), usable: true,
			wantApply: []string{"guest/StorageClass//standard-csi-nova"}, wantCreate: []string{"guest/StorageClass//standard-csi-nova"}, wantInvalid: []string{"Bad Zone"}},
		{name: "When a class that is not the operator's holds a per-zone name asked for, it should leave it and report it", data: classes(nova, cinder), usable: true,
			others:    []storagev1.StorageClass{{ObjectMeta: metav1.ObjectMeta{Name: "standard-csi-nova"}, Provisioner: "example.com/other"}},
			wantApply: []string{"guest/StorageClass//standard-csi-cinder"}, wantCreate: []string{"guest/StorageClass//standard-csi-cinder"}, wantForeign: []string{"standard-csi-nova"}},
		{name: "When a class that is not the operator's holds the name of a zone no longer asked for, it should neither retire nor report it", data: classes(cinder), usable: true,
			others:    []storagev1.StorageClass{{ObjectMeta: metav1.ObjectMeta{Name: "standard-csi-nova"}, Provisioner: "example.com/other"}},
			wantApply: []string{"guest/StorageClass//standard-csi-cinder"}, wantCreate: []string{"guest/StorageClass//standard-csi-cinder"}},
		{name: "When storageClassState is Unmanaged, it should leave them", data: classes(nova), usable: true, live: []zoneclasses.Class{cinder},
			scState: operatorv1.UnmanagedStorageClass},
		{name: "When storageClassState is Removed, it should delete them, used or not", data: classes(nova), usable: true, live: []zoneclasses.Class{nova, cinder},
			scState:    operatorv1.RemovedStorageClass,
			wantDelete: []string{"guest/StorageClass//standard-csi-cinder", "guest/StorageClass//standard-csi-nova"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := withFeatures(testState(true, true), tt.data)
			if !tt.usable {
				s.CloudConf.Annotations[nodeconf.HashAnnotation] = "csi-operator-rewrote-it"
			}
			s.Driver.Spec.StorageClassState = tt.scState
			for _, c := range tt.live {
				s.StorageClasses = append(s.StorageClasses, liveZoneClass(t, c))
			}
			s.StorageClasses = append(s.StorageClasses, tt.others...)
			p := desiredPlan(t, testConfig(true), s)
			g.Expect(zoneSteps(p.Apply)).To(ConsistOf(orEmpty(tt.wantApply)))
			g.Expect(zoneSteps(p.Recreate)).To(ConsistOf(orEmpty(tt.wantRecreate)))
			g.Expect(zoneSteps(p.Create)).To(ConsistOf(orEmpty(tt.wantCreate)))
			g.Expect(p.Retire).To(Equal(tt.wantRetire))
			g.Expect(zoneSteps(p.Delete)).To(ConsistOf(orEmpty(tt.wantDelete)))
			g.Expect(p.InvalidZones).To(Equal(tt.wantInvalid))
			g.Expect(p.ForeignClasses).To(Equal(tt.wantForeign))
			g.Expect(p.Problems != nil).To(Equal(tt.wantProblem))
		})
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func TestDesiredSnapshotClasses(t *testing.T) {
	t.Parallel()
	const backupName = "guest/VolumeSnapshotClass//" + names.BackupSnapshotClass
	find := func(p *Plan, name string) *snapshotv1.VolumeSnapshotClass {
		for _, st := range p.Apply {
			if vsc, ok := st.Object.(*snapshotv1.VolumeSnapshotClass); ok && vsc.Name == name {
				return vsc
			}
		}
		return nil
	}
	// liveVSC is a live class as the operator made it, with its label.
	liveVSC := func(name string, params map[string]string) *snapshotv1.VolumeSnapshotClass {
		return &snapshotv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{names.ManagedByLabel: names.ManagedByValue}}, Parameters: params}
	}

	t.Run("When the backup class is asked for in a zone, it should match the fixture", func(t *testing.T) {
		t.Parallel()
		s := withFeatures(testState(true, false), map[string]string{nodeconf.KeyBackupSnapshotClass: "true", nodeconf.KeyBackupAvailabilityZone: "backups"})
		p := desiredPlan(t, testConfig(true), s)
		var vscs []any
		for _, st := range p.Apply {
			if _, ok := st.Object.(*snapshotv1.VolumeSnapshotClass); ok {
				vscs = append(vscs, st.Object)
			}
		}
		golden.CompareWithFixture(t, vscs...)
	})

	for _, tt := range []struct {
		name         string
		data         map[string]string
		usable       bool
		crd          bool
		live, backup *snapshotv1.VolumeSnapshotClass
		wantForce    string
		wantBackup   map[string]string
		wantDelete   bool
		wantRecreate []string
		wantCreate   []string
	}{
		{name: "When nothing is asked for, it should force-create and plan no backup class", usable: true, crd: true, wantForce: "true"},
		{name: "When the backup class is turned off, it should delete it", usable: true, crd: true, wantForce: "true",
			backup: liveVSC(names.BackupSnapshotClass, map[string]string{"type": "backup", paramForceCreate: "true"}), wantDelete: true},
		{name: "When csi-operator's class is live, it should update its force-create in place", usable: true, crd: true,
			live: liveVSC(names.VolumeSnapshotCls, map[string]string{paramForceCreate: "false"}), wantForce: "true"},
		{name: "When the user opts out of force-create, it should set false on both classes and create the backup class", usable: true, crd: true,
			data:      map[string]string{nodeconf.KeySnapshotForceCreate: "false", nodeconf.KeyBackupSnapshotClass: "true"},
			wantForce: "false", wantBackup: map[string]string{"type": "backup", paramForceCreate: "false"}, wantCreate: []string{backupName}},
		{name: "When the operator's backup class is live, it should apply it", usable: true, crd: true,
			data:      map[string]string{nodeconf.KeyBackupSnapshotClass: "true"},
			backup:    liveVSC(names.BackupSnapshotClass, map[string]string{"type": "backup", paramForceCreate: "false"}),
			wantForce: "true", wantBackup: map[string]string{"type": "backup", paramForceCreate: "true"}},
		{name: "When the backup zone is unset after it was set, it should recreate the backup class", usable: true, crd: true,
			data:      map[string]string{nodeconf.KeyBackupSnapshotClass: "true"},
			backup:    liveVSC(names.BackupSnapshotClass, map[string]string{"type": "backup", paramAvailability: "z", paramForceCreate: "true"}),
			wantForce: "true", wantBackup: map[string]string{"type": "backup", paramForceCreate: "true"},
			wantRecreate: []string{backupName}, wantCreate: []string{backupName}},
		{name: "When the node copy is not known, it should keep the live force-create and leave the backup class", crd: true,
			data: map[string]string{nodeconf.KeyBackupSnapshotClass: "true"},
			live: liveVSC(names.VolumeSnapshotCls, map[string]string{paramForceCreate: "false"}), wantForce: "false"},
		{name: "When the kind is not served, it should plan no snapshot class at all", usable: true,
			data: map[string]string{nodeconf.KeyBackupSnapshotClass: "true"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := withFeatures(testState(true, false), tt.data)
			if !tt.usable {
				s.CloudConf.Labels = nil
			}
			s.SnapshotCRD, s.SnapshotClass, s.BackupSnapshotClass = tt.crd, tt.live, tt.backup
			p := desiredPlan(t, testConfig(true), s)
			if std := find(p, names.VolumeSnapshotCls); tt.wantForce != "" {
				g.Expect(std).NotTo(BeNil())
				g.Expect(std.Parameters).To(Equal(map[string]string{paramForceCreate: tt.wantForce}))
			} else {
				g.Expect(std).To(BeNil())
			}
			if b := find(p, names.BackupSnapshotClass); tt.wantBackup != nil {
				g.Expect(b).NotTo(BeNil())
				g.Expect(b.Parameters).To(Equal(tt.wantBackup))
			} else {
				g.Expect(b).To(BeNil())
			}
			if tt.wantDelete {
				g.Expect(testutil.StepNames(p.Delete)).To(ContainElement(backupName))
			} else {
				g.Expect(testutil.StepNames(p.Delete)).NotTo(ContainElement(backupName))
			}
			g.Expect(testutil.StepNames(p.Recreate)).To(ConsistOf(orEmpty(tt.wantRecreate)))
			g.Expect(testutil.StepNames(p.Create)).To(ConsistOf(orEmpty(tt.wantCreate)))
			g.Expect(p.BackupClassTaken).To(BeFalse())
		})
	}
}

// TestBackupClassOfOthers checks that a VolumeSnapshotClass under the backup class's name without
// the operator's label is someone else's: never applied over, recreated or deleted, in any state.
func TestBackupClassOfOthers(t *testing.T) {
	t.Parallel()
	const backupStep = "guest/VolumeSnapshotClass//" + names.BackupSnapshotClass
	others := map[string]*snapshotv1.VolumeSnapshotClass{
		"a user's class without labels": {
			ObjectMeta: metav1.ObjectMeta{Name: names.BackupSnapshotClass},
			Driver:     "example.com/other", Parameters: map[string]string{"tier": "cold"},
		},
		"a user's backup class of the driver, labelled by another manager": {
			ObjectMeta: metav1.ObjectMeta{Name: names.BackupSnapshotClass, Labels: map[string]string{names.ManagedByLabel: "gitops"}},
			Driver:     names.DriverName, Parameters: map[string]string{"type": "backup", paramAvailability: "cold-az"},
		},
	}
	asked := map[string]string{nodeconf.KeyBackupSnapshotClass: "true"}
	steps := testutil.StepNames
	for what, other := range others {
		t.Run("When "+what+" holds the backup class's name and the backup class is not asked for, it should not delete it", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := withFeatures(testState(true, false), nil)
			s.BackupSnapshotClass = other
			p := desiredPlan(t, testConfig(true), s)
			g.Expect(steps(p.Delete)).NotTo(ContainElement(backupStep))
			g.Expect(steps(p.Apply)).NotTo(ContainElement(backupStep))
			g.Expect(p.BackupClassTaken).To(BeFalse(), "not asked for, nothing to report")
		})

		t.Run("When "+what+" holds the backup class's name and the backup class is asked for, it should neither apply nor recreate it", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := withFeatures(testState(true, false), asked)
			s.BackupSnapshotClass = other
			p := desiredPlan(t, testConfig(true), s)
			g.Expect(steps(p.Apply)).NotTo(ContainElement(backupStep))
			g.Expect(steps(p.Recreate)).NotTo(ContainElement(backupStep))
			g.Expect(steps(p.Create)).NotTo(ContainElement(backupStep))
			g.Expect(steps(p.Delete)).NotTo(ContainElement(backupStep))
			g.Expect(steps(p.Apply)).To(ContainElement("guest/VolumeSnapshotClass//"+names.VolumeSnapshotCls), "standard-csi's class is applied")
			g.Expect(p.BackupClassTaken).To(BeTrue(), "reported in the zone warning")
		})

		t.Run("When "+what+" holds the backup class's name under managementState Removed, it should not delete it", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := withFeatures(testState(true, false), asked)
			s.BackupSnapshotClass = other
			s.Driver.Spec.ManagementState = operatorv1.Removed
			p := desiredPlan(t, testConfig(true), s)
			g.Expect(steps(p.Delete)).NotTo(ContainElement(backupStep))
			g.Expect(steps(p.Delete)).To(ContainElement("guest/VolumeSnapshotClass//"+names.VolumeSnapshotCls), "standard-csi's class is deleted")
		})
	}

	t.Run("When the operator's backup class exists under managementState Removed, it should delete it", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := testState(true, false)
		s.BackupSnapshotClass = &snapshotv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: names.BackupSnapshotClass,
			Labels: map[string]string{names.ManagedByLabel: names.ManagedByValue}}}
		s.Driver.Spec.ManagementState = operatorv1.Removed
		p := desiredPlan(t, testConfig(true), s)
		g.Expect(steps(p.Delete)).To(ContainElement(backupStep))
	})
}

// TestDesiredSnapshotClassDefault checks that the default-class annotation of standard-csi's
// VolumeSnapshotClass is the user's once the class exists, as the StorageClass's is.
func TestDesiredSnapshotClassDefault(t *testing.T) {
	t.Parallel()
	const annotation = "snapshot.storage.kubernetes.io/is-default-class"
	find := func(p *Plan) *snapshotv1.VolumeSnapshotClass {
		for _, st := range p.Apply {
			if vsc, ok := st.Object.(*snapshotv1.VolumeSnapshotClass); ok && vsc.Name == names.VolumeSnapshotCls {
				return vsc
			}
		}
		return nil
	}
	for _, v := range []string{"false", "true"} {
		t.Run("When the user set standard-csi's VolumeSnapshotClass default annotation to "+v+", it should keep it", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			s := testState(true, false)
			s.SnapshotClass = &snapshotv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: names.VolumeSnapshotCls,
				Annotations: map[string]string{annotation: v}}, Driver: names.DriverName, Parameters: map[string]string{paramForceCreate: "true"}}
			vsc := find(desiredPlan(t, testConfig(true), s))
			g.Expect(vsc).NotTo(BeNil())
			g.Expect(vsc.Annotations).To(HaveKeyWithValue(annotation, v))
		})
	}

	t.Run("When standard-csi's VolumeSnapshotClass does not exist, it should create it as the default", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		vsc := find(desiredPlan(t, testConfig(true), testState(true, false)))
		g.Expect(vsc).NotTo(BeNil())
		g.Expect(vsc.Annotations).To(HaveKeyWithValue(annotation, "true"))
	})

	t.Run("When the user made another class of the driver the default and removed standard-csi's annotation, it should not make standard-csi the default", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		s := testState(true, false)
		live := snapshotv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: names.VolumeSnapshotCls}, Driver: names.DriverName}
		s.SnapshotClass = &live
		s.SnapshotClasses = []snapshotv1.VolumeSnapshotClass{live, {
			ObjectMeta: metav1.ObjectMeta{Name: "fast", Annotations: map[string]string{annotation: "true"}}, Driver: names.DriverName,
		}}
		vsc := find(desiredPlan(t, testConfig(true), s))
		g.Expect(vsc).NotTo(BeNil())
		g.Expect(vsc.Annotations).To(HaveKeyWithValue(annotation, "false"))
	})
}

func TestUndecodable(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		data map[string]string
		want string
	}{
		{name: "When one key does not decode, it should name it",
			data: map[string]string{nodeconf.KeyZoneClasses: "["},
			want: "Key zone_classes of ConfigMap openshift-cluster-csi-drivers/cloud-conf, which the controlplane manager writes, does not decode; " +
				"the per-zone StorageClasses are left as they are."},
		{name: "When several keys do not decode, it should name them all",
			data: map[string]string{nodeconf.KeyZoneClasses: "[", nodeconf.KeyEnableTopology: "yes"},
			want: "Keys enable_topology, zone_classes of ConfigMap openshift-cluster-csi-drivers/cloud-conf, which the controlplane manager writes, do not decode; " +
				"the per-zone StorageClasses are left as they are."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			_, err := nodeconf.Decode(tt.data)
			g.Expect(err).To(HaveOccurred())
			g.Expect(undecodable(err, true)).To(Equal(tt.want))
		})
	}
}

func TestDesiredMutatesNothing(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	// A hosted guest whose node copy asks for a per-zone class and the backup class, with the
	// classes of an earlier plan live.
	input := func() Input {
		s := withFeatures(testState(true, true), map[string]string{
			nodeconf.KeyZoneClasses:         zoneClassesValue([]zoneclasses.Class{{VolumeZone: "nova", ComputeZones: []string{"nova"}}}),
			nodeconf.KeyVolumeZones:         "nova",
			nodeconf.KeyBackupSnapshotClass: "true",
		})
		s.Config = testConfig(true)
		return s
	}
	live := liveClasses(desiredPlan(t, testConfig(true), input()))
	in := input()
	in.StorageClasses = live
	testutil.Build(t, func(d *manifests.Decoder) (*Plan, error) { return Compute(d, in) })
	want := input()
	want.StorageClasses = liveClasses(desiredPlan(t, testConfig(true), input()))
	g.Expect(in).To(Equal(want), "planning leaves its input as it was")
}
