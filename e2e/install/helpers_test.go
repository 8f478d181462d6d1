package install_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	operatorv1 "github.com/openshift/api/operator/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/install"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/clusters"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/conditions"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
)

const (
	// Generous: two shared cores run two or three local clusters at once.
	installTimeout = 4 * time.Minute
	poll           = 500 * time.Millisecond
)

// Install manifest files, relative to manifests/install.
const (
	hyperShiftManagementFile = "hypershift/management.yaml"
	hyperShiftGuestFile      = "hypershift/guest.yaml"
	standaloneFile           = "standalone/operator.yaml"
)

// installDir is manifests/install seen from this package's directory, where go test runs.
var installDir = filepath.Join("..", "..", "manifests", "install")

// doc is one object of an install manifest, as sent (U) and as decoded strictly (Obj).
type doc struct {
	File string
	U    *unstructured.Unstructured
	Obj  runtime.Object
}

func (d doc) String() string {
	return fmt.Sprintf("%s %s %s", d.File, d.U.GetKind(), client.ObjectKeyFromObject(d.U))
}

func newScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s, err := clusters.NewScheme()
	if err != nil {
		t.Fatalf("building the scheme: %v", err)
	}
	return s
}

// readManifest reads one install manifest, applying replace to its text first (the installer's
// placeholder substitution), and decodes every document strictly: an unknown or duplicated field
// fails the test, so a typo cannot silently drop a field.
func readManifest(t testing.TB, rel string, replace *strings.Replacer) []doc {
	t.Helper()
	read, err := install.Read(filepath.Join(installDir, filepath.FromSlash(rel)), replace)
	if err != nil {
		t.Fatal(err)
	}
	decoder := serializer.NewCodecFactory(newScheme(t), serializer.EnableStrict).UniversalDeserializer()
	var docs []doc
	for i, d := range read {
		obj, _, err := decoder.Decode(d.Raw, nil, nil)
		if err != nil {
			t.Fatalf("decoding object %d of %s: %v", i+1, rel, err)
		}
		docs = append(docs, doc{File: rel, U: d.Object, Obj: obj})
	}
	if len(docs) == 0 {
		t.Fatalf("%s holds no object", rel)
	}
	return docs
}

// installFiles returns every YAML file under manifests/install, relative to it.
func installFiles(t testing.TB) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(installDir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			rel, err := filepath.Rel(installDir, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("listing %s: %v", installDir, err)
	}
	return files
}

// objectsOf returns the typed objects of type T in docs.
func objectsOf[T runtime.Object](docs []doc) []T {
	var out []T
	for _, d := range docs {
		if o, ok := d.Obj.(T); ok {
			out = append(out, o)
		}
	}
	return out
}

// createAll creates every object of docs with an admin client, the way an installer would. Only
// a Namespace may already exist (the local environment seeds the namespaces it needs).
func createAll(t *testing.T, c client.Client, docs []doc) {
	t.Helper()
	g := NewWithT(t)
	for _, d := range docs {
		err := c.Create(context.Background(), d.U.DeepCopy())
		if apierrors.IsAlreadyExists(err) && d.U.GetKind() == "Namespace" {
			continue
		}
		g.Expect(err).NotTo(HaveOccurred(), "creating %s", d)
	}
}

// operatorSA names the operator's ServiceAccount in the install set of an install manifest file
// (relative to manifests/install): standalone, csi-operator's name; on HyperShift, the
// operator's own, on both clusters.
func operatorSA(file string) string {
	if strings.HasPrefix(file, "hypershift/") {
		return env.OperatorName(env.ModeHyperShift)
	}
	return env.OperatorName(env.ModeStandalone)
}

// serviceAccount returns the identity of ServiceAccount name in namespace ns, as the API server
// authenticates its token.
func serviceAccount(ns, name string) rest.ImpersonationConfig {
	return rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
}

// impersonating returns a client that acts as id on the cluster of cfg.
func impersonating(t *testing.T, cfg *rest.Config, id rest.ImpersonationConfig) client.Client {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = id
	c, err := client.New(cfg, client.Options{Scheme: newScheme(t)})
	if err != nil {
		t.Fatalf("creating an impersonating client: %v", err)
	}
	return c
}

