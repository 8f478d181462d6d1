// Package guest is the guest-side manager of a hosted cluster (or, in standalone mode, the node
// half of the operator). It owns the node plugin DaemonSet and its ServiceAccount and RBAC, the
// CSIDriver, the default StorageClass and the VolumeSnapshotClass, and, as the node copy of
// cloud-conf asks, one StorageClass per volume zone and the backup VolumeSnapshotClass. It
// writes its own ClusterCSIDriver conditions, ZoneWarning among them (nodes no volume zone
// serves, classes kept for their claims, names taken), and status.observedGeneration.
package guest

import (
	"fmt"

	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/cinder-csi-operator/cinder-csi-operator/guest/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/loglevel"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
)

// Config configures the guest manager.
type Config struct {
	// HyperShift selects the hosted-cluster flavour; false is standalone OpenShift.
	HyperShift bool
	// Images are the node plugin's operand images.
	Images operandimages.Node
	// LogLevel is the operator's own verbosity, driven by spec.operatorLogLevel.
	LogLevel *loglevel.Live
}

// plan is what the plan takes of c (desired.Config).
func (c Config) plan() desired.Config {
	return desired.Config{HyperShift: c.HyperShift, Images: c.Images}
}

// CacheOptions returns the guest manager's cache options: its namespace, the cluster-scoped kinds
// it owns selected by label, all StorageClasses (to respect a user's default class and find the
// per-zone classes), the ClusterCSIDriver and the VolumeSnapshotClass CRD by name, the nodes'
// zone labels, and the claims' StorageClasses.
func CacheOptions(cfg Config) cache.Options {
	return cache.Options{
		DefaultNamespaces: map[string]cache.Config{names.GuestNamespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&operatorv1.ClusterCSIDriver{}: {Field: clusters.ByName(names.ClusterCSIDriverName)},
			&corev1.ConfigMap{}:            {Field: clusters.ByName(nodeconf.Name(cfg.HyperShift))},
			&appsv1.DaemonSet{}:            clusters.Owned,
			&corev1.ServiceAccount{}:       clusters.Owned,
			&rbacv1.ClusterRole{}:          clusters.Owned,
			&rbacv1.ClusterRoleBinding{}:   clusters.Owned,
			&rbacv1.Role{}:                 clusters.Owned,
			&rbacv1.RoleBinding{}:          clusters.Owned,
			&storagev1.CSIDriver{}:         clusters.Owned,
			// Nodes, metadata only and trimmed to their zone labels (nodeCache), watched only
			// once the zone warning needs them.
			nodeMetadata(): nodeCache,
			// Claims of every namespace, trimmed to the class they name (claimCache), watched
			// only while a per-zone class is to be retired.
			&corev1.PersistentVolumeClaim{}: claimCache,
			&apiextensionsv1.CustomResourceDefinition{}: {
				Field: clusters.ByName(names.VolumeSnapshotClassCRD),
			},
		},
	}
}

// Setup adds the guest reconciler to mgr; guest is the cluster (and cache, see CacheOptions) it
// reconciles: the manager itself on HyperShift, an extra cache on the one cluster in standalone.
func Setup(mgr ctrl.Manager, guest cluster.Cluster, cfg Config) error {
	// The same client without its cache, for the reads that must not see a deleted object (a
	// class being recreated).
	api, err := client.New(guest.GetConfig(), client.Options{Scheme: guest.GetScheme(), Mapper: guest.GetRESTMapper(), HTTPClient: guest.GetHTTPClient()})
	if err != nil {
		return fmt.Errorf("creating the guest's uncached client: %w", err)
	}
	r := &Reconciler{
		Guest:    guest.GetClient(),
		GuestAPI: api,
		Config:   cfg,
		Decoder:  manifests.NewDecoder(mgr.GetScheme()),
		Recorder: guest.GetEventRecorder(names.FieldOwnerGuest),
	}
	if err := r.SetupWithManager(mgr, guest); err != nil {
		return fmt.Errorf("setting up the guest reconciler: %w", err)
	}
	return nil
}
