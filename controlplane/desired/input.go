package desired

import (
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/openstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operandimages"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/zoneclasses"
)

// Input is everything the controlplane manager's plan is computed from: the manager's own
// configuration, the ClusterCSIDriver, the objects the manager read from both clusters (each nil
// when it does not exist), what the last availability-zone listing said, and the controller pods
// that may still run. The plan only reads it.
type Input struct {
	Config Config
	Driver *operatorv1.ClusterCSIDriver

	HCP         *hyperv1.HostedControlPlane
	Credentials *corev1.Secret
	// CAConfigMap holds the OpenStack CA under ca-bundle.pem: openstack-cloud-config in the HCP
	// namespace, or, standalone, the installer's cloud provider config Infrastructure names,
	// which is also where the driver settings come from without UserConfig (configsource.go).
	CAConfigMap *corev1.ConfigMap
	// Infrastructure and Proxy are the cluster's (standalone only).
	Infrastructure *configv1.Infrastructure
	Proxy          *configv1.Proxy
	// APIServer holds the cluster's TLS security profile (standalone only; HyperShift's is in
	// the HostedControlPlane).
	APIServer *configv1.APIServer
	// TrustedCA is the CA bundle the cluster network operator injects into the controller's
	// trusted-CA ConfigMap: standalone, the cluster's; on HyperShift, the management cluster's,
	// when it is an OpenShift cluster (nothing fills it elsewhere).
	TrustedCA *corev1.ConfigMap
	// AdditionalTrustBundle is the ConfigMap the HostedControlPlane's
	// spec.additionalTrustBundle names (HyperShift only): the CAs the hosted cluster's owner
	// added for the control plane and the nodes.
	AdditionalTrustBundle *corev1.ConfigMap
	UserConfig            *corev1.ConfigMap
	// CloudConf is the live controller copy of cloud-conf: it holds the last topology decision.
	CloudConf *corev1.ConfigMap
	// NodeCloudConf is the live node copy of cloud-conf, in the guest: it holds the zones of
	// the last listing that succeeded.
	NodeCloudConf *corev1.ConfigMap
	Deployment    *appsv1.Deployment
	// Monitoring is which monitoring objects the cluster of the controller serves and the
	// operator may write.
	Monitoring Monitoring

	// Detection is what the availability-zone listing said: the reconciler asks its listings
	// for the one Resolution.Listing names; an offline render or a fixture gives a fixed one
	// (Offline).
	Detection Detection
	// ControllerPods names the controller pods that may still run, read only under
	// managementState Removed in standalone mode (see holdServiceAccount).
	ControllerPods []string
}

// Config is what the manager's configuration gives the plan: the mode, the namespace and images
// of the controller, and what the operator's environment sets on HyperShift.
type Config struct {
	// HyperShift selects the hosted-control-plane flavour; false is standalone OpenShift.
	HyperShift bool
	// Namespace is where the controller runs: the HostedControlPlane namespace, or
	// openshift-cluster-csi-drivers in standalone mode.
	Namespace string
	// Images are the controller's operand images.
	Images operandimages.Controller
	// Proxy is, on HyperShift, the proxy of the operator's own environment: the controller's
	// containers and the listings use it. Standalone mode ignores it and follows the
	// cluster-wide Proxy instead.
	Proxy configv1.ProxyStatus
	// ReleaseVersion is the release the operator belongs to; on HyperShift the controller
	// Deployment carries it in its release annotations (releaseAnnotations). Empty writes none.
	ReleaseVersion string
	// RunAsUser is the UID the controller's pods run as on HyperShift; nil leaves it to the
	// cluster.
	RunAsUser *int64
}

// Detection is what the availability-zone listing said.
type Detection struct {
	// Enabled is the decision of the last listing that succeeded, nil when none did.
	Enabled *bool
	// Failure is why the latest listing failed; empty when it succeeded or none was made.
	// FailureMessage is its user-facing sentence (openstack.Describe), which names the proxy
	// when the proxy failed.
	Failure        openstack.Reason
	FailureMessage string
	// ComputeZones and VolumeZones are the zones of the last success: the per-zone classes and
	// the node copy's zone keys are made from them (chooseZones), and logs show them.
	ComputeZones, VolumeZones []string
	// Backup is what the listing of Cinder's backup services said, when the backup class is
	// asked for.
	Backup BackupDetection
	// RecheckIn is when the zones are due to be listed again; zero when no listing is needed.
	RecheckIn time.Duration
	// Pending is whether no listing has finished yet: the first one is still running.
	Pending bool
}

// BackupDetection is what the listing of Cinder's backup services said.
type BackupDetection struct {
	// Listed is whether a listing succeeded; Services are the cinder-backup services of the
	// last one that did.
	Listed   bool
	Services []openstack.BackupService
	// Failure is why the latest listing failed (openstack.ReasonPermissionDenied when Cinder's
	// policy refused it); FailureMessage its sentence.
	Failure        openstack.Reason
	FailureMessage string
}

// Offline is the Detection of an offline render, where no zone can be listed: the given decision,
// as if a listing had made it.
func Offline(enabled bool) Detection { return Detection{Enabled: &enabled} }

// OfflineZones is the Detection of an offline render given the zones a listing would have
// returned: the given decision, made from them as a listing would have made it.
func OfflineZones(enabled bool, computeZones, volumeZones []string) Detection {
	d := Offline(enabled)
	d.ComputeZones, d.VolumeZones = zoneclasses.Zones(computeZones), zoneclasses.Zones(volumeZones)
	return d
}

// Listing is what a listing of the zones (and of the backup services) is made with, as the
// resolution of an Input names it (Resolution.Listing).
type Listing struct {
	CloudsYAML []byte
	CloudName  string
	CAPEM      []byte
	// Proxy is what OpenStack is reached through: the cluster-wide Proxy in standalone mode,
	// the proxy of the operator's own environment on HyperShift. Empty connects directly.
	Proxy configv1.ProxyStatus
	// Decided is whether a decision is already in force (the live cloud-conf's, or the user's):
	// then there is nothing to wait for.
	Decided bool
	// Backup also lists Cinder's backup services, with the same client, for the backup class.
	Backup bool
}