// apiLog records, for every manager and cluster, how many requests the operator sent, which of
// them were denied (401 or 403) and which did not carry the expected impersonation. Denials
// must fail the test: controller-runtime retries a forbidden watch forever and only logs it.
type apiLog struct {
	mu       sync.Mutex
	requests map[string]int
	denied   []string
	wrongID  []string
}

// wrapConfig is an env.OperatorOptions.WrapConfig that makes each manager act, on each cluster,
// as the identity ids gives for that cluster, and records every response.
func (l *apiLog) wrapConfig(t *testing.T, ids map[string]rest.ImpersonationConfig) func(manager, cluster string, cfg *rest.Config) *rest.Config {
	return func(manager, cluster string, cfg *rest.Config) *rest.Config {
		id, ok := ids[cluster]
		if !ok {
			// Never run a manager with the admin identity by accident.
			t.Errorf("no identity for the %s manager on cluster %s", manager, cluster)
			id = rest.ImpersonationConfig{UserName: "system:anonymous"}
		}
		cfg.Impersonate = id
		key := manager + "@" + cluster
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				resp, err := rt.RoundTrip(req)
				l.record(key, id.UserName, req, resp)
				return resp, err
			})
		})
		return cfg
	}
}

func (l *apiLog) record(key, user string, req *http.Request, resp *http.Response) {
	what := key + " " + req.Method + " " + req.URL.Path
	if req.URL.RawQuery != "" {
		what += "?" + req.URL.RawQuery
	}
	var denial string
	if resp != nil && (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusUnauthorized) {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		var st metav1.Status
		msg := string(body)
		if json.Unmarshal(body, &st) == nil && st.Message != "" {
			msg = st.Message
		}
		denial = fmt.Sprintf("%s: %d %s", what, resp.StatusCode, msg)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.requests == nil {
		l.requests = map[string]int{}
	}
	l.requests[key]++
	if denial != "" {
		l.denied = append(l.denied, denial)
	}
	if got := req.Header.Get("Impersonate-User"); got != user {
		l.wrongID = append(l.wrongID, fmt.Sprintf("%s: as %q", what, got))
	}
}

// expectAllowed checks that every request so far was allowed, was sent as the intended
// ServiceAccount, and that each of keys ("manager@cluster") sent requests at all.
func (l *apiLog) expectAllowed(t *testing.T, keys ...string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	g := NewWithT(t)
	g.Expect(l.denied).To(BeEmpty(), "requests of the operator the install RBAC denied:\n%s", distinct(l.denied))
	g.Expect(l.wrongID).To(BeEmpty(), "requests of the operator not sent as its ServiceAccount:\n%s", distinct(l.wrongID))
	for _, k := range keys {
		g.Expect(l.requests[k]).To(BeNumerically(">", 0), "requests of %s", k)
	}
}

// distinct lists each of lines once, sorted, one per line: a denied request is usually retried
// many times.
func distinct(lines []string) string {
	out := slices.Clone(lines)
	slices.Sort(out)
	return strings.Join(slices.Compact(out), "\n")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// access is one permission a rule grants.
type access struct {
	Namespace, Verb, Group, Resource, Subresource, Name string
}

func (a access) String() string {
	s := a.Verb + " " + a.Resource
	if a.Subresource != "" {
		s += "/" + a.Subresource
	}
	if a.Group != "" {
		s += "." + a.Group
	}
	if a.Name != "" {
		s += " " + a.Name
	}
	if a.Namespace != "" {
		s += " in " + a.Namespace
	}
	return s
}

// grantedAccess returns every permission docs grant to id through their bindings, one per
// combination of namespace, verb, group, resource and name. Every binding must bind only the
// operator's ServiceAccount to a role of the same set.
func grantedAccess(t *testing.T, docs []doc, id rest.ImpersonationConfig) []access {
	t.Helper()
	g := NewWithT(t)
	roles := map[string][]rbacv1.PolicyRule{}
	for _, r := range objectsOf[*rbacv1.Role](docs) {
		roles["Role/"+r.Namespace+"/"+r.Name] = r.Rules
	}
	for _, r := range objectsOf[*rbacv1.ClusterRole](docs) {
		roles["ClusterRole//"+r.Name] = r.Rules
	}
	type binding struct {
		namespace string
		subjects  []rbacv1.Subject
		ref       rbacv1.RoleRef
	}
	var bindings []binding
	for _, b := range objectsOf[*rbacv1.RoleBinding](docs) {
		bindings = append(bindings, binding{b.Namespace, b.Subjects, b.RoleRef})
	}
	for _, b := range objectsOf[*rbacv1.ClusterRoleBinding](docs) {
		bindings = append(bindings, binding{"", b.Subjects, b.RoleRef})
	}
	g.Expect(bindings).NotTo(BeEmpty())
	var out []access
	for _, b := range bindings {
		g.Expect(b.subjects).To(HaveLen(1))
		s := b.subjects[0]
		g.Expect("system:serviceaccount:" + s.Namespace + ":" + s.Name).To(Equal(id.UserName))
		key := b.ref.Kind + "/" + b.namespace + "/" + b.ref.Name
		if b.ref.Kind == "ClusterRole" {
			key = "ClusterRole//" + b.ref.Name
		}
		rules, ok := roles[key]
		g.Expect(ok).To(BeTrue(), "binding to %s, which the set does not define", key)
		for _, r := range rules {
			resourceNames := r.ResourceNames
			if len(resourceNames) == 0 {
				resourceNames = []string{""}
			}
			for _, verb := range r.Verbs {
				for _, group := range r.APIGroups {
					for _, res := range r.Resources {
						resource, sub, _ := strings.Cut(res, "/")
						for _, name := range resourceNames {
							out = append(out, access{b.namespace, verb, group, resource, sub, name})
						}
					}
				}
			}
		}
	}
	return out
}

// waitRulesInEffect waits until the API server's authorizer allows id every permission docs
// grant it: RBAC objects take effect through the API server's informers, and a manager started
// before that would see (and the test would count) forbidden requests.
func waitRulesInEffect(t *testing.T, c client.Client, docs []doc, id rest.ImpersonationConfig) {
	t.Helper()
	want := grantedAccess(t, docs, id)
	NewWithT(t).Eventually(func(g Gomega) {
		var denied []string
		for _, a := range want {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   id.UserName,
				Groups: id.Groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: a.Namespace, Verb: a.Verb, Group: a.Group,
					Resource: a.Resource, Subresource: a.Subresource, Name: a.Name,
				},
			}}
			g.Expect(c.Create(context.Background(), sar)).To(Succeed())
			if !sar.Status.Allowed {
				denied = append(denied, a.String())
			}
		}
		g.Expect(denied).To(BeEmpty(), "permissions not (yet) in effect")
	}).WithTimeout(time.Minute).WithPolling(poll).Should(Succeed())
}

