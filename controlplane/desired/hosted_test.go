package desired

import (
	"testing"

	. "github.com/onsi/gomega"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

// rolledOutDeployment is a controller Deployment applied for desired whose rollout has finished,
// carrying version as its rolled-out release ("" for none).
func rolledOutDeployment(desired, version string) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: names.ControllerDeployment, Namespace: hcpNamespace, Generation: 3,
			Annotations: map[string]string{desiredVersionAnnotation: desired}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		}},
	}
	if version != "" {
		d.Annotations[versionAnnotation] = version
	}
	return d
}

func TestReleaseAnnotations(t *testing.T) {
	t.Parallel()
	progressing := func(d *appsv1.Deployment) *appsv1.Deployment {
		d.Status.Conditions[1].Reason = "ReplicaSetUpdated"
		return d
	}
	stale := func(d *appsv1.Deployment) *appsv1.Deployment {
		d.Generation = 4
		return d
	}
	for _, tt := range []struct {
		name    string
		live    *appsv1.Deployment
		version string
		want    map[string]string
	}{
		{name: "When no release version is configured, it should write neither annotation", live: rolledOutDeployment("4.21.3", "4.21.3")},
		{name: "When the Deployment does not exist yet, it should write only the desired version",
			version: "4.21.3", want: map[string]string{desiredVersionAnnotation: "4.21.3"}},
		{name: "When the Deployment has rolled out for this version, it should write the version too",
			live: rolledOutDeployment("4.21.3", ""), version: "4.21.3",
			want: map[string]string{desiredVersionAnnotation: "4.21.3", versionAnnotation: "4.21.3"}},
		{name: "When the rollout for a new version is still progressing, it should keep the version of the pods that serve",
			live: progressing(rolledOutDeployment("4.21.4", "4.21.3")), version: "4.21.4",
			want: map[string]string{desiredVersionAnnotation: "4.21.4", versionAnnotation: "4.21.3"}},
		{name: "When the Deployment controller has not seen the latest spec, it should not call the rollout done",
			live: stale(rolledOutDeployment("4.21.4", "4.21.3")), version: "4.21.4",
			want: map[string]string{desiredVersionAnnotation: "4.21.4", versionAnnotation: "4.21.3"}},
		{name: "When the live Deployment was applied for another version, it should not take its finished rollout for this one",
			live: rolledOutDeployment("4.21.3", "4.21.3"), version: "4.21.4",
			want: map[string]string{desiredVersionAnnotation: "4.21.4", versionAnnotation: "4.21.3"}},
		{name: "When an older operator's Deployment has no version at all, it should write only the desired version",
			live: rolledOutDeployment("", ""), version: "4.21.4", want: map[string]string{desiredVersionAnnotation: "4.21.4"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(releaseAnnotations(tt.live, tt.version)).To(Equal(tt.want))
		})
	}
}

func TestHostedControlPlaneOwner(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		hcp  *hyperv1.HostedControlPlane
		want *metav1.OwnerReference
	}{
		{name: "When there is no HostedControlPlane, it should own nothing"},
		{name: "When the HostedControlPlane has no UID (an offline render), it should own nothing",
			hcp: &hyperv1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "example"}}},
		{name: "When the HostedControlPlane was read from a cluster, it should be the blocking controller owner, as control-plane-operator makes it",
			hcp: &hyperv1.HostedControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "example", UID: "u-1"}},
			want: &metav1.OwnerReference{APIVersion: "hypershift.openshift.io/v1beta1", Kind: "HostedControlPlane", Name: "example", UID: "u-1",
				Controller: ptr.To(true)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			NewWithT(t).Expect(hostedControlPlaneOwner(tt.hcp)).To(Equal(tt.want))
		})
	}
}

func TestAdaptHostedDeployment(t *testing.T) {
	t.Parallel()
	newDeployment := func() *appsv1.Deployment {
		return &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			Containers:      []corev1.Container{{Name: "csi-driver"}, {Name: "csi-provisioner"}},
		}}}}
	}
	for _, tt := range []struct {
		name  string
		in    hostedInputs
		check func(g Gomega, d *appsv1.Deployment)
	}{
		{name: "When nothing is given, it should label the Deployment for the rollout check and its pods for the management API server, and change nothing else",
			check: func(g Gomega, d *appsv1.Deployment) {
				g.Expect(d.Labels).To(Equal(map[string]string{hyperShiftManagedByLabel: "cluster-storage-operator"}))
				g.Expect(d.Annotations).To(BeEmpty())
				g.Expect(d.Spec.Template.Labels).To(Equal(map[string]string{"hypershift.openshift.io/need-management-kas-access": "true"}))
				g.Expect(d.Spec.Template.Spec).To(Equal(newDeployment().Spec.Template.Spec))
			}},
		{name: "When RUN_AS_USER is given, it should run the pods as that UID and keep the rest of their security context",
			in: hostedInputs{RunAsUser: ptr.To[int64](1001)},
			check: func(g Gomega, d *appsv1.Deployment) {
				g.Expect(d.Spec.Template.Spec.SecurityContext).To(Equal(&corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1001)}))
			}},
		{name: "When an additional trust bundle is named, it should add it to the driver's trust store only",
			in: hostedInputs{AdditionalTrustBundle: "user-ca-bundle"},
			check: func(g Gomega, d *appsv1.Deployment) {
				pod := d.Spec.Template.Spec
				g.Expect(pod.Volumes).To(ConsistOf(corev1.Volume{Name: additionalTrustVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "user-ca-bundle"},
					Items:                []corev1.KeyToPath{{Key: "ca-bundle.crt", Path: "user-ca-bundle.pem"}},
				}}}))
				g.Expect(pod.Containers[0].VolumeMounts).To(ConsistOf(corev1.VolumeMount{Name: additionalTrustVolume, MountPath: "/etc/pki/tls/certs", ReadOnly: true}))
				g.Expect(pod.Containers[1].VolumeMounts).To(BeEmpty())
			}},
		{name: "When a release version is given, it should annotate the Deployment, not its pods",
			in: hostedInputs{ReleaseVersion: "4.21.3"},
			check: func(g Gomega, d *appsv1.Deployment) {
				g.Expect(d.Annotations).To(Equal(map[string]string{desiredVersionAnnotation: "4.21.3"}))
				g.Expect(d.Spec.Template.Annotations).To(BeEmpty())
			}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newDeployment()
			adaptHostedDeployment(d, tt.in)
			tt.check(NewWithT(t), d)
		})
	}
}
