package applier_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
)

// legacyOwner stands for csi-operator: it writes with create and update, never apply.
const legacyOwner = "legacy-operator"

// missingReader is a cache that does not hold the object, as a label-selected cache does not hold
// an object the operator has yet to label.
type missingReader struct{}

func (missingReader) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, key.Name)
}

func (missingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return nil
}

func TestApplier_Adopting(t *testing.T) {
	t.Parallel()
	e := startEnv(t, "adopt")

	// legacyConfigMap is what the replaced operator left: keys and an annotation the new
	// owner no longer sets, and a user's annotation added with kubectl.
	legacyConfigMap := func(t *testing.T, g Gomega, ns string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloud-conf", Annotations: map[string]string{"legacy.example.com/hash": "abc"}},
			Data:       map[string]string{"kept": "old", "dropped": "old"},
		}
		g.Expect(e.direct.Create(t.Context(), cm, client.FieldOwner(legacyOwner))).To(Succeed())
		patch := client.MergeFrom(cm.DeepCopy())
		cm.Annotations["user.example.com/note"] = "mine"
		g.Expect(e.direct.Patch(t.Context(), cm, patch, client.FieldOwner("kubectl-edit"))).To(Succeed())
		return cm
	}
	desired := func(ns string) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cloud-conf", Labels: map[string]string{"managed": "yes"}},
			Data:       map[string]string{"kept": "new"},
		}
	}
	// expectAdopted checks that the applier owns what it sends, the legacy owner nothing, that
	// what only the legacy owner had set is gone and that the user's annotation stayed.
	expectAdopted := func(g Gomega, ns string) {
		live := get(g, e, desired(ns))
		g.Expect(live.Data).To(Equal(map[string]string{"kept": "new"}))
		g.Expect(live.Labels).To(Equal(map[string]string{"managed": "yes"}))
		g.Expect(live.Annotations).To(Equal(map[string]string{"user.example.com/note": "mine"}))
		g.Expect(owners(live)).To(ConsistOf(testOwner+" Apply", "kubectl-edit Update"))
	}
	// methods returns the method and content type of the requests about ConfigMaps, leaving
	// out the discovery requests a new client sends first.
	methods := func(reqs []string) []string {
		var out []string
		for _, r := range reqs {
			method, rest, _ := strings.Cut(r, " ")
			path, contentType, _ := strings.Cut(rest, " ")
			if strings.Contains(path, "/configmaps/") {
				out = append(out, method+" "+strings.TrimPrefix(contentType, "application/"))
			}
		}
		return out
	}

	t.Run("When the cache does not hold an object a legacy owner wrote, it should read it, take its fields over and drop what it no longer sets in one apply", func(t *testing.T) {
		g := NewWithT(t)
		ns := e.namespace(t)
		legacyConfigMap(t, g, ns)
		a, log := e.applier(t, testOwner)
		a.Reader = missingReader{}
		a.Adopting(legacyOwner)

		res, err := a.Apply(t.Context(), desired(ns))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Applied))
		reqs := methods(log.take())
		g.Expect(reqs).To(HaveLen(3))
		g.Expect(reqs[0]).To(HavePrefix(http.MethodGet))
		g.Expect(reqs[1]).To(Equal(http.MethodPatch + " json-patch+json"))
		g.Expect(reqs[2]).To(HavePrefix(http.MethodPatch + " apply-patch"))
		expectAdopted(g, ns)
	})

	t.Run("When the cache holds an object a legacy owner wrote, it should take its fields over without reading it again", func(t *testing.T) {
		g := NewWithT(t)
		ns := e.namespace(t)
		cm := legacyConfigMap(t, g, ns)
		waitCached(g, e, cm)
		a, log := e.applier(t, testOwner)
		a.Adopting(legacyOwner)

		_, err := a.Apply(t.Context(), desired(ns))
		g.Expect(err).NotTo(HaveOccurred())
		reqs := methods(log.take())
		g.Expect(reqs).To(HaveLen(2))
		g.Expect(reqs[0]).To(Equal(http.MethodPatch + " json-patch+json"))
		g.Expect(reqs[1]).To(HavePrefix(http.MethodPatch + " apply-patch"))
		expectAdopted(g, ns)

		// Adopted: the next apply of the same object sends nothing.
		waitCached(g, e, cm)
		res, err := a.Apply(t.Context(), desired(ns))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Unchanged))
		g.Expect(log.take()).To(BeEmpty())
	})

	t.Run("When no legacy owner wrote the object, it should apply as without adoption", func(t *testing.T) {
		g := NewWithT(t)
		ns := e.namespace(t)
		a, log := e.applier(t, testOwner)
		a.Adopting(legacyOwner)

		// Missing everywhere: one read that finds nothing, then the apply creates it.
		a.Reader = missingReader{}
		_, err := a.Apply(t.Context(), desired(ns))
		g.Expect(err).NotTo(HaveOccurred())
		reqs := methods(log.take())
		g.Expect(reqs).To(HaveLen(2))
		g.Expect(reqs[0]).To(HavePrefix(http.MethodGet))
		g.Expect(reqs[1]).To(HavePrefix(http.MethodPatch + " apply-patch"))

		// In the cache and unchanged: nothing at all.
		a.Reader = e.cache
		waitCached(g, e, desired(ns))
		res, err := a.Apply(t.Context(), desired(ns))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Unchanged))
		g.Expect(log.take()).To(BeEmpty())
	})
}
