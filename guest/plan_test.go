package guest

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil/golden"
)

func testConfig(hyperShift bool) Config {
	return Config{HyperShift: hyperShift, Images: testNodeInputs(false).Images}
}

// testState is a guest whose node copy of cloud-conf exists, with the VolumeSnapshotClass CRD.
func testState(hyperShift, topology bool) State {
	data := map[string]string{names.KeyCloudConf: "[Global]\n", names.KeyEnableTopology: fmt.Sprint(topology)}
	return State{
		Driver: &operatorv1.ClusterCSIDriver{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterCSIDriverName}},
		CloudConf: &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: names.GuestNamespace, Name: names.NodeCloudConf(hyperShift),
				Labels:      map[string]string{names.ManagedByLabel: names.ManagedByValue},
				Annotations: map[string]string{names.DataHashAnnotation: confighash.Data(data, nil)},
			},
			Data: data,
		},
		SnapshotCRD: true,
	}
}

func desiredPlan(t testing.TB, cfg Config, s State) *Plan {
	return testutil.Build(t, func(d *manifests.Decoder) (*Plan, error) { return Desired(d, cfg, s) })
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
				g.Expect(s.Cluster).To(Equal(plan.Guest))
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
		s.CloudConf.Data[names.KeyCloudConf] = "[Global]\nuse-clouds = true\n"
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
			if tt.wantDelete {
				g.Expect(testutil.StepNames(p.Delete)).To(Equal([]string{sc}))
			} else {
				g.Expect(p.Delete).To(BeEmpty())
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
// (the VolumeSnapshotClass included), DaemonSet and classes before the RBAC they rely on.
func TestDesiredRemoved(t *testing.T) {
	t.Parallel()
	for _, hyperShift := range []bool{true, false} {
		for _, crd := range []bool{true, false} {
			t.Run(fmt.Sprintf("When Removed (HyperShift %t, snapshot CRD %t), it should delete every object Managed applies", hyperShift, crd), func(t *testing.T) {
				t.Parallel()
				g := NewWithT(t)
				s := testState(hyperShift, true)
				s.SnapshotCRD = crd
				managed := desiredPlan(t, testConfig(hyperShift), s)

				removed := State{Driver: s.Driver.DeepCopy(), SnapshotCRD: crd}
				removed.Driver.Spec.ManagementState = operatorv1.Removed
				p := desiredPlan(t, testConfig(hyperShift), removed)
				g.Expect(p.Apply).To(BeEmpty())
				g.Expect(testutil.StepNames(p.Delete)).To(ConsistOf(testutil.StepNames(plan.Identities(managed.Apply))))
				g.Expect(p.Delete[0].Group).To(Equal(groupNode), "the DaemonSet goes first")
				g.Expect(p.Delete[len(p.Delete)-1].Group).To(Equal(groupStatic), "the RBAC and CSIDriver go last")
			})
		}
	}
}
