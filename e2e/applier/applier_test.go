// Package applier_test runs shared/apply's Applier against a real API server: what it sends
// (one PATCH or nothing), adoption of csi-operator's objects, users' edits, status subresources
// and deletion.
package applier_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/localcluster"
	"github.com/cinder-csi-operator/cinder-csi-operator/manifests"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/apply"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
)

// testOwner is the field owner the tests apply as.
const testOwner = "cinder-csi-operator-test"

// The fixtures shared with shared/apply's unit tests: the Deployment they apply, and the
// fields a real API server records for its apply, which they use as realistic managed fields.
const (
	deploymentFixture = "../../shared/apply/testdata/deployment.yaml"
	fieldsFixture     = "../../shared/apply/testdata/deployment_fields.json"
)

// Timeouts of the waits for the cache and the API server.
const (
	waitTimeout = 20 * time.Second
	waitPoll    = 20 * time.Millisecond
)

// requestLog records every request a client sends, so that a test can prove an apply sent
// nothing at all, or exactly one PATCH.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// wrap is a rest.Config WrapperFunc that records each request as "METHOD path content-type".
func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.reqs = append(l.reqs, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type"))
		l.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// take returns the requests recorded since the last call and forgets them.
func (l *requestLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.reqs
	l.reqs = nil
	return out
}

// mutating returns the requests among reqs that could change something.
func mutating(reqs []string) []string {
	var out []string
	for _, r := range reqs {
		method, _, _ := strings.Cut(r, " ")
		switch method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			out = append(out, r)
		}
	}
	return out
}

// expectOneApply checks that reqs hold exactly one mutating request: a server-side apply PATCH to
// a path ending in pathSuffix.
func expectOneApply(g Gomega, reqs []string, pathSuffix string) {
	m := mutating(reqs)
	g.Expect(m).To(HaveLen(1), "mutating requests: %v", m)
	method, rest, _ := strings.Cut(m[0], " ")
	path, contentType, _ := strings.Cut(rest, " ")
	g.Expect(method).To(Equal(http.MethodPatch))
	g.Expect(path).To(HaveSuffix(pathSuffix))
	g.Expect(contentType).To(ContainSubstring("apply-patch"))
}

// env is one local API server with an informer cache, shared by the cases of one test.
type env struct {
	cfg     *rest.Config
	direct  client.Client
	cache   cache.Cache
	decoder *manifests.Decoder
}

// startEnv starts a control-plane-only cluster with the given CRDs and a started, synced cache.
func startEnv(t *testing.T, name string, crds ...string) *env {
	t.Helper()
	c := localcluster.StartForTest(t, localcluster.Options{Name: name, ControlPlaneOnly: true, CRDs: crds})
	scheme, err := clusters.NewScheme()
	if err != nil {
		t.Fatalf("Building the scheme: %v", err)
	}
	cfg := c.RESTConfig()
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatalf("Creating a client: %v", err)
	}
	ca := startCache(t, cfg, cache.Options{Scheme: scheme})
	return &env{cfg: cfg, direct: direct, cache: ca, decoder: manifests.NewDecoder(scheme)}
}

// applier returns an Applier for owner that writes through a client of its own, whose requests
// are recorded in the returned log, and that compares against the shared cache.
func (e *env) applier(t *testing.T, owner string) (*apply.Applier, *requestLog) {
	t.Helper()
	log := &requestLog{}
	cfg := rest.CopyConfig(e.cfg)
	cfg.Wrap(log.wrap)
	c, err := client.New(cfg, client.Options{Scheme: e.direct.Scheme()})
	if err != nil {
		t.Fatalf("Creating a client: %v", err)
	}
	return &apply.Applier{Client: c, Reader: e.cache, Owner: owner}, log
}

// namespace creates a namespace for one case.
func (e *env) namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "apply-"}}
	if err := e.direct.Create(t.Context(), ns); err != nil {
		t.Fatalf("Creating a namespace: %v", err)
	}
	return ns.Name
}

// empty returns a new zero object of obj's type. Reading into it, rather than into a copy of a
// desired object, matters: JSON decoding merges into existing maps.
func empty[T client.Object](obj T) T {
	return reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T)
}