// driver reads the ClusterCSIDriver.
func driver(g Gomega, e *env.Env) *operatorv1.ClusterCSIDriver {
	d := &operatorv1.ClusterCSIDriver{}
	g.Expect(e.GuestClient.Get(context.Background(), client.ObjectKey{Name: names.ClusterCSIDriverName}, d)).To(Succeed())
	return d
}

// availability returns the controller's and the node plugin's Available conditions; g fails
// while one is missing.
func availability(g Gomega, conds []operatorv1.OperatorCondition) []*operatorv1.OperatorCondition {
	var out []*operatorv1.OperatorCondition
	for _, ct := range []string{names.ConditionControllerAvailable, names.ConditionNodeAvailable} {
		found := conditions.Find(conds, ct)
		g.Expect(found).NotTo(BeNil(), ct)
		out = append(out, found)
	}
	return out
}

// waitAvailable waits until the controller and the node plugin are Available and rolled out,
// as installed (not as Removed), and nothing is Degraded.
func waitAvailable(t *testing.T, e *env.Env) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		conds := driver(g, e).Status.Conditions
		for _, c := range availability(g, conds) {
			g.Expect(c.Status).To(Equal(operatorv1.ConditionTrue), c.Type)
			g.Expect(c.Reason).To(Equal(names.ReasonAsExpected), c.Type)
		}
		for _, c := range conds {
			if strings.HasSuffix(c.Type, "Progressing") || strings.HasSuffix(c.Type, "Degraded") {
				g.Expect(c.Status).NotTo(Equal(operatorv1.ConditionTrue), "%s: %s", c.Type, c.Message)
			}
		}
	}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
}

