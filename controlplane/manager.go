// Package controlplane is the management-side manager of a hosted cluster (or, in standalone
// mode, the controller half of the operator). It owns the CSI controller Deployment, its
// ServiceAccount, PodDisruptionBudget and metrics Service, and both copies of the cloud-conf
// ConfigMap; it decides topology from the OpenStack availability zones; it writes its own
// ClusterCSIDriver conditions in the guest. In both modes it also owns the trusted CA bundle
// ConfigMap and, where the monitoring stack serves the kinds and the operator may write them,
// the ServiceMonitors of the controller and of the operator and the operator's PrometheusRule.
package controlplane

import (
	"context"
	"fmt"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/cinder-csi-operator/cinder-csi-operator/controlplane/desired"
	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/loglevel"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
)

// Default intervals.
const (
	// DefaultTopologyRecheckInterval is how often the availability zones are listed again:
	// zones change rarely, and this is the only state the operator cannot watch.
	DefaultTopologyRecheckInterval = 10 * time.Minute
	// DefaultOpenStackTimeout bounds one topology detection (authentication plus two lists).
	DefaultOpenStackTimeout = 30 * time.Second
	// DefaultFirstTopologyWait bounds how long a fresh install waits for its first topology
	// decision before it applies the controller without one (topology off until the listing
	// ends): a healthy cloud answers in well under a second, so the install rolls out once,
	// with room for a slow Keystone or a busy operator; a hung cloud costs at most this, not
	// the whole OpenStack timeout.
	DefaultFirstTopologyWait = 10 * time.Second
)

// Config configures the controlplane manager.
type Config struct {
	// HyperShift selects the hosted-control-plane flavour; false is standalone OpenShift.
	HyperShift bool
	// Namespace is where the controller runs: the HostedControlPlane namespace, or
	// openshift-cluster-csi-drivers in standalone mode.
	Namespace string
	// Images are the controller's operand images.
	Images operandimages.Controller
	// LogLevel is the operator's own verbosity, driven by spec.operatorLogLevel.
	LogLevel *loglevel.Live
	// TopologyRecheckInterval is how often the availability zones are listed again.
	TopologyRecheckInterval time.Duration
	// OpenStackTimeout bounds one topology detection.
	OpenStackTimeout time.Duration
	// FirstTopologyWait bounds the wait for the first topology decision of a fresh install;
	// nothing else ever waits for OpenStack.
	FirstTopologyWait time.Duration
	// NewLister builds the OpenStack client; tests and the default use openstack.NewClient.
	NewLister func(context.Context, openstack.Config) (openstack.Lister, error)
	// Proxy is, on HyperShift, the proxy of the operator's own environment (HTTP_PROXY,
	// HTTPS_PROXY and NO_PROXY, which HyperShift's control-plane operator sets): topology
	// detection and every controller container use it, as csi-operator's do. Standalone mode
	// ignores it and follows the cluster-wide Proxy instead.
	Proxy configv1.ProxyStatus
	// ReleaseVersion is the release the operator belongs to, from OPERATOR_IMAGE_VERSION (which
	// HyperShift's control-plane operator sets to the hosted cluster's release version, as for
	// every control-plane component). On HyperShift the controller Deployment carries it in
	// release.openshift.io/desired-version, and in release.openshift.io/version once rolled
	// out, which HyperShift's rollout checks compare with the release. Empty writes neither.
	ReleaseVersion string
	// RunAsUser is the UID the controller's pods run as on HyperShift, from RUN_AS_USER, which
	// the control-plane operator sets on management clusters without SecurityContextConstraints
	// (where nothing else would assign one). Nil leaves the UID to the cluster.
	RunAsUser *int64
}

// plan is what the plan takes of c (desired.Config).
func (c Config) plan() desired.Config {
	return desired.Config{
		HyperShift: c.HyperShift, Namespace: c.Namespace, Images: c.Images, Proxy: c.Proxy,
		ReleaseVersion: c.ReleaseVersion, RunAsUser: c.RunAsUser,
	}
}

// defaults gives every duration left zero its default: the flags of the subcommands set them,
// start (csi-operator's command line) and the tests leave them.
func (c *Config) defaults() {
	if c.TopologyRecheckInterval <= 0 {
		c.TopologyRecheckInterval = DefaultTopologyRecheckInterval
	}
	if c.OpenStackTimeout <= 0 {
		c.OpenStackTimeout = DefaultOpenStackTimeout
	}
	if c.FirstTopologyWait <= 0 {
		c.FirstTopologyWait = DefaultFirstTopologyWait
	}
}

