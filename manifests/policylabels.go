package manifests

import "maps"

// The pod labels by which cluster-storage-operator's NetworkPolicies in
// openshift-cluster-csi-drivers let a storage pod talk (manifests/09_network-policy-*.yaml of
// openshift/cluster-storage-operator), each with the value PolicyAllow.
const (
	PolicyLabelAllEgress            = "openshift.storage.network-policy.all-egress"
	PolicyLabelAPIServer            = "openshift.storage.network-policy.api-server"
	PolicyLabelDNS                  = "openshift.storage.network-policy.dns"
	PolicyLabelMetricsRange         = "openshift.storage.network-policy.metrics-range"
	PolicyLabelOperatorMetricsRange = "openshift.storage.network-policy.operator-metrics-range"
	PolicyAllow                     = "allow"
)

// OperatorPolicyLabels returns the labels the operator's pod template must carry, in both install
// manifests: what openshift/origin's storage conformance test ("Storage Network Policy",
// test/extended/storage/storage_networkpolicy.go) requires of Deployment
// openstack-cinder-csi-driver-operator on OpenStack, the Deployment this operator replaces. They
// let the pod reach its API server, DNS and, on any TCP port, OpenStack and the guest API server,
// and let its metrics be scraped on 8443-8445.
//
// It is the one list the install manifests' and the operands' tests check against, so that a
// label dropped from a manifest fails a test instead of a cluster.
func OperatorPolicyLabels() map[string]string {
	return maps.Clone(operatorPolicyLabels)
}

// ControllerPolicyLabels returns the labels the CSI controller's pod template must carry, on
// HyperShift and standalone alike: what the same conformance test requires of Deployment
// openstack-cinder-csi-driver-controller. They let the pod reach its API server, DNS and OpenStack,
// and let its kube-rbac-proxy metrics ports (inside 9201-9223, which controlplane's tests check)
// be scraped.
func ControllerPolicyLabels() map[string]string {
	return maps.Clone(controllerPolicyLabels)
}

var (
	operatorPolicyLabels = map[string]string{
		PolicyLabelAPIServer:            PolicyAllow,
		PolicyLabelDNS:                  PolicyAllow,
		PolicyLabelOperatorMetricsRange: PolicyAllow,
		PolicyLabelAllEgress:            PolicyAllow,
	}
	controllerPolicyLabels = map[string]string{
		PolicyLabelAPIServer:    PolicyAllow,
		PolicyLabelDNS:          PolicyAllow,
		PolicyLabelMetricsRange: PolicyAllow,
		PolicyLabelAllEgress:    PolicyAllow,
	}
)
