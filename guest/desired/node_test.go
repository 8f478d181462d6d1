package desired

import (
	"fmt"
	"slices"
	"testing"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil/golden"
)

// testNodeInputs returns the inputs of a HyperShift guest: the node copy of cloud-conf is
// called cloud-conf there.
func testNodeInputs(topology bool) nodeInputs {
	return nodeInputs{
		Images: operandimages.Node{
			Driver:              "cinder-csi-driver@sha256:d1",
			NodeDriverRegistrar: "csi-node-driver-registrar@sha256:n1",
			LivenessProbe:       "csi-livenessprobe@sha256:l1",
		},
		Verbosity:     2,
		Topology:      topology,
		CloudConfName: names.CloudConfConfigMap,
		CloudConfHash: "0123456789abcdef",
	}
}

func nodeDaemonSet(t testing.TB, in nodeInputs) *appsv1.DaemonSet {
	return testutil.Build(t, func(d *manifests.Decoder) (*appsv1.DaemonSet, error) { return desiredNode(d, in) })
}

func TestDesiredNode(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		topology bool
	}{
		{name: "When topology is off, it should match the fixture"},
		{name: "When topology is on, it should match the fixture", topology: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			golden.CompareWithFixture(t, nodeDaemonSet(t, testNodeInputs(tt.topology)))
		})
	}

	tests := []struct {
		name  string
		edit  func(*nodeInputs)
		check func(g Gomega, ds *appsv1.DaemonSet)
	}{
		{
			name: "When rendered, it should mount no Secret at all",
			check: func(g Gomega, ds *appsv1.DaemonSet) {
				for _, v := range ds.Spec.Template.Spec.Volumes {
					g.Expect(v.Secret).To(BeNil(), v.Name)
					if v.Projected != nil {
						for _, s := range v.Projected.Sources {
							g.Expect(s.Secret).To(BeNil(), v.Name)
						}
					}
				}
				for _, c := range ds.Spec.Template.Spec.Containers {
					for _, e := range c.Env {
						g.Expect(e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil).To(BeTrue(), "%s env %s", c.Name, e.Name)
					}
					for _, from := range c.EnvFrom {
						g.Expect(from.SecretRef).To(BeNil(), c.Name)
					}
				}
			},
		},
		{
			name: "When rendered, it should tolerate every taint",
			check: func(g Gomega, ds *appsv1.DaemonSet) {
				g.Expect(ds.Spec.Template.Spec.Tolerations).To(Equal([]corev1.Toleration{{Operator: corev1.TolerationOpExists}}))
			},
		},
		{
			name: "When rendered, it should use the host network",
			check: func(g Gomega, ds *appsv1.DaemonSet) {
				g.Expect(ds.Spec.Template.Spec.HostNetwork).To(BeTrue())
			},
		},
		{
			name: "When rendered, it should roll out at most 10% of the nodes at a time",
			check: func(g Gomega, ds *appsv1.DaemonSet) {
				g.Expect(ds.Spec.UpdateStrategy.Type).To(Equal(appsv1.RollingUpdateDaemonSetStrategyType))
				g.Expect(ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable).To(HaveValue(Equal(intstr.FromString("10%"))))
			},
		},
		{
			name: "When topology is on, it should pass --with-topology=true to the driver only",
			edit: func(in *nodeInputs) { in.Topology = true },
			check: func(g Gomega, ds *appsv1.DaemonSet) {
				for _, c := range ds.Spec.Template.Spec.Containers {
					v, ok := testutil.FlagValue(c.Args, "with-topology")
					if c.Name != "csi-driver" {
						g.Expect(ok).To(BeFalse(), c.Name)
						continue
					}
					g.Expect(ok).To(BeTrue())
					g.Expect(v).To(Equal("true"))
				}
			},
		},
		{
			name: "When the log level is set, it should pass --v to every container",
			edit: func(in *nodeInputs) { in.Verbosity = 8 },
			check: func(g Gomega, ds *appsv1.DaemonSet) {
				for _, c := range ds.Spec.Template.Spec.Containers {
					v, ok := testutil.FlagValue(c.Args, "v")
					g.Expect(ok).To(BeTrue(), c.Name)
					g.Expect(v).To(Equal("8"), c.Name)
				}
			},
		},
		{
			name: "When rendered, it should harden every container and give it resource requests",
			check: func(g Gomega, ds *appsv1.DaemonSet) {
				g.Expect(ds.Spec.Template.Spec.Containers).To(HaveLen(3))
				for _, c := range ds.Spec.Template.Spec.Containers {
					g.Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()), c.Name)
					g.Expect(c.TerminationMessagePolicy).To(Equal(corev1.TerminationMessageFallbackToLogsOnError), c.Name)
					g.Expect(c.ImagePullPolicy).To(Equal(corev1.PullIfNotPresent), c.Name)
					g.Expect(c.Resources.Requests.Cpu().IsZero()).To(BeFalse(), c.Name)
					g.Expect(c.Resources.Requests.Memory().IsZero()).To(BeFalse(), c.Name)
				}
			},
		},
		{
			name: "When standalone names the node copy cloud-conf-node, it should mount that ConfigMap",
			edit: func(in *nodeInputs) { in.CloudConfName = nodeconf.StandaloneName },
			check: func(g Gomega, ds *appsv1.DaemonSet) {
				i := slices.IndexFunc(ds.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.ConfigMap != nil })
				g.Expect(i).NotTo(Equal(-1))
				g.Expect(ds.Spec.Template.Spec.Volumes[i].ConfigMap.Name).To(Equal(nodeconf.StandaloneName))
			},
		},
		{
			name: "When the cloud-conf hash is given, it should annotate the pod template with it",
			check: func(g Gomega, ds *appsv1.DaemonSet) {
				g.Expect(ds.Spec.Template.Annotations).To(HaveKeyWithValue(confighash.AnnotationKey(nodeconf.HashInput), "0123456789abcdef"))
			},
		},
		{
			name: "When rendered, it should carry the managed-by label and live in the guest namespace",
			check: func(g Gomega, ds *appsv1.DaemonSet) {
				g.Expect(ds.Namespace).To(Equal(names.GuestNamespace))
				g.Expect(ds.Name).To(Equal(names.NodeDaemonSet))
				g.Expect(ds.Labels).To(HaveKeyWithValue(names.ManagedByLabel, names.ManagedByValue))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			in := testNodeInputs(false)
			if tt.edit != nil {
				tt.edit(&in)
			}
			tt.check(g, nodeDaemonSet(t, in))
		})
	}

	for _, missing := range []string{"csi-driver", "csi-node-driver-registrar", "csi-liveness-probe"} {
		t.Run("When the "+missing+" image is missing, it should fail naming the container", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			in := testNodeInputs(false)
			switch missing {
			case "csi-driver":
				in.Images.Driver = ""
			case "csi-node-driver-registrar":
				in.Images.NodeDriverRegistrar = ""
			case "csi-liveness-probe":
				in.Images.LivenessProbe = ""
			}
			ds, err := desiredNode(testutil.Decoder(t), in)
			g.Expect(err).To(MatchError(ContainSubstring(missing)))
			g.Expect(ds).To(BeNil())
		})
	}
}

