package desired

import (
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/operand"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/plan"
)

// What HyperShift reads of the objects next to a hosted control plane, and what it gives the
// controller there (all pure; the reconciler reads the inputs).
const (
	// hyperShiftManagedByLabel names the control-plane component a Deployment of the HostedControlPlane
	// namespace belongs to: control-plane-operator's operand rollout check
	// (support/controlplane-component MonitorOperandsRolloutStatus) lists a component's
	// operands by it. csi-operator labels its controller with cluster-storage-operator, the
	// component that runs the Cinder operator; the label stays the same when this operator
	// takes csi-operator's place.
	hyperShiftManagedByLabel = "hypershift.openshift.io/managed-by"
	hyperShiftManagedByValue = "cluster-storage-operator"
	// desiredVersionAnnotation is the release the operator applied the Deployment for;
	// versionAnnotation the release it has rolled out, the one the rollout check compares with
	// the hosted cluster's release (library-go's DeploymentVersionController sets both for
	// csi-operator).
	desiredVersionAnnotation = "release.openshift.io/desired-version"
	versionAnnotation        = "release.openshift.io/version"

	// additionalTrustVolume mounts the HostedControlPlane's additional trust bundle where
	// control-plane-operator mounts it into its own components: a file in /etc/pki/tls/certs,
	// a directory Go reads every certificate file of, besides the system bundle. The driver
	// keeps the system roots (the bundle holds only the added CAs).
	additionalTrustVolume = "additional-trust-bundle"
	additionalTrustDir    = "/etc/pki/tls/certs"
	additionalTrustFile   = "user-ca-bundle.pem"
)

// hostedInputs is what the controller's objects take from a hosted control plane.
type hostedInputs struct {
	// Owner is the HostedControlPlane as controller owner; nil for none (standalone).
	Owner *metav1.OwnerReference
	// ReleaseVersion is Config.ReleaseVersion; Live the controller Deployment as read, whose
	// rollout decides the version annotation.
	ReleaseVersion string
	Live           *appsv1.Deployment
	// RunAsUser is Config.RunAsUser.
	RunAsUser *int64
	// AdditionalTrustBundle names the ConfigMap of the HostedControlPlane's extra CAs (key
	// ca-bundle.crt), "" for none.
	AdditionalTrustBundle string
}

// hostedControlPlaneOwner returns the HostedControlPlane as the controller owner of the
// controller's objects, so that they go with the hosted control plane they serve. It does not
// block the owner's foreground deletion: on an OpenShift management cluster the admission plugin
// OwnerReferencesPermissionEnforcement lets only a writer that may update
// hostedcontrolplanes/finalizers set blockOwnerDeletion, and cluster-storage-operator's Role for
// the operator it starts grants no such thing (csi-operator sets no owner at all). A
// HostedControlPlane without a UID (an offline render of a file) owns nothing: the API server
// refuses a reference without one.
func hostedControlPlaneOwner(hcp *hyperv1.HostedControlPlane) *metav1.OwnerReference {
	if hcp == nil || hcp.UID == "" {
		return nil
	}
	return &metav1.OwnerReference{
		APIVersion: hyperv1.GroupVersion.String(),
		Kind:       "HostedControlPlane",
		Name:       hcp.Name,
		UID:        hcp.UID,
		Controller: ptr.To(true),
	}
}

// AdditionalTrustBundleRef returns the name of the ConfigMap the HostedControlPlane names as its
// additional trust bundle, "" for none.
func AdditionalTrustBundleRef(hcp *hyperv1.HostedControlPlane) string {
	if hcp == nil || hcp.Spec.AdditionalTrustBundle == nil {
		return ""
	}
	return hcp.Spec.AdditionalTrustBundle.Name
}

// ownedBy makes owner the owner of each of objs; a nil owner leaves them without one.
func ownedBy(owner *metav1.OwnerReference, objs ...plan.Object) {
	if owner == nil {
		return
	}
	for _, o := range objs {
		o.SetOwnerReferences([]metav1.OwnerReference{*owner})
	}
}

// adaptHostedDeployment applies what HyperShift expects of the controller Deployment: the
// component label and the release annotations its rollout check reads, and what the hosted
// control plane gives the pods.
func adaptHostedDeployment(dep *appsv1.Deployment, in hostedInputs) {
	if dep.Labels == nil {
		dep.Labels = map[string]string{}
	}
	dep.Labels[hyperShiftManagedByLabel] = hyperShiftManagedByValue
	for k, v := range releaseAnnotations(in.Live, in.ReleaseVersion) {
		if dep.Annotations == nil {
			dep.Annotations = map[string]string{}
		}
		dep.Annotations[k] = v
	}
	adaptHostedPod(&dep.Spec.Template, in)
}

// releaseAnnotations returns the release annotations of the controller Deployment: the desired
// version always, and the rolled-out version once live, applied for that version, has finished
// its rollout; until then, the version live already carries (the pods of the previous release
// still serve). Applying the version is one metadata change after each rollout to a new release,
// with no new rollout: annotations of the Deployment are not part of its pod template.
func releaseAnnotations(live *appsv1.Deployment, version string) map[string]string {
	if version == "" {
		return nil
	}
	out := map[string]string{desiredVersionAnnotation: version}
	switch {
	case live == nil:
	case live.Annotations[desiredVersionAnnotation] == version && RolledOut(live):
		out[versionAnnotation] = version
	case live.Annotations[versionAnnotation] != "":
		out[versionAnnotation] = live.Annotations[versionAnnotation]
	}
	return out
}

// adaptHostedPod applies what a hosted control plane gives the controller's pods: access to the
// management API server, the UID of a management cluster without SecurityContextConstraints, and
// the additional trust bundle in the driver's trust store.
//
// The access label exempts the pods from HyperShift's management-kas NetworkPolicy. The CSI
// sidecars talk to the guest, but each kube-rbac-proxy reviews the scraper's token and access
// (TokenReview, SubjectAccessReview) at the API server of the cluster it runs in, the management
// one; without the label every scrape would be refused where the policy is in force.
// (csi-operator's controller lacks it, and its metrics are unreadable there.)
func adaptHostedPod(tmpl *corev1.PodTemplateSpec, in hostedInputs) {
	if tmpl.Labels == nil {
		tmpl.Labels = map[string]string{}
	}
	tmpl.Labels[names.NeedManagementKASAccess] = "true"
	pod := &tmpl.Spec
	if in.RunAsUser != nil {
		if pod.SecurityContext == nil {
			pod.SecurityContext = &corev1.PodSecurityContext{}
		}
		pod.SecurityContext.RunAsUser = ptr.To(*in.RunAsUser)
	}
	if in.AdditionalTrustBundle == "" {
		return
	}
	operand.MountConfigMapFile(pod, manifests.ContainerDriver, operand.ConfigMapFile{
		Volume:    additionalTrustVolume,
		ConfigMap: in.AdditionalTrustBundle, Key: names.KeyTrustedCA,
		Path: additionalTrustFile, Dir: additionalTrustDir,
	})
}

// RolledOut reports whether the Deployment controller has acted on dep's latest spec and finished
// rolling it out (the Progressing condition's NewReplicaSetAvailable reason, which Kubernetes
// documents as a complete rollout).
func RolledOut(dep *appsv1.Deployment) bool {
	if dep.Status.ObservedGeneration != dep.Generation {
		return false
	}
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing {
			return c.Status == corev1.ConditionTrue && c.Reason == "NewReplicaSetAvailable"
		}
	}
	return false
}