// get reads obj's current state from the API server, bypassing the cache.
func get[T client.Object](g Gomega, e *env, obj T) T {
	out := empty(obj)
	g.Expect(e.direct.Get(context.Background(), client.ObjectKeyFromObject(obj), out)).To(Succeed())
	return out
}

// waitCached waits until the cache holds obj at the resource version the API server has, so
// that the next apply compares against what the previous write produced.
func waitCached[T client.Object](g Gomega, e *env, obj T) {
	want := get(g, e, obj).GetResourceVersion()
	g.Eventually(func(g Gomega) {
		cached := empty(obj)
		g.Expect(e.cache.Get(context.Background(), client.ObjectKeyFromObject(obj), cached)).To(Succeed())
		g.Expect(cached.GetResourceVersion()).To(Equal(want))
	}).WithTimeout(waitTimeout).WithPolling(waitPoll).Should(Succeed())
}

// container returns the named container of a pod spec.
func container(g Gomega, pod corev1.PodSpec, name string) corev1.Container {
	i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == name })
	g.Expect(i).NotTo(Equal(-1), "container %s", name)
	return pod.Containers[i]
}

// testDeployment returns the Deployment shared/apply's unit tests use (the operator's controller
// Deployment with images filled in), from the fixture they keep, in namespace ns.
func testDeployment(t testing.TB, ns string) *appsv1.Deployment {
	t.Helper()
	b, err := os.ReadFile(deploymentFixture)
	if err != nil {
		t.Fatalf("Reading the Deployment fixture: %v", err)
	}
	dep := &appsv1.Deployment{}
	if err := yaml.UnmarshalStrict(b, dep); err != nil {
		t.Fatalf("Decoding %s: %v", deploymentFixture, err)
	}
	dep.Namespace = ns
	return dep
}

// testDaemonSet returns the operator's real node DaemonSet with images filled in and one
// resource quantity spelled the way the API server does not store it.
func testDaemonSet(t *testing.T, d *manifests.Decoder, ns string) *appsv1.DaemonSet {
	t.Helper()
	ds, err := manifests.Object[*appsv1.DaemonSet](d, "node.yaml")
	if err != nil {
		t.Fatalf("Loading the node DaemonSet: %v", err)
	}
	ds.Namespace = ns
	for i := range ds.Spec.Template.Spec.Containers {
		c := &ds.Spec.Template.Spec.Containers[i]
		c.Image = "" + c.Name + ":v1"
		if c.Name == "csi-node-driver-registrar" {
			// "0.1" is stored as "100m": the comparison must not see a change.
			c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("0.1")
		}
	}
	return ds
}

func testConfigMap(ns string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cloud-conf", Namespace: ns, Labels: map[string]string{"owner-label": "yes"}},
		Data: map[string]string{
			nodeconf.KeyCloudConf:      "[Global]\nuse-clouds = true\n",
			nodeconf.KeyEnableTopology: "false",
			nodeconf.KeyCABundle:       "-----BEGIN CERTIFICATE-----\n",
		},
	}
}

func testClusterRoleBinding(name string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"owner-label": "yes"}},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "node-sa", Namespace: "kube-system"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "privileged"},
	}
}

func testStorageClass(name string) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{names.DefaultStorageClassAnnotation: "true"},
		},
		Provisioner:          names.DriverName,
		Parameters:           map[string]string{"type": "ssd"},
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		AllowVolumeExpansion: ptr.To(true),
	}
}

// kindCase drives one kind through create, no-op, change, no-op, removal, no-op.
type kindCase struct {
	name string
	// path is the end of the object's API path, checked on every write.
	path    func(obj client.Object) string
	build   func(t *testing.T, e *env) client.Object
	change  func(obj client.Object)
	changed func(g Gomega, live client.Object)
	drop    func(obj client.Object)
	dropped func(g Gomega, live client.Object)
}