func TestDesiredStaticObjects(t *testing.T) {
	t.Parallel()
	hyperShiftKinds := []string{"*v1.ServiceAccount", "*v1.ClusterRole", "*v1.ClusterRoleBinding", "*v1.CSIDriver"}
	for _, tt := range []struct {
		name       string
		hyperShift bool
	}{
		{name: "When on HyperShift, it should match the fixture", hyperShift: true},
		{name: "When standalone, it should match the fixture"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			objs := testutil.Build(t, func(d *manifests.Decoder) ([]client.Object, error) {
				return desiredStaticObjects(d, tt.hyperShift, false)
			})
			var kinds []string
			all := make([]any, 0, len(objs))
			for _, o := range objs {
				g.Expect(o.GetLabels()).To(HaveKeyWithValue(names.ManagedByLabel, names.ManagedByValue), o.GetName())
				kinds = append(kinds, fmt.Sprintf("%T", o))
				all = append(all, o)
			}
			if tt.hyperShift {
				g.Expect(kinds).To(Equal(hyperShiftKinds))
			} else {
				g.Expect(kinds[:len(hyperShiftKinds)]).To(Equal(hyperShiftKinds), "the node objects come first")
				g.Expect(kinds).To(ContainElements("*v1.Role", "*v1.RoleBinding"))
			}
			golden.CompareWithFixture(t, all...)
		})
	}

	t.Run("When on HyperShift, it should create nothing for the controller's ServiceAccount, which lives in the management cluster", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		objs := testutil.Build(t, func(d *manifests.Decoder) ([]client.Object, error) { return desiredStaticObjects(d, true, false) })
		for _, o := range objs {
			out, err := golden.Marshal(o)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(out)).NotTo(ContainSubstring(names.ControllerServiceAccount), o.GetName())
		}
	})

	t.Run("When rendered, it should declare the CSIDriver with attach, pod info and SELinux mount", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		objs := testutil.Build(t, func(d *manifests.Decoder) ([]client.Object, error) { return desiredStaticObjects(d, true, false) })
		i := slices.IndexFunc(objs, func(o client.Object) bool { _, ok := o.(*storagev1.CSIDriver); return ok })
		g.Expect(i).NotTo(Equal(-1))
		d := objs[i].(*storagev1.CSIDriver)
		g.Expect(d.Name).To(Equal(names.DriverName))
		g.Expect(d.Spec.AttachRequired).To(HaveValue(BeTrue()))
		g.Expect(d.Spec.PodInfoOnMount).To(HaveValue(BeTrue()))
		g.Expect(d.Spec.SELinuxMount).To(HaveValue(BeTrue()))
	})
}

