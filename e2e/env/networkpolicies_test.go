package env

import (
	"net"
	"testing"

	. "github.com/onsi/gomega"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil/policylabels"
)

// The policies as the platform's sources write them, transcribed as YAML: the facts the typed
// objects must reproduce field for field.
const (
	// openshift/cluster-storage-operator manifests/09_network-policy-*.yaml (and the proposed
	// 09_network-policy-deny-all.yaml), spec only.
	storageFacts = `
default-deny:
  podSelector: {}
  policyTypes: [Ingress, Egress]
allow-all-egress:
  podSelector: {matchLabels: {openshift.storage.network-policy.all-egress: allow}}
  egress: [{ports: [{protocol: TCP, port: 1, endPort: 65535}]}]
  policyTypes: [Egress]
allow-egress-to-api-server:
  podSelector: {matchLabels: {openshift.storage.network-policy.api-server: allow}}
  egress: [{ports: [{protocol: TCP, port: 6443}]}]
  policyTypes: [Egress]
allow-ingress-to-metrics-range:
  podSelector: {matchLabels: {openshift.storage.network-policy.metrics-range: allow}}
  ingress: [{ports: [{protocol: TCP, port: 9201, endPort: 9223}]}]
  policyTypes: [Ingress]
allow-ingress-to-operator-metrics-range:
  podSelector: {matchLabels: {openshift.storage.network-policy.operator-metrics-range: allow}}
  ingress: [{ports: [{protocol: TCP, port: 8443, endPort: 8445}]}]
  policyTypes: [Ingress]
allow-to-dns:
  podSelector: {matchLabels: {openshift.storage.network-policy.dns: allow}}
  egress:
  - to:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: openshift-dns}}
      podSelector: {matchLabels: {dns.operator.openshift.io/daemonset-dns: default}}
    ports: [{protocol: TCP, port: 5353}, {protocol: UDP, port: 5353}]
  policyTypes: [Egress]
`
	// openshift/hypershift hypershift-operator/controllers/hostedcluster/network_policies.go for
	// an OpenStack hosted cluster with Route publishing on a plain Kubernetes management cluster
	// whose API server is at 10.200.1.10.
	hyperShiftFacts = `
openshift-ingress:
  podSelector: {}
  ingress: [{from: [{namespaceSelector: {matchLabels: {network.openshift.io/policy-group: ingress}}}]}]
  policyTypes: [Ingress]
same-namespace:
  podSelector: {}
  ingress: [{from: [{podSelector: {}}]}]
  policyTypes: [Ingress]
kas:
  podSelector: {matchLabels: {app: kube-apiserver}}
  ingress: [{ports: [{protocol: TCP, port: 6443}]}]
  policyTypes: [Ingress]
management-kas:
  podSelector:
    matchExpressions:
    - {key: hypershift.openshift.io/need-management-kas-access, operator: DoesNotExist}
    - {key: name, operator: NotIn, values: [aws-ebs-csi-driver-operator]}
  egress:
  - to: [{podSelector: {}}]
  - to: [{ipBlock: {cidr: 0.0.0.0/0, except: [10.200.1.10/32]}}]
  - ports: [{protocol: UDP, port: 53}, {protocol: TCP, port: 53}]
  policyTypes: [Egress]
openshift-monitoring:
  podSelector: {}
  ingress: [{from: [{namespaceSelector: {matchLabels: {network.openshift.io/policy-group: monitoring}}}]}]
  policyTypes: [Ingress]
`
)

func TestNetworkPolicies(t *testing.T) {
	t.Parallel()

	t.Run("When cluster-storage-operator's set is built, it should match its manifests in openshift-cluster-csi-drivers", func(t *testing.T) {
		g := NewWithT(t)
		got := StorageNetworkPolicies()
		for _, np := range got {
			g.Expect(np.Namespace).To(Equal("openshift-cluster-csi-drivers"), np.Name)
		}
		g.Expect(specsByName(got)).To(Equal(facts(t, storageFacts)))
	})

	t.Run("When HyperShift's set is built, it should match hypershift-operator's policies with the management API server blocked", func(t *testing.T) {
		g := NewWithT(t)
		got := HyperShiftNetworkPolicies("clusters-example", []net.IP{net.ParseIP("10.200.1.10"), net.ParseIP("10.200.1.10"), net.ParseIP("fd00::1")})
		for _, np := range got {
			g.Expect(np.Namespace).To(Equal("clusters-example"), np.Name)
		}
		g.Expect(specsByName(got)).To(Equal(facts(t, hyperShiftFacts)))
	})

	t.Run("When the operator's and the controller's required labels are matched, each should be selected by a policy of openshift-cluster-csi-drivers", func(t *testing.T) {
		// What origin's storage conformance test checks of the namespace: for every required
		// label, some NetworkPolicy selects pods by it.
		g := NewWithT(t)
		for _, required := range []map[string]string{policylabels.Operator(), policylabels.Controller()} {
			for k, v := range required {
				found := false
				for _, np := range StorageNetworkPolicies() {
					if np.Spec.PodSelector.MatchLabels[k] == v {
						found = true
					}
				}
				g.Expect(found).To(BeTrue(), "no policy selects %s=%s", k, v)
			}
		}
	})

	t.Run("When a pod without the access label is matched against management-kas, it should be selected, and one with it not", func(t *testing.T) {
		g := NewWithT(t)
		var mkas *networkingv1.NetworkPolicy
		for _, np := range HyperShiftNetworkPolicies("clusters-example", nil) {
			if np.Name == "management-kas" {
				mkas = np
			}
		}
		g.Expect(mkas).NotTo(BeNil())
		sel, err := metav1.LabelSelectorAsSelector(&mkas.Spec.PodSelector)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(sel.Matches(labels.Set{"app": "some-control-plane-component"})).To(BeTrue())
		g.Expect(sel.Matches(labels.Set{"app": "cinder-csi-operator", "hypershift.openshift.io/need-management-kas-access": "true"})).To(BeFalse())
	})
}

// specsByName returns the policies' specs, keyed by name, as plain YAML values.
func specsByName(nps []*networkingv1.NetworkPolicy) map[string]any {
	out := map[string]any{}
	for _, np := range nps {
		b, err := yaml.Marshal(np.Spec)
		if err != nil {
			panic(err)
		}
		var v any
		if err := yaml.Unmarshal(b, &v); err != nil {
			panic(err)
		}
		out[np.Name] = v
	}
	return out
}

// facts decodes a transcription into the same plain values.
func facts(t *testing.T, doc string) map[string]any {
	t.Helper()
	out := map[string]any{}
	if err := yaml.Unmarshal([]byte(doc), &out); err != nil {
		t.Fatalf("decoding the facts: %v", err)
	}
	// Round-trip each spec through the typed object, so that equal specs compare equal
	// whatever the transcription's spelling (port numbers, ordering of keys).
	for name, spec := range out {
		b, err := yaml.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		var s networkingv1.NetworkPolicySpec
		if err := yaml.UnmarshalStrict(b, &s); err != nil {
			t.Fatalf("decoding the facts of %s: %v", name, err)
		}
		out[name] = specsByName([]*networkingv1.NetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: s}})[name]
	}
	return out
}
