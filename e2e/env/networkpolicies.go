package env

import (
	"context"
	"fmt"
	"net"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cinder-csi-operator/cinder-csi-operator/shared/names"
	"github.com/cinder-csi-operator/cinder-csi-operator/shared/testutil/policylabels"
)

// The NetworkPolicies a real cluster puts around the operator, seeded by the local world in every
// environment (kwok or real nodes). Each is written out from the platform's own source, named in
// its comment; a policy here is only data: whether anything enforces it depends on the nodes
// (on real nodes, a NetworkPolicy implementation runs beside the kubelet; kwok nodes run nothing).
//
// Two things of the platform are not run locally, and the policies keep their meaning all the
// same:
//   - DNS. OpenShift's resolvers are the openshift-dns pods labelled
//     dns.operator.openshift.io/daemonset-dns=default, which the DNS allow policies name as their
//     only peer. Locally the namespace exists (so the selector resolves as it does on a cluster)
//     but holds no resolver, so a name lookup from a pod fails whatever the policies say. Neither
//     the operator nor the CSI controller resolves a name to do its work: both reach their API
//     servers at the address of the kubernetes Service (or the one in their kubeconfig) and
//     OpenStack at the address in clouds.yaml.
//   - Monitoring and ingress. HyperShift's openshift-monitoring and openshift-ingress policies let
//     in traffic from namespaces labelled network.openshift.io/policy-group; the namespaces
//     openshift-monitoring and openshift-ingress are created with those labels (as OpenShift
//     labels them), empty: a test can run a scraper there.

// Namespaces the policies' peers select, and the labels they select them by.
const (
	// DNSNamespace is where OpenShift's resolvers run; the namespace's kubernetes.io/metadata.name
	// label, which the API server sets on every namespace, is what the DNS policies select.
	DNSNamespace = "openshift-dns"
	// MonitoringNamespace and IngressNamespace are the management cluster's monitoring and
	// router namespaces, selected by policyGroupLabel.
	MonitoringNamespace = "openshift-monitoring"
	IngressNamespace    = "openshift-ingress"
	policyGroupLabel    = "network.openshift.io/policy-group"
	dnsDaemonSetLabel   = "dns.operator.openshift.io/daemonset-dns"
)

// hostedKASPort is the hosted kube-apiserver's Service port (HyperShift's config.KASSVCPort).
const hostedKASPort = 6443

