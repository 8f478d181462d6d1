package desired

import (
	"slices"
	"strconv"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operand"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
)

// nodeInputs is everything the node DaemonSet is computed from.
type nodeInputs struct {
	Images        operandimages.Node
	Verbosity     int
	Topology      bool
	CloudConfName string
	// CloudConfHash is the hash of the node cloud-conf as it is in the guest.
	CloudConfHash string
}

// desiredStaticObjects returns the node ServiceAccount, its RBAC and the CSIDriver, in apply
// order (the ClusterRole before the binding that references it).
// In standalone mode it adds the controller's RBAC: there the sidecars use the controller's
// ServiceAccount in this cluster (on HyperShift they use the guest's admin kubeconfig instead).
// noAccessReviews drops the SubjectAccessReview rule of the kube-rbac-proxies' ClusterRole: an
// operator that does not hold it may not create a role that grants it (RBAC's escalation check).
func desiredStaticObjects(d *manifests.Decoder, hyperShift, noAccessReviews bool) ([]plan.Object, error) {
	files := []string{"node_sa.yaml", "node_rbac.yaml", "csidriver.yaml"}
	if !hyperShift {
		files = append(files, "controller_rbac.yaml")
	}
	var objs []plan.Object
	for _, f := range files {
		o, err := d.Operand(f)
		if err != nil {
			return nil, err
		}
		objs = append(objs, o...)
	}
	if noAccessReviews {
		for _, o := range objs {
			if role, ok := o.(*rbacv1.ClusterRole); ok && role.Name == names.KubeRBACProxyRole {
				role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
					return slices.Contains(r.Resources, "subjectaccessreviews")
				})
			}
		}
	}
	operand.Managed(objs...)
	return objs, nil
}

// desiredNode returns the node plugin DaemonSet.
func desiredNode(d *manifests.Decoder, in nodeInputs) (*appsv1.DaemonSet, error) {
	ds, err := manifests.Object[*appsv1.DaemonSet](d, "node.yaml")
	if err != nil {
		return nil, err
	}
	operand.Managed(ds)
	pod := &ds.Spec.Template.Spec
	verbosity := "--v=" + strconv.Itoa(in.Verbosity)
	byName := map[string]string{
		manifests.ContainerDriver:              in.Images.Driver,
		manifests.ContainerNodeDriverRegistrar: in.Images.NodeDriverRegistrar,
		manifests.ContainerLivenessProbe:       in.Images.LivenessProbe,
	}
	if err := operand.SetImages(pod, func(container string) (string, bool) {
		image, ok := byName[container]
		return image, ok
	}); err != nil {
		return nil, err
	}
	operand.EachContainer(pod, func(c *corev1.Container) {
		if c.Name == manifests.ContainerDriver {
			// The node must report topology exactly when the controller uses it
			// (OCPBUGS-56128): both read the same decision from cloud-conf.
			c.Args = append(c.Args, "--with-topology="+strconv.FormatBool(in.Topology))
		}
		c.Args = append(c.Args, verbosity)
		operand.Harden(c)
	})
	for i := range pod.Volumes {
		if v := &pod.Volumes[i]; v.ConfigMap != nil && v.ConfigMap.Name == names.CloudConfConfigMap {
			v.ConfigMap.Name = in.CloudConfName
		}
	}
	confighash.Annotate(&ds.Spec.Template, map[string]string{nodeconf.HashInput: in.CloudConfHash})
	return ds, nil
}

// desiredStorageClass returns the default StorageClass. isDefault is the default-class annotation
// value to set: see defaultClassValue.
func desiredStorageClass(d *manifests.Decoder, isDefault string) (*storagev1.StorageClass, error) {
	sc, err := manifests.Object[*storagev1.StorageClass](d, "storageclass.yaml")
	if err != nil {
		return nil, err
	}
	operand.Managed(sc)
	if sc.Annotations == nil {
		sc.Annotations = map[string]string{}
	}
	sc.Annotations[names.DefaultStorageClassAnnotation] = isDefault
	return sc, nil
}

// defaultClassValue decides the default-class annotation of standard-csi so that a user's choice
// stands: an annotation already on the live class is kept as it is (a user who set it to "false"
// keeps that); a new class becomes the default only when no other class is.
func defaultClassValue(live *storagev1.StorageClass, all []storagev1.StorageClass) string {
	if live != nil {
		if v, ok := live.Annotations[names.DefaultStorageClassAnnotation]; ok {
			return v
		}
	}
	for _, sc := range all {
		if sc.Name != names.StorageClass && sc.Annotations[names.DefaultStorageClassAnnotation] == "true" {
			return "false"
		}
	}
	return "true"
}

// desiredVolumeSnapshotClass returns the default VolumeSnapshotClass with force-create
// forceCreate (see snapshotForceCreate). isDefault is the default-class annotation value to set:
// see defaultSnapshotClassValue.
func desiredVolumeSnapshotClass(d *manifests.Decoder, forceCreate, isDefault string) (*snapshotv1.VolumeSnapshotClass, error) {
	vsc, err := manifests.Object[*snapshotv1.VolumeSnapshotClass](d, "volumesnapshotclass.yaml")
	if err != nil {
		return nil, err
	}
	operand.Managed(vsc)
	if vsc.Annotations == nil {
		vsc.Annotations = map[string]string{}
	}
	vsc.Annotations[names.DefaultSnapshotClassAnnotation] = isDefault
	if vsc.Parameters == nil {
		vsc.Parameters = map[string]string{}
	}
	vsc.Parameters[paramForceCreate] = forceCreate
	return vsc, nil
}

// defaultSnapshotClassValue decides the default-class annotation of standard-csi's
// VolumeSnapshotClass as defaultClassValue does the StorageClass's, so that a user's choice stands
// as it does under csi-operator (whose library-go never changes a class's metadata once it
// exists): an annotation already on the live class is kept as it is; a new class, or one whose
// annotation was removed, becomes the default only when no other class of the driver is. Only the
// driver's classes count: the snapshot controller looks for the default class among those of a
// snapshot's driver, so another driver's default is no conflict.
func defaultSnapshotClassValue(live *snapshotv1.VolumeSnapshotClass, all []snapshotv1.VolumeSnapshotClass) string {
	if live != nil {
		if v, ok := live.Annotations[names.DefaultSnapshotClassAnnotation]; ok {
			return v
		}
	}
	for _, vsc := range all {
		if vsc.Name != names.VolumeSnapshotCls && vsc.Driver == names.DriverName && vsc.Annotations[names.DefaultSnapshotClassAnnotation] == "true" {
			return "false"
		}
	}
	return "true"
}
