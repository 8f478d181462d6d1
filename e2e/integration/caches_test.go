// Case 9, caches: each manager lists and watches only what it needs. A management cluster runs
// hundreds of these operators, one per hosted control plane, so the controlplane manager must
// never list or watch beyond its own HCP namespace there; on the guest both managers narrow
// their watches to their namespaces, names and labels.
package integration

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
)

// otherHCPNamespace is a second hosted control plane's namespace on the management cluster,
// holding the same kinds and names as the operator's own, managed label included: a cache that
// is not confined to its namespace would list them.
const otherHCPNamespace = "clusters-other"

// TestCaches is case 9: from the recorded requests, every list and watch each manager sends is
// confined to the namespaces, names and labels it needs.
func TestCaches(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
	others := seedOtherHostedControlPlane(t, e)
	op := e.RunOperatorForTest(t, env.OperatorOptions{LeaderElection: true})
	waitAvailable(t, e)

	mgmtHost, guestHost := hostOf(e.Mgmt.RESTConfig().Host), hostOf(e.Guest.RESTConfig().Host)
	NewWithT(t).Expect(mgmtHost).NotTo(Equal(guestHost))
	type sent struct {
		env.Request
		target apiTarget
	}
	// requests returns a manager's requests to one API server that name an API resource
	// (discovery and other non-resource paths left out).
	requests := func(manager, host string) []sent {
		var out []sent
		for _, r := range op.Requests[manager].Since(time.Time{}) {
			if tgt, ok := parseAPIPath(r.Path); ok && r.Host == host {
				out = append(out, sent{r, tgt})
			}
		}
		return out
	}
	listsAndWatches := func(rs []sent) []sent {
		var out []sent
		for _, r := range rs {
			if r.Method == http.MethodGet && r.target.Name == "" {
				out = append(out, r)
			}
		}
		return out
	}

	t.Run("When the operator runs next to another hosted control plane, the controlplane manager should list and watch only its own namespace on the management cluster", func(t *testing.T) {
		g := NewWithT(t)
		all := requests("controlplane", mgmtHost)
		watched := map[string]bool{}
		for _, r := range listsAndWatches(all) {
			g.Expect(r.target.Namespace).To(Equal(e.Namespace), "list or watch outside %s: %s", e.Namespace, describe(r.Request))
			watched[r.target.Resource] = true
		}
		// The checks above mean something only if the manager's informers are among them.
		for _, res := range []string{"secrets", "configmaps", "deployments", "serviceaccounts", "services", "poddisruptionbudgets", "hostedcontrolplanes"} {
			g.Expect(watched).To(HaveKey(res), "no list or watch of %s in %s", res, e.Namespace)
		}
		// Nor does it read or write anything outside its namespace there. Its
		// SelfSubjectAccessReviews, cluster-scoped by kind, ask what it may do to its own
		// monitoring objects in that namespace.
		for _, r := range all {
			if r.target.Resource == "selfsubjectaccessreviews" {
				continue
			}
			g.Expect(r.target.Namespace).To(Equal(e.Namespace), "request outside %s: %s", e.Namespace, describe(r.Request))
		}
	})

	t.Run("When another hosted control plane's namespace holds the same objects, no manager should request anything about it", func(t *testing.T) {
		g := NewWithT(t)
		for m, log := range op.Requests {
			for _, r := range log.Since(time.Time{}) {
				g.Expect(r.Path+"?"+r.Query).NotTo(ContainSubstring(otherHCPNamespace), "%s: %s", m, describe(r))
			}
			// A list or watch across all namespaces would return that namespace's objects
			// as well; on the management cluster the operator needs no cluster-scoped kind.
			for _, r := range listsAndWatches(requests(m, mgmtHost)) {
				g.Expect(r.target.Namespace).NotTo(BeEmpty(), "%s: list or watch across the management cluster: %s", m, describe(r.Request))
			}
		}
		// And none of its objects was written to or deleted: every write of the operator is
		// an apply under one of its field owners, which managed fields would show.
		ctx := context.Background()
		for _, obj := range others {
			key := client.ObjectKeyFromObject(obj)
			g.Expect(e.MgmtClient.Get(ctx, key, obj)).To(Succeed(), "%T %s", obj, key)
			for _, f := range obj.GetManagedFields() {
				g.Expect(f.Manager).NotTo(HavePrefix("cinder-csi-operator"), "%T %s written by the operator", obj, key)
			}
		}
	})

	t.Run("When the guest manager runs, its namespaced lists and watches should be confined to openshift-cluster-csi-drivers and its cluster-wide ones narrowed", func(t *testing.T) {
		g := NewWithT(t)
		// Cluster-scoped kinds the guest manager owns or must see, and how each is narrowed.
		managedBy := names.ManagedByLabel + "=" + names.ManagedByValue
		clusterScoped := map[string]struct{ label, field string }{
			"clusterroles":              {label: managedBy},
			"clusterrolebindings":       {label: managedBy},
			"csidrivers":                {label: managedBy},
			"clustercsidrivers":         {field: "metadata.name=" + names.ClusterCSIDriverName},
			"customresourcedefinitions": {field: "metadata.name=" + names.VolumeSnapshotClassCRD},
			// All StorageClasses: the operator must see a default class set by the user.
			"storageclasses": {},
			// The VolumeSnapshotClass CRD may not exist when the cache is built, which
			// rules out per-kind cache options (they need the kind's REST mapping).
			"volumesnapshotclasses": {},
			// Nodes, metadata only and trimmed to their zone labels in the cache, for the zone
			// warning while topology is on: a node's zone may be either of two labels, which no
			// one selector can ask for.
			"nodes": {},
			// Claims, trimmed to their class in the cache, watched only while a per-zone class
			// is to be retired.
			"persistentvolumeclaims": {},
		}
		watched := map[string]bool{}
		for _, r := range listsAndWatches(requests("guest", guestHost)) {
			watched[r.target.Resource] = true
			if r.target.Namespace != "" {
				g.Expect(r.target.Namespace).To(Equal(names.GuestNamespace), "namespaced list or watch elsewhere: %s", describe(r.Request))
				continue
			}
			narrowing, ok := clusterScoped[r.target.Resource]
			g.Expect(ok).To(BeTrue(), "cluster-wide list or watch of %s: %s", r.target.Resource, describe(r.Request))
			q := parseQuery(g, r.Query)
			g.Expect(q.Get("labelSelector")).To(Equal(narrowing.label), "label selector of %s", describe(r.Request))
			g.Expect(q.Get("fieldSelector")).To(Equal(narrowing.field), "field selector of %s", describe(r.Request))
		}
		for _, res := range []string{"daemonsets", "serviceaccounts", "configmaps", "clusterroles", "clusterrolebindings", "csidrivers", "storageclasses", "clustercsidrivers", "customresourcedefinitions"} {
			g.Expect(watched).To(HaveKey(res), "no list or watch of %s by the guest manager", res)
		}
		// The guest manager sends nothing to the management cluster: the operator's one lease
		// is held by the process (the split guest process holds a lease of its own there).
		g.Expect(requests("guest", mgmtHost)).To(BeEmpty(), "guest manager requests to the management cluster")
	})

	t.Run("When the operator elects its leader, it should only hold its lease and record its Events, in its own namespace on the management cluster", func(t *testing.T) {
		g := NewWithT(t)
		all := requests(leaderLog, mgmtHost)
		g.Expect(all).NotTo(BeEmpty())
		for _, r := range all {
			g.Expect(r.target.Resource).To(BeElementOf("leases", "events"), "leader election request: %s", describe(r.Request))
			g.Expect(r.target.Namespace).To(Equal(e.Namespace), "leader election request outside %s: %s", e.Namespace, describe(r.Request))
		}
		g.Expect(requests(leaderLog, guestHost)).To(BeEmpty(), "leader election requests to the guest")
	})

	t.Run("When the controlplane manager watches the guest, it should watch only the ClusterCSIDriver and its ConfigMaps, by name or namespace, and the attachments, CSINodes and PersistentVolumes", func(t *testing.T) {
		g := NewWithT(t)
		watched := map[string]bool{}
		for _, r := range listsAndWatches(requests("controlplane", guestHost)) {
			watched[r.target.Resource] = true
			q := parseQuery(g, r.Query)
			switch r.target.Resource {
			case "configmaps":
				byName := strings.HasPrefix(q.Get("fieldSelector"), "metadata.name=")
				inNamespace := slices.Contains([]string{names.OpenShiftConfigNamespace, names.GuestNamespace}, r.target.Namespace)
				g.Expect(byName || inNamespace).To(BeTrue(), "ConfigMap list or watch neither by name nor in %s or %s: %s",
					names.OpenShiftConfigNamespace, names.GuestNamespace, describe(r.Request))
			case "clustercsidrivers":
				g.Expect(q.Get("fieldSelector")).To(Equal("metadata.name="+names.ClusterCSIDriverName), "ClusterCSIDriver watch: %s", describe(r.Request))
			case "volumeattachments", "csinodes", "persistentvolumes":
				// The attachment monitor's: no selector can pick a driver's attachments or
				// volumes, or the nodes that run its plugin.
				g.Expect(q.Get("fieldSelector")+q.Get("labelSelector")).To(BeEmpty(), "%s", describe(r.Request))
			default:
				g.Expect(r.target.Resource).To(BeEmpty(), "unexpected list or watch of the guest: %s", describe(r.Request))
			}
		}
		for _, res := range []string{"configmaps", "clustercsidrivers", "volumeattachments", "csinodes", "persistentvolumes"} {
			g.Expect(watched).To(HaveKey(res))
		}
	})

	t.Run("When either manager watches Secrets, it should do so only in the hosted control plane's namespace", func(t *testing.T) {
		g := NewWithT(t)
		seen := 0
		for _, m := range []string{"controlplane", "guest"} {
			for _, host := range []string{mgmtHost, guestHost} {
				for _, r := range requests(m, host) {
					if r.target.Resource != "secrets" {
						continue
					}
					seen++
					g.Expect(r.Host).To(Equal(mgmtHost), "%s: Secret request to the guest: %s", m, describe(r.Request))
					g.Expect(r.target.Namespace).To(Equal(e.Namespace), "%s: Secret request outside %s: %s", m, e.Namespace, describe(r.Request))
				}
			}
		}
		// The controlplane watches its credentials: the check above has something to check.
		g.Expect(seen).To(BeNumerically(">", 0))
	})
}