// StorageNetworkPolicies returns cluster-storage-operator's NetworkPolicies in
// openshift-cluster-csi-drivers, which the cluster-version operator applies on every OpenShift
// cluster (standalone and, in the hosted cluster, HyperShift), plus the default-deny that makes
// them bind every pod.
//
// The allow policies are those of openshift/cluster-storage-operator's main branch (and
// release-4.20 onward), files manifests/09_network-policy-*.yaml. The default-deny of this
// namespace is not in that branch: cluster-storage-operator ships a default-deny only for its own
// namespace (manifests/0000_90_cluster-storage-operator_10_network-policy-cso-deny-all.yaml), and
// the one for openshift-cluster-csi-drivers (manifests/09_network-policy-deny-all.yaml) is
// proposed in its pull requests 561 and 562. It is seeded all the same: it changes nothing for a
// pod that carries its labels (each allow policy already isolates the pods it selects in its
// direction), and it is what makes a pod that lacks them fail here as it will there.
func StorageNetworkPolicies() []*networkingv1.NetworkPolicy {
	ns := GuestNamespace
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	selecting := func(label string) metav1.LabelSelector {
		return metav1.LabelSelector{MatchLabels: map[string]string{label: policylabels.Allow}}
	}
	return []*networkingv1.NetworkPolicy{
		// 09_network-policy-deny-all.yaml (proposed): every pod of the namespace is cut off
		// both ways unless an allow policy selects it.
		networkPolicy(ns, "default-deny", networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		}),
		// 09_network-policy-allow-all-egress.yaml: every TCP port out, to anywhere (the CSI
		// controller's and the operator's way to OpenStack and, on HyperShift, to the guest
		// API server).
		networkPolicy(ns, "allow-all-egress", networkingv1.NetworkPolicySpec{
			PodSelector: selecting(policylabels.AllEgress),
			Egress:      []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{portRange(tcp, 1, 65535)}}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		}),
		// 09_network-policy-allow-egress-to-api-server.yaml: TCP 6443 out, to anywhere: the API
		// server behind the kubernetes Service, once the Service address is translated.
		networkPolicy(ns, "allow-egress-to-api-server", networkingv1.NetworkPolicySpec{
			PodSelector: selecting(policylabels.APIServer),
			Egress:      []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{port(tcp, 6443)}}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		}),
		// 09_network-policy-allow-ingress-to-metrics.yaml: TCP 9201-9223 in, from anywhere: the
		// drivers' kube-rbac-proxy metrics ports.
		networkPolicy(ns, "allow-ingress-to-metrics-range", networkingv1.NetworkPolicySpec{
			PodSelector: selecting(policylabels.MetricsRange),
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{portRange(tcp, 9201, 9223)}}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		}),
		// 09_network-policy-allow-ingress-to-operator-metrics-range.yaml: TCP 8443-8445 in, from
		// anywhere: the driver operators' own metrics.
		networkPolicy(ns, "allow-ingress-to-operator-metrics-range", networkingv1.NetworkPolicySpec{
			PodSelector: selecting(policylabels.OperatorMetricsRange),
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{portRange(tcp, 8443, 8445)}}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		}),
		// 09_network-policy-allow-to-dns.yaml: port 5353, TCP and UDP, out to the resolver pods
		// of openshift-dns only.
		networkPolicy(ns, "allow-to-dns", networkingv1.NetworkPolicySpec{
			PodSelector: selecting(policylabels.DNS),
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: namespaceNamed(DNSNamespace),
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{dnsDaemonSetLabel: "default"}},
				}},
				Ports: []networkingv1.NetworkPolicyPort{port(tcp, 5353), port(udp, 5353)},
			}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		}),
	}
}