func TestApplier_Apply(t *testing.T) {
	t.Parallel()
	e := startEnv(t, "apply")
	ctx := t.Context()

	namespaced := func(resource string) func(client.Object) string {
		return func(o client.Object) string {
			return "/namespaces/" + o.GetNamespace() + "/" + resource + "/" + o.GetName()
		}
	}
	clusterScoped := func(resource string) func(client.Object) string {
		return func(o client.Object) string { return "/" + resource + "/" + o.GetName() }
	}
	kinds := []kindCase{
		{
			name:  "When a Deployment is applied, changed and trimmed, it should send one PATCH per change and nothing in between",
			path:  namespaced("deployments"),
			build: func(t *testing.T, e *env) client.Object { return testDeployment(t, e.namespace(t)) },
			change: func(o client.Object) {
				d := o.(*appsv1.Deployment)
				d.Spec.Template.Spec.Containers[0].Image = "csi-driver:v2"
			},
			changed: func(g Gomega, o client.Object) {
				g.Expect(container(g, o.(*appsv1.Deployment).Spec.Template.Spec, "csi-driver").Image).To(Equal("csi-driver:v2"))
			},
			drop: func(o client.Object) {
				d := o.(*appsv1.Deployment)
				delete(d.Annotations, "example.com/dropped")
				p := &d.Spec.Template.Spec.Containers[1]
				p.Args = slices.DeleteFunc(p.Args, func(a string) bool { return a == "--extra-create-metadata" })
			},
			dropped: func(g Gomega, o client.Object) {
				d := o.(*appsv1.Deployment)
				g.Expect(d.Annotations).NotTo(HaveKey("example.com/dropped"))
				g.Expect(d.Annotations).To(HaveKey("example.com/kept"))
				g.Expect(container(g, d.Spec.Template.Spec, "csi-provisioner").Args).NotTo(ContainElement("--extra-create-metadata"))
				g.Expect(container(g, d.Spec.Template.Spec, "csi-provisioner").Args).To(ContainElement("--default-fstype=ext4"))
			},
		},
		{
			name:  "When a DaemonSet is applied, changed and trimmed, it should send one PATCH per change and nothing in between",
			path:  namespaced("daemonsets"),
			build: func(t *testing.T, e *env) client.Object { return testDaemonSet(t, e.decoder, e.namespace(t)) },
			change: func(o client.Object) {
				c := &o.(*appsv1.DaemonSet).Spec.Template.Spec.Containers[0]
				c.Args = append(c.Args, "--v=4")
				c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("64Mi")
			},
			changed: func(g Gomega, o client.Object) {
				ds := o.(*appsv1.DaemonSet)
				c := container(g, ds.Spec.Template.Spec, "csi-driver")
				g.Expect(c.Args).To(HaveLen(6))
				g.Expect(c.Args[5]).To(Equal("--v=4"))
				g.Expect(c.Resources.Requests.Memory().String()).To(Equal("64Mi"))
				registrar := container(g, ds.Spec.Template.Spec, "csi-node-driver-registrar")
				g.Expect(registrar.Resources.Requests.Cpu().String()).To(Equal("100m"))
				g.Expect(ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable).To(Equal(ptr.To(intstr.FromString("10%"))))
			},
			drop: func(o client.Object) {
				ds := o.(*appsv1.DaemonSet)
				ds.Spec.Template.Spec.Containers = slices.DeleteFunc(ds.Spec.Template.Spec.Containers,
					func(c corev1.Container) bool { return c.Name == "csi-liveness-probe" })
			},
			dropped: func(g Gomega, o client.Object) {
				var got []string
				for _, c := range o.(*appsv1.DaemonSet).Spec.Template.Spec.Containers {
					got = append(got, c.Name)
				}
				g.Expect(got).To(Equal([]string{"csi-driver", "csi-node-driver-registrar"}))
			},
		},
		{
			name:  "When a ConfigMap is applied, changed and trimmed, it should send one PATCH per change and nothing in between",
			path:  namespaced("configmaps"),
			build: func(t *testing.T, e *env) client.Object { return testConfigMap(e.namespace(t)) },
			change: func(o client.Object) {
				o.(*corev1.ConfigMap).Data[nodeconf.KeyEnableTopology] = "true"
			},
			changed: func(g Gomega, o client.Object) {
				g.Expect(o.(*corev1.ConfigMap).Data).To(HaveKeyWithValue(nodeconf.KeyEnableTopology, "true"))
			},
			drop: func(o client.Object) {
				cm := o.(*corev1.ConfigMap)
				delete(cm.Data, nodeconf.KeyCABundle)
				cm.Labels = nil
			},
			dropped: func(g Gomega, o client.Object) {
				cm := o.(*corev1.ConfigMap)
				g.Expect(cm.Data).To(HaveLen(2))
				g.Expect(cm.Data).NotTo(HaveKey(nodeconf.KeyCABundle))
				g.Expect(cm.Labels).To(BeEmpty())
			},
		},
		{
			name:  "When a ClusterRoleBinding is applied, changed and trimmed, it should send one PATCH per change and nothing in between",
			path:  clusterScoped("clusterrolebindings"),
			build: func(*testing.T, *env) client.Object { return testClusterRoleBinding("apply-test-binding") },
			change: func(o client.Object) {
				b := o.(*rbacv1.ClusterRoleBinding)
				b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "other-sa", Namespace: "kube-system"})
			},
			changed: func(g Gomega, o client.Object) {
				g.Expect(o.(*rbacv1.ClusterRoleBinding).Subjects).To(HaveLen(2))
			},
			drop: func(o client.Object) {
				o.SetLabels(nil)
			},
			dropped: func(g Gomega, o client.Object) {
				g.Expect(o.GetLabels()).NotTo(HaveKey("owner-label"))
				g.Expect(o.(*rbacv1.ClusterRoleBinding).Subjects).To(HaveLen(2))
			},
		},
		{
			name:  "When a StorageClass is applied, changed and trimmed, it should send one PATCH per change and nothing in between",
			path:  clusterScoped("storageclasses"),
			build: func(*testing.T, *env) client.Object { return testStorageClass("apply-test-class") },
			change: func(o client.Object) {
				o.(*storagev1.StorageClass).AllowVolumeExpansion = ptr.To(false)
			},
			changed: func(g Gomega, o client.Object) {
				g.Expect(o.(*storagev1.StorageClass).AllowVolumeExpansion).To(Equal(ptr.To(false)))
			},
			drop: func(o client.Object) {
				o.SetAnnotations(nil)
			},
			dropped: func(g Gomega, o client.Object) {
				g.Expect(o.GetAnnotations()).NotTo(HaveKey(names.DefaultStorageClassAnnotation))
				g.Expect(o.(*storagev1.StorageClass).Parameters).To(HaveKeyWithValue("type", "ssd"))
			},
		},
	}
	for _, tc := range kinds {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			a, log := e.applier(t, testOwner)
			desired := tc.build(t, e)
			path := tc.path(desired)

			steps := []struct {
				what   string
				edit   func(client.Object)
				verify func(Gomega, client.Object)
			}{
				{what: "create"},
				{what: "change", edit: tc.change, verify: tc.changed},
				{what: "removal", edit: tc.drop, verify: tc.dropped},
			}
			for _, s := range steps {
				if s.edit != nil {
					s.edit(desired)
				}
				res, err := a.Apply(ctx, desired)
				g.Expect(err).NotTo(HaveOccurred(), s.what)
				g.Expect(res).To(Equal(apply.Applied), s.what)
				expectOneApply(g, log.take(), path)
				if s.verify != nil {
					s.verify(g, get(g, e, desired))
				}

				waitCached(g, e, desired)
				res, err = a.Apply(ctx, desired)
				g.Expect(err).NotTo(HaveOccurred(), s.what)
				g.Expect(res).To(Equal(apply.Unchanged), "repeating the %s", s.what)
				g.Expect(log.take()).To(BeEmpty(), "repeating the %s must send no request at all", s.what)
			}
		})
	}

	t.Run("When csi-operator created the object with an update, it should adopt it with one PATCH and then send nothing", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		a, log := e.applier(t, testOwner)
		ns := e.namespace(t)

		// What csi-operator left behind: the same Deployment with an older image, written with
		// an update (not an apply) by its own field manager.
		old := testDeployment(t, ns)
		old.Spec.Template.Spec.Containers[0].Image = "csi-driver:v0"
		g.Expect(e.direct.Create(ctx, old, client.FieldOwner("csi-operator"))).To(Succeed())
		waitCached(g, e, old)

		desired := testDeployment(t, ns)
		res, err := a.Apply(ctx, desired)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Applied))
		expectOneApply(g, log.take(), "/deployments/"+desired.Name)
		live := get(g, e, desired)
		g.Expect(container(g, live.Spec.Template.Spec, "csi-driver").Image).To(Equal("csi-driver:v1"))
		_, ok := appliedFields(g, live.ManagedFields, testOwner, "")
		g.Expect(ok).To(BeTrue(), "the owner has an apply entry after adoption")

		waitCached(g, e, desired)
		res, err = a.Apply(ctx, desired)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Unchanged))
		g.Expect(log.take()).To(BeEmpty())
	})

	t.Run("When a user adds an annotation with an update, it should keep it and not apply again", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		a, log := e.applier(t, testOwner)
		desired := testConfigMap(e.namespace(t))
		_, err := a.Apply(ctx, desired)
		g.Expect(err).NotTo(HaveOccurred())
		log.take()

		user := get(g, e, desired)
		user.Annotations = map[string]string{"example.com/note": "mine"}
		g.Expect(e.direct.Update(ctx, user, client.FieldOwner("kubectl-annotate"))).To(Succeed())
		waitCached(g, e, desired)

		res, err := a.Apply(ctx, desired)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Unchanged))
		g.Expect(log.take()).To(BeEmpty())

		desired.Data[nodeconf.KeyEnableTopology] = "true"
		res, err = a.Apply(ctx, desired)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Applied))
		expectOneApply(g, log.take(), "/configmaps/"+desired.Name)
		live := get(g, e, desired)
		g.Expect(live.Annotations).To(HaveKeyWithValue("example.com/note", "mine"))
		g.Expect(live.Data).To(HaveKeyWithValue(nodeconf.KeyEnableTopology, "true"))

		waitCached(g, e, desired)
		res, err = a.Apply(ctx, desired)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Unchanged))
		g.Expect(log.take()).To(BeEmpty())
	})

	t.Run("When a user edits a field the owner sets, it should revert it with one PATCH", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		a, log := e.applier(t, testOwner)
		desired := testDeployment(t, e.namespace(t))
		_, err := a.Apply(ctx, desired)
		g.Expect(err).NotTo(HaveOccurred())
		log.take()

		user := get(g, e, desired)
		user.Spec.Replicas = ptr.To[int32](5)
		g.Expect(e.direct.Update(ctx, user, client.FieldOwner("kubectl-edit"))).To(Succeed())
		waitCached(g, e, desired)

		res, err := a.Apply(ctx, desired)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Applied))
		expectOneApply(g, log.take(), "/deployments/"+desired.Name)
		g.Expect(get(g, e, desired).Spec.Replicas).To(Equal(ptr.To[int32](2)))

		waitCached(g, e, desired)
		res, err = a.Apply(ctx, desired)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Unchanged))
		g.Expect(log.take()).To(BeEmpty())
	})

	t.Run("When a Deployment is applied, it should record the managed fields shared/apply's unit tests expect", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		a, _ := e.applier(t, testOwner)
		desired := testDeployment(t, e.namespace(t))
		_, err := a.Apply(ctx, desired)
		g.Expect(err).NotTo(HaveOccurred())
		owned, ok := appliedFields(g, get(g, e, desired).ManagedFields, testOwner, "")
		g.Expect(ok).To(BeTrue())
		if update := os.Getenv("UPDATE"); update == "1" || update == "true" {
			b, err := json.MarshalIndent(owned, "", "  ")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(os.WriteFile(fieldsFixture, append(b, '\n'), 0o644)).To(Succeed())
			return
		}
		b, err := os.ReadFile(fieldsFixture)
		g.Expect(err).NotTo(HaveOccurred())
		var want map[string]any
		g.Expect(json.Unmarshal(b, &want)).To(Succeed())
		g.Expect(owned).To(Equal(want), "the API server records other fields than %s says; UPDATE=1 rewrites it", fieldsFixture)
	})
}

