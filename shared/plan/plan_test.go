package plan

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
)

func TestIdentity(t *testing.T) {
	t.Parallel()
	t.Run("When given a typed object, it should keep only its type, namespace and name", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		dep := &appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d", Labels: map[string]string{"a": "b"}, ResourceVersion: "7"},
			Spec:       appsv1.DeploymentSpec{Replicas: new(int32)},
		}
		id := Identity(dep)
		g.Expect(id).To(Equal(&appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d"},
		}))
		g.Expect(dep.Labels).To(HaveKey("a"), "the original is left as it is")
	})
	t.Run("When given an unstructured object, it should keep only apiVersion, kind and the name", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
			"metadata": map[string]any{"namespace": "ns", "name": "m", "labels": map[string]any{"a": "b"}},
			"spec":     map[string]any{"endpoints": []any{}},
		}}
		g.Expect(Identity(u)).To(Equal(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
			"metadata": map[string]any{"namespace": "ns", "name": "m"},
		}}))
	})
}

func TestStepsAndIdentities(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}, Data: map[string]string{"k": "v"}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}
	steps := Steps(apply.ClusterGuest, "g", cm, sa)
	g.Expect(steps).To(HaveLen(2))
	g.Expect(steps[0]).To(Equal(Step{Cluster: apply.ClusterGuest, Group: "g", Object: cm}))
	ids := Identities(steps)
	g.Expect(ids[0].Object.(*corev1.ConfigMap).Data).To(BeNil())
	g.Expect(ids[1].Cluster).To(Equal(apply.ClusterGuest))
	g.Expect(cm.Data).To(HaveKey("k"), "the plan's objects are left as they are")
	g.Expect(Kind(sa)).To(Equal("ServiceAccount"), "without type meta, the Go type names the kind")
}

func TestHold(t *testing.T) {
	t.Parallel()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	isSA := func(s Step) bool { _, ok := s.Object.(*corev1.ServiceAccount); return ok }

	t.Run("When a step is in use, it should move from Delete to Held, the others keeping their order, and Waiting should say why", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		b := Base{Delete: Steps(apply.ClusterGuest, "g", cm, sa, cm)}
		b.Hold(isSA, "in use")
		g.Expect(b.Delete).To(Equal(Steps(apply.ClusterGuest, "g", cm, cm)))
		g.Expect(b.Held).To(Equal(Steps(apply.ClusterGuest, "g", sa)))
		g.Expect(b.Waiting).To(Equal("in use"))
	})
	t.Run("When no step is in use, it should leave Delete whole and say nothing", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		b := Base{Delete: Steps(apply.ClusterGuest, "g", cm)}
		b.Hold(isSA, "in use")
		g.Expect(b.Delete).To(Equal(Steps(apply.ClusterGuest, "g", cm)))
		g.Expect(b.Held).To(BeEmpty())
		g.Expect(b.Waiting).To(BeEmpty())
	})
}
