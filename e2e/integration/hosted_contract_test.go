package integration

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/confighash"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
)

// hostedRelease is the release the in-process operator is told it belongs to, as
// control-plane-operator tells it through OPERATOR_IMAGE_VERSION.
const hostedRelease = "4.21.3"

// TestHostedControlPlaneContract checks, against a real API server and Deployment controller,
// what HyperShift expects of the objects next to a hosted control plane: the HostedControlPlane
// owns them, the controller Deployment carries the component label and reports its release
// once rolled out, its pods run as the management cluster's UID, and the hosted control plane's
// additional trust bundle reaches the driver and rolls it when it changes.
func TestHostedControlPlaneContract(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
	ctx := context.Background()
	hcp := &hyperv1.HostedControlPlane{}
	NewWithT(t).Expect(e.MgmtClient.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: env.DefaultHostedCluster}, hcp)).To(Succeed())
	e.RunOperatorForTest(t, env.OperatorOptions{ReleaseVersion: hostedRelease, RunAsUser: ptr.To[int64](1001)})
	waitAvailable(t, e)

	t.Run("When the controller's objects are applied, the HostedControlPlane should own each as controller without blocking its deletion, and nothing in the guest", func(t *testing.T) {
		g := NewWithT(t)
		// BlockOwnerDeletion stays unset: setting it needs update on hostedcontrolplanes/finalizers,
		// which cluster-storage-operator's Role does not grant (hostedControlPlaneOwner).
		owner := metav1.OwnerReference{
			APIVersion: "hypershift.openshift.io/v1beta1", Kind: "HostedControlPlane", Name: hcp.Name, UID: hcp.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: nil,
		}
		for _, o := range []client.Object{
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: names.ControllerDeployment}},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: names.ControllerServiceAccount}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: names.ControllerMetricsService}},
			&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: names.ControllerPDB}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names.CloudConfConfigMap}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names.TrustedCABundleConfigMap}},
		} {
			g.Expect(e.MgmtClient.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: o.GetName()}, o)).To(Succeed(), o.GetName())
			g.Expect(o.GetOwnerReferences()).To(ConsistOf(owner), o.GetName())
		}
		g.Expect(configMap(g, e.GuestClient, names.GuestNamespace, nodeconf.Name(true)).OwnerReferences).To(BeEmpty())
	})

	t.Run("When the controller has rolled out, its Deployment should carry the component label and the release as desired and as rolled out", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			dep := controllerDeployment(g, e)
			g.Expect(dep.Labels).To(HaveKeyWithValue("hypershift.openshift.io/managed-by", "cluster-storage-operator"))
			g.Expect(dep.Annotations).To(HaveKeyWithValue("release.openshift.io/desired-version", hostedRelease))
			g.Expect(dep.Annotations).To(HaveKeyWithValue("release.openshift.io/version", hostedRelease))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		// The annotation is metadata: it must not have rolled the pods a second time.
		g.Expect(replicaSets(g, e)).To(HaveLen(1))
	})

	t.Run("When the controller's pods are created, they should be let through HyperShift's management-kas policy", func(t *testing.T) {
		// Their kube-rbac-proxies review scrapers at the management API server.
		NewWithT(t).Expect(controllerDeployment(NewWithT(t), e).Spec.Template.Labels).To(HaveKeyWithValue(names.NeedManagementKASAccess, "true"))
	})

	t.Run("When RUN_AS_USER is set, the controller's pods should run as that UID", func(t *testing.T) {
		g := NewWithT(t)
		sc := controllerDeployment(g, e).Spec.Template.Spec.SecurityContext
		g.Expect(sc).NotTo(BeNil())
		g.Expect(sc.RunAsUser).To(HaveValue(Equal(int64(1001))))
	})

	const bundle = "user-ca-bundle"
	hashKey := confighash.AnnotationKey("configmap-additional-trust-bundle")
	var firstHash string

	t.Run("When the HostedControlPlane names an additional trust bundle, it should reach the driver's trust store", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(e.MgmtClient.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: bundle},
			Data:       map[string]string{names.KeyTrustedCA: string(e.OpenStack.CACertPEM())},
		})).To(Succeed())
		update(t, e.MgmtClient, hcp, "hypershift-operator", func(h *hyperv1.HostedControlPlane) {
			h.Spec.AdditionalTrustBundle = &corev1.LocalObjectReference{Name: bundle}
		})
		g.Eventually(func(g Gomega) {
			pod := controllerDeployment(g, e).Spec.Template.Spec
			g.Expect(pod.Volumes).To(ContainElement(HaveField("ConfigMap.LocalObjectReference.Name", bundle)))
			g.Expect(container(&pod, "csi-driver").VolumeMounts).To(ContainElement(HaveField("MountPath", "/etc/pki/tls/certs")))
			firstHash = controllerDeployment(g, e).Spec.Template.Annotations[hashKey]
			g.Expect(firstHash).NotTo(BeEmpty())
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
	})

	t.Run("When the additional trust bundle changes, it should roll the controller with the new hash", func(t *testing.T) {
		g := NewWithT(t)
		before := controllerDeployment(g, e).Generation
		update(t, e.MgmtClient, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: bundle}}, "hypershift-operator",
			func(cm *corev1.ConfigMap) { cm.Data[names.KeyTrustedCA] += "\n# rotated\n" })
		g.Eventually(func(g Gomega) {
			dep := controllerDeployment(g, e)
			g.Expect(dep.Generation).To(Equal(before + 1))
			g.Expect(dep.Spec.Template.Annotations[hashKey]).NotTo(Equal(firstHash))
		}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
		g.Consistently(func(g Gomega) {
			g.Expect(controllerDeployment(g, e).Generation).To(Equal(before + 1))
		}).WithTimeout(3 * time.Second).WithPolling(poll).Should(Succeed())
	})
}