// appliedFields returns the decoded field set of owner's apply entry for the subresource.
func appliedFields(g Gomega, entries []metav1.ManagedFieldsEntry, owner, subresource string) (map[string]any, bool) {
	i := slices.IndexFunc(entries, func(e metav1.ManagedFieldsEntry) bool {
		return e.Manager == owner && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == subresource
	})
	if i < 0 {
		return nil, false
	}
	set := map[string]any{}
	if entries[i].FieldsV1 != nil {
		g.Expect(json.Unmarshal(entries[i].FieldsV1.GetRawBytes(), &set)).To(Succeed())
	}
	return set, true
}

// driverStatus is a ClusterCSIDriver status apply as the managers build it: unstructured, so
// that only conditions are sent (a typed OperatorStatus would also send readyReplicas: 0).
func driverStatus(name string, conds ...[3]string) *unstructured.Unstructured {
	list := make([]any, 0, len(conds))
	for _, c := range conds {
		list = append(list, map[string]any{
			"type":               c[0],
			"status":             c[1],
			"reason":             c[2],
			"message":            c[0] + " is " + c[1] + ".",
			"lastTransitionTime": "2026-01-02T03:04:05Z",
		})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": operatorv1.GroupVersion.String(),
		"kind":       "ClusterCSIDriver",
		"metadata":   map[string]any{"name": name},
		"status":     map[string]any{"conditions": list},
	}}
}