func TestDesiredStorageClass(t *testing.T) {
	t.Parallel()
	t.Run("When it is the default class, it should match the fixture", func(t *testing.T) {
		t.Parallel()
		sc := testutil.Build(t, func(d *manifests.Decoder) (*storagev1.StorageClass, error) { return desiredStorageClass(d, "true") })
		golden.CompareWithFixture(t, sc)
	})

	for _, v := range []string{"true", "false"} {
		t.Run("When the default-class value is "+v+", it should set the annotation to it", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			sc := testutil.Build(t, func(d *manifests.Decoder) (*storagev1.StorageClass, error) { return desiredStorageClass(d, v) })
			g.Expect(sc.Name).To(Equal(names.StorageClass))
			g.Expect(sc.Provisioner).To(Equal(names.DriverName))
			g.Expect(sc.Annotations).To(Equal(map[string]string{names.DefaultStorageClassAnnotation: v}))
			g.Expect(sc.Labels).To(HaveKeyWithValue(names.ManagedByLabel, names.ManagedByValue))
		})
	}
}

func TestDesiredVolumeSnapshotClass(t *testing.T) {
	t.Parallel()
	t.Run("When rendered, it should match the fixture", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		vsc := testutil.Build(t, func(d *manifests.Decoder) (*snapshotv1.VolumeSnapshotClass, error) {
			return desiredVolumeSnapshotClass(d, "true", "true")
		})
		g.Expect(vsc.Driver).To(Equal(names.DriverName))
		g.Expect(vsc.Labels).To(HaveKeyWithValue(names.ManagedByLabel, names.ManagedByValue))
		golden.CompareWithFixture(t, vsc)
	})

	for _, v := range []string{"true", "false"} {
		t.Run("When force-create is "+v+", it should set the parameter to it and leave the default-class annotation alone", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			vsc := testutil.Build(t, func(d *manifests.Decoder) (*snapshotv1.VolumeSnapshotClass, error) {
				return desiredVolumeSnapshotClass(d, v, "true")
			})
			g.Expect(vsc.Parameters).To(Equal(map[string]string{paramForceCreate: v}))
			g.Expect(vsc.Annotations).To(Equal(map[string]string{"snapshot.storage.kubernetes.io/is-default-class": "true"}))
		})
		t.Run("When the default-class value is "+v+", it should set the annotation to it", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			vsc := testutil.Build(t, func(d *manifests.Decoder) (*snapshotv1.VolumeSnapshotClass, error) {
				return desiredVolumeSnapshotClass(d, "true", v)
			})
			g.Expect(vsc.Annotations).To(Equal(map[string]string{"snapshot.storage.kubernetes.io/is-default-class": v}))
		})
	}
}

// storageClass returns a StorageClass with the default-class annotation set to isDefault, or
// without it when isDefault is "".
func storageClass(name, isDefault string) storagev1.StorageClass {
	sc := storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "example.com/other"}
	if isDefault != "" {
		sc.Annotations = map[string]string{names.DefaultStorageClassAnnotation: isDefault}
	}
	return sc
}

