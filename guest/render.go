package guest

import (
	"fmt"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/loglevel"
)

// RenderInputs are the inputs of an offline render of the guest side.
type RenderInputs struct {
	Config Config
	Driver *operatorv1.ClusterCSIDriver
	// CloudConf is the node copy of cloud-conf, as the controlplane manager writes it.
	CloudConf *corev1.ConfigMap
	// StorageClasses are the cluster's other StorageClasses (for the default-class decision).
	StorageClasses []storagev1.StorageClass
	// SnapshotCRD says whether the VolumeSnapshotClass CRD exists.
	SnapshotCRD bool
}

// Render returns what the guest manager would apply for the inputs, in apply order, with the
// same pure functions the reconciler uses.
func Render(d *manifests.Decoder, in RenderInputs) ([]client.Object, error) {
	driver := in.Driver
	if driver == nil {
		driver = &operatorv1.ClusterCSIDriver{}
	}
	verbosity, err := loglevel.Verbosity(driver.Spec.LogLevel)
	if err != nil {
		return nil, err
	}
	objs, err := desiredStaticObjects(d, in.Config.HyperShift)
	if err != nil {
		return nil, err
	}
	if in.CloudConf == nil {
		return nil, fmt.Errorf("rendering the node DaemonSet needs the node cloud-conf")
	}
	ds, err := desiredNodeFor(d, in.Config, in.CloudConf, verbosity)
	if err != nil {
		return nil, err
	}
	objs = append(objs, ds)
	switch driver.Spec.StorageClassState {
	case operatorv1.UnmanagedStorageClass, operatorv1.RemovedStorageClass:
	default:
		sc, err := desiredStorageClass(d, defaultClassValue(nil, in.StorageClasses))
		if err != nil {
			return nil, err
		}
		objs = append(objs, sc)
	}
	if in.SnapshotCRD {
		vsc, err := desiredVolumeSnapshotClass(d)
		if err != nil {
			return nil, err
		}
		objs = append(objs, vsc)
	}
	return objs, nil
}