// seedOtherHostedControlPlane creates, in otherHCPNamespace, what a second hosted control plane
// has: its HostedControlPlane, credentials, CA and pull secret, and the objects a second
// operator would own there, with the same names and the managed-by label. It returns them.
func seedOtherHostedControlPlane(t *testing.T, e *env.Env) []client.Object {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := otherHCPNamespace
	managed := map[string]string{names.ManagedByLabel: names.ManagedByValue, "app": names.ControllerDeployment}

	hcp := &hyperv1.HostedControlPlane{}
	hcps := &hyperv1.HostedControlPlaneList{}
	g.Expect(e.MgmtClient.List(ctx, hcps, client.InNamespace(e.Namespace))).To(Succeed())
	g.Expect(hcps.Items).To(HaveLen(1))
	hcp.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "other"}
	hcp.Spec = hcps.Items[0].Spec
	hcp.Spec.InfraID = "other-a1b2c"
	creds := &corev1.Secret{}
	g.Expect(e.MgmtClient.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: names.CredentialsSecret}, creds)).To(Succeed())

	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{names.HostedControlPlaneLabel: "true"}}},
		hcp,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.CredentialsSecret}, Data: creds.Data},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.PullSecret}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.HyperShiftCloudConfigMap}, Data: map[string]string{names.KeyCABundle: "not a CA"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.CloudConfConfigMap, Labels: managed},
			Data: map[string]string{nodeconf.KeyCloudConf: "[Global]\n", nodeconf.KeyEnableTopology: "false"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ControllerServiceAccount, Labels: managed}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ControllerMetricsService, Labels: managed},
			Spec: corev1.ServiceSpec{Selector: managed, Ports: []corev1.ServicePort{{Name: "metrics", Port: 9202}}}},
		&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ControllerPDB, Labels: managed},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: managed}}},
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ControllerDeployment, Labels: managed},
			Spec: appsv1.DeploymentSpec{
				// No pods: the objects only have to exist, not to churn.
				Replicas: ptr.To(int32(0)),
				Selector: &metav1.LabelSelector{MatchLabels: managed},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: managed},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "csi-driver", Image: "cinder-csi-plugin:other"}}},
				},
			},
		},
	}
	for _, o := range objs {
		g.Expect(e.MgmtClient.Create(ctx, o)).To(Succeed(), "creating %T %s", o, client.ObjectKeyFromObject(o))
	}
	return objs
}

