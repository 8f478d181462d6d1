package applier_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
)

// managedByTest is the label the test's objects carry and its label-selected cache selects, as
// the guest's cache selects the operator's managed-by label.
var managedByTest = map[string]string{"app.kubernetes.io/managed-by": "applier-test"}

// TestApplier_UpdateFallback writes under RBAC without patch through a cache that selects the
// writer's label, so that an object someone else created is on the API server and not in the
// cache: what cluster-storage-operator's image swap meets with csi-operator's CSIDriver.
func TestApplier_UpdateFallback(t *testing.T) {
	t.Parallel()
	e := startEnv(t, "fallback")
	ctx := t.Context()

	// Two writers, so that granting one patch leaves the other's cases under the RBAC without.
	const denied, granted = "fallback-writer", "fallback-granted"
	for _, user := range []string{denied, granted} {
		grantWriter(t, e, user, "get", "list", "watch", "create", "update", "delete")
	}
	labelled := labelledCache(t, e)

	// writer returns an Applier for the test's owner that writes as user, adopting legacyOwner's
	// fields as the operator adopts csi-operator's, and compares with the label-selected cache.
	writer := func(t *testing.T, user string, f *apply.UpdateFallback) (*apply.Applier, *requestLog) {
		t.Helper()
		log := &requestLog{}
		cfg := rest.CopyConfig(e.cfg)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
		cfg.Wrap(log.wrap)
		c, err := client.New(cfg, client.Options{Scheme: e.direct.Scheme()})
		if err != nil {
			t.Fatalf("Creating a client: %v", err)
		}
		a := &apply.Applier{Client: c, Reader: labelled, Owner: testOwner, Fallback: f}
		return a.Adopting(legacyOwner), log
	}
	// writes returns the method and content type of the requests about kind's resource.
	writes := func(reqs []string, resource string) []string {
		var out []string
		for _, r := range reqs {
			method, rest, _ := strings.Cut(r, " ")
			path, contentType, _ := strings.Cut(rest, " ")
			if strings.Contains(path, "/"+resource+"/") || strings.HasSuffix(path, "/"+resource) {
				out = append(out, method+" "+strings.TrimPrefix(contentType, "application/"))
			}
		}
		return out
	}

	for _, tc := range []struct {
		kind     string
		resource string
		// others is the object as its creator made it: no label of the writer's, an annotation
		// of its own; desired is what the writer applies.
		others, desired client.Object
	}{
		{
			kind: "CSIDriver", resource: "csidrivers",
			others: &storagev1.CSIDriver{
				ObjectMeta: metav1.ObjectMeta{Name: "fallback.csi.example.com", Annotations: map[string]string{"csi.openshift.io/managed": "true"}},
				Spec:       storagev1.CSIDriverSpec{AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(true)},
			},
			desired: &storagev1.CSIDriver{
				ObjectMeta: metav1.ObjectMeta{Name: "fallback.csi.example.com", Labels: managedByTest},
				Spec:       storagev1.CSIDriverSpec{AttachRequired: ptr.To(true), PodInfoOnMount: ptr.To(true)},
			},
		},
		{
			kind: "StorageClass", resource: "storageclasses",
			others: func() client.Object {
				sc := testStorageClass("fallback-others")
				sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "false"}
				return sc
			}(),
			desired: func() client.Object {
				sc := testStorageClass("fallback-others")
				sc.Annotations = nil
				sc.Labels = managedByTest
				return sc
			}(),
		},
	} {
		t.Run("When someone else created the "+tc.kind+" and patch is forbidden, it should update it once and never create it", func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			g.Expect(e.direct.Create(ctx, tc.others.DeepCopyObject().(client.Object), client.FieldOwner(legacyOwner))).To(Succeed())
			f := apply.NewUpdateFallback(schema.GroupKind{Group: storagev1.GroupName, Kind: tc.kind})
			a, log := writer(t, denied, f)

			res, err := a.Apply(ctx, tc.desired.DeepCopyObject().(client.Object))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res).To(Equal(apply.Applied))
			// Read from the API server, the adoption refused, then one update: no create.
			g.Expect(writes(log.take(), tc.resource)).To(Equal([]string{
				http.MethodGet + " ", http.MethodPatch + " json-patch+json", http.MethodPut + " json",
			}))
			live := get(g, e, tc.desired)
			g.Expect(owners(live)).To(ContainElement(testOwner+" Update"), "written with an update")
			g.Expect(live.GetLabels()).To(Equal(managedByTest))
			g.Expect(live.GetAnnotations()).To(Equal(tc.others.GetAnnotations()), "the creator's annotation stays")

			// Labelled now, so in the cache: the next reconciles send nothing.
			waitCachedIn(g, e, labelled, tc.desired)
			for range 2 {
				res, err = a.Apply(ctx, tc.desired.DeepCopyObject().(client.Object))
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(res).To(Equal(apply.Unchanged))
			}
			g.Expect(log.take()).To(BeEmpty())
		})
	}

	t.Run("When patch is granted after the fallback switched on, it should go back to server-side apply and remove what it no longer sets", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		f := apply.NewUpdateFallback(schema.GroupKind{Group: storagev1.GroupName, Kind: "StorageClass"})
		f.Interval = time.Second
		a, _ := writer(t, granted, f)
		sc := testStorageClass("fallback-granted")
		sc.Annotations = nil
		sc.Labels = map[string]string{"app.kubernetes.io/managed-by": "applier-test", "example.com/dropped": "yes"}
		_, err := a.Apply(ctx, sc.DeepCopy())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(owners(get(g, e, sc))).To(ConsistOf(testOwner+" Update"), "created with a create")

		grantWriter(t, e, granted, "get", "list", "watch", "create", "update", "delete", "patch")

		delete(sc.Labels, "example.com/dropped")
		g.Eventually(func(g Gomega) {
			_, err := a.Apply(ctx, sc.DeepCopy())
			g.Expect(err).NotTo(HaveOccurred())
			live := get(g, e, sc)
			g.Expect(live.Labels).To(Equal(managedByTest), "the label set only under the fallback is removed")
			g.Expect(owners(live)).To(ConsistOf(testOwner+" Apply"), "back to server-side apply")
		}).WithTimeout(waitTimeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	})
}

