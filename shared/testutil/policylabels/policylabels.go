// Package policylabels is the test oracle of the pod labels by which cluster-storage-operator's
// NetworkPolicies let a storage pod talk: the one list the install manifests', the operands' and
// the real-node tests check against, and the labels the harness's copies of those policies
// select on. The product carries the labels in its manifests; it never reads this package.
package policylabels

import "maps"

// The pod labels by which cluster-storage-operator's NetworkPolicies in
// openshift-cluster-csi-drivers let a storage pod talk (manifests/09_network-policy-*.yaml of
// openshift/cluster-storage-operator), each with the value Allow.
const (
	AllEgress            = "openshift.storage.network-policy.all-egress"
	APIServer            = "openshift.storage.network-policy.api-server"
	DNS                  = "openshift.storage.network-policy.dns"
	MetricsRange         = "openshift.storage.network-policy.metrics-range"
	OperatorMetricsRange = "openshift.storage.network-policy.operator-metrics-range"
	Allow                = "allow"
)

// Operator returns the labels the operator's pod template must carry, in both install
// manifests: what openshift/origin's storage conformance test ("Storage Network Policy",
// test/extended/storage/storage_networkpolicy.go) requires of Deployment
// openstack-cinder-csi-driver-operator on OpenStack, the Deployment this operator replaces. They
// let the pod reach its API server, DNS and, on any TCP port, OpenStack and the guest API server,
// and let its metrics be scraped on 8443-8445.
//
// A label dropped from a manifest so fails a test instead of a cluster.
func Operator() map[string]string {
	return maps.Clone(operator)
}

// Controller returns the labels the CSI controller's pod template must carry, on
// HyperShift and standalone alike: what the same conformance test requires of Deployment
// openstack-cinder-csi-driver-controller. They let the pod reach its API server, DNS and OpenStack,
// and let its kube-rbac-proxy metrics ports (inside 9201-9223, which controlplane's tests check)
// be scraped.
func Controller() map[string]string {
	return maps.Clone(controller)
}

var (
	operator = map[string]string{
		APIServer:            Allow,
		DNS:                  Allow,
		OperatorMetricsRange: Allow,
		AllEgress:            Allow,
	}
	controller = map[string]string{
		APIServer:    Allow,
		DNS:          Allow,
		MetricsRange: Allow,
		AllEgress:    Allow,
	}
)