func TestDefaultClassValue(t *testing.T) {
	t.Parallel()
	ours := func(isDefault string) *storagev1.StorageClass {
		sc := storageClass(names.StorageClass, isDefault)
		return &sc
	}
	tests := []struct {
		name string
		live *storagev1.StorageClass
		all  []storagev1.StorageClass
		want string
	}{
		{
			name: "When no class exists, it should make standard-csi the default",
			want: "true",
		},
		{
			name: "When no other class is the default, it should make standard-csi the default",
			all:  []storagev1.StorageClass{storageClass("fast", ""), storageClass("slow", "false")},
			want: "true",
		},
		{
			name: "When another class is the default, it should not make standard-csi the default",
			all:  []storagev1.StorageClass{storageClass("fast", "true"), storageClass("slow", "")},
			want: "false",
		},
		{
			name: "When the live standard-csi has the annotation false, it should keep false even with no other default",
			live: ours("false"),
			all:  []storagev1.StorageClass{*ours("false"), storageClass("fast", "")},
			want: "false",
		},
		{
			name: "When the live standard-csi has the annotation true, it should keep true even if another class is the default",
			live: ours("true"),
			all:  []storagev1.StorageClass{*ours("true"), storageClass("fast", "true")},
			want: "true",
		},
		{
			name: "When the live standard-csi has no annotation and is listed as the only class, it should make it the default",
			live: ours(""),
			all:  []storagev1.StorageClass{*ours("")},
			want: "true",
		},
		{
			name: "When the live standard-csi has no annotation and another class is the default, it should not make it the default",
			live: ours(""),
			all:  []storagev1.StorageClass{*ours(""), storageClass("fast", "true")},
			want: "false",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(defaultClassValue(tt.live, tt.all)).To(Equal(tt.want))
		})
	}
}

// snapshotClass returns a VolumeSnapshotClass of driver with the default-class annotation set to
// isDefault, or without it when isDefault is "".
func snapshotClass(name, driver, isDefault string) snapshotv1.VolumeSnapshotClass {
	vsc := snapshotv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: driver}
	if isDefault != "" {
		vsc.Annotations = map[string]string{"snapshot.storage.kubernetes.io/is-default-class": isDefault}
	}
	return vsc
}

// TestDefaultSnapshotClassValue checks that standard-csi's VolumeSnapshotClass follows the rules
// of standard-csi's StorageClass (TestDefaultClassValue), among the classes of its driver.
func TestDefaultSnapshotClassValue(t *testing.T) {
	t.Parallel()
	ours := func(isDefault string) *snapshotv1.VolumeSnapshotClass {
		vsc := snapshotClass(names.VolumeSnapshotCls, names.DriverName, isDefault)
		return &vsc
	}
	tests := []struct {
		name string
		live *snapshotv1.VolumeSnapshotClass
		all  []snapshotv1.VolumeSnapshotClass
		want string
	}{
		{
			name: "When no class exists, it should make standard-csi the default",
			want: "true",
		},
		{
			name: "When no other class of the driver is the default, it should make standard-csi the default",
			all:  []snapshotv1.VolumeSnapshotClass{snapshotClass("fast", names.DriverName, ""), snapshotClass("slow", names.DriverName, "false")},
			want: "true",
		},
		{
			name: "When another class of the driver is the default, it should not make standard-csi the default",
			all:  []snapshotv1.VolumeSnapshotClass{snapshotClass("fast", names.DriverName, "true")},
			want: "false",
		},
		{
			name: "When only another driver's class is the default, it should make standard-csi the default",
			all:  []snapshotv1.VolumeSnapshotClass{snapshotClass("nfs", "nfs.csi.k8s.io", "true")},
			want: "true",
		},
		{
			name: "When the live standard-csi has the annotation false, it should keep false even with no other default",
			live: ours("false"),
			all:  []snapshotv1.VolumeSnapshotClass{*ours("false")},
			want: "false",
		},
		{
			name: "When the live standard-csi has the annotation true, it should keep true even if another class of the driver is the default",
			live: ours("true"),
			all:  []snapshotv1.VolumeSnapshotClass{*ours("true"), snapshotClass("fast", names.DriverName, "true")},
			want: "true",
		},
		{
			name: "When the user removed the annotation from the live standard-csi and no other class is the default, it should make it the default again",
			live: ours(""),
			all:  []snapshotv1.VolumeSnapshotClass{*ours("")},
			want: "true",
		},
		{
			name: "When the user removed the annotation from the live standard-csi and another class of the driver is the default, it should not make it the default",
			live: ours(""),
			all:  []snapshotv1.VolumeSnapshotClass{*ours(""), snapshotClass("fast", names.DriverName, "true")},
			want: "false",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(defaultSnapshotClassValue(tt.live, tt.all)).To(Equal(tt.want))
		})
	}
}