// apiTarget is what an API request path names.
type apiTarget struct {
	Group, Version, Namespace, Resource, Name, Subresource string
}

// parseAPIPath parses a resource path (/api/v1/..., /apis/<group>/<version>/...). It returns
// false for discovery and other non-resource paths.
func parseAPIPath(path string) (apiTarget, bool) {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	var t apiTarget
	switch {
	case len(seg) >= 3 && seg[0] == "api":
		t.Version, seg = seg[1], seg[2:]
	case len(seg) >= 4 && seg[0] == "apis":
		t.Group, t.Version, seg = seg[1], seg[2], seg[3:]
	default:
		return t, false
	}
	// namespaces/<ns>/<resource>... is a namespaced resource; namespaces[/<ns>] alone is the
	// Namespace kind itself.
	if len(seg) >= 3 && seg[0] == "namespaces" {
		t.Namespace, seg = seg[1], seg[2:]
	}
	t.Resource = seg[0]
	if len(seg) > 1 {
		t.Name = seg[1]
	}
	if len(seg) > 2 {
		t.Subresource = strings.Join(seg[2:], "/")
	}
	return t, true
}

func parseQuery(g Gomega, raw string) url.Values {
	q, err := url.ParseQuery(raw)
	g.Expect(err).NotTo(HaveOccurred())
	return q
}
