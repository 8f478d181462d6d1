// Case 8, security: the OpenStack credentials stay on the management side. After an install,
// nothing in the guest that the operator wrote, and no Pod, ConfigMap, Secret or pod template
// there, holds a credential of the seeded clouds.yaml or a trace of one (the clouds.yaml file,
// the clouds-file setting, an application credential secret); the node plugin mounts no Secret
// and its cloud-conf has no [Global] section.
package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/env"
	"github.com/cinder-csi-operator/cinder-csi-operator/e2e/fakeopenstack"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/nodeconf"
)

// credentialMarkers betray credentials even when their values are unknown: the clouds.yaml file
// (a key or a mount of it), cloud.conf's pointer to it, an application credential, the
// credentials Secret's name (something that mounts or copies it).
var credentialMarkers = []string{names.KeyCloudsYAML, "clouds-file", "application_credential_secret", names.CredentialsSecret}

// globalSection matches a [Global] section header as gcfg reads it (any case, inner blanks).
var globalSection = regexp.MustCompile(`(?im)^\s*\[\s*global\s*\]`)

func TestNoCredentialsInGuest(t *testing.T) {
	t.Parallel()
	e := env.StartForTest(t, env.Options{Mode: env.ModeHyperShift})
	e.RunOperatorForTest(t, env.OperatorOptions{})
	waitAvailable(t, e)
	ctx := context.Background()

	secrets := seededSecretValues(t, e)
	forbidden := append(append([]string(nil), secrets...), credentialMarkers...)

	t.Run("When the driver is installed, the operator should have written no Secret into the guest", func(t *testing.T) {
		g := NewWithT(t)
		l := &corev1.SecretList{}
		g.Expect(e.GuestClient.List(ctx, l)).To(Succeed())
		for _, s := range l.Items {
			g.Expect(writtenByOperator(&s)).To(BeFalse(), "Secret %s/%s", s.Namespace, s.Name)
		}
	})

	t.Run("When the driver is installed, nothing the operator created in the guest should hold credentials", func(t *testing.T) {
		g := NewWithT(t)
		objs := labelledObjects(t, e)
		kinds := map[string]bool{}
		for _, o := range objs {
			kinds[o.GetKind()] = true
			expectClean(g, fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName()), objectText(g, o), forbidden)
		}
		// The scan found what the operator is known to create, so it looked in the right place.
		for _, k := range []string{"DaemonSet", "ConfigMap", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "CSIDriver", "StorageClass"} {
			g.Expect(kinds).To(HaveKey(k), "no %s labelled %s=%s found", k, names.ManagedByLabel, names.ManagedByValue)
		}
	})

	t.Run("When the driver is installed, no Pod, ConfigMap or Secret in the guest should hold credentials", func(t *testing.T) {
		g := NewWithT(t)
		pods := &corev1.PodList{}
		g.Expect(e.GuestClient.List(ctx, pods)).To(Succeed())
		nodePods := 0
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Labels["app"] == names.NodeDaemonSet {
				nodePods++
			}
			expectClean(g, "Pod "+p.Namespace+"/"+p.Name, objectText(g, p), forbidden)
		}
		// Every node runs the node plugin; kwok plays the kubelet, so these pods exist.
		g.Expect(nodePods).To(BeNumerically("==", nodeDaemonSet(g, e).Status.DesiredNumberScheduled))
		g.Expect(nodePods).To(BeNumerically(">", 0))

		cms := &corev1.ConfigMapList{}
		g.Expect(e.GuestClient.List(ctx, cms)).To(Succeed())
		sawCloudConf := false
		for i := range cms.Items {
			cm := &cms.Items[i]
			sawCloudConf = sawCloudConf || (cm.Namespace == names.GuestNamespace && cm.Name == names.CloudConfConfigMap)
			expectClean(g, "ConfigMap "+cm.Namespace+"/"+cm.Name, objectText(g, cm), forbidden)
		}
		g.Expect(sawCloudConf).To(BeTrue(), "the guest cloud-conf was not among the ConfigMaps")

		l := &corev1.SecretList{}
		g.Expect(e.GuestClient.List(ctx, l)).To(Succeed())
		for i := range l.Items {
			s := &l.Items[i]
			// In real HyperShift the hosted-cluster-config-operator puts a copy of the
			// credentials here for other components; if the seed ever does too, that copy is
			// not the operator's doing. It must still not be the operator's.
			if s.Namespace == names.GuestNamespace && s.Name == names.CredentialsSecret && !writtenByOperator(s) {
				continue
			}
			expectClean(g, "Secret "+s.Namespace+"/"+s.Name, objectText(g, s), forbidden)
		}
	})

	t.Run("When the driver is installed, no pod template of a guest workload should hold credentials", func(t *testing.T) {
		g := NewWithT(t)
		// Every kind that holds a pod template at spec.template.
		templates := map[string]corev1.PodTemplateSpec{}
		for _, gvk := range []schema.GroupVersionKind{
			appsv1.SchemeGroupVersion.WithKind("DaemonSet"),
			appsv1.SchemeGroupVersion.WithKind("Deployment"),
			appsv1.SchemeGroupVersion.WithKind("ReplicaSet"),
			appsv1.SchemeGroupVersion.WithKind("StatefulSet"),
			batchv1.SchemeGroupVersion.WithKind("Job"),
		} {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			g.Expect(e.GuestClient.List(ctx, list)).To(Succeed())
			for _, o := range list.Items {
				raw, _, err := unstructured.NestedMap(o.Object, "spec", "template")
				g.Expect(err).NotTo(HaveOccurred())
				var tpl corev1.PodTemplateSpec
				g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &tpl)).To(Succeed())
				templates[gvk.Kind+" "+o.GetNamespace()+"/"+o.GetName()] = tpl
			}
		}
		g.Expect(templates).To(HaveKey("DaemonSet " + names.GuestNamespace + "/" + names.NodeDaemonSet))
		for what, tpl := range templates {
			expectClean(g, what, objectText(g, &tpl), forbidden)
		}
	})

	t.Run("When the driver is installed, the node plugin should mount no Secret at all", func(t *testing.T) {
		g := NewWithT(t)
		ds := nodeDaemonSet(g, e)
		g.Expect(ds.Spec.Template.Spec.Volumes).NotTo(BeEmpty(), "the node plugin should at least mount cloud-conf")
		expectNoSecretRefs(g, "node DaemonSet", &ds.Spec.Template.Spec)

		pods := &corev1.PodList{}
		g.Expect(e.GuestClient.List(ctx, pods, client.InNamespace(names.GuestNamespace), client.MatchingLabels{"app": names.NodeDaemonSet})).To(Succeed())
		g.Expect(pods.Items).NotTo(BeEmpty())
		// The live pods too: admission adds volumes of its own (the service account token),
		// which must not bring a Secret either.
		for i := range pods.Items {
			expectNoSecretRefs(g, "Pod "+pods.Items[i].Name, &pods.Items[i].Spec)
		}
	})

	t.Run("When the driver is installed, the guest cloud-conf should have no [Global] section", func(t *testing.T) {
		g := NewWithT(t)
		node := configMap(g, e.GuestClient, names.GuestNamespace, names.CloudConfConfigMap)
		g.Expect(node.BinaryData).To(BeEmpty())
		for k := range node.Data {
			// What the node plugin reads, and the zones the controlplane manager records for
			// the guest manager (zone names only).
			g.Expect(k).To(BeElementOf(nodeconf.KeyCloudConf, nodeconf.KeyEnableTopology, nodeconf.KeyVolumeZones, nodeconf.KeyComputeZones), "guest cloud-conf key")
		}
		g.Expect(node.Data).To(HaveKey(nodeconf.KeyCloudConf))
		g.Expect(node.Data[nodeconf.KeyCloudConf]).NotTo(MatchRegexp(globalSection.String()))
		for _, key := range []string{"use-clouds", "clouds-file", "ca-file", "cloud ="} {
			g.Expect(node.Data[nodeconf.KeyCloudConf]).NotTo(ContainSubstring(key))
		}

		// The controller's copy on the management side does point at clouds.yaml: the
		// checks above would see a leak of it into the guest.
		ctrlConf := configMap(g, e.MgmtClient, e.Namespace, names.CloudConfConfigMap).Data[nodeconf.KeyCloudConf]
		g.Expect(ctrlConf).To(MatchRegexp(globalSection.String()))
		g.Expect(ctrlConf).To(ContainSubstring("clouds-file"))
		g.Expect(ctrlConf).To(ContainSubstring(names.KeyCloudsYAML))
	})
}