// conditionTypes returns the condition types of the live ClusterCSIDriver, sorted.
func conditionTypes(d *operatorv1.ClusterCSIDriver) []string {
	var out []string
	for _, c := range d.Status.Conditions {
		out = append(out, c.Type)
	}
	slices.Sort(out)
	return out
}

func TestApplier_ApplyStatus(t *testing.T) {
	t.Parallel()
	crds, err := localcluster.GuestCRDs()
	if err != nil {
		t.Fatalf("Finding the guest CRDs: %v", err)
	}
	e := startEnv(t, "apply-status", crds...)
	ctx := t.Context()

	create := func(g Gomega, name string) *operatorv1.ClusterCSIDriver {
		d := &operatorv1.ClusterCSIDriver{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       operatorv1.ClusterCSIDriverSpec{OperatorSpec: operatorv1.OperatorSpec{ManagementState: operatorv1.Managed, LogLevel: operatorv1.Normal}},
		}
		g.Expect(e.direct.Create(ctx, d)).To(Succeed())
		waitCached(g, e, d)
		return d
	}
	const (
		cpAvailable = names.ConditionControllerAvailable
		cpDegraded  = names.ConditionControllerDegraded
		guestAvail  = names.ConditionNodeAvailable
	)

	t.Run("When two owners apply their conditions, it should keep both sets and send nothing when repeated", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		d := create(g, names.ClusterCSIDriverName)
		cp, cpLog := e.applier(t, names.FieldOwnerControlPlane)
		guest, guestLog := e.applier(t, names.FieldOwnerGuest)
		statusPath := "/clustercsidrivers/" + d.Name + "/status"

		cpConds := driverStatus(d.Name, [3]string{cpAvailable, "True", "AsExpected"}, [3]string{cpDegraded, "False", "AsExpected"})
		res, err := cp.ApplyStatus(ctx, cpConds)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Applied))
		expectOneApply(g, cpLog.take(), statusPath)
		waitCached(g, e, d)

		res, err = cp.ApplyStatus(ctx, cpConds)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Unchanged))
		g.Expect(cpLog.take()).To(BeEmpty())

		guestConds := driverStatus(d.Name, [3]string{guestAvail, "False", "Deploying"})
		res, err = guest.ApplyStatus(ctx, guestConds)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Applied))
		expectOneApply(g, guestLog.take(), statusPath)
		g.Expect(conditionTypes(get(g, e, d))).To(Equal([]string{cpAvailable, cpDegraded, guestAvail}))
		waitCached(g, e, d)

		// Neither owner's repeat is disturbed by the other's conditions in the same list.
		for _, tc := range []struct {
			a    *apply.Applier
			log  *requestLog
			obj  *unstructured.Unstructured
			name string
		}{{cp, cpLog, cpConds, "controlplane"}, {guest, guestLog, guestConds, "guest"}} {
			res, err = tc.a.ApplyStatus(ctx, tc.obj)
			g.Expect(err).NotTo(HaveOccurred(), tc.name)
			g.Expect(res).To(Equal(apply.Unchanged), tc.name)
			g.Expect(tc.log.take()).To(BeEmpty(), tc.name)
		}

		// An owner that stops sending a condition removes only that one.
		res, err = cp.ApplyStatus(ctx, driverStatus(d.Name, [3]string{cpAvailable, "False", "NotAvailable"}))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Applied))
		expectOneApply(g, cpLog.take(), statusPath)
		live := get(g, e, d)
		g.Expect(conditionTypes(live)).To(Equal([]string{cpAvailable, guestAvail}))
		g.Expect(live.Status.Conditions).To(ContainElement(And(
			HaveField("Type", cpAvailable), HaveField("Status", operatorv1.ConditionFalse), HaveField("Reason", "NotAvailable"))))
		g.Expect(live.Status.Conditions).To(ContainElement(And(
			HaveField("Type", guestAvail), HaveField("Reason", "Deploying"))))
	})

	t.Run("When the driver carries csi-operator's conditions, the guest's removal should take exactly those and leave every owner's apply alone", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		d := create(g, "smb.csi.k8s.io")
		cp, _ := e.applier(t, names.FieldOwnerControlPlane)
		guest, guestLog := e.applier(t, names.FieldOwnerGuest)
		// csi-operator's controllers apply their conditions each under its own field manager
		// (library-go's ApplyOperatorStatus, named <controller instance>-<controller>).
		for _, w := range []struct {
			manager string
			conds   [][3]string
		}{
			{"OpenStackCinderDriverNodeServiceController-CSIDriverNodeService", [][3]string{
				{"OpenStackCinderDriverNodeServiceControllerAvailable", "True", "AsExpected"},
				{"OpenStackCinderDriverNodeServiceControllerProgressing", "False", "AsExpected"},
			}},
			{"OpenStackCinderDriverNodeServiceController-reportDegraded", [][3]string{
				{"OpenStackCinderDriverNodeServiceControllerDegraded", "True", "SyncError"},
			}},
			{"OpenStackCinderCSIDriver-ManagementState", [][3]string{{"ManagementStateDegraded", "False", "AsExpected"}}},
		} {
			a, _ := e.applier(t, w.manager)
			_, err := a.ApplyStatus(ctx, driverStatus(d.Name, w.conds...))
			g.Expect(err).NotTo(HaveOccurred(), w.manager)
		}
		cpConds := driverStatus(d.Name, [3]string{cpAvailable, "True", "AsExpected"})
		guestConds := driverStatus(d.Name, [3]string{guestAvail, "True", "AsExpected"})
		for _, a := range []struct {
			a   *apply.Applier
			obj *unstructured.Unstructured
		}{{cp, cpConds}, {guest, guestConds}} {
			_, err := a.a.ApplyStatus(ctx, a.obj)
			g.Expect(err).NotTo(HaveOccurred())
		}
		waitCached(g, e, d)
		guestLog.take()
		before := get(g, e, d)
		cpFields, _ := appliedFields(g, before.ManagedFields, names.FieldOwnerControlPlane, "status")
		guestFields, _ := appliedFields(g, before.ManagedFields, names.FieldOwnerGuest, "status")

		cached := &operatorv1.ClusterCSIDriver{}
		g.Expect(e.cache.Get(ctx, client.ObjectKeyFromObject(d), cached)).To(Succeed())
		g.Expect(conditions.RemoveTypes(ctx, guest, cached, names.CSIOperatorConditions)).To(Succeed())
		m := mutating(guestLog.take())
		g.Expect(m).To(HaveLen(1), "mutating requests: %v", m)
		g.Expect(m[0]).To(And(HavePrefix(http.MethodPatch+" "), HaveSuffix("/status application/json-patch+json")))

		live := get(g, e, d)
		g.Expect(conditionTypes(live)).To(Equal([]string{cpAvailable, guestAvail}))
		// Each owner's apply still owns exactly what it sent; csi-operator's managers own nothing
		// and the patch left no entry of its own.
		for _, mf := range live.ManagedFields {
			g.Expect(mf.Manager).NotTo(HavePrefix("OpenStackCinderDriver"), "entry %s %s", mf.Manager, mf.Operation)
			g.Expect(mf.Manager).NotTo(HavePrefix("OpenStackCinderCSIDriver"), "entry %s %s", mf.Manager, mf.Operation)
			if mf.Subresource == "status" {
				g.Expect(mf.Operation).To(Equal(metav1.ManagedFieldsOperationApply), "entry %s", mf.Manager)
			}
		}
		got, ok := appliedFields(g, live.ManagedFields, names.FieldOwnerControlPlane, "status")
		g.Expect(ok).To(BeTrue())
		g.Expect(got).To(Equal(cpFields))
		got, ok = appliedFields(g, live.ManagedFields, names.FieldOwnerGuest, "status")
		g.Expect(ok).To(BeTrue())
		g.Expect(got).To(Equal(guestFields))

		// Nothing more to remove, nothing to re-apply: both repeat without a request.
		waitCached(g, e, d)
		g.Expect(e.cache.Get(ctx, client.ObjectKeyFromObject(d), cached)).To(Succeed())
		g.Expect(conditions.RemoveTypes(ctx, guest, cached, names.CSIOperatorConditions)).To(Succeed())
		res, err := guest.ApplyStatus(ctx, guestConds)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Unchanged))
		g.Expect(guestLog.take()).To(BeEmpty())
	})

	t.Run("When the object passed carries spec and metadata, it should write only the status", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		d := create(g, "manila.csi.openstack.org")
		a, log := e.applier(t, testOwner)

		obj := driverStatus(d.Name, [3]string{cpAvailable, "True", "AsExpected"})
		obj.Object["spec"] = map[string]any{"managementState": "Removed", "logLevel": "TraceAll"}
		obj.SetLabels(map[string]string{"example.com/label": "x"})
		res, err := a.ApplyStatus(ctx, obj)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Applied))
		expectOneApply(g, log.take(), "/clustercsidrivers/"+d.Name+"/status")

		live := get(g, e, d)
		g.Expect(live.Spec.ManagementState).To(Equal(operatorv1.Managed))
		g.Expect(live.Spec.LogLevel).To(Equal(operatorv1.Normal))
		g.Expect(live.Labels).To(BeEmpty())
		g.Expect(conditionTypes(live)).To(Equal([]string{cpAvailable}))
		owned, ok := appliedFields(g, live.ManagedFields, testOwner, "status")
		g.Expect(ok).To(BeTrue())
		g.Expect(owned).To(HaveLen(1))
		g.Expect(owned).To(HaveKey("f:status"))
		g.Expect(owned["f:status"]).To(HaveLen(1))
		g.Expect(owned["f:status"]).To(HaveKey("f:conditions"))

		waitCached(g, e, d)
		res, err = a.ApplyStatus(ctx, obj)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Unchanged))
		g.Expect(log.take()).To(BeEmpty())
	})
}