// CacheOptions returns the cache options of the controlplane manager's two clusters. The
// management cache covers the controller namespace only: a management cluster runs hundreds of
// these managers and none may watch it whole. The guest cache holds the ClusterCSIDriver and the
// two ConfigMaps this manager reads or writes, selected by name.
func CacheOptions(cfg Config) (mgmt, guest cache.Options) {
	mgmt = cache.Options{
		DefaultNamespaces: map[string]cache.Config{cfg.Namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}:            clusters.Owned,
			&corev1.ServiceAccount{}:        clusters.Owned,
			&corev1.Service{}:               clusters.Owned,
			&policyv1.PodDisruptionBudget{}: clusters.Owned,
			// The HostedControlPlane namespace holds many Secrets (etcd and kubeconfig
			// material among them). Only the credentials are needed: list and watch that
			// one Secret by name, so that the operator's RBAC can be limited to it
			// (manifests/install) and no other Secret is ever sent to it.
			&corev1.Secret{}: {Field: clusters.ByName(names.CredentialsSecret)},
		},
	}
	guestConfigMaps := map[string]cache.Config{
		names.GuestNamespace:           {FieldSelector: clusters.ByName(nodeconf.Name(cfg.HyperShift))},
		names.OpenShiftConfigNamespace: {FieldSelector: clusters.ByName(names.UserConfigMap)},
	}
	guest = cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&operatorv1.ClusterCSIDriver{}: {Field: clusters.ByName(names.ClusterCSIDriverName)},
			&corev1.ConfigMap{}:            {Namespaces: guestConfigMaps},
			// Watched by the attachment monitor's volume count, cut down to their zone.
			&corev1.PersistentVolume{}: volumeCache,
		},
	}
	if !cfg.HyperShift {
		// The installer's cloud provider config (the CA, and the driver settings without
		// cinder-csi-config) is named by Infrastructure, so it cannot be selected by a fixed
		// name: openshift-config has few ConfigMaps.
		guestConfigMaps[names.OpenShiftConfigNamespace] = cache.Config{}
		guest.ByObject[&configv1.Infrastructure{}] = cache.ByObject{Field: clusters.ByName(names.InfrastructureName)}
		guest.ByObject[&configv1.Proxy{}] = cache.ByObject{Field: clusters.ByName(names.ProxyName)}
		guest.ByObject[&configv1.APIServer{}] = cache.ByObject{Field: clusters.ByName(names.APIServerName)}
		// The ServiceMonitor is watched once its CRD is served, so a cluster without the
		// monitoring stack costs nothing. Its informer covers the controller namespace
		// unfiltered: a per-kind option would need the kind's REST mapping when the cache
		// is built, before the CRD may exist, and the namespace holds few ServiceMonitors.
		guest.ByObject[&apiextensionsv1.CustomResourceDefinition{}] = cache.ByObject{Field: clusters.ByName(names.ServiceMonitorCRD)}
	}
	return mgmt, guest
}

// Setup adds the controlplane reconciler to mgr. mgmt is the cluster (and cache) of the controller
// namespace, guest the cluster (and cache) of the ClusterCSIDriver and the guest ConfigMaps; in
// standalone mode both are the one cluster, seen through the caches CacheOptions describes.
func Setup(mgr ctrl.Manager, mgmt, guest cluster.Cluster, cfg Config) error {
	cfg.defaults()
	r := &Reconciler{
		Mgmt:     mgmt.GetClient(),
		MgmtAPI:  mgmt.GetAPIReader(),
		Guest:    guest.GetClient(),
		Config:   cfg,
		Decoder:  manifests.NewDecoder(mgr.GetScheme()),
		Recorder: guest.GetEventRecorder(names.FieldOwnerControlPlane),
		listings: newListingCache(),
		// Which monitoring objects may be written is asked once, again while denied.
		monitoringAccess: newMonitoringAccess(),
		// The ServiceMonitor watch starts later, on the controller namespace's cache.
		mgmtCache: mgmt.GetCache(),
	}
	if cfg.NewLister == nil {
		cfg.NewLister = func(ctx context.Context, c openstack.Config) (openstack.Lister, error) {
			return openstack.NewClient(ctx, c)
		}
	}
	r.Config = cfg
	// The zone listings run beside the reconciles and end with the manager.
	if err := mgr.Add(r.listings); err != nil {
		return fmt.Errorf("adding the zone listings: %w", err)
	}
	if err := r.SetupWithManager(mgr, mgmt, guest); err != nil {
		return fmt.Errorf("setting up the controlplane reconciler: %w", err)
	}
	if err := newAttachmentMonitor(r, guest).SetupWithManager(mgr, mgmt, guest); err != nil {
		return fmt.Errorf("setting up the attachment monitor: %w", err)
	}
	leases := &LeaseReclaimer{
		Mgmt: mgmt.GetAPIReader(), Guest: guest.GetAPIReader(), GuestWriter: guest.GetClient(),
		Namespace: cfg.Namespace, Recorder: r.Recorder,
	}
	if err := leases.SetupWithManager(mgr, mgmt); err != nil {
		return fmt.Errorf("setting up the sidecar lease reclaimer: %w", err)
	}
	return nil
}
