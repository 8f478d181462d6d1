//go:build e2e

package suite

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
)

const timeout = 3 * time.Minute

// The tests run in file order and build on each other: install first, then changes.

func TestInstall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	t.Run("When the operator runs on a hosted cluster, it should report the driver Available", func(t *testing.T) {
		NewWithT(t).Eventually(func(g Gomega) {
			d := getDriver(g)
			g.Expect(env.ConditionTrue(d.Status.Conditions, names.ConditionControllerAvailable)).To(BeTrue())
			g.Expect(env.ConditionTrue(d.Status.Conditions, names.ConditionNodeAvailable)).To(BeTrue())
			g.Expect(env.ConditionTrue(d.Status.Conditions, names.ConditionControllerProgressing)).To(BeFalse())
			g.Expect(env.ConditionTrue(d.Status.Conditions, names.ConditionNodeProgressing)).To(BeFalse())
		}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
	})
	t.Run("When installed, it should have rolled each workload out once", func(t *testing.T) {
		if tgt.Local == nil {
			t.Skip("a deployed operator may have rolled out before; single rollout is checked on local clusters")
		}
		g := NewWithT(t)
		g.Expect(replicaSets(g)).To(HaveLen(1))
		revs := &appsv1.ControllerRevisionList{}
		g.Expect(tgt.Guest.List(ctx, revs, client.InNamespace(names.GuestNamespace), client.MatchingLabels{"app": names.NodeDaemonSet})).To(Succeed())
		g.Expect(revs.Items).To(HaveLen(1))
	})
	t.Run("When installed, each manager should own its own conditions", func(t *testing.T) {
		g := NewWithT(t)
		d := getDriver(g)
		owners := map[string]bool{}
		for _, mf := range d.ManagedFields {
			if mf.Subresource == "status" {
				owners[mf.Manager] = true
			}
		}
		g.Expect(owners).To(HaveKey(names.FieldOwnerControlPlane))
		g.Expect(owners).To(HaveKey(names.FieldOwnerGuest))
	})
	g.Expect(tgt.Guest.Get(ctx, client.ObjectKey{Name: names.StorageClass}, &storagev1.StorageClass{})).To(Succeed())
}

func TestCredentialRotation(t *testing.T) {
	g := NewWithT(t)
	before := len(replicaSets(g))
	ds := daemonSet(g)

	// Rotate to the same credentials written anew: the data changes, the cloud still accepts it.
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tgt.Namespace, Name: names.CredentialsSecret}}
	update(g, tgt.Mgmt, s, "someone", func(s *corev1.Secret) {
		s.Data[names.KeyCloudsYAML] = append(s.Data[names.KeyCloudsYAML], []byte("\n# rotated "+time.Now().Format(time.RFC3339Nano)+"\n")...)
	})

	t.Run("When clouds.yaml changes, it should roll the controller pods", func(t *testing.T) {
		NewWithT(t).Eventually(func(g Gomega) {
			g.Expect(len(replicaSets(g))).To(BeNumerically(">", before))
			d := getDriver(g)
			g.Expect(env.ConditionTrue(d.Status.Conditions, names.ConditionControllerAvailable)).To(BeTrue())
			g.Expect(env.ConditionTrue(d.Status.Conditions, names.ConditionControllerProgressing)).To(BeFalse())
		}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
	})
	t.Run("When clouds.yaml changes, it should not roll the node plugin", func(t *testing.T) {
		g := NewWithT(t)
		after := daemonSet(g)
		g.Expect(after.Generation).To(Equal(ds.Generation))
		g.Expect(after.Spec.Template.Annotations).To(Equal(ds.Spec.Template.Annotations))
	})
}