func TestApplier_Delete(t *testing.T) {
	t.Parallel()
	e := startEnv(t, "apply-delete")
	ctx := t.Context()

	t.Run("When the object exists, it should delete it once and then send nothing", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		a, log := e.applier(t, testOwner)
		cm := testConfigMap(e.namespace(t))
		_, err := a.Apply(ctx, cm)
		g.Expect(err).NotTo(HaveOccurred())
		waitCached(g, e, cm)
		log.take()

		res, err := a.Delete(ctx, cm)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Deleted))
		m := mutating(log.take())
		g.Expect(m).To(HaveLen(1))
		g.Expect(m[0]).To(HavePrefix("DELETE "))

		g.Eventually(func() error {
			return e.cache.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
		}).WithTimeout(waitTimeout).WithPolling(waitPoll).Should(MatchError(ContainSubstring("not found")))
		res, err = a.Delete(ctx, cm)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Unchanged))
		g.Expect(log.take()).To(BeEmpty())
	})

	t.Run("When the object never existed, it should send nothing", func(t *testing.T) {
		t.Parallel()
		g := NewWithT(t)
		a, log := e.applier(t, testOwner)
		res, err := a.Delete(ctx, testStorageClass("never-created"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(apply.Unchanged))
		g.Expect(mutating(log.take())).To(BeEmpty())
	})
}

// startCache starts a cache of cfg's API server with opts, stopped when the test ends, and
// returns it once synced.
func startCache(t *testing.T, cfg *rest.Config, opts cache.Options) cache.Cache {
	t.Helper()
	ca, err := cache.New(cfg, opts)
	if err != nil {
		t.Fatalf("Creating a cache: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ca.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Cache stopped with an error: %v", err)
		}
	})
	if !ca.WaitForCacheSync(ctx) {
		t.Fatal("The cache did not sync")
	}
	return ca
}

// owners returns the field managers of obj with their operation ("Apply", or "Update" for a
// create or an update), which tell how the applier wrote it.
func owners(obj client.Object) []string {
	var out []string
	for _, m := range obj.GetManagedFields() {
		out = append(out, m.Manager+" "+string(m.Operation))
	}
	return out
}