// setManagementState sets the ClusterCSIDriver's spec.managementState as a user would.
func setManagementState(t *testing.T, e *env.Env, state operatorv1.ManagementState) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"managementState":%q}}`, state))
	d := &operatorv1.ClusterCSIDriver{ObjectMeta: metav1.ObjectMeta{Name: names.ClusterCSIDriverName}}
	NewWithT(t).Expect(e.GuestClient.Patch(context.Background(), d, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
}

// waitRemoved waits until managementState Removed is reported and each of objs (named by name
// and namespace) is gone from c.
func waitRemoved(t *testing.T, e *env.Env, c client.Client, objs []client.Object) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		for _, c := range availability(g, driver(g, e).Status.Conditions) {
			g.Expect(c.Reason).To(Equal(names.ReasonRemoved), c.Type)
		}
		var left []string
		for _, o := range objs {
			fresh := o.DeepCopyObject().(client.Object)
			err := c.Get(context.Background(), client.ObjectKeyFromObject(o), fresh)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				g.Expect(err).NotTo(HaveOccurred())
			case fresh.GetDeletionTimestamp() == nil:
				left = append(left, fmt.Sprintf("%T %s", o, client.ObjectKeyFromObject(o)))
			}
		}
		g.Expect(left).To(BeEmpty(), "objects still there")
	}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
}

// expectExist checks that each of objs (named by name and namespace) exists in c.
func expectExist(t *testing.T, c client.Client, objs []client.Object) {
	t.Helper()
	g := NewWithT(t)
	for _, o := range objs {
		fresh := o.DeepCopyObject().(client.Object)
		g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(o), fresh)).To(Succeed(), "%T %s", o, client.ObjectKeyFromObject(o))
	}
}

// exerciseEvents turns the configuration bad (an invalid enable_topology override) and good
// again, and waits for the operator's Degraded and Recovered Events about the ClusterCSIDriver:
// the one path that creates Events in the cluster where the ClusterCSIDriver lives.
func exerciseEvents(t *testing.T, e *env.Env) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	cm := userConfig(map[string]string{names.KeyEnableTopology: "sometimes"})
	g.Expect(e.GuestClient.Create(ctx, cm)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.ConditionTrue(driver(g, e).Status.Conditions, names.ConditionConfigDegraded)).To(BeTrue())
	}).WithTimeout(installTimeout).WithPolling(poll).Should(Succeed())
	g.Expect(e.GuestClient.Delete(ctx, cm)).To(Succeed())
	waitAvailable(t, e)
	g.Eventually(func(g Gomega) []string {
		return driverEventReasons(g, e)
	}).WithTimeout(time.Minute).WithPolling(poll).Should(ContainElements(names.ReasonInvalidConfig, "Recovered"))
}

func userConfig(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: names.OpenShiftConfigNamespace, Name: names.UserConfigMap},
		Data:       data,
	}
}

// driverEventReasons returns the reasons of the Events regarding the ClusterCSIDriver, from every
// namespace.
func driverEventReasons(g Gomega, e *env.Env) []string {
	l := &eventsv1.EventList{}
	g.Expect(e.GuestClient.List(context.Background(), l)).To(Succeed())
	var reasons []string
	for _, ev := range l.Items {
		if ev.Regarding.Kind == "ClusterCSIDriver" && ev.Regarding.Name == names.ClusterCSIDriverName {
			reasons = append(reasons, ev.Reason)
		}
	}
	slices.Sort(reasons)
	return slices.Compact(reasons)
}