// labelledCache returns a started cache of e's API server that holds only objects carrying
// managedByTest.
func labelledCache(t *testing.T, e *env) cache.Cache {
	t.Helper()
	return startCache(t, e.cfg, cache.Options{Scheme: e.direct.Scheme(), DefaultLabelSelector: labels.SelectorFromSet(managedByTest)})
}

// waitCachedIn waits until c holds obj at the resource version the API server has.
func waitCachedIn[T client.Object](g Gomega, e *env, c cache.Cache, obj T) {
	want := get(g, e, obj).GetResourceVersion()
	g.Eventually(func(g Gomega) {
		cached := empty(obj)
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(obj), cached)).To(Succeed())
		g.Expect(cached.GetResourceVersion()).To(Equal(want))
	}).WithTimeout(waitTimeout).WithPolling(waitPoll).Should(Succeed())
}

// grantWriter gives user verbs on CSIDrivers and StorageClasses with a ClusterRole of its name
// (created, or replaced), and waits until the API server's RBAC says so.
func grantWriter(t *testing.T, e *env, user string, verbs ...string) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}}
	rules := []rbacv1.PolicyRule{{APIGroups: []string{storagev1.GroupName}, Resources: []string{"csidrivers", "storageclasses"}, Verbs: verbs}}
	if err := e.direct.Get(ctx, client.ObjectKeyFromObject(role), role); err == nil {
		role.Rules = rules
		g.Expect(e.direct.Update(ctx, role)).To(Succeed())
	} else {
		role.Rules = rules
		g.Expect(e.direct.Create(ctx, role)).To(Succeed())
		g.Expect(e.direct.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		})).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		for _, verb := range []string{"create", "patch"} {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: []string{"system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: storagev1.GroupName, Resource: "storageclasses"},
			}}
			g.Expect(e.direct.Create(ctx, sar)).To(Succeed())
			g.Expect(sar.Status.Allowed).To(Equal(slices.Contains(verbs, verb)), verb)
		}
	}).WithTimeout(waitTimeout).WithPolling(waitPoll).Should(Succeed())
}