// seededSecretValues returns the secret values of the seeded clouds.yaml: every password,
// application credential secret and token of every cloud in it.
func seededSecretValues(t *testing.T, e *env.Env) []string {
	t.Helper()
	g := NewWithT(t)
	s := &corev1.Secret{}
	g.Expect(e.MgmtClient.Get(context.Background(), client.ObjectKey{Namespace: e.Namespace, Name: names.CredentialsSecret}, s)).To(Succeed())
	var doc struct {
		Clouds map[string]struct {
			Auth map[string]any `json:"auth"`
		} `json:"clouds"`
	}
	g.Expect(yaml.Unmarshal(s.Data[names.KeyCloudsYAML], &doc)).To(Succeed())
	var out []string
	for _, c := range doc.Clouds {
		for _, k := range []string{"password", "application_credential_secret", "token"} {
			if v, ok := c.Auth[k].(string); ok && v != "" {
				out = append(out, v)
			}
		}
	}
	// The scan looks for what is really there.
	g.Expect(out).To(ContainElement(fakeopenstack.DefaultPassword))
	return out
}

// labelledObjects returns every object of every listable kind in the guest that carries the
// operator's managed-by label, whatever its kind: a new kind the operator starts to create is
// scanned without this test knowing of it.
func labelledObjects(t *testing.T, e *env.Env) []unstructured.Unstructured {
	t.Helper()
	g := NewWithT(t)
	dc, err := discovery.NewDiscoveryClientForConfig(e.GuestConfig())
	g.Expect(err).NotTo(HaveOccurred())
	dyn, err := dynamic.NewForConfig(e.GuestConfig())
	g.Expect(err).NotTo(HaveOccurred())
	lists, err := dc.ServerPreferredResources()
	g.Expect(err).NotTo(HaveOccurred())
	selector := names.ManagedByLabel + "=" + names.ManagedByValue
	var out []unstructured.Unstructured
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		g.Expect(err).NotTo(HaveOccurred())
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !hasVerb(r, "list") {
				continue
			}
			items, err := dyn.Resource(gv.WithResource(r.Name)).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
			g.Expect(err).NotTo(HaveOccurred(), "listing %s", r.Name)
			out = append(out, items.Items...)
		}
	}
	return out
}