func TestStompBack(t *testing.T) {
	ctx := context.Background()
	t.Run("When a user edits a managed field of the controller Deployment, it should be reverted", func(t *testing.T) {
		g := NewWithT(t)
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: tgt.Namespace, Name: names.ControllerDeployment}}
		update(g, tgt.Mgmt, d, "someone", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.PriorityClassName = ""
			d.Spec.Template.Spec.Containers[0].Args = []string{"--edited"}
		})
		g.Eventually(func(g Gomega) {
			got := deployment(g)
			g.Expect(got.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement("--edited"))
			g.Expect(got.Spec.Template.Spec.PriorityClassName).To(Equal(names.HyperShiftPriorityClass))
		}).WithTimeout(timeout).Should(Succeed())
	})
	t.Run("When a user deletes the controller PodDisruptionBudget, it should be recreated", func(t *testing.T) {
		g := NewWithT(t)
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: tgt.Namespace, Name: names.ControllerPDB}}
		g.Expect(tgt.Mgmt.Delete(ctx, pdb)).To(Succeed())
		g.Eventually(func() error {
			return tgt.Mgmt.Get(ctx, client.ObjectKeyFromObject(pdb), &policyv1.PodDisruptionBudget{})
		}).WithTimeout(timeout).Should(Succeed())
	})
	t.Run("When a user adds an annotation to the node DaemonSet, it should be kept", func(t *testing.T) {
		g := NewWithT(t)
		ds := daemonSet(g)
		patch := client.MergeFrom(ds.DeepCopy())
		if ds.Annotations == nil {
			ds.Annotations = map[string]string{}
		}
		ds.Annotations["example.com/owner"] = "storage-team"
		g.Expect(tgt.Guest.Patch(ctx, ds, patch, client.FieldOwner("someone"))).To(Succeed())
		// Make the guest manager reconcile: a deleted CSIDriver is recreated.
		g.Expect(tgt.Guest.Delete(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: names.DriverName}})).To(Succeed())
		g.Eventually(func() error {
			return tgt.Guest.Get(ctx, client.ObjectKey{Name: names.DriverName}, &storagev1.CSIDriver{})
		}).WithTimeout(timeout).Should(Succeed())
		g.Expect(daemonSet(g).Annotations).To(HaveKeyWithValue("example.com/owner", "storage-team"))
	})
}

func TestNoCredentialsInGuest(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	s := &corev1.Secret{}
	g.Expect(tgt.Mgmt.Get(ctx, client.ObjectKey{Namespace: tgt.Namespace, Name: names.CredentialsSecret}, s)).To(Succeed())
	secrets := secretValues(string(s.Data[names.KeyCloudsYAML]))
	g.Expect(secrets).NotTo(BeEmpty())

	cms := &corev1.ConfigMapList{}
	g.Expect(tgt.Guest.List(ctx, cms)).To(Succeed())
	for _, cm := range cms.Items {
		for k, v := range cm.Data {
			for _, secret := range secrets {
				g.Expect(v).NotTo(ContainSubstring(secret), "ConfigMap %s/%s key %s", cm.Namespace, cm.Name, k)
			}
		}
	}
	ds := daemonSet(g)
	for _, v := range ds.Spec.Template.Spec.Volumes {
		g.Expect(v.Secret).To(BeNil(), "the node DaemonSet mounts Secret volume %s", v.Name)
	}
	conf := &corev1.ConfigMap{}
	g.Expect(tgt.Guest.Get(ctx, client.ObjectKey{Namespace: names.GuestNamespace, Name: names.CloudConfConfigMap}, conf)).To(Succeed())
	g.Expect(conf.Data[nodeconf.KeyCloudConf]).NotTo(ContainSubstring("[Global]"))
}

// secretValues returns the values of clouds.yaml keys that hold secrets.
func secretValues(clouds string) []string {
	var out []string
	for _, line := range strings.Split(clouds, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "password", "application_credential_secret", "token":
			if v = strings.Trim(strings.TrimSpace(v), `"'`); v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

// update is env.Edit for a test: a failed edit fails the test.
func update[T client.Object](g Gomega, c client.Client, obj T, fieldManager string, mutate func(T)) {
	err := env.Edit(context.Background(), c, obj, fieldManager, mutate)
	g.Expect(err).To(Succeed(), "updating %T %s", obj, client.ObjectKeyFromObject(obj))
}

func getDriver(g Gomega) *operatorv1.ClusterCSIDriver {
	d := &operatorv1.ClusterCSIDriver{}
	g.Expect(tgt.Guest.Get(context.Background(), client.ObjectKey{Name: names.ClusterCSIDriverName}, d)).To(Succeed())
	return d
}

func deployment(g Gomega) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	g.Expect(tgt.Mgmt.Get(context.Background(), client.ObjectKey{Namespace: tgt.Namespace, Name: names.ControllerDeployment}, d)).To(Succeed())
	return d
}

func daemonSet(g Gomega) *appsv1.DaemonSet {
	d := &appsv1.DaemonSet{}
	g.Expect(tgt.Guest.Get(context.Background(), client.ObjectKey{Namespace: names.GuestNamespace, Name: names.NodeDaemonSet}, d)).To(Succeed())
	return d
}

func replicaSets(g Gomega) []appsv1.ReplicaSet {
	l := &appsv1.ReplicaSetList{}
	err := tgt.Mgmt.List(context.Background(), l, client.InNamespace(tgt.Namespace), client.MatchingLabels{"app": names.ControllerDeployment})
	if apierrors.IsNotFound(err) {
		return nil
	}
	g.Expect(err).NotTo(HaveOccurred())
	return l.Items
}