// HyperShiftNetworkPolicies returns the NetworkPolicies hypershift-operator writes into the
// HostedControlPlane namespace ns of an OpenStack hosted cluster whose services are published as
// Routes without a hostname of their own (the seeded HostedControlPlane's), on a management
// cluster that serves neither networks.config.openshift.io nor dnses.config.openshift.io (the
// local one: a plain Kubernetes cluster). managementKAS are the addresses at which pods of the
// management cluster reach its API server once the kubernetes Service address is translated;
// management-kas refuses them to every pod without names.NeedManagementKASAccess.
//
// Source: hypershift-operator/controllers/hostedcluster/network_policies.go of openshift/hypershift
// (reconcileNetworkPolicies), names from hypershift-operator/controllers/manifests/networkpolicy.
// Left out, because they do not apply to such a cluster: private-router (AWS, Azure, GCP),
// virt-launcher (KubeVirt), sharedingress (shared ingress), metrics-server (opt-in), and the
// nodeport-* and loadbalancer-oauth policies (NodePort or LoadBalancer publishing).
//
// management-kas is, in that source, written only for AWS hosted clusters. It is seeded here for
// every hosted cluster: it is the policy whose label the operator's pod must carry (design.md), as
// must the CSI controller's (its kube-rbac-proxies review scrapers at the management API server),
// and a pod that runs under it runs where it is not written too.
func HyperShiftNetworkPolicies(ns string, managementKAS []net.IP) []*networkingv1.NetworkPolicy {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	policyGroup := func(group string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{policyGroupLabel: group}}
	}
	// The exceptions must lie inside the rule's 0.0.0.0/0, so only IPv4 addresses count (the
	// local clusters have no other).
	var kasBlock []string
	for _, ip := range managementKAS {
		if v4 := ip.To4(); v4 != nil {
			kasBlock = append(kasBlock, (&net.IPNet{IP: v4, Mask: net.CIDRMask(32, 32)}).String())
		}
	}
	slices.Sort(kasBlock)
	kasBlock = slices.Compact(kasBlock)
	return []*networkingv1.NetworkPolicy{
		// openshift-ingress (reconcileOpenshiftIngressNetworkPolicy): every pod of the namespace
		// is isolated for ingress; the management cluster's routers may connect to any port.
		networkPolicy(ns, "openshift-ingress", networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: policyGroup("ingress")}}}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		}),
		// same-namespace (reconcileSameNamespaceNetworkPolicy): pods of the namespace may
		// connect to each other on any port.
		networkPolicy(ns, "same-namespace", networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		}),
		// kas (reconcileKASNetworkPolicy): the hosted kube-apiserver pods accept TCP 6443 from
		// anywhere. Locally the guest API server is a process, not a pod, so it selects nothing.
		networkPolicy(ns, "kas", networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "kube-apiserver"}},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{port(tcp, hostedKASPort)}}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		}),
		// management-kas (reconcileManagementKASNetworkPolicy): a pod without the access label
		// (and not AWS EBS's operator) may go out only to pods of its namespace, to any address
		// but the management API server's, and to port 53 anywhere (the rule for a management
		// cluster without OpenShift's DNS operator).
		networkPolicy(ns, "management-kas", networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: names.NeedManagementKASAccess, Operator: metav1.LabelSelectorOpDoesNotExist},
				{Key: "name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"aws-ebs-csi-driver-operator"}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{
				{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}},
				{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: kasBlock}}}},
				{Ports: []networkingv1.NetworkPolicyPort{port(udp, 53), port(tcp, 53)}},
			},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
		}),
		// openshift-monitoring (reconcileOpenshiftMonitoringNetworkPolicy): the management
		// cluster's monitoring may connect to any pod of the namespace on any port.
		networkPolicy(ns, "openshift-monitoring", networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: policyGroup("monitoring")}}}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		}),
	}
}

// peerNamespaces returns the namespaces the seeded policies' peers select, with the labels they
// select them by: openshift-dns for the DNS policies in the guest (or the one standalone
// cluster); on a HyperShift management cluster, openshift-monitoring and openshift-ingress.
func peerNamespaces(hyperShiftManagement bool) []client.Object {
	if !hyperShiftManagement {
		return []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DNSNamespace}}}
	}
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: MonitoringNamespace, Labels: map[string]string{policyGroupLabel: "monitoring"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: IngressNamespace, Labels: map[string]string{policyGroupLabel: "ingress"}}},
	}
}

// ManagementAPIServerIPs returns the addresses the management cluster's kubernetes EndpointSlice
// lists: where its API server is reached once a node translates the Service address, and so what
// hypershift-operator blocks (it reads the same addresses from the kubernetes Endpoints). A
// cluster may list none: the local clusters' API servers advertise 127.0.0.1, which the API
// server refuses to publish as an endpoint (a loopback address is no valid one), so with kwok
// nodes management-kas excepts nothing, and nothing enforces it there anyway.
func ManagementAPIServerIPs(ctx context.Context, c client.Client) ([]net.IP, error) {
	slice := &discoveryv1.EndpointSlice{}
	err := c.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceDefault, Name: "kubernetes"}, slice)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the management API server's addresses from EndpointSlice default/kubernetes: %w", err)
	}
	var ips []net.IP
	for _, ep := range slice.Endpoints {
		for _, a := range ep.Addresses {
			if ip := net.ParseIP(a); ip != nil {
				ips = append(ips, ip)
			}
		}
	}
	return ips, nil
}

func networkPolicy(ns, name string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func port(p corev1.Protocol, n int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: ptr.To(p), Port: ptr.To(intstr.FromInt32(n))}
}

func portRange(p corev1.Protocol, from, to int32) networkingv1.NetworkPolicyPort {
	np := port(p, from)
	np.EndPort = ptr.To(to)
	return np
}

func namespaceNamed(name string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: name}}
}