func hasVerb(r metav1.APIResource, verb string) bool {
	for _, v := range r.Verbs {
		if v == verb {
			return true
		}
	}
	return false
}

// objectText is what a scan searches: the object as JSON (metadata, annotations, data, env,
// args, everything), plus the decoded bytes of Secret data and ConfigMap binaryData, which JSON
// shows only in base64.
func objectText(g Gomega, obj any) string {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		switch u.GetKind() {
		case "Secret":
			s := &corev1.Secret{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s)).To(Succeed())
			obj = s
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cm)).To(Succeed())
			obj = cm
		}
	}
	b, err := json.Marshal(obj)
	g.Expect(err).NotTo(HaveOccurred())
	text := []string{string(b)}
	switch o := obj.(type) {
	case *corev1.Secret:
		for _, v := range o.Data {
			text = append(text, string(v))
		}
	case *corev1.ConfigMap:
		for _, v := range o.BinaryData {
			text = append(text, string(v))
		}
	}
	return strings.Join(text, "\n")
}

// expectClean checks that text contains none of the forbidden strings.
func expectClean(g Gomega, what, text string, forbidden []string) {
	for _, f := range forbidden {
		g.Expect(text).NotTo(ContainSubstring(f), "%s holds %q", what, f)
	}
}

// expectNoSecretRefs checks that a pod spec takes nothing from a Secret: no Secret volume, no
// projected Secret, no Secret in env or envFrom of any container.
func expectNoSecretRefs(g Gomega, what string, pod *corev1.PodSpec) {
	for _, v := range pod.Volumes {
		g.Expect(v.Secret).To(BeNil(), "%s volume %s", what, v.Name)
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				g.Expect(src.Secret).To(BeNil(), "%s projected volume %s", what, v.Name)
			}
		}
	}
	containers := append(append([]corev1.Container(nil), pod.InitContainers...), pod.Containers...)
	for _, c := range containers {
		for _, ef := range c.EnvFrom {
			g.Expect(ef.SecretRef).To(BeNil(), "%s container %s envFrom", what, c.Name)
		}
		for _, ev := range c.Env {
			if ev.ValueFrom != nil {
				g.Expect(ev.ValueFrom.SecretKeyRef).To(BeNil(), "%s container %s env %s", what, c.Name, ev.Name)
			}
		}
	}
}

// writtenByOperator reports whether the operator labelled the object or wrote any of its
// fields: every write of the operator, apply or not, is recorded under a field manager that
// starts with cinder-csi-operator.
func writtenByOperator(obj metav1.Object) bool {
	if obj.GetLabels()[names.ManagedByLabel] == names.ManagedByValue {
		return true
	}
	for _, mf := range obj.GetManagedFields() {
		if strings.HasPrefix(mf.Manager, "cinder-csi-operator") {
			return true
		}
	}
	return false
}
